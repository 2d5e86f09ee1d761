// stats.cpp - statistics: per-cache figures, /proc/slabinfo text, page allocator totals, the
// whole-heap sums behind mallinfo2, and the report SLABKIT_STATS=exit prints at exit.
#include "api/stats.hpp"

#include "api/leak_report.hpp"
#include "core/debug.hpp"
#include "core/report.hpp"
#include "core/slabinfo.hpp"
#include "designs/designs.hpp"
#include "kmalloc/hot_class.hpp"
#include "kmalloc/kmalloc.hpp"
#include "kmalloc/large.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "platform/rseq.hpp"
#include "slot/slot.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

using namespace slabkit;

void api::fill_stats(const cache *c, slabkit_cache_stats *out) {
    memset(out, 0, sizeof *out);
    memcpy(out->name, c->name, sizeof out->name); // both kNameMax, NUL-terminated
    static_assert(sizeof out->name == kNameMax);
    snprintf(out->design, sizeof out->design, "%s", design_name(c->kind));
    out->object_size = c->object_size;
    out->slot_size = c->size;
    out->align = c->align;
    out->order = c->order;
    out->objects_per_slab = c->objects;
    design_stats st;
    designs::statistics(const_cast<cache *>(c), &st);
    out->slabs = st.slabs;
    out->objects = st.objects;
    out->active_objects = st.active_objects;
    out->queued_objects = st.queued_objects;
    static_assert(design_stats::kMaxCounters <= sizeof out->counters / sizeof out->counters[0]);
    out->nr_counters = st.nr_counters;
    for (unsigned i = 0; i < st.nr_counters; ++i) {
        out->counter_names[i] = st.counter_names[i];
        out->counters[i] = st.counters[i];
    }
    static_assert(design_stats::kMaxTunables <= sizeof out->tunables / sizeof out->tunables[0]);
    out->nr_tunables = st.nr_tunables;
    for (unsigned i = 0; i < st.nr_tunables; ++i) {
        out->tunable_names[i] = st.tunable_names[i];
        out->tunables[i] = st.tunables[i];
        if (strcmp(st.tunable_names[i], "hiwater") == 0)
            out->hiwater = static_cast<unsigned>(st.tunables[i]);
        if (strcmp(st.tunable_names[i], "freebatch") == 0)
            out->freebatch = static_cast<unsigned>(st.tunables[i]);
    }
    out->slabinfo_tunables[0] = st.slabinfo_tunables[0];
    out->slabinfo_tunables[1] = st.slabinfo_tunables[1];
    out->slabinfo_tunables[2] = st.slabinfo_tunables[2];
    out->active_slabs = st.slabs > st.free_slabs ? st.slabs - st.free_slabs : 0;
    out->shared_avail = st.shared_avail;
    out->allocs = st.allocs;
    out->alloc_slow = st.alloc_slow;
    out->frees = st.frees;
    out->free_slow = st.free_slow;
    debug_letters(c->flags, out->flags, sizeof out->flags);
}

void api::debug_letters(unsigned flags, char *buf, size_t size) {
    static constexpr struct {
        unsigned flag;
        char letter;
    } kLetters[] = {{kConsistencyChecks, 'F'},
                    {kRedZone, 'Z'},
                    {kPoison, 'P'},
                    {kStoreUser, 'U'},
                    {kTrace, 'T'}};
    size_t n = 0;
    for (const auto &l : kLetters)
        if ((flags & l.flag) && n + 1 < size) buf[n++] = l.letter;
    if (size) buf[n] = '\0';
}

namespace {

struct stats_walk {
    slabkit_cache_stats *out;
    size_t max;
    size_t n;
};

void write_all(int fd, const char *text, size_t len) {
    platform::write_fd(fd, text, len);
}

void print_to(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void print_to(int fd, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        write_all(fd, buf,
                  static_cast<size_t>(n) < sizeof buf ? static_cast<size_t>(n) : sizeof buf - 1);
}

// One cache's /proc/slabinfo line. The caller holds the registry lock.
void slabinfo_line_of(text_out &out, const cache *c) {
    slabkit_cache_stats st;
    api::fill_stats(c, &st);
    slabinfo_line(out, slabinfo_row{c->name, st.active_objects, st.objects, c->size, c->objects,
                                    uint64_t{1} << c->order, st.slabinfo_tunables[0],
                                    st.slabinfo_tunables[1], st.slabinfo_tunables[2],
                                    st.active_slabs, st.slabs, st.shared_avail});
}

double mib(uint64_t bytes) {
    return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// SLABKIT_STATS: "exit" prints the report to stderr when the process exits normally.
bool g_stats_at_exit = false;

// A comma-separated list: "exit" here, "live" or "live:MS" in live.cpp.
__attribute__((constructor)) void read_stats_setting() {
    const char *v = platform::env("SLABKIT_STATS");
    if (!v || !*v || strcmp(v, "0") == 0) return;
    bool exit_seen = false, bad = false;
    for (const char *p = v; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? static_cast<size_t>(end - p) : strlen(p);
        if (n == 4 && strncmp(p, "exit", 4) == 0)
            exit_seen = true;
        else if (!(n >= 4 && strncmp(p, "live", 4) == 0 && (n == 4 || p[4] == ':')))
            bad = true;
        p += n + (end ? 1 : 0);
    }
    if (bad) {
        platform::print_error("slabkit: SLABKIT_STATS=%s is not understood (accepted: a "
                              "comma-separated list of exit and live or live:MS); no statistics "
                              "will be printed\n",
                              v);
        return;
    }
    g_stats_at_exit = exit_seen;
}

// SLABKIT_VALIDATE=exit: every cache checked at exit (slabkit_validate). SLABKIT_LEAKS=exit:
// every object still allocated in a debug cache reported at exit, with its allocation site;
// SLABKIT_LEAKS=scan: only those the leak scan finds nothing points to (api/leak_report.hpp).
bool g_validate_at_exit = false;
bool g_leaks_at_exit = false;
bool g_leak_scan_at_exit = false;

bool read_exit_switch(const char *name, bool scan_too = false) {
    const char *v = platform::env(name);
    if (!v || !*v || strcmp(v, "0") == 0) return false;
    if (strcmp(v, "exit") == 0) return true;
    if (scan_too && strcmp(v, "scan") == 0) {
        g_leak_scan_at_exit = true;
        return false;
    }
    platform::print_error("slabkit: %s=%s is not understood (accepted: exit%s); ignored\n", name, v,
                          scan_too ? ", scan" : "");
    return false;
}

__attribute__((constructor)) void read_exit_checks() {
    g_validate_at_exit = read_exit_switch("SLABKIT_VALIDATE");
    g_leaks_at_exit = read_exit_switch("SLABKIT_LEAKS", true);
}

__attribute__((destructor)) void print_stats_at_exit() {
    // Debugging: what still waits in the quarantine is checked as it goes back to its design,
    // so that a write after free to an object freed shortly before exit is reported too (it
    // would otherwise leave with the process, unseen).
    if (debug::quarantine_bytes() != 0) debug::drain_quarantine(nullptr);
    if (g_stats_at_exit) api::print_stats(platform::kStderrFd);
    if (g_validate_at_exit) {
        char first[256];
        unsigned problems = slabkit_validate(first, sizeof first);
        platform::print_error("slabkit: SLABKIT_VALIDATE=exit: %u problem%s%s%s\n", problems,
                              problems == 1 ? "" : "s", problems ? ": " : "",
                              problems ? first : "");
    }
    if (g_leaks_at_exit) {
        uint64_t leaks = 0;
        registry::for_each(
            [](cache *c, void *arg) { *static_cast<uint64_t *>(arg) += debug::report_leaks(c); },
            &leaks);
        platform::print_error("slabkit: SLABKIT_LEAKS=exit: %llu object%s of debug caches still "
                              "allocated\n",
                              static_cast<unsigned long long>(leaks), leaks == 1 ? "" : "s");
    }
    if (g_leak_scan_at_exit) {
        static char report[65536];
        char why[160];
        if (api::run_leak_scan(api::leak_format::text, 0, report, sizeof report, why, sizeof why) <
            0)
            platform::print_error("slabkit: SLABKIT_LEAKS=scan: the scan could not run: %s\n", why);
        else
            platform::write_stderr(report, strlen(report));
    }
    char names[256];
    debug::unmatched_names(names, sizeof names);
    if (names[0])
        platform::print_error("slabkit: SLABKIT_DEBUG named cache(s) that this process never "
                              "made: %s\n",
                              names);
}

} // namespace

void api::add_cache_to_totals(heap_totals *t, const slabkit_cache_stats &st) {
    const uint64_t free_objects = free_objects_of(st);
    const uint64_t in_use = st.active_objects - st.queued_objects;
    t->caches += 1;
    t->slab_pages += st.slabs << st.order;
    t->objects_in_use += in_use;
    t->object_bytes += in_use * st.slot_size;
    t->free_objects += free_objects;
    t->free_object_bytes += free_objects * st.slot_size;
}

void api::gather_heap_totals(heap_totals *out) {
    *out = heap_totals{};
    designs::bootstrap_process_design();
    registry::for_each(
        [](cache *c, void *arg) {
            slabkit_cache_stats st;
            fill_stats(c, &st);
            add_cache_to_totals(static_cast<heap_totals *>(arg), st);
        },
        out);
    add_pages_to_totals(out);
}

void api::add_pages_to_totals(heap_totals *out) {
    page_stats ps;
    page_allocator::global().snapshot(&ps);
    out->block_pages = ps.in_use > out->slab_pages ? ps.in_use - out->slab_pages : 0;
    out->free_pages = ps.free_pages + ps.in_pcp;
    out->free_resident_pages = ps.free_resident + ps.in_pcp;
    out->returned_pages = ps.returned;
    out->reserved_bytes = ps.reserved_bytes;
    out->large_blocks = large::mapped_blocks();
    out->large_bytes = large::mapped_bytes();
    out->kept_blocks = large::retained_blocks();
    out->kept_bytes = large::retained_bytes();
    out->errors = ps.errors + slab_errors();
    out->refusals = ps.refusals + large::refusals();
}

void api::print_stats(int fd) {
    designs::bootstrap_process_design();
    char line[512];
    {
        text_out out{line, sizeof line};
        slabinfo_header(out);
        write_all(fd, line, out.len < sizeof line ? out.len : sizeof line - 1);
    }
    registry::for_each(
        [](cache *c, void *arg) {
            const int out_fd = *static_cast<int *>(arg);
            char buf[512];
            text_out row_out{buf, sizeof buf};
            slabinfo_line_of(row_out, c);
            write_all(out_fd, buf, row_out.len < sizeof buf ? row_out.len : sizeof buf - 1);
        },
        &fd);
    // Each cache's design counters that moved (SLQB's ALLOC, FREE, ...; SLUB's ALLOC_FASTPATH,
    // FREE_SLOWPATH, ...), one line per cache.
    print_to(fd, "slabkit: counters (the design's statistics; those not zero):\n");
    registry::for_each(
        [](cache *c, void *arg) {
            const int out_fd = *static_cast<int *>(arg);
            design_stats st;
            designs::statistics(c, &st);
            char buf[2048];
            text_out row{buf, sizeof buf};
            row.printf("%s [%s]:", c->name, design_name(c->kind));
            unsigned shown = 0;
            for (unsigned i = 0; i < st.nr_counters; ++i) {
                if (!st.counters[i]) continue;
                row.printf(" %s=%llu", st.counter_names[i],
                           static_cast<unsigned long long>(st.counters[i]));
                ++shown;
            }
            if (!shown) return;
            row.printf("\n");
            if (row.len >= sizeof buf) buf[sizeof buf - 2] = '\n';
            write_all(out_fd, buf, row.len < sizeof buf ? row.len : sizeof buf - 1);
        },
        &fd);
    heap_totals t;
    gather_heap_totals(&t);
    const uint64_t page = kPageSize;
    print_to(fd,
             "slabkit: design %s; %llu caches: %llu objects in use (%.1f MiB), %llu free "
             "(%.1f MiB), in %llu slab pages (%.1f MiB)\n",
             design_name(process_design()), static_cast<unsigned long long>(t.caches),
             static_cast<unsigned long long>(t.objects_in_use), mib(t.object_bytes),
             static_cast<unsigned long long>(t.free_objects), mib(t.free_object_bytes),
             static_cast<unsigned long long>(t.slab_pages), mib(t.slab_pages * page));
    print_to(fd,
             "slabkit: page allocator: %.1f MiB in other blocks, %.1f MiB free (%.1f MiB of it "
             "may be resident), %.1f MiB given back to the OS so far, %.1f MiB reserved\n",
             mib(t.block_pages * page), mib(t.free_pages * page), mib(t.free_resident_pages * page),
             mib(t.returned_pages * page), mib(t.reserved_bytes));
    print_to(fd,
             "slabkit: %llu blocks mapped from the OS directly (%.1f MiB), %llu more kept for "
             "reuse (%.1f MiB)%s; %llu bad frees reported; %llu requests for memory refused; %u "
             "hot malloc classes made (of %u)\n",
             static_cast<unsigned long long>(t.large_blocks), mib(t.large_bytes),
             static_cast<unsigned long long>(t.kept_blocks), mib(t.kept_bytes),
             large::region_huge_pages() ? ", on huge pages where they fill them" : "",
             static_cast<unsigned long long>(t.errors), static_cast<unsigned long long>(t.refusals),
             kmalloc::nr_hot_classes(), kmalloc::kNrHotClasses);
    slabkit_slot_stats sl;
    slabkit_get_slot_stats(&sl);
    print_to(fd,
             "slabkit: slots: mode %s (%s), rseq from %s; %u of CPUs, %u for threads (%u owned "
             "now); %llu critical sections restarted, %llu slow paths found their slot busy, "
             "%llu shared-slot holds, %llu CPU drains\n",
             sl.mode, sl.why, sl.rseq, sl.cpu_slots, sl.thread_slots, sl.threads_owning,
             static_cast<unsigned long long>(sl.restarts), static_cast<unsigned long long>(sl.busy),
             static_cast<unsigned long long>(sl.shared_holds),
             static_cast<unsigned long long>(sl.cpu_drains));
}

size_t api::malloc_info_xml(char *buf, size_t size) {
    // The rows first, under the registry lock, then the text: nothing is printed under a lock.
    struct row {
        uint64_t slot_size, count;
    };
    static constexpr unsigned kMaxRows = 512;
    struct walk {
        row rows[kMaxRows];
        unsigned n;
        heap_totals totals; // from the same walk as the rows
    };
    // Both constant-initialised (constinit): a function-local static with a run-time
    // initialisation would need the C++ runtime's __cxa_guard_acquire, and with it libstdc++ in
    // every process that preloads libslabkit-malloc.so.
    constinit static walk w{}; // under g_info_lock
    constinit static platform::mutex g_info_lock;
    platform::lock_guard guard(g_info_lock);
    w.n = 0;
    w.totals = heap_totals{};
    designs::bootstrap_process_design();
    registry::for_each(
        [](cache *c, void *arg) {
            auto *wk = static_cast<walk *>(arg);
            slabkit_cache_stats st;
            fill_stats(c, &st);
            add_cache_to_totals(&wk->totals, st);
            const uint64_t free_objects = free_objects_of(st);
            if (!free_objects || wk->n == kMaxRows) return;
            wk->rows[wk->n++] = {st.slot_size, free_objects};
        },
        &w);
    add_pages_to_totals(&w.totals);
    const heap_totals &t = w.totals;
    const uint64_t arena = arena_bytes(t);
    auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    text_out out{buf, size};
    if (buf && size) buf[0] = '\0';
    out.printf("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n");
    for (unsigned i = 0; i < w.n; ++i)
        out.printf("  <size from=\"%llu\" to=\"%llu\" total=\"%llu\" count=\"%llu\"/>\n",
                   u(w.rows[i].slot_size), u(w.rows[i].slot_size),
                   u(w.rows[i].slot_size * w.rows[i].count), u(w.rows[i].count));
    out.printf("</sizes>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
               "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n"
               "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n"
               "<aspace type=\"total\" size=\"%llu\"/>\n<aspace type=\"mprotect\" size=\"%llu\"/>\n"
               "</heap>\n",
               u(t.free_objects), u(t.free_object_bytes), u(arena), u(arena), u(t.reserved_bytes),
               u(arena));
    out.printf("<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
               "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n"
               "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n"
               "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n"
               "<aspace type=\"total\" size=\"%llu\"/>\n<aspace type=\"mprotect\" size=\"%llu\"/>\n"
               "</malloc>\n",
               u(t.free_objects), u(t.free_object_bytes), u(t.large_blocks), u(t.large_bytes),
               u(arena + t.large_bytes), u(arena + t.large_bytes),
               u(t.reserved_bytes + t.large_bytes), u(arena + t.large_bytes));
    return out.len;
}

extern "C" {

size_t slabkit_malloc_info(char *buf, size_t size) {
    return api::malloc_info_xml(buf, size);
}

size_t slabkit_stats(struct slabkit_cache_stats *out, size_t max) {
    designs::bootstrap_process_design();
    stats_walk walk{out, max, 0};
    registry::for_each(
        [](cache *c, void *arg) {
            auto *w = static_cast<stats_walk *>(arg);
            if (w->n < w->max) api::fill_stats(c, &w->out[w->n]);
            ++w->n;
        },
        &walk);
    return walk.n;
}

void slabkit_get_cache_stats(const slabkit_cache *c, struct slabkit_cache_stats *out) {
    // Under the registry lock: trims free idle slots' structures under it.
    platform::lock_guard guard(registry::lock());
    api::fill_stats(reinterpret_cast<const cache *>(c), out);
}

size_t slabkit_slabinfo(char *buf, size_t size) {
    designs::bootstrap_process_design();
    text_out out{buf, size};
    if (size) buf[0] = '\0';
    slabinfo_header(out);
    registry::for_each(
        [](cache *c, void *arg) { slabinfo_line_of(*static_cast<text_out *>(arg), c); }, &out);
    return out.len;
}

void slabkit_get_page_stats(struct slabkit_page_stats *out) {
    page_stats st;
    page_allocator::global().snapshot(&st);
    out->pages_in_use = st.in_use;
    out->pages_parked = st.in_pcp;
    out->pages_free = st.free_pages;
    out->pages_resident = st.resident;
    out->pages_returned = st.returned;
    out->reserved_bytes = st.reserved_bytes;
    out->large_os_bytes = large::mapped_bytes();
    out->errors = st.errors + slab_errors();
}

size_t slabkit_get_node_stats(struct slabkit_node_stats *out, size_t max) {
    page_stats st;
    page_allocator::global().snapshot(&st);
    static_assert(sizeof out->free_blocks / sizeof out->free_blocks[0] == kNrOrders);
    for (unsigned n = 0; n < st.nodes && n < max; ++n) {
        const page_stats::node_stats &ns = st.node[n];
        slabkit_node_stats &o = out[n];
        o.node = n;
        for (unsigned k = 0; k < kNrOrders; ++k) o.free_blocks[k] = ns.free_blocks[k];
        o.free_pages = ns.free_pages;
        o.free_resident = ns.free_resident;
        o.in_use = ns.in_use;
        o.in_pcp = ns.in_pcp;
        o.usable_pages = ns.usable_pages;
        o.chunks = ns.chunks;
        o.returned = ns.returned;
        o.decommits = ns.decommits;
    }
    return st.nodes;
}

uint64_t slabkit_refusals(void) {
    api::heap_totals t;
    api::add_pages_to_totals(&t);
    return t.refusals;
}

void slabkit_get_heap_stats(struct slabkit_heap_stats *out) {
    api::heap_totals t;
    api::gather_heap_totals(&t);
    *out = slabkit_heap_stats{t.caches,         t.slab_pages,     t.objects_in_use,
                              t.object_bytes,   t.free_objects,   t.free_object_bytes,
                              t.block_pages,    t.free_pages,     t.free_resident_pages,
                              t.returned_pages, t.reserved_bytes, t.large_blocks,
                              t.large_bytes,    t.kept_blocks,    t.kept_bytes,
                              t.errors};
}

void slabkit_get_slot_stats(struct slabkit_slot_stats *out) {
    memset(out, 0, sizeof *out);
    slots::layout_info l = slots::layout();
    snprintf(out->mode, sizeof out->mode, "%s", slots::mode_name(l.m));
    snprintf(out->why, sizeof out->why, "%s", l.why);
    platform::rseq_source src = platform::rseq_state().source;
    snprintf(out->rseq, sizeof out->rseq, "%s",
             src == platform::rseq_source::glibc ? "glibc"
             : src == platform::rseq_source::own ? "own"
                                                 : "none");
    out->cpu_slots = l.cpu_slots;
    out->thread_slots = l.own_slots;
    out->threads_owning = l.owned;
    slots::counters c = slots::stats();
    out->restarts = c.restarts;
    out->busy = c.busy;
    out->shared_holds = c.shared_holds;
    out->cpu_drains = c.cpu_drains;
}

int slabkit_set_slot_mode(const char *mode, const char **why) {
    const char *reason = nullptr;
    bool ok = false;
    if (!mode) {
        reason = "no mode given (thread, cpu or auto)";
    } else if (strcmp(mode, "thread") == 0) {
        ok = slots::set_mode(slots::mode::thread, &reason);
    } else if (strcmp(mode, "cpu") == 0) {
        ok = slots::set_mode(slots::mode::cpu, &reason);
    } else if (strcmp(mode, "auto") == 0) {
        ok = slots::set_mode(slots::mode::automatic, &reason);
    } else {
        reason = "not a slot mode (thread, cpu or auto)";
    }
    if (why) *why = ok ? nullptr : reason;
    return ok ? 0 : -1;
}

void slabkit_print_stats(int fd) {
    api::print_stats(fd);
}

} // extern "C"
