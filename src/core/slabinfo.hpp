// slabinfo.hpp - the /proc/slabinfo 2.1 text, from rows any design can fill.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slabkit {

struct slabinfo_row {
    const char *name;
    uint64_t active_objs, num_objs;
    uint64_t objsize, objperslab, pagesperslab;
    uint64_t limit, batchcount, sharedfactor; // tunables (SLQB: hiwater freebatch 0)
    uint64_t active_slabs, num_slabs, sharedavail;
};

// A bounded text buffer that counts what would not fit, like snprintf.
struct text_out {
    char *buf;
    size_t size;
    size_t len = 0;
    void printf(const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    // n bytes of s as they are (no formatting: what a text of many small pieces wants).
    void append(const char *s, size_t n);
};

void slabinfo_header(text_out &out);
void slabinfo_line(text_out &out, const slabinfo_row &row);

} // namespace slabkit
