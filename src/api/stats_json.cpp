// stats_json.cpp - every statistic as one JSON text (docs/slabinfo.md, "The snapshot"): what
// slabkit_stats_json returns and what a publishing process keeps in its live segment.
#include "api/stats_json.hpp"

#include "api/json_out.hpp"
#include "api/stats.hpp"
#include "core/failslab.hpp"
#include "designs/designs.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"

namespace slabkit::api {

namespace {

// The caches' walk: each one's object, and its share of the heap's totals.
struct cache_walk {
    json_out &j;
    heap_totals totals;
};

void write_cache(json_out &j, const cache *c, heap_totals *totals) {
    slabkit_cache_stats st;
    fill_stats(c, &st);
    add_cache_to_totals(totals, st);
    j.begin_object();
    j.member("name", st.name).member("design", st.design);
    j.member("object_size", st.object_size).member("slot_size", st.slot_size);
    j.member("align", st.align).member("order", st.order);
    j.member("objects_per_slab", st.objects_per_slab).member("flags", st.flags);
    j.member("slabs", st.slabs).member("active_slabs", st.active_slabs);
    j.member("objects", st.objects).member("active_objects", st.active_objects);
    j.member("queued_objects", st.queued_objects).member("shared_avail", st.shared_avail);
    j.key("slabinfo_tunables").begin_array();
    for (uint64_t v : st.slabinfo_tunables) j.number(v);
    j.end_array();
    j.key("tunables").begin_object();
    for (unsigned i = 0; i < st.nr_tunables; ++i) j.member(st.tunable_names[i], st.tunables[i]);
    j.end_object();
    j.key("counters").begin_object();
    for (unsigned i = 0; i < st.nr_counters; ++i) j.member(st.counter_names[i], st.counters[i]);
    j.end_object();
    j.key("activity").begin_object();
    j.member("allocs", st.allocs).member("alloc_slow", st.alloc_slow);
    j.member("frees", st.frees).member("free_slow", st.free_slow);
    j.member("failslab_failures", failslab::failures_of(const_cast<cache *>(c)));
    j.end_object();
    j.end_object();
}

} // namespace

// Fault injection's settings and counts (core/failslab.hpp).
void write_failslab(json_out &j) {
    failslab::status st;
    failslab::get_status(&st);
    j.key("failslab").begin_object();
    j.key("armed").boolean(st.armed);
    j.key("probability").number_text(st.probability);
    j.member("interval", st.interval);
    j.key("times").signed_number(st.times);
    j.key("space").signed_number(st.space);
    j.member("caches", st.caches);
    j.member("failures", st.failures).member("block_failures", st.block_failures);
    j.member("caches_untracked", st.caches_untracked);
    j.end_object();
}

namespace {

// The totals of the caches written above (the same figures, not a second walk), and the rest.
void write_heap(json_out &j, heap_totals h) {
    add_pages_to_totals(&h);
    j.key("heap").begin_object();
    j.member("caches", h.caches).member("slab_pages", h.slab_pages);
    j.member("objects_in_use", h.objects_in_use).member("object_bytes", h.object_bytes);
    j.member("free_objects", h.free_objects).member("free_object_bytes", h.free_object_bytes);
    j.member("block_pages", h.block_pages).member("free_pages", h.free_pages);
    j.member("free_resident_pages", h.free_resident_pages);
    j.member("returned_pages", h.returned_pages).member("reserved_bytes", h.reserved_bytes);
    j.member("large_blocks", h.large_blocks).member("large_bytes", h.large_bytes);
    j.member("kept_blocks", h.kept_blocks).member("kept_bytes", h.kept_bytes);
    j.member("errors", h.errors).member("refusals", h.refusals);
    j.end_object();
}

void write_pages(json_out &j) {
    page_stats st;
    page_allocator::global().snapshot(&st);
    j.key("pages").begin_object();
    j.member("in_use", st.in_use).member("in_pcp", st.in_pcp);
    j.member("free_pages", st.free_pages).member("free_resident", st.free_resident);
    j.member("returned", st.returned).member("resident", st.resident);
    j.member("reserved_bytes", st.reserved_bytes).member("chunks", st.chunks);
    j.member("errors", st.errors);
    j.key("nodes").begin_array();
    for (unsigned n = 0; n < st.nodes; ++n) {
        const page_stats::node_stats &ns = st.node[n];
        j.begin_object();
        j.member("node", n);
        j.key("free_blocks").begin_array();
        for (uint64_t b : ns.free_blocks) j.number(b);
        j.end_array();
        j.member("free_pages", ns.free_pages).member("free_resident", ns.free_resident);
        j.member("in_use", ns.in_use).member("in_pcp", ns.in_pcp);
        j.member("usable_pages", ns.usable_pages).member("chunks", ns.chunks);
        j.member("returned", ns.returned).member("decommits", ns.decommits);
        j.end_object();
    }
    j.end_array();
    j.end_object();
}

void write_slots(json_out &j) {
    slabkit_slot_stats sl;
    slabkit_get_slot_stats(&sl);
    j.key("slots").begin_object();
    j.member("mode", sl.mode).member("why", sl.why).member("rseq", sl.rseq);
    j.member("cpu_slots", sl.cpu_slots).member("thread_slots", sl.thread_slots);
    j.member("threads_owning", sl.threads_owning).member("restarts", sl.restarts);
    j.member("busy", sl.busy).member("shared_holds", sl.shared_holds);
    j.member("cpu_drains", sl.cpu_drains);
    j.end_object();
}

} // namespace

void write_stats_json(text_out &out, const live_info *live) {
    designs::bootstrap_process_design();
    json_out j{out};
    char program[64];
    platform::program_name(program, sizeof program);
    j.begin_object();
    j.member("format", "slabkit-stats").member("version", uint64_t{kStatsJsonVersion});
    j.key("pid").signed_number(platform::process_id());
    j.member("program", program).member("time_ns", platform::realtime_ns());
    j.member("design", slabkit_allocator()).member("designs", slabkit_designs());
    j.member("page_size", kPageSize);
    j.key("caches").begin_array();
    cache_walk walk{j, {}};
    registry::for_each(
        [](cache *c, void *arg) {
            auto *w = static_cast<cache_walk *>(arg);
            write_cache(w->j, c, &w->totals);
        },
        &walk);
    j.end_array();
    write_heap(j, walk.totals);
    write_pages(j);
    write_slots(j);
    write_failslab(j);
    if (live) {
        j.key("live").begin_object();
        j.member("period_ms", live->period_ms).member("publish_count", live->publish_count);
        j.end_object();
    }
    j.end_object();
    out.printf("\n");
}

} // namespace slabkit::api

extern "C" size_t slabkit_stats_json(char *buf, size_t size) {
    slabkit::text_out out{buf, size};
    if (buf && size) buf[0] = '\0';
    slabkit::api::write_stats_json(out, nullptr);
    return out.len;
}
