// leak_report.cpp - the leak scan's report (leak_report.hpp).
#include "api/leak_report.hpp"

#include "api/json_out.hpp"
#include "core/debug.hpp"
#include "core/leak_scan.hpp"
#include "platform/platform.hpp"

#include <cstdio>
#include <cstring>

namespace slabkit::api {

namespace {

constexpr unsigned kCopyTimeoutMs = 60000;

// Leaked objects of one cache from one allocation site.
struct group {
    cache *c;
    uintptr_t site; // 0: no owner track
    uint64_t count, bytes, age_min_ms, age_max_ms;
};
constexpr unsigned kMaxGroups = 1024;
group g_groups[kMaxGroups]; // in the copy
struct collected {
    unsigned n;
    uint64_t dropped, now_ms;
    leak_scan::result r;
};

void add_leak(cache *c, void *, size_t size, const debug::track *tr, void *a) {
    auto *k = static_cast<collected *>(a);
    const uintptr_t site = tr ? debug::site_of(tr[0]) : 0;
    const uint64_t age =
        tr && tr[0].tid && k->now_ms > tr[0].when_ms ? k->now_ms - tr[0].when_ms : 0;
    group *g = nullptr;
    for (unsigned i = 0; i < k->n; ++i)
        if (g_groups[i].c == c && g_groups[i].site == site) g = &g_groups[i];
    if (!g) {
        if (k->n == kMaxGroups) {
            ++k->dropped;
            return;
        }
        g = &g_groups[k->n++];
        *g = group{c, site, 0, 0, age, age};
    }
    ++g->count;
    g->bytes += size;
    g->age_min_ms = age < g->age_min_ms ? age : g->age_min_ms;
    g->age_max_ms = age > g->age_max_ms ? age : g->age_max_ms;
}

collected collect(uint64_t min_age_ms) {
    collected k{0, 0, platform::now_coarse_ms(), {}};
    k.r = leak_scan::scan(min_age_ms, add_leak, &k);
    // Most objects first.
    for (unsigned i = 1; i < k.n; ++i) {
        group x = g_groups[i];
        unsigned j = i;
        for (; j > 0 && g_groups[j - 1].count < x.count; --j) g_groups[j] = g_groups[j - 1];
        g_groups[j] = x;
    }
    return k;
}

void site_name(const group &g, char *where, size_t size) {
    if (g.site)
        platform::describe_address(g.site, where, size);
    else
        snprintf(where, size, "(no owner track: SLABKIT_DEBUG without U)");
}

struct copy_arg {
    leak_format f;
    uint64_t min_age_ms;
};

// In the copy: the scan and its report.
size_t report_in_copy(void *arg, char *out, size_t size) {
    const auto &a = *static_cast<copy_arg *>(arg);
    const collected k = collect(a.min_age_ms);
    text_out text{out, size};
    if (a.f == leak_format::json) {
        json_out j{text};
        j.begin_object();
        j.key("roots_listed").boolean(k.r.roots_ok);
        j.member("debug_caches", k.r.caches).member("root_bytes", k.r.root_bytes);
        j.member("objects", k.r.candidates).member("leaked", k.r.leaked);
        j.member("leaked_bytes", k.r.leaked_bytes).member("groups_dropped", k.dropped);
        j.key("groups").begin_array();
        for (unsigned i = 0; i < k.n; ++i) {
            const group &g = g_groups[i];
            char where[256];
            site_name(g, where, sizeof where);
            j.begin_object().member("cache", g.c->name).member("site", where);
            j.member("count", g.count).member("bytes", g.bytes);
            j.member("age_min_ms", g.age_min_ms).member("age_max_ms", g.age_max_ms);
            j.end_object();
        }
        j.end_array().end_object();
    } else {
        text.printf("slabkit: leak scan: %llu of %llu objects of %llu debug caches referenced by "
                    "nothing (%llu bytes; conservative, as kmemleak)\n",
                    static_cast<unsigned long long>(k.r.leaked),
                    static_cast<unsigned long long>(k.r.candidates),
                    static_cast<unsigned long long>(k.r.caches),
                    static_cast<unsigned long long>(k.r.leaked_bytes));
        for (unsigned i = 0; i < k.n; ++i) {
            const group &g = g_groups[i];
            char where[256];
            site_name(g, where, sizeof where);
            text.printf("slabkit:   %llu objects, %llu bytes of %s, allocated at %s (age %llu-%llu "
                        "ms)\n",
                        static_cast<unsigned long long>(g.count),
                        static_cast<unsigned long long>(g.bytes), g.c->name, where,
                        static_cast<unsigned long long>(g.age_min_ms),
                        static_cast<unsigned long long>(g.age_max_ms));
        }
        if (k.dropped)
            text.printf("slabkit:   %llu objects of more groups not shown\n",
                        static_cast<unsigned long long>(k.dropped));
    }
    return text.len < size ? text.len : size;
}

} // namespace

long run_leak_scan(leak_format f, uint64_t min_age_ms, char *buf, size_t size, char *why,
                   size_t why_size, uint64_t *leaked) {
    if (size < 2) {
        snprintf(why, why_size, "no room for the report");
        return -1;
    }
#if defined(SLABKIT_SANITIZED)
    // A sanitizer's shadow memory is terabytes of writable mappings: not roots to scan.
    (void)f, (void)min_age_ms, (void)leaked;
    snprintf(why, why_size, "not in sanitized builds (their shadow memory would be scanned)");
    return -1;
#endif
    copy_arg a{f, min_age_ms};
    platform::os_status st;
    long n = platform::run_in_copy(report_in_copy, &a, buf, size - 1, kCopyTimeoutMs, &st);
    if (n < 0) {
        platform::describe(st, why, why_size);
        return -1;
    }
    buf[n] = '\0';
    if (leaked) {
        unsigned long long v = 0;
        const char *p = f == leak_format::json ? strstr(buf, "\"leaked\":") : buf;
        if (p && sscanf(p, f == leak_format::json ? "\"leaked\":%llu" : "slabkit: leak scan: %llu",
                        &v) == 1)
            *leaked = v;
    }
    return n;
}

} // namespace slabkit::api
