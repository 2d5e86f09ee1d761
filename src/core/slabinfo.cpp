// slabinfo.cpp - /proc/slabinfo version 2.1 lines.
#include "core/slabinfo.hpp"

#include <cstdarg>
#include <cstdio>

namespace slabkit {

void text_out::printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *at = len < size ? buf + len : nullptr;
    size_t room = len < size ? size - len : 0;
    int n = vsnprintf(at, room, fmt, ap);
    va_end(ap);
    if (n > 0) len += static_cast<size_t>(n);
}

void text_out::append(const char *s, size_t n) {
    if (len < size) {
        // Keep room for the terminating NUL, as vsnprintf does.
        size_t room = size - len - 1;
        size_t copy = n < room ? n : room;
        for (size_t i = 0; i < copy; ++i) buf[len + i] = s[i];
        buf[len + copy] = '\0';
    }
    len += n;
}

void slabinfo_header(text_out &out) {
    out.printf("slabinfo - version: 2.1\n");
    out.printf("# name            <active_objs> <num_objs> <objsize> <objperslab> "
               "<pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata "
               "<active_slabs> <num_slabs> <sharedavail>\n");
}

void slabinfo_line(text_out &out, const slabinfo_row &r) {
    auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    out.printf("%-17s %6llu %6llu %6llu %4llu %4llu : tunables %4llu %4llu %4llu : slabdata "
               "%6llu %6llu %6llu\n",
               r.name, u(r.active_objs), u(r.num_objs), u(r.objsize), u(r.objperslab),
               u(r.pagesperslab), u(r.limit), u(r.batchcount), u(r.sharedfactor), u(r.active_slabs),
               u(r.num_slabs), u(r.sharedavail));
}

} // namespace slabkit
