// slqb_cache.cpp - SLQB cache management: the static bootstrap, create, destroy, shrink, trims,
// tunables and statistics.
#include "core/report.hpp"
#include "core/slot_array.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slqb/slqb_internal.hpp"

#include <cstring>
#include <new>

namespace slabkit::slqb {

const char *const kStatNames[NR_STATS] = {
    "ALLOC",
    "ALLOC_SLAB_FILL",
    "ALLOC_SLAB_NEW",
    "FREE",
    "FREE_REMOTE",
    "FLUSH_FREE_LIST",
    "FLUSH_FREE_LIST_OBJECTS",
    "FLUSH_FREE_LIST_REMOTE",
    "FLUSH_SLAB_PARTIAL",
    "FLUSH_SLAB_FREE",
    "FLUSH_RFREE_LIST",
    "FLUSH_RFREE_LIST_OBJECTS",
    "CLAIM_REMOTE_LIST",
    "CLAIM_REMOTE_LIST_OBJECTS",
    "QUEUE_GROW",
};

// SLQB's order policy: order 0 unless that leaves more than 1/8 of the slab unused (then order
// 1), else the smallest order that holds an object; the boot settings raise the first order
// tried and the objects a slab must hold. The patch's comment says 1/8; its code passed 4 (a
// quarter), which leaves objects of 1 to 2 KiB in order-0 slabs that waste up to a quarter of
// every page - an inode of 1128 bytes three to a page, 17% of each page unused. With 1/8 those
// go to order 1 (seven inodes in two pages, 4% unused), which took slabbench's boot footprint
// under SLUB's (docs/slqb.md, "Watermarks and order").
static order_policy policy_of(const settings &st) {
    return order_policy{st.min_order, 1, 8, st.min_objects};
}

unsigned calculate_order(size_t size, const settings &st) {
    return order_by_waste(size, policy_of(st));
}

namespace {
settings g_settings;
} // namespace

const settings &boot_settings() {
    return g_settings;
}

// ---- the bootstrap: three caches whose own structures are static ---------------------------
//
// "kmem_cache" holds cache descriptors, "kmem_cache_cpu" per-slot structures, "kmem_cache_node"
// per-node structures. Their descriptors, per-slot pointer arrays, per-slot structures and
// per-node structures are all static objects (zero-initialised, so they cost no memory until a
// slot touches them), wired up in one step by bootstrap().

namespace {
enum meta_index { kMetaCache, kMetaCpu, kMetaNode, kNrMeta };
const char *const kMetaNames[kNrMeta] = {"kmem_cache", "kmem_cache_cpu", "kmem_cache_node"};
const size_t kMetaSizes[kNrMeta] = {sizeof(slqb_cache), sizeof(slqb_cpu), sizeof(slqb_node)};

slqb_cache g_meta[kNrMeta];
std::atomic<slqb_cpu *> g_meta_cpu_slab[kNrMeta][kMaxSlots + 1];
slqb_cpu g_meta_cpus[kNrMeta][kMaxSlots];
slqb_node g_meta_nodes[kNrMeta][platform::kMaxNodes];

std::atomic<bool> g_booted{false};
platform::mutex g_boot_lock;

void setup_common(slqb_cache *s, const cache_args &args) {
    describe_cache(s, args, design::slqb);
    compute_layout(s, policy_of(g_settings));
    // freebatch = max(4 pages' worth, min(256, 64 pages' worth)) of objects, at least 1.
    size_t fb = 64 * kPageSize / s->size < 256 ? 64 * kPageSize / s->size : 256;
    if (4 * kPageSize / s->size > fb) fb = 4 * kPageSize / s->size;
    const uint32_t batch = fb ? static_cast<uint32_t>(fb) : 1;
    s->freebatch.store(batch);
    s->hiwater.store(4 * batch);
    s->hiwater_max.store(4 * batch);
    // A byte bound from the creator: a shorter queue to start with (still four batches long, at
    // least 4 objects) rather than a smaller share of objects per batch; it may grow back to
    // the design's sizing (hiwater_max, grow_queues).
    if (args.queue_bytes && uint64_t{4} * batch * s->size > args.queue_bytes) {
        uint64_t hw = args.queue_bytes / s->size;
        s->hiwater.store(static_cast<uint32_t>(hw < 4 ? 4 : hw));
        s->freebatch.store(s->hiwater.load() / 4);
        s->queue_growth_budget = args.queue_growth_budget;
    }
    s->nr_nodes = page_allocator::global().nodes();
    s->numa = s->nr_nodes > 1;
    s->inline_abi.store(gate_tag_for(s)); // plain caches open their gate (core/cache.hpp)
    if (s->debug) {
        s->debug_alloc = debug_slot_alloc;
        s->debug_free = debug_slot_free;
    }
}
} // namespace

slqb_cache &cache_cache() {
    return g_meta[kMetaCache];
}
slqb_cache &cpu_cache() {
    return g_meta[kMetaCpu];
}
slqb_cache &node_cache() {
    return g_meta[kMetaNode];
}

slqb_cpu *meta_cpu_storage(slqb_cache *s, unsigned slot) {
    return &g_meta_cpus[s - g_meta][slot];
}

void bootstrap() {
    if (SLABKIT_LIKELY(g_booted.load(std::memory_order_acquire))) return;
    platform::lock_guard guard(g_boot_lock);
    if (g_booted.load(std::memory_order_relaxed)) return;
    g_settings.min_order = static_cast<unsigned>(
        platform::env_uint("SLABKIT_SLQB_MIN_ORDER", g_settings.min_order, 0, kMaxOrder));
    g_settings.min_objects = static_cast<unsigned>(
        platform::env_uint("SLABKIT_SLQB_MIN_OBJECTS", g_settings.min_objects, 1, 32767));
    for (unsigned m = 0; m < kNrMeta; ++m) {
        slqb_cache *s = &g_meta[m];
        char name[kNameMax];
        internal_cache_name(design::slqb, kMetaNames[m], name, sizeof name);
        setup_common(s, cache_args{name, kMetaSizes[m], kCacheLine, 0, nullptr});
        s->meta = true;
        // Per-slot structures come from g_meta_cpus when a slot first uses the cache
        // (get_cpu): set up all 1024 here, they would make 1.2 MiB resident in every process.
        s->cpu_slab = g_meta_cpu_slab[m];
        for (unsigned n = 0; n < s->nr_nodes; ++n) {
            init_list(&g_meta_nodes[m][n].list, s, n, true);
            s->node_slab[n] = &g_meta_nodes[m][n];
        }
        registry::add_internal(s);
    }
    g_booted.store(true, std::memory_order_release);
}

// ---- create and destroy -------------------------------------------------------------------

static bool make_nodes(slqb_cache *s) {
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        void *mem = alloc_shared(&node_cache());
        if (!mem) return false;
        slqb_node *node = new (mem) slqb_node();
        init_list(&node->list, s, n, true);
        s->node_slab[n] = node;
    }
    return true;
}

// Frees a cache's per-slot and per-node structures and its pointer array (all empty).
static void free_structures(slqb_cache *s) {
    for (unsigned slot = 0; slot < kMaxSlots; ++slot) {
        slqb_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire);
        if (!c) continue;
        s->cpu_slab[slot].store(nullptr, std::memory_order_relaxed);
        c->~slqb_cpu();
        free_shared(&cpu_cache(), c);
    }
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        if (!s->node_slab[n]) continue;
        s->node_slab[n]->~slqb_node();
        free_shared(&node_cache(), s->node_slab[n]);
        s->node_slab[n] = nullptr;
    }
    free_slot_array(s->cpu_slab);
    s->cpu_slab = nullptr;
}

bool open_static(slqb_cache *s, slot_storage *slots, const cache_args &args, const char **why) {
    bootstrap();
    setup_common(s, args);
    s->cpu_slab = slots->data();
    // Per-node structures of static caches come from the node cache like any other's.
    if (!make_nodes(s)) {
        if (why) *why = "out of memory for the per-node structures";
        return false;
    }
    registry::add_internal(s);
    return true;
}

slqb_cache *create(const cache_args &args, const char **why) {
    bootstrap();
    void *mem = alloc_shared(&cache_cache());
    if (!mem) {
        if (why) *why = "out of memory for the cache descriptor";
        return nullptr;
    }
    slqb_cache *s = new (mem) slqb_cache();
    setup_common(s, args);
    s->cpu_slab = alloc_slot_array<slqb_cpu>();
    if (!s->cpu_slab || !make_nodes(s)) {
        if (why) *why = "out of memory for the per-slot and per-node structures";
        if (s->cpu_slab) free_structures(s);
        s->~slqb_cache();
        free_shared(&cache_cache(), s);
        return nullptr;
    }
    if (!registry::add(s, why)) {
        free_structures(s);
        s->~slqb_cache();
        free_shared(&cache_cache(), s);
        return nullptr;
    }
    return s;
}

// Every list of the cache: fn(list, cpu or nullptr, node or nullptr).
template <class Fn>
static void for_each_list(slqb_cache *s, Fn fn) {
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top; ++slot) {
        slqb_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire);
        if (c) fn(&c->list, c, static_cast<slqb_node *>(nullptr));
    }
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n])
            fn(&s->node_slab[n]->list, static_cast<slqb_cpu *>(nullptr), s->node_slab[n]);
}

// Claims a node list's inbox and returns its whole queue to its slabs.
static void drain_node(slqb_cache *s, slqb_node *n) {
    deferred_release defer; // the emptied slabs go back after the list lock is dropped
    platform::lock_guard guard(n->list_lock);
    claim_remote_list(s, &n->list);
    flush_free_list_all(s, &n->list, nullptr);
}

// Reports the objects still allocated in list l's slabs; returns how many.
static uint64_t report_leaks(slqb_cache *s, slqb_list *l) {
    uint64_t leaked = 0;
    platform::lock_guard guard(l->page_lock);
    for (page_list *sl : {&l->partial, &l->full})
        for (page *pg = sl->first; pg; pg = pg->next) leaked += report_slab_leaks(s, pg);
    return leaked;
}

void destroy(slqb_cache *s) {
    if (!s || s->dead) return;
    registry::remove(s);
    // The caller guarantees no thread uses the cache any more, so every slot's structure may be
    // flushed here, including those of live threads. Two passes: queues and outboxes first
    // (which fills inboxes), then every inbox and node list.
    for_each_list(s, [&](slqb_list *, slqb_cpu *c, slqb_node *) {
        if (c) flush_cpu(s, c);
    });
    for_each_list(s, [&](slqb_list *l, slqb_cpu *c, slqb_node *n) {
        if (c) {
            claim_remote_list(s, l);
            flush_free_list_all(s, l, c);
        } else {
            drain_node(s, n);
        }
    });
    uint64_t slabs = 0;
    for_each_list(s, [&](slqb_list *l, slqb_cpu *, slqb_node *) {
        slabs += l->nr_slabs.load(std::memory_order_relaxed);
    });
    if (slabs == 0) {
        free_structures(s);
        s->~slqb_cache();
        free_shared(&cache_cache(), s);
        return;
    }
    uint64_t leaked = 0;
    for_each_list(s, [&](slqb_list *l, slqb_cpu *, slqb_node *) { leaked += report_leaks(s, l); });
    report("kmem_cache_destroy(%s): %llu object(s) still allocated in %llu slab(s); the cache's "
           "memory is kept",
           s->name, static_cast<unsigned long long>(leaked),
           static_cast<unsigned long long>(slabs));
    s->dead = true;
}

// ---- shrink and trims ------------------------------------------------------------------------

size_t reclaim(slqb_cache *s) {
    if (!s || s->dead) return 0;
    unsigned me = slots::current_if_any();
    if (me != kNoSlot) {
        if (slqb_cpu *c = s->cpu_slab[me].load(std::memory_order_relaxed)) flush_cpu(s, c);
    }
    // Other threads' inboxes go straight to their slabs (the owners' queues stay theirs); the
    // owners flush their queues at their next slow path.
    s->shrink_gen.fetch_add(1, std::memory_order_relaxed);
    for_each_list(s, [&](slqb_list *l, slqb_cpu *c, slqb_node *n) {
        if (c)
            drain_inbox_to_pages(s, l);
        else
            drain_node(s, n);
    });
    uint64_t slabs = 0;
    for_each_list(s, [&](slqb_list *l, slqb_cpu *, slqb_node *) {
        slabs += l->nr_slabs.load(std::memory_order_relaxed);
    });
    return slabs;
}

// True when a flushed per-slot structure holds nothing and no slab points at its list.
static bool cpu_is_empty(slqb_cpu *c) {
    platform::lock_guard guard(c->list.page_lock);
    return c->list.nr_slabs.load(std::memory_order_relaxed) == 0 && !c->list.freelist.head() &&
           c->list.inbox.count() == 0 && c->rlist.count() == 0;
}

void flush_slot(slqb_cache *s, unsigned slot, bool release) {
    if (s->dead || slot >= kMaxSlots) return;
    slqb_cpu *cpu = s->cpu_slab[slot].load(std::memory_order_acquire);
    if (!cpu) return;
    flush_cpu(s, cpu);
    // Freed only when the slot is idle and nothing refers to the structure any more, so that
    // memory follows the slots in use rather than the most ever used. The designs layer calls
    // this under the cache registry lock, which statistics readers hold too: none is reading it.
    if (!release || s->meta || !cpu_is_empty(cpu)) return;
    for (unsigned i = 0; i < NR_STATS; ++i)
        s->shared_stats[i].add_shared(i == FREE ? frees_of(&cpu->list) : cpu->list.stats[i].get());
    s->cpu_slab[slot].store(nullptr, std::memory_order_release);
    cpu->~slqb_cpu();
    free_shared(&cpu_cache(), cpu);
}

void trim(slqb_cache *s) {
    if (s->dead) return;
    // The node lists' share of SLQB's trimmer (cache_trim_worker): claim the inbox and give back
    // one batch of the queue, so that objects freed to a node list below freebatch do not keep
    // their slabs until an explicit shrink. A node list's queue only holds objects of its own
    // slabs, so no outbox is needed.
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        slqb_node *node = s->node_slab[n];
        if (!node) continue;
        deferred_release defer; // emptied slabs go back after the list lock is dropped
        platform::lock_guard guard(node->list_lock);
        claim_remote_list(s, &node->list);
        flush_node_batch(s, &node->list);
    }
}

bool tune(slqb_cache *s, uint32_t hiwater, uint32_t freebatch) {
    if (freebatch < 1 || freebatch > hiwater + 1 || hiwater > kMaxHiwater) return false;
    s->hiwater.store(hiwater);
    s->freebatch.store(freebatch);
    s->hiwater_max.store(hiwater); // set by hand: no growth
    return true;
}

bool tune(slqb_cache *s, const char *name, unsigned long value, const char **why) {
    if (strcmp(name, "order") == 0)
        return set_order(s, value > UINT32_MAX ? UINT32_MAX : static_cast<unsigned>(value), why);
    if (strcmp(name, "hiwater") == 0 || strcmp(name, "freebatch") == 0) {
        if (value > UINT32_MAX) {
            *why = "the value is too large";
            return false;
        }
        uint32_t v = static_cast<uint32_t>(value);
        bool ok = name[0] == 'h' ? tune(s, v, s->freebatch.load()) : tune(s, s->hiwater.load(), v);
        if (!ok)
            *why = "freebatch must be at least 1 and at most hiwater + 1, and hiwater at most "
                   "16384";
        return ok;
    }
    *why = "unknown tunable (SLQB has order, hiwater, freebatch)";
    return false;
}

uint64_t frees_of(const slqb_list *l) {
    if (l->is_node_list) return l->stats[FREE].get();
    int64_t pops = static_cast<int64_t>(l->stats[ALLOC].get() - l->stats[ALLOC_SLAB_FILL].get() -
                                        l->stats[ALLOC_SLAB_NEW].get());
    int64_t frees = static_cast<int64_t>(l->freelist.count()) + pops +
                    static_cast<int64_t>(l->stats[FLUSH_FREE_LIST_OBJECTS].get()) -
                    static_cast<int64_t>(l->stats[CLAIM_REMOTE_LIST_OBJECTS].get()) +
                    static_cast<int64_t>(l->stats[FREE_REMOTE].get());
    return frees > 0 ? static_cast<uint64_t>(frees) : 0; // a racing read can undershoot
}

bool set_order(slqb_cache *s, unsigned order, const char **why) {
    uint64_t slabs = 0;
    for_each_list(s, [&](slqb_list *l, slqb_cpu *, slqb_node *) {
        slabs += l->nr_slabs.load(std::memory_order_relaxed);
    });
    return set_slab_order(s, order, slabs, why);
}

void statistics(slqb_cache *s, design_stats *out) {
    stats_totals t;
    gather_stats(s, &t);
    out->slabs = t.slabs;
    out->objects = t.slabs * s->objects;
    out->active_objects = t.active_objects;
    out->queued_objects = t.queued;
    static_assert(NR_STATS <= design_stats::kMaxCounters);
    out->nr_counters = NR_STATS;
    out->counter_names = kStatNames;
    for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] = t.counters[i];
    // A slow allocation takes an object from a slab (a partial one or a new one); a slow free
    // goes to the outbox at once (another node's object) or flushes a batch past hiwater.
    out->allocs = t.counters[ALLOC];
    out->alloc_slow = t.counters[ALLOC_SLAB_FILL] + t.counters[ALLOC_SLAB_NEW];
    out->frees = t.counters[FREE];
    out->free_slow = t.counters[FREE_REMOTE] + t.counters[FLUSH_FREE_LIST];
    out->nr_tunables = 3;
    out->tunable_names[0] = "order";
    out->tunables[0] = s->order;
    out->tunable_names[1] = "hiwater";
    out->tunables[1] = s->hiwater.load();
    out->tunable_names[2] = "freebatch";
    out->tunables[2] = s->freebatch.load();
    // SLQB's /proc/slabinfo put hiwater and freebatch in the limit and batchcount columns.
    out->slabinfo_tunables[0] = s->hiwater.load();
    out->slabinfo_tunables[1] = s->freebatch.load();
}

void gather_stats(slqb_cache *s, stats_totals *out) {
    *out = stats_totals{};
    for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] = s->shared_stats[i].get();
    for_each_list(s, [&](slqb_list *l, slqb_cpu *c, slqb_node *) {
        for (unsigned i = 0; i < NR_STATS; ++i)
            out->counters[i] += i == FREE ? frees_of(l) : l->stats[i].get();
        out->queued += l->freelist.count() + l->inbox.count();
        if (c) out->queued += c->rlist.count();
        platform::lock_guard guard(l->page_lock);
        out->slabs += l->nr_slabs.load(std::memory_order_relaxed);
        for (page *pg = l->partial.first; pg; pg = pg->next) out->active_objects += pg->aux;
        out->active_objects += l->full.count * s->objects;
    });
}

// ---- fork ----------------------------------------------------------------------------------
//
// The designs layer takes every design's locks before fork, in the lock order: SLQB's boot lock
// (fork_boot, at platform::kForkRankSlabBoot: bootstrap allocates pages under it, so it ranks
// before the slot registry), then, under the cache registry lock (kForkRankCaches, after the
// slot registry, whose idle-slot flushes take them), each cache's node list locks, every list's
// page_lock and every list's inbox lock (fork_cache), all under the cache's slots_lock, so that no
// slot's structure is made in between. After fork the parent unlocks them and the
// child resets them. Lock-free per-slot queues of threads that do not exist in the child stay
// with their slots for the next thread to inherit; a queue count left off by a fork in the
// middle of a push or pop is tolerated by the flushes, which stop at the queue's end.

void fork_boot(fork_op op) {
    apply_fork_op(g_boot_lock, op);
}

void fork_cache(slqb_cache *s, fork_op op) {
    // slots_lock first and last: no slot's structure appears between the lock and the unlock
    // (one that did was unlocked in the parent without having been locked, while its owner
    // held it: two threads in one slab list, a double free reported a little later).
    if (op != fork_op::unlock) apply_fork_op(s->slots_lock, op);
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) apply_fork_op(s->node_slab[n]->list_lock, op);
    for_each_list(s,
                  [&](slqb_list *l, slqb_cpu *, slqb_node *) { apply_fork_op(l->page_lock, op); });
    for_each_list(s,
                  [&](slqb_list *l, slqb_cpu *, slqb_node *) { apply_fork_op(l->inbox_lock, op); });
    if (op == fork_op::unlock) apply_fork_op(s->slots_lock, op);
}

} // namespace slabkit::slqb
