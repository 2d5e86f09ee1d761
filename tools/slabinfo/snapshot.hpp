// snapshot.hpp - the statistics snapshot of one process (docs/slabinfo.md, JSON version 1), as the
// slabinfo tool reads it from a live segment or from a file saved with -o.
//
// parse_snapshot() checks what it reads: a JSON that is not a slabkit snapshot, another version, a
// missing field or a field of the wrong type ends in a slabinfo_error whose one-line message names
// the source and the field. to_json() writes the same schema back, so that
// parse_snapshot(to_json(s)) == s.
//
// Every record lists its fields once, in the schema's order, in a static fields(self, visitor):
// the parser, the writer and the tests walk the same list.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace slabinfo {

// Every error of the tool: what() is one line saying what was wrong.
struct slabinfo_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline constexpr const char *kSnapshotFormat = "slabkit-stats";
inline constexpr uint64_t kSnapshotVersion = 1;

// One entry of a JSON object whose keys are names chosen by the design (counters, tunables).
struct named_value {
    std::string name;
    uint64_t value = 0;
    bool operator==(const named_value &) const = default;
};
using named_values = std::vector<named_value>;

// The same events in one shape for every design.
struct activity_counts {
    uint64_t allocs = 0;
    uint64_t alloc_slow = 0;
    uint64_t frees = 0;
    uint64_t free_slow = 0;
    // Allocations failed on purpose (docs/failslab.md); absent in snapshots saved before fault
    // injection (2026-12-07), which still load.
    std::optional<uint64_t> failslab_failures;

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("allocs", s.allocs);
        v("alloc_slow", s.alloc_slow);
        v("frees", s.frees);
        v("free_slow", s.free_slow);
        v("failslab_failures", s.failslab_failures);
    }
    bool operator==(const activity_counts &) const = default;
};

// One cache: struct slabkit_cache_stats.
struct cache_stats {
    std::string name;
    std::string design;
    uint64_t object_size = 0;
    uint64_t slot_size = 0;
    uint64_t align = 0;
    uint64_t order = 0;
    uint64_t objects_per_slab = 0;
    std::string flags;
    uint64_t slabs = 0;
    uint64_t active_slabs = 0;
    uint64_t objects = 0;
    uint64_t active_objects = 0;
    uint64_t queued_objects = 0;
    uint64_t shared_avail = 0;
    std::array<uint64_t, 3> slabinfo_tunables{};
    named_values tunables;
    named_values counters;
    activity_counts activity;

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("name", s.name);
        v("design", s.design);
        v("object_size", s.object_size);
        v("slot_size", s.slot_size);
        v("align", s.align);
        v("order", s.order);
        v("objects_per_slab", s.objects_per_slab);
        v("flags", s.flags);
        v("slabs", s.slabs);
        v("active_slabs", s.active_slabs);
        v("objects", s.objects);
        v("active_objects", s.active_objects);
        v("queued_objects", s.queued_objects);
        v("shared_avail", s.shared_avail);
        v("slabinfo_tunables", s.slabinfo_tunables);
        v("tunables", s.tunables);
        v("counters", s.counters);
        v("activity", s.activity);
    }
    bool operator==(const cache_stats &) const = default;
};

// The sums over every cache and the page allocator (api::heap_totals).
struct heap_totals {
    uint64_t caches = 0;
    uint64_t slab_pages = 0;
    uint64_t objects_in_use = 0;
    uint64_t object_bytes = 0;
    uint64_t free_objects = 0;
    uint64_t free_object_bytes = 0;
    uint64_t block_pages = 0;
    uint64_t free_pages = 0;
    uint64_t free_resident_pages = 0;
    uint64_t returned_pages = 0;
    uint64_t reserved_bytes = 0;
    uint64_t large_blocks = 0;
    uint64_t large_bytes = 0;
    uint64_t kept_blocks = 0;
    uint64_t kept_bytes = 0;
    uint64_t errors = 0;
    // Requests for memory refused (out of memory or address space); absent in snapshots saved
    // before slabkit counted them (2026-12-07), which still load.
    std::optional<uint64_t> refusals;

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("caches", s.caches);
        v("slab_pages", s.slab_pages);
        v("objects_in_use", s.objects_in_use);
        v("object_bytes", s.object_bytes);
        v("free_objects", s.free_objects);
        v("free_object_bytes", s.free_object_bytes);
        v("block_pages", s.block_pages);
        v("free_pages", s.free_pages);
        v("free_resident_pages", s.free_resident_pages);
        v("returned_pages", s.returned_pages);
        v("reserved_bytes", s.reserved_bytes);
        v("large_blocks", s.large_blocks);
        v("large_bytes", s.large_bytes);
        v("kept_blocks", s.kept_blocks);
        v("kept_bytes", s.kept_bytes);
        v("errors", s.errors);
        v("refusals", s.refusals);
    }
    bool operator==(const heap_totals &) const = default;
};

// One NUMA node of the page allocator; free_blocks[order] as in /proc/buddyinfo.
struct node_pages {
    uint64_t node = 0;
    std::vector<uint64_t> free_blocks;
    uint64_t free_pages = 0;
    uint64_t free_resident = 0;
    uint64_t in_use = 0;
    uint64_t in_pcp = 0;
    uint64_t usable_pages = 0;
    uint64_t chunks = 0;
    uint64_t returned = 0;
    uint64_t decommits = 0;

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("node", s.node);
        v("free_blocks", s.free_blocks);
        v("free_pages", s.free_pages);
        v("free_resident", s.free_resident);
        v("in_use", s.in_use);
        v("in_pcp", s.in_pcp);
        v("usable_pages", s.usable_pages);
        v("chunks", s.chunks);
        v("returned", s.returned);
        v("decommits", s.decommits);
    }
    bool operator==(const node_pages &) const = default;
};

// The page allocator.
struct page_totals {
    uint64_t in_use = 0;
    uint64_t in_pcp = 0;
    uint64_t free_pages = 0;
    uint64_t free_resident = 0;
    uint64_t returned = 0;
    uint64_t resident = 0;
    uint64_t reserved_bytes = 0;
    uint64_t chunks = 0;
    uint64_t errors = 0;
    std::vector<node_pages> nodes;

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("in_use", s.in_use);
        v("in_pcp", s.in_pcp);
        v("free_pages", s.free_pages);
        v("free_resident", s.free_resident);
        v("returned", s.returned);
        v("resident", s.resident);
        v("reserved_bytes", s.reserved_bytes);
        v("chunks", s.chunks);
        v("errors", s.errors);
        v("nodes", s.nodes);
    }
    bool operator==(const page_totals &) const = default;
};

// struct slabkit_slot_stats.
struct slot_stats {
    std::string mode;
    std::string why;
    std::string rseq;
    uint64_t cpu_slots = 0;
    uint64_t thread_slots = 0;
    uint64_t threads_owning = 0;
    uint64_t restarts = 0;
    uint64_t busy = 0;
    uint64_t shared_holds = 0;
    uint64_t cpu_drains = 0;

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("mode", s.mode);
        v("why", s.why);
        v("rseq", s.rseq);
        v("cpu_slots", s.cpu_slots);
        v("thread_slots", s.thread_slots);
        v("threads_owning", s.threads_owning);
        v("restarts", s.restarts);
        v("busy", s.busy);
        v("shared_holds", s.shared_holds);
        v("cpu_drains", s.cpu_drains);
    }
    bool operator==(const slot_stats &) const = default;
};

// Fault injection's settings and failures (docs/failslab.md).
struct failslab_info {
    bool armed = false;
    double probability = 0; // percent
    uint64_t interval = 1;
    int64_t times = -1; // failures left; -1: no limit
    int64_t space = 0;
    std::string caches; // the filter; "": every cache
    uint64_t failures = 0;
    uint64_t block_failures = 0; // of blocks not of a cache
    uint64_t caches_untracked = 0;

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("armed", s.armed);
        v("probability", s.probability);
        v("interval", s.interval);
        v("times", s.times);
        v("space", s.space);
        v("caches", s.caches);
        v("failures", s.failures);
        v("block_failures", s.block_failures);
        v("caches_untracked", s.caches_untracked);
    }
    bool operator==(const failslab_info &) const = default;
};

// What a live segment's payload adds.
struct live_info {
    uint64_t period_ms = 0;
    uint64_t publish_count = 0;

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("period_ms", s.period_ms);
        v("publish_count", s.publish_count);
    }
    bool operator==(const live_info &) const = default;
};

// The whole snapshot. "format" and "version" are checked on reading and written by to_json; they
// are not kept.
struct snapshot {
    uint64_t pid = 0;
    std::string program;
    uint64_t time_ns = 0;
    std::string design;
    std::string designs;
    uint64_t page_size = 0;
    std::vector<cache_stats> caches;
    heap_totals heap;
    page_totals pages;
    slot_stats slots;
    std::optional<failslab_info> failslab; // absent before fault injection (2026-12-07)
    std::optional<live_info> live;         // a live segment's payload
    std::optional<std::string> saved_from; // a snapshot saved with slabinfo -o

    template <class Self, class V>
    static void fields(Self &s, V &&v) {
        v("pid", s.pid);
        v("program", s.program);
        v("time_ns", s.time_ns);
        v("design", s.design);
        v("designs", s.designs);
        v("page_size", s.page_size);
        v("caches", s.caches);
        v("heap", s.heap);
        v("pages", s.pages);
        v("slots", s.slots);
        v("failslab", s.failslab);
        v("live", s.live);
        v("saved_from", s.saved_from);
    }
    bool operator==(const snapshot &) const = default;
};

// Parses and checks a snapshot. `source` names where the text came from ("snap.json", "process
// 1234"); every error message starts with it.
snapshot parse_snapshot(std::string_view text, std::string_view source);
// The same, from a JSON value already parsed.
snapshot snapshot_from_json(const nlohmann::ordered_json &j, std::string_view source);

// The snapshot as JSON, in the schema's order.
nlohmann::ordered_json to_json_value(const snapshot &s);
// The same as text: indent < 0 is one line.
std::string to_json(const snapshot &s, int indent = 2);

// Bytes of one slab and of every slab of a cache (saturating: never wraps).
uint64_t slab_bytes(const snapshot &s, const cache_stats &c);
uint64_t space_bytes(const snapshot &s, const cache_stats &c);
// Bytes of the objects in use (active_objects * object_size, saturating).
uint64_t used_bytes(const cache_stats &c);
// A cache that holds nothing: no slab and no object out.
inline bool is_empty(const cache_stats &c) {
    return c.slabs == 0 && c.active_objects == 0;
}

// Text fit for a one-line message: control characters replaced by '?', at most `max` bytes.
std::string one_line(std::string_view text, size_t max = 200);

} // namespace slabinfo
