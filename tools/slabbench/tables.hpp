// tables.hpp - the tables slabbench prints, shaped like the seeds': per configuration min, max,
// avg, sd over the runs, % against the baseline and a mark where the difference is within noise
// (Welch's t-test), or for a sweep a row per case and a column per configuration.
#pragma once

#include "outcome.hpp"

#include <string>
#include <vector>

namespace slabbench {

// One workload's tables (what its layout asks for), its skipped and failed configurations.
std::string format_workload(const workload_outcome &o);
// Who won each workload (best configuration and best design per case, counted), the targets.
std::string format_summary(const std::vector<workload_outcome> &all,
                           const std::vector<target_outcome> &targets);
// With --counters, each run of a slabkit kmem_cache configuration notes every statistics counter
// of its design that moved over the run, summed over the process's caches, as
// "counter:<NAME>" (SLQB's FREE_REMOTE, SLUB's ALLOC_SLOWPATH, the sheaves' SHEAF_REFILL ...),
// and the allocations made, as "counter:allocs".
inline const std::string kCounterNote = "counter:";
inline const std::string kCounterAllocsNote = "counter:allocs";
// The counters table of a workload: a row per counter, a column per configuration that noted
// counters, each cell the counter per 1000 allocations averaged over the configuration's ok
// runs ("-": the design has no such counter, or it never moved); the first row the
// allocations per run. "" when no run noted counters.
std::string format_counters(const workload_outcome &o);
// A number with about four significant figures, as the tables show it.
std::string short_number(double v);

} // namespace slabbench
