// leak_report.hpp - the leak scan (core/leak_scan.hpp) run in a copy of the process, its leaked
// objects grouped by cache and allocation site: as JSON for the live request (slabinfo --leaks),
// as text for slabkit_scan_leaks and SLABKIT_LEAKS=scan.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slabkit::api {

enum class leak_format { json, text };

// Runs the scan in a copy of the process (objects younger than min_age_ms left out) and writes
// its report into buf (NUL-terminated). Returns the report's length, or -1 with a sentence in
// why. *leaked (if given) gets the number of leaked objects.
long run_leak_scan(leak_format f, uint64_t min_age_ms, char *buf, size_t size, char *why,
                   size_t why_size, uint64_t *leaked = nullptr);

} // namespace slabkit::api
