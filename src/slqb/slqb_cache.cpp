// slqb_cache.cpp - SLQB cache management: the static bootstrap, create, destroy, shrink, trims,
// tunables and statistics.
#include "core/report.hpp"
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
};

// SLQB's order policy: order 0 unless that wastes more than 25% (then order 1), else the
// smallest order that holds an object.
static constexpr order_policy kPolicy{0, 1, 4, 1};

// The per-slot pointer array of a created cache: kMaxSlots + 1 pointers, just over 8 KiB, so an
// order-2 block; only the pages a slot touches become resident (the last entry's page is read,
// never written).
static constexpr unsigned kCpuSlabOrder = 2;

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
    s->object_size = static_cast<uint32_t>(args.size);
    s->align = static_cast<uint32_t>(args.align);
    s->flags = args.flags;
    s->ctor = args.ctor;
    s->kind = design::slqb;
    strncpy(s->name, args.name, kNameMax - 1);
    compute_layout(s, kPolicy);
    // freebatch = max(4 pages' worth, min(256, 64 pages' worth)) of objects, at least 1.
    size_t fb = 64 * kPageSize / s->size < 256 ? 64 * kPageSize / s->size : 256;
    if (4 * kPageSize / s->size > fb) fb = 4 * kPageSize / s->size;
    s->freebatch = fb ? static_cast<uint32_t>(fb) : 1;
    s->hiwater = 4 * s->freebatch;
    s->nr_nodes = page_allocator::global().nodes();
    s->numa = s->nr_nodes > 1;
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
    for (unsigned m = 0; m < kNrMeta; ++m) {
        slqb_cache *s = &g_meta[m];
        setup_common(s, cache_args{kMetaNames[m], kMetaSizes[m], kCacheLine, 0, nullptr});
        s->meta = true;
        // Per-slot structures come from g_meta_cpus when a slot first uses the cache
        // (get_cpu): set up all 1024 here, they would make 1.2 MiB resident in every process.
        s->cpu_slab = g_meta_cpu_slab[m];
        for (unsigned n = 0; n < s->nr_nodes; ++n) {
            init_list(&g_meta_nodes[m][n].list, s, n, true);
            s->node_slab[n] = &g_meta_nodes[m][n];
        }
        registry::add(s, nullptr);
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
    page_allocator::global().free(s->cpu_slab, kCpuSlabOrder);
    s->cpu_slab = nullptr;
}

bool open_static(slqb_cache *s, std::atomic<slqb_cpu *> *cpu_slab, const cache_args &args,
                 const char **why) {
    bootstrap();
    if (const char *bad = cache_args_invalid(args)) {
        if (why) *why = bad;
        return false;
    }
    setup_common(s, args);
    s->cpu_slab = cpu_slab;
    // Per-node structures of static caches come from the node cache like any other's.
    if (!make_nodes(s)) {
        if (why) *why = "out of memory for the per-node structures";
        return false;
    }
    return registry::add(s, why);
}

slqb_cache *create(const cache_args &args, const char **why) {
    bootstrap();
    if (const char *bad = cache_args_invalid(args)) {
        if (why) *why = bad;
        return nullptr;
    }
    void *mem = alloc_shared(&cache_cache());
    if (!mem) {
        if (why) *why = "out of memory for the cache descriptor";
        return nullptr;
    }
    slqb_cache *s = new (mem) slqb_cache();
    setup_common(s, args);
    static_assert((kMaxSlots + 1) * sizeof(void *) <= kPageSize << kCpuSlabOrder,
                  "the per-slot pointer array fits its block");
    s->cpu_slab = static_cast<std::atomic<slqb_cpu *> *>(
        page_allocator::global().alloc(kCpuSlabOrder, kAnyNode, kZero));
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
    for (page_list *sl : {&l->partial, &l->full}) {
        for (page *pg = sl->first; pg; pg = pg->next) {
            // Objects on the slab's freelist are free; every other one is leaked.
            uint64_t free_map[(kPageSize << kMaxOrder) / kMinAlign / 64 / 64 + 1] = {};
            bool map_ok = s->objects <= sizeof free_map * 8;
            for (void *o = slab_freelist(pg); o && map_ok; o = get_freepointer(s, o)) {
                long idx = s->object_index(reinterpret_cast<uintptr_t>(o) - slab_base(pg));
                if (idx >= 0) free_map[idx / 64] |= uint64_t{1} << (idx % 64);
            }
            for (uint32_t i = 0; i < s->objects && map_ok; ++i) {
                if (free_map[i / 64] >> (i % 64) & 1) continue;
                report("kmem_cache_destroy(%s): object %p is still allocated", s->name,
                       reinterpret_cast<void *>(slab_base(pg) + uint64_t{i} * s->size));
                ++leaked;
            }
        }
    }
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

// ---- shrink and trims -----------------------------------------------------------------------

static void flush_idle_slot_of(unsigned slot, void *arg) {
    slqb_cache *s = static_cast<slqb_cache *>(arg);
    slqb_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire);
    if (c) flush_cpu(s, c);
}

// Everything of shrink but the idle slots (which need the slot registry lock, taken before the
// cache registry's): the caller's slot, every inbox, the node lists.
static size_t shrink_lists(slqb_cache *s) {
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

size_t shrink(slqb_cache *s) {
    if (!s || s->dead) return 0;
    {
        deferred_release defer;
        slots::for_each_idle(flush_idle_slot_of, s);
    }
    return shrink_lists(s);
}

namespace {
struct slot_flush {
    unsigned slot;
    bool free_empty; // the slot is idle: free its structures that hold nothing
};

// True when a flushed per-slot structure holds nothing and no slab points at its list.
bool cpu_is_empty(slqb_cpu *c) {
    platform::lock_guard guard(c->list.page_lock);
    return c->list.nr_slabs.load(std::memory_order_relaxed) == 0 && !c->list.freelist.head &&
           c->list.inbox.count() == 0 && c->rlist.count() == 0;
}

// Under the cache registry lock (and, for an idle slot, the slot registry lock): flushes the
// slot's structure of cache c, and frees it when the slot is idle and nothing refers to it any
// more, so that memory follows the slots in use rather than the most ever used. Statistics
// readers hold the cache registry lock too, so none is reading it.
void flush_slot_in_cache(cache *c, void *arg) {
    if (c->kind != design::slqb) return;
    slqb_cache *s = static_cast<slqb_cache *>(c);
    if (s->dead) return;
    const slot_flush &f = *static_cast<slot_flush *>(arg);
    slqb_cpu *cpu = s->cpu_slab[f.slot].load(std::memory_order_acquire);
    if (!cpu) return;
    flush_cpu(s, cpu);
    if (!f.free_empty || s->meta || !cpu_is_empty(cpu)) return;
    for (unsigned i = 0; i < NR_STATS; ++i)
        s->shared_stats[i].add_shared(i == FREE ? frees_of(&cpu->list) : cpu->list.stats[i].get());
    s->cpu_slab[f.slot].store(nullptr, std::memory_order_release);
    cpu->~slqb_cpu();
    free_shared(&cpu_cache(), cpu);
}
void flush_idle_slot_all_caches(unsigned slot, void *free_empty) {
    slot_flush f{slot, free_empty != nullptr};
    registry::for_each(flush_slot_in_cache, &f);
}
int g_free_empty_tag;
void *const kFreeEmpty = &g_free_empty_tag;
void shrink_cb(cache *c, void *) {
    if (c->kind == design::slqb && !static_cast<slqb_cache *>(c)->dead)
        shrink_lists(static_cast<slqb_cache *>(c));
}
std::atomic<uint64_t> g_next_trim_ms{0};
std::atomic<uint64_t> g_trim_epoch{0};
} // namespace

void trim_idle_slots(bool force) {
    uint64_t now = platform::now_coarse_ms();
    uint64_t next = g_next_trim_ms.load(std::memory_order_relaxed);
    if (now < next && !force) return;
    unsigned decay = page_allocator::global().settings().decay_ms;
    if (!g_next_trim_ms.compare_exchange_strong(next, now + (decay ? decay / 2 : 500),
                                                std::memory_order_relaxed) &&
        !force)
        return;
    g_trim_epoch.fetch_add(1, std::memory_order_relaxed);
    deferred_release defer;
    // Unforced, this runs on an allocation's slow path, which may hold a cache's locks: it only
    // tries the slot registry lock (see slots::try_for_each_idle_since).
    const uint64_t before = now > decay ? now - decay : 0;
    if (force)
        slots::for_each_idle_since(before, flush_idle_slot_all_caches, kFreeEmpty);
    else
        slots::try_for_each_idle_since(before, flush_idle_slot_all_caches, kFreeEmpty);
}

uint64_t trim_epoch() {
    return g_trim_epoch.load(std::memory_order_relaxed);
}

void trim_all() {
    // The idle slots of every cache first (slot registry, then cache registry: the lock order),
    // then each cache's own lists under the cache registry lock, so no cache is destroyed
    // meanwhile.
    // A slot's structure can only be freed once no slab is left on its list, which may take the
    // other slots' flushes (their objects of its slabs reach its inbox) and the inbox drains: so
    // flush everything first, then free the idle slots' empty structures, then give back the
    // per-slot cache's pages that held them.
    deferred_release defer;
    slots::for_each_idle(flush_idle_slot_all_caches, nullptr);
    slot_flush mine{slots::current_if_any(), false};
    if (mine.slot != kNoSlot) registry::for_each(flush_slot_in_cache, &mine);
    registry::for_each(shrink_cb, nullptr);
    slots::for_each_idle(flush_idle_slot_all_caches, kFreeEmpty);
    if (mine.slot != kNoSlot) registry::for_each(flush_slot_in_cache, &mine);
    registry::for_each(shrink_cb, nullptr);
}

bool tune(slqb_cache *s, uint32_t hiwater, uint32_t freebatch) {
    if (freebatch < 1 || freebatch > hiwater + 1) return false;
    s->hiwater = hiwater;
    s->freebatch = freebatch;
    return true;
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
    if (slabs) {
        *why = "the cache holds slabs: its order can change only while it is empty (shrink it "
               "first)";
        return false;
    }
    return set_slab_order(s, order, why);
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
// Before fork every SLQB lock is taken (boot lock, cache registry, then per cache: node list
// locks, every list's page_lock, every list's inbox lock - the lock order), so the child finds
// no structure half-changed under a lock; after it the parent unlocks and the child resets
// them. Lock-free per-slot queues of threads that do not exist in the child stay with their
// slots for the next thread to inherit; a queue count left off by a fork in the middle of a
// push or pop is tolerated by the flushes, which stop at the queue's end.

namespace {
enum class fork_op { lock, unlock, reset };

void apply(platform::mutex &m, fork_op op) {
    switch (op) {
    case fork_op::lock:
        m.lock();
        break;
    case fork_op::unlock:
        m.unlock();
        break;
    case fork_op::reset:
        m.reset_after_fork();
        break;
    }
}

void cache_locks(cache *c, void *arg) {
    if (c->kind != design::slqb) return;
    slqb_cache *s = static_cast<slqb_cache *>(c);
    fork_op op = *static_cast<fork_op *>(arg);
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) apply(s->node_slab[n]->list_lock, op);
    for_each_list(s, [&](slqb_list *l, slqb_cpu *, slqb_node *) { apply(l->page_lock, op); });
    for_each_list(s, [&](slqb_list *l, slqb_cpu *, slqb_node *) { apply(l->inbox_lock, op); });
}

void fork_prepare() {
    registry::lock().lock();
    fork_op op = fork_op::lock;
    registry::for_each_locked(cache_locks, &op);
}

void fork_parent() {
    fork_op op = fork_op::unlock;
    registry::for_each_locked(cache_locks, &op);
    registry::lock().unlock();
}

void fork_child() {
    fork_op op = fork_op::reset;
    registry::for_each_locked(cache_locks, &op);
    registry::lock().reset_after_fork();
}

__attribute__((constructor)) void install_fork_hooks() {
    // The boot lock ranks before the slot registry (bootstrap allocates pages under it), the
    // cache locks after it (idle-slot flushes take them under the registry lock).
    if (!platform::add_fork_hooks({platform::kForkRankSlabBoot, [] { g_boot_lock.lock(); },
                                   [] { g_boot_lock.unlock(); },
                                   [] { g_boot_lock.reset_after_fork(); }}) ||
        !platform::add_fork_hooks(
            {platform::kForkRankCaches, fork_prepare, fork_parent, fork_child}))
        platform::fatal("slabkit: cannot register SLQB's fork hooks\n");
}
} // namespace

} // namespace slabkit::slqb
