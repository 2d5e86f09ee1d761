// live.cpp - live statistics (SLABKIT_STATS=live, slabkit_stats_live_start): a helper thread
// publishes the JSON snapshot (api/stats_json.hpp) into a shared-memory segment laid out as
// api/live_format.hpp says, every period, and serves the requests of readers (tools/slabinfo).
//
// Why a helper thread rather than the process's next slow path: a process that is idle, or busy
// in code that does not allocate, may take no slow path for as long as it likes, and a reader
// would wait without bound. The helper sleeps on the request word (a shared futex) between
// publications, so a request is served at once. The fast paths know nothing of it.
//
// Locks: `g_control` orders starts and stops; `g_publish` makes one publication at a time
// (the helper's and slabkit_stats_publish's). A publication takes the cache registry lock and
// the designs' list locks under g_publish, as slabkit_stats does; the helper holds no slabkit
// lock while it serves a request (validate's copy takes every lock through the fork hooks).
#include "api/json_out.hpp"
#include "api/leak_report.hpp"
#include "api/live_format.hpp"
#include "api/stats.hpp"
#include "api/stats_json.hpp"
#include "core/debug.hpp"
#include "core/failslab.hpp"
#include "core/leak_scan.hpp"
#include "designs/designs.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace slabkit::api {

namespace {

constexpr unsigned kDefaultPeriodMs = 1000;
constexpr unsigned kMinPeriodMs = 10;
constexpr unsigned kMaxPeriodMs = 60000;
// How long validate's copy of the process may take.
constexpr unsigned kCopyTimeoutMs = 30000;

platform::mutex g_control;
platform::mutex g_publish;
live::live_header *g_segment = nullptr; // under g_control (the helper reads it while running)
char g_name[40];
std::atomic<bool> g_stop{false};
std::atomic<uint32_t> g_period_ms{kDefaultPeriodMs};
// The helper is detached: the process may exit while it serves a request, which nobody waits
// for then; a stop waits for this word instead, which the helper sets as its last act.
std::atomic<uint32_t> g_helper_exited{1};
bool g_helper_running = false; // under g_control

char *payload_of(live::live_header *h) {
    return reinterpret_cast<char *>(h) + live::kPayloadOffset;
}
char *reply_of(live::live_header *h) {
    return reinterpret_cast<char *>(h) + live::kReplyOffset;
}

// One publication: the snapshot written between two changes of the generation (odd while
// writing), so that a reader keeps only a whole one.
uint64_t publish(live::live_header *h) {
    platform::lock_guard guard(g_publish);
    const uint64_t gen = h->generation.load(std::memory_order_relaxed);
    h->generation.store(gen + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    const uint64_t count = h->publish_count.load(std::memory_order_relaxed) + 1;
    live_info info{g_period_ms.load(std::memory_order_relaxed), count};
    text_out out{payload_of(h), live::kPayloadBytes};
    write_stats_json(out, &info);
    if (out.len >= live::kPayloadBytes) {
        // Too many caches for the segment: say so rather than publish a cut text.
        text_out err{payload_of(h), live::kPayloadBytes};
        json_out j{err};
        j.begin_object().member("format", "slabkit-stats").member("version", kStatsJsonVersion);
        j.member("error", "the statistics are larger than the live segment's payload");
        j.end_object();
        out = err;
    }
    h->payload_bytes.store(out.len, std::memory_order_relaxed);
    h->published_ns.store(platform::realtime_ns(), std::memory_order_relaxed);
    h->publish_count.store(count, std::memory_order_relaxed);
    h->generation.store(gen + 2, std::memory_order_release);
    return count;
}

// ---- requests -------------------------------------------------------------------------------

struct name_match {
    const char *name; // "" or nullptr: every cache
    unsigned seen = 0;
};

bool matches(const cache *c, void *arg) {
    auto *m = static_cast<name_match *>(arg);
    if (m->name && m->name[0] && strcmp(c->name, m->name) != 0) return false;
    ++m->seen;
    return true;
}

// Whether a live cache of that name exists ("" names every cache).
bool cache_exists(const char *name) {
    if (!name[0]) return true;
    name_match m{name};
    registry::for_each([](cache *c, void *arg) { (void)matches(c, arg); }, &m);
    return m.seen != 0;
}

// In the copy of the process: every matching cache's checks. Writes "<problems> <caches>\n"
// and the first problems' text into out.
size_t validate_in_copy(void *arg, char *out, size_t size) {
    struct walk {
        name_match m;
        unsigned problems;
        text_out text;
    } w{{static_cast<const char *>(arg)}, 0, text_out{nullptr, 0}};
    static char first[8192];
    w.text = text_out{first, sizeof first};
    first[0] = '\0';
    registry::for_each(
        [](cache *c, void *a) {
            auto *wk = static_cast<walk *>(a);
            if (!matches(c, &wk->m)) return;
            char buf[1024] = "";
            unsigned n = designs::validate(c, buf, sizeof buf);
            if (n && wk->text.len < wk->text.size) wk->text.printf("%s", buf);
            wk->problems += n;
        },
        &w);
    text_out o{out, size};
    o.printf("%u %u\n%s", w.problems, w.m.seen, first);
    return o.len < size ? o.len : size;
}

struct copy_result {
    bool ok;
    unsigned problems, caches;
    const char *text;
    char why[160];
};

copy_result validate_copy(const char *name, char *buf, size_t size) {
    copy_result r{};
    platform::os_status st;
    long n = platform::run_in_copy(validate_in_copy, const_cast<char *>(name), buf, size - 1,
                                   kCopyTimeoutMs, &st);
    if (n < 0) {
        if (st.call && strcmp(st.call, "the copy died") == 0)
            snprintf(r.why, sizeof r.why,
                     "the copy of the process that ran the checks died (signal %d): a list was "
                     "being changed when it was made; ask again",
                     st.err);
        else
            platform::describe(st, r.why, sizeof r.why);
        return r;
    }
    buf[n] = '\0';
    if (sscanf(buf, "%u %u", &r.problems, &r.caches) != 2) {
        snprintf(r.why, sizeof r.why, "the copy of the process sent no result");
        return r;
    }
    const char *nl = strchr(buf, '\n');
    r.text = nl ? nl + 1 : "";
    r.ok = true;
    return r;
}

void serve_validate(json_out &j, const char *name, int *status) {
    // Two buffers: the second copy's result must not overwrite the first's text.
    static char first_buf[16384], second_buf[16384];
    copy_result a = validate_copy(name, first_buf, sizeof first_buf);
    if (!a.ok) {
        j.member("error", a.why);
        *status = 1;
        return;
    }
    unsigned copies = 1;
    copy_result shown = a;
    if (a.problems) {
        // A per-slot list that a thread was changing when the copy was made looks broken in
        // it: a second copy tells such a moment from a broken heap.
        copy_result b = validate_copy(name, second_buf, sizeof second_buf);
        copies = 2;
        if (b.ok) shown = b;
    }
    j.member("caches_checked", shown.caches).member("problems", shown.problems);
    j.member("report", shown.text).member("copies", copies);
    if (copies == 2) j.member("first_copy_problems", a.problems);
}

// In the copy of the process: every matching cache with owner tracking, its allocation and
// free sites grouped (debug::gather_traces), as a JSON array into out.
size_t traces_in_copy(void *arg, char *out, size_t size) {
    struct walk {
        name_match m;
        json_out *j;
    };
    text_out text{out, size};
    json_out j{text};
    walk w{{static_cast<const char *>(arg)}, &j};
    j.begin_array();
    registry::for_each(
        [](cache *c, void *a) {
            auto *wk = static_cast<walk *>(a);
            const bool tracked = c->debug && (c->flags & kStoreUser);
            const leak_scan::block_source *src = leak_scan::current_block_source();
            const bool blocks = !tracked && src && src->owner == c;
            if ((!tracked && !blocks) || !matches(c, &wk->m)) return;
            static debug::trace_table alloc, freed;
            if (tracked ? !debug::gather_traces(c, &alloc, &freed)
                        : !debug::gather_block_traces(c, &alloc, &freed))
                return;
            json_out &jj = *wk->j;
            jj.begin_object().member("name", c->name);
            // SLOB keeps nothing of a free slot or block: no free sites to show.
            jj.key("free_sites_kept").boolean(tracked && !c->debug_fresh);
            for (auto [key, t] : {std::pair{"alloc", &alloc}, std::pair{"free", &freed}}) {
                jj.key(key).begin_object();
                jj.member("objects", t->objects).member("dropped", t->dropped);
                jj.key("sites").begin_array();
                for (unsigned i = 0; i < t->n; ++i) {
                    const debug::trace_site &e = t->sites[i];
                    char where[256] = "(no stack: the unwinder's own first allocation)";
                    if (e.addr) platform::describe_address(e.addr, where, sizeof where);
                    jj.begin_object().member("count", e.count).member("site", where);
                    jj.member("age_min_ms", e.age_min_ms);
                    jj.member("age_avg_ms", e.age_sum_ms / e.count);
                    jj.member("age_max_ms", e.age_max_ms);
                    jj.member("tid_min", uint64_t{e.tid_min})
                        .member("tid_max", uint64_t{e.tid_max});
                    jj.member("cpus", e.cpus);
                    jj.end_object();
                }
                jj.end_array().end_object();
            }
            jj.end_object();
        },
        &w);
    j.end_array();
    return text.len < size ? text.len : size;
}

void serve_traces(json_out &j, const char *name, int *status) {
    static char buf[live::kReplyBytes - 4096];
    platform::os_status st;
    long n = platform::run_in_copy(traces_in_copy, const_cast<char *>(name), buf, sizeof buf - 1,
                                   kCopyTimeoutMs, &st);
    if (n < 0) {
        char why[160];
        platform::describe(st, why, sizeof why);
        j.member("error", why);
        *status = 1;
        return;
    }
    if (n >= static_cast<long>(sizeof buf - 1)) {
        j.member("error", "the traces are longer than a reply holds: name one cache");
        *status = 1;
        return;
    }
    j.key("caches").json_text(buf, static_cast<size_t>(n));
}

void serve_leaks(json_out &j, const char *arg, int *status) {
    static char buf[live::kReplyBytes - 4096];
    uint64_t min_age = 0;
    for (const char *p = arg; *p; ++p) {
        if (*p < '0' || *p > '9' || min_age > (uint64_t{1} << 40)) {
            j.member("error", "the least age must be a whole number of milliseconds");
            *status = 1;
            return;
        }
        min_age = min_age * 10 + static_cast<uint64_t>(*p - '0');
    }
    char why[160];
    long n = run_leak_scan(leak_format::json, min_age, buf, sizeof buf, why, sizeof why);
    if (n < 0) {
        j.member("error", why);
        *status = 1;
        return;
    }
    j.key("scan").json_text(buf, static_cast<size_t>(n));
}

void serve_shrink(json_out &j, const char *name) {
    struct row {
        char name[32];
        uint64_t before, after;
    };
    static row rows[4096];
    struct walk {
        name_match m;
        unsigned n;
        bool after;
    } w{{name}, 0, false};
    auto gather = [](cache *c, void *arg) {
        auto *wk = static_cast<walk *>(arg);
        if (!matches(c, &wk->m) || wk->m.seen > sizeof rows / sizeof rows[0]) return;
        slabkit_cache_stats st;
        fill_stats(c, &st);
        row &r = rows[wk->m.seen - 1];
        uint64_t pages = st.slabs << st.order;
        if (wk->after) {
            if (strcmp(r.name, c->name) == 0) r.after = pages;
        } else {
            snprintf(r.name, sizeof r.name, "%s", c->name);
            r.before = r.after = pages;
            wk->n = wk->m.seen;
        }
    };
    registry::for_each(gather, &w);
    name_match shrink_m{name};
    designs::shrink_matching(matches, &shrink_m);
    w.m.seen = 0;
    w.after = true;
    registry::for_each(gather, &w);
    j.key("caches").begin_array();
    for (unsigned i = 0; i < w.n; ++i) {
        j.begin_object().member("name", rows[i].name);
        j.member("pages_before", rows[i].before).member("pages_after", rows[i].after);
        j.end_object();
    }
    j.end_array();
}

void serve_report(json_out &j, int *status) {
    static char text[live::kReplyBytes / 2];
    int fd = platform::temp_fd();
    if (fd < 0) {
        j.member("error", "no in-memory file for the report (memfd_create failed)");
        *status = 1;
        return;
    }
    print_stats(fd);
    size_t n = platform::read_back(fd, text, sizeof text - 1);
    platform::close_fd(fd);
    j.key("text").string_n(text, n);
}

void serve(live::live_header *h, uint32_t seq) {
    char name[sizeof h->request_arg];
    memcpy(name, h->request_arg, sizeof name);
    name[sizeof name - 1] = '\0';
    const auto kind = static_cast<live::request>(h->request_kind.load(std::memory_order_relaxed));
    text_out out{reply_of(h), live::kReplyBytes};
    json_out j{out};
    int status = 0;
    j.begin_object();
    switch (kind) {
    case live::request::validate:
    case live::request::shrink:
        j.member("request", kind == live::request::validate ? "validate" : "shrink");
        if (!cache_exists(name)) {
            char why[128];
            snprintf(why, sizeof why, "no cache named \"%s\"", name);
            j.member("error", why);
            status = 1;
        } else if (kind == live::request::validate) {
            serve_validate(j, name, &status);
        } else {
            serve_shrink(j, name);
        }
        break;
    case live::request::report:
        j.member("request", "report");
        serve_report(j, &status);
        break;
    case live::request::traces:
        j.member("request", "traces");
        if (!cache_exists(name)) {
            char why[128];
            snprintf(why, sizeof why, "no cache named \"%s\"", name);
            j.member("error", why);
            status = 1;
        } else {
            serve_traces(j, name, &status);
        }
        break;
    case live::request::leaks:
        j.member("request", "leaks");
        serve_leaks(j, name, &status);
        break;
    case live::request::failslab: {
        j.member("request", "failslab");
        char *caches = strchr(name, ';');
        if (caches) *caches++ = '\0';
        const char *why = nullptr;
        // An empty argument reads the settings only.
        if (name[0] != '\0' && !failslab::set(name, caches, &why)) {
            j.member("error", why);
            status = 1;
        } else {
            write_failslab(j);
        }
        break;
    }
    default:
        j.member("request", "unknown");
        j.member("error", "not a request this process knows (validate, shrink, report, failslab)");
        status = 1;
    }
    j.end_object();
    if (out.len >= live::kReplyBytes) {
        // Cut: replace it by a short error rather than hand out broken JSON.
        text_out err{reply_of(h), live::kReplyBytes};
        json_out e{err};
        e.begin_object().member("request", "unknown").member("error", "the reply was too long");
        e.end_object();
        out = err;
        status = 1;
    }
    h->reply_bytes.store(out.len, std::memory_order_relaxed);
    h->reply_status.store(status, std::memory_order_relaxed);
    h->reply_seq.store(seq, std::memory_order_release);
    platform::futex_wake_shared(&h->reply_seq);
}

// ---- the helper thread ----------------------------------------------------------------------

void helper_loop(live::live_header *h);

void helper_main(void *arg) {
    helper_loop(static_cast<live::live_header *>(arg));
    g_helper_exited.store(1, std::memory_order_release);
    platform::futex_wake_shared(&g_helper_exited);
}

void helper_loop(live::live_header *h) {
    uint32_t seen = h->request_seq.load(std::memory_order_acquire);
    while (!g_stop.load(std::memory_order_acquire)) {
        publish(h);
        const uint64_t deadline =
            platform::now_ns() + uint64_t{g_period_ms.load(std::memory_order_relaxed)} * 1000000u;
        for (;;) {
            h->heartbeat_ns.store(platform::realtime_ns(), std::memory_order_relaxed);
            if (g_stop.load(std::memory_order_acquire)) return;
            const uint32_t seq = h->request_seq.load(std::memory_order_acquire);
            if (seq != seen) {
                seen = seq;
                serve(h, seq);
                publish(h); // what a shrink changed is in the next read
                continue;
            }
            const uint64_t now = platform::now_ns();
            if (now >= deadline) break;
            platform::futex_wait_shared(&h->request_seq, seq, deadline - now);
        }
    }
}

bool start_locked(unsigned period_ms, const char **why) {
    g_period_ms.store(period_ms, std::memory_order_relaxed);
    if (g_segment) {
        g_segment->period_ms = period_ms;
        platform::futex_wake_shared(&g_segment->request_seq); // the new period from now
        return true;
    }
    snprintf(g_name, sizeof g_name, "%s%d", live::kNamePrefix, platform::process_id());
    platform::os_status st;
    void *p = platform::shared_memory_create(g_name, live::kSegmentBytes, &st);
    if (!p) {
        static char reason[160];
        char os[96];
        snprintf(reason, sizeof reason, "cannot make the live segment %s: %s", g_name,
                 platform::describe(st, os, sizeof os));
        *why = reason;
        return false;
    }
    auto *h = static_cast<live::live_header *>(p);
    memcpy(h->magic, live::kMagic, sizeof h->magic);
    h->version = live::kVersion;
    h->header_bytes = sizeof(live::live_header);
    h->segment_bytes = live::kSegmentBytes;
    h->pid = platform::process_id();
    h->period_ms = period_ms;
    h->start_ticks = platform::process_start_ticks();
    publish(h); // readable from the first moment it says live
    h->state.store(static_cast<uint32_t>(live::state::live), std::memory_order_release);
    g_stop.store(false, std::memory_order_relaxed);
    g_helper_exited.store(0, std::memory_order_relaxed);
    platform::thread_handle helper;
    if (!platform::start_thread(helper_main, h, &helper, &st)) {
        g_helper_exited.store(1, std::memory_order_relaxed);
        static char reason[160];
        char os[96];
        snprintf(reason, sizeof reason, "cannot start the live statistics' helper thread: %s",
                 platform::describe(st, os, sizeof os));
        platform::shared_memory_close(g_name, h, live::kSegmentBytes, true);
        *why = reason;
        return false;
    }
    platform::detach_thread(helper);
    g_segment = h;
    g_helper_running = true;
    return true;
}

void stop_locked(bool join) {
    if (!g_segment) return;
    g_segment->state.store(static_cast<uint32_t>(live::state::stopped), std::memory_order_release);
    g_stop.store(true, std::memory_order_release);
    platform::futex_wake_shared(&g_segment->request_seq);
    if (join && g_helper_running) {
        while (g_helper_exited.load(std::memory_order_acquire) == 0)
            platform::futex_wait_shared(&g_helper_exited, 0, 100000000u);
        g_helper_running = false;
        platform::shared_memory_close(g_name, g_segment, live::kSegmentBytes, true);
        g_segment = nullptr;
    } else {
        // At exit: the name goes, the mapping stays until the process ends (the helper may be
        // in the middle of a publication or a request, and is not waited for: it is detached).
        platform::shared_memory_close(g_name, nullptr, 0, true);
    }
}

// SLABKIT_STATS: a comma-separated list of "exit" (stats.cpp prints the report at exit) and
// "live" or "live:MS". A list stats.cpp does not understand (it says so) starts nothing.
__attribute__((constructor)) void start_from_environment() {
    const char *v = platform::env("SLABKIT_STATS");
    if (!v) return;
    bool live = false;
    unsigned period = kDefaultPeriodMs;
    for (const char *p = v; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? static_cast<size_t>(end - p) : strlen(p);
        if (n >= 4 && strncmp(p, "live", 4) == 0 && (n == 4 || p[4] == ':')) {
            live = true;
            if (n > 4) {
                char digits[16] = "";
                unsigned long ms = 0;
                bool ok = n - 5 >= 1 && n - 5 < sizeof digits;
                if (ok) {
                    memcpy(digits, p + 5, n - 5);
                    char *stop = nullptr;
                    ms = strtoul(digits, &stop, 10);
                    ok = *stop == '\0' && ms >= kMinPeriodMs && ms <= kMaxPeriodMs;
                }
                if (ok)
                    period = static_cast<unsigned>(ms);
                else
                    platform::print_error("slabkit: SLABKIT_STATS=%s: the live period must be "
                                          "%u to %u ms (live:MS); using %u\n",
                                          v, kMinPeriodMs, kMaxPeriodMs, kDefaultPeriodMs);
            }
        } else if (!(n == 4 && strncmp(p, "exit", 4) == 0)) {
            return;
        }
        p += n + (end ? 1 : 0);
    }
    if (!live) return;
    const char *why = nullptr;
    if (slabkit_stats_live_start(period, &why) != 0)
        platform::print_error("slabkit: SLABKIT_STATS=%s: %s\n", v, why);
}

__attribute__((destructor)) void stop_at_exit() {
    // Not waiting for the helper: see stop_locked. No lock either, were a thread stopped with
    // g_control held.
    if (g_segment) stop_locked(false);
}

void reset_in_child() {
    // The child has no helper thread; the segment is the parent's, named by the parent's pid.
    if (g_segment) platform::shared_memory_close(g_name, g_segment, live::kSegmentBytes, false);
    g_segment = nullptr;
    g_helper_running = false;
    g_helper_exited.store(1, std::memory_order_relaxed);
    g_control.reset_after_fork();
    g_publish.reset_after_fork();
}

__attribute__((constructor)) void install_fork_hook() {
    if (!platform::add_fork_hooks({platform::kForkRankLive, nullptr, nullptr, reset_in_child}))
        platform::fatal("slabkit: cannot install the live statistics' fork hook\n");
}

} // namespace

} // namespace slabkit::api

extern "C" {

int slabkit_stats_live_start(unsigned period_ms, const char **why) {
    using namespace slabkit::api;
    if (period_ms == 0) period_ms = kDefaultPeriodMs;
    if (period_ms < kMinPeriodMs || period_ms > kMaxPeriodMs) {
        if (why) *why = "the period must be 10 to 60000 ms (0: 1000)";
        return -1;
    }
    const char *reason = nullptr;
    bool ok;
    {
        slabkit::platform::lock_guard guard(g_control);
        ok = start_locked(period_ms, &reason);
    }
    if (why) *why = ok ? nullptr : reason;
    return ok ? 0 : -1;
}

void slabkit_stats_live_stop(void) {
    using namespace slabkit::api;
    slabkit::platform::lock_guard guard(g_control);
    stop_locked(true);
}

uint64_t slabkit_stats_publish(void) {
    using namespace slabkit::api;
    slabkit::platform::lock_guard guard(g_control);
    return g_segment ? publish(g_segment) : 0;
}

} // extern "C"
