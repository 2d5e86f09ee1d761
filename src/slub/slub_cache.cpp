// slub_cache.cpp - SLUB cache management: boot settings and sizing (order, min_partial,
// cpu_partial), the static bootstrap, create, destroy, flushing slots, shrink, tunables,
// statistics and fork.
#include "core/report.hpp"
#include "core/slot_array.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slub/slub_internal.hpp"

#include <cstring>
#include <new>

namespace slabkit::slub {

const char *const kStatNames[NR_STATS] = {
    "ALLOC_FASTPATH",      "FREE_FASTPATH",       "ALLOC_SLOWPATH",
    "FREE_SLOWPATH",       "FREE_FROZEN",         "FREE_ADD_PARTIAL",
    "FREE_REMOVE_PARTIAL", "ALLOC_FROM_PARTIAL",  "ALLOC_SLAB",
    "ALLOC_REFILL",        "ALLOC_NODE_MISMATCH", "FREE_SLAB",
    "CPUSLAB_FLUSH",       "DEACTIVATE_FULL",     "DEACTIVATE_EMPTY",
    "DEACTIVATE_TO_HEAD",  "DEACTIVATE_TO_TAIL",  "DEACTIVATE_REMOTE_FREES",
    "DEACTIVATE_BYPASS",   "CMPXCHG_DOUBLE_FAIL", "CPU_PARTIAL_ALLOC",
    "CPU_PARTIAL_FREE",    "CPU_PARTIAL_NODE",    "CPU_PARTIAL_DRAIN",
};
static_assert(NR_STATS <= design_stats::kMaxCounters);

// ---- sizing ----------------------------------------------------------------------------------

namespace {

unsigned fls(uint64_t v) { // bits needed to hold v: fls(0) = 0, fls(1) = 1, fls(4) = 3
    return v ? 64 - static_cast<unsigned>(__builtin_clzll(v)) : 0;
}

unsigned get_order(uint64_t bytes) { // the smallest order whose slab holds `bytes`
    unsigned order = 0;
    while ((kPageSize << order) < bytes) ++order;
    return order;
}

// The smallest order in [min_order, max_order] whose leftover is at most slab / fraction;
// max_order + 1 when there is none (calc_slab_order).
unsigned calc_slab_order(size_t size, unsigned min_order, unsigned max_order, unsigned fraction) {
    for (unsigned order = min_order; order <= max_order; ++order) {
        size_t slab = kPageSize << order;
        if (slab % size <= slab / fraction) return order;
    }
    return max_order + 1;
}

} // namespace

unsigned calculate_order(size_t size, unsigned cpus, unsigned min_objects, unsigned max_order) {
    if (max_order > kMaxOrder) max_order = kMaxOrder;
    if (min_objects == 0) min_objects = 4 * (fls(cpus) + 1);
    // At most what a slab of max_order holds (and at least one: get_order(0) is meaningless).
    uint64_t max_objects = (kPageSize << max_order) / size;
    if (max_objects < 1) max_objects = 1;
    if (min_objects > max_objects) min_objects = static_cast<unsigned>(max_objects);
    unsigned min_order = get_order(uint64_t{min_objects} * size);
    // Small objects and a large min_objects (SLABKIT_SLUB_MIN_OBJECTS): the order just below
    // the one that would overflow a slab's object count, whatever its leftover.
    if ((kPageSize << min_order) / size > kMaxObjsPerSlab)
        return get_order(uint64_t{kMaxObjsPerSlab} * size) - 1;
    // Waste at most 1/16 of the slab, then 1/8, 1/4, 1/2: the last accepts any waste at the
    // order min_objects asks for, as long as it is within max_order.
    for (unsigned fraction = 16; fraction > 1; fraction /= 2) {
        unsigned order = calc_slab_order(size, min_order, max_order, fraction);
        if (order <= max_order) return order;
    }
    // Not even one object fits a slab of max_order: the order of one object.
    unsigned order = get_order(size);
    return order <= kMaxOrder ? order : kMaxOrder;
}

uint32_t default_min_partial(size_t size) {
    uint32_t v = (fls(size) - 1) / 2; // ilog2(size) / 2
    return v < 5 ? 5 : v > 10 ? 10 : v;
}

uint32_t default_cpu_partial(size_t size) {
    if (size >= kPageSize) return 6;
    if (size >= 1024) return 24;
    if (size >= 256) return 52;
    return 120;
}

namespace {

settings g_settings;

// cpu_partial is in objects; the chain's bound is in slabs, assuming they are half full.
void set_cpu_partial(slub_cache *s, uint32_t objects) {
    s->cpu_partial = objects;
    s->cpu_partial_slabs = (2 * objects + s->objects - 1) / s->objects;
}

void setup_common(slub_cache *s, const cache_args &args, design kind) {
    describe_cache(s, args, kind);
    compute_object_layout(s, freeptr_place::middle);
    const settings &st = g_settings;
    apply_order(s, calculate_order(s->size, st.cpus, st.min_objects, st.max_order));
    s->min_partial =
        st.min_partial >= 0 ? static_cast<uint32_t>(st.min_partial) : default_min_partial(s->size);
    set_cpu_partial(s, st.cpu_partial >= 0 ? static_cast<uint32_t>(st.cpu_partial)
                                           : default_cpu_partial(s->size));
    s->nr_nodes = page_allocator::global().nodes();
    s->numa = s->nr_nodes > 1;
    s->inline_abi.store(gate_tag_for(s)); // plain caches open their gate (core/cache.hpp)
    if (s->debug) {
        set_cpu_partial(s, 0);
        s->debug_alloc = debug_slot_alloc;
        s->debug_free = debug_slot_free;
    }
}

} // namespace

void setup_cache(slub_cache *s, const cache_args &args, design kind) {
    setup_common(s, args, kind);
}

const settings &boot_settings() {
    bootstrap();
    return g_settings;
}

// ---- the bootstrap: three caches whose own structures are static -----------------------------
//
// "kmem_cache" holds cache descriptors, "kmem_cache_node" per-node structures, and
// "kmem_cache_cpu" per-slot structures (the kernel's came from its per-CPU allocator). They have
// no per-slot structures of their own: every object comes from their node lists under list_lock,
// one at a time, as the kernel's debug caches allocate. Their descriptors and per-node
// structures are static, wired up in one step.

namespace {
enum meta_index { kMetaCache, kMetaCpu, kMetaNode, kNrMeta };
const char *const kMetaNames[kNrMeta] = {"kmem_cache", "kmem_cache_cpu", "kmem_cache_node"};
const size_t kMetaSizes[kNrMeta] = {sizeof(slub_cache), sizeof(slub_cpu), sizeof(slub_node)};

slub_cache g_meta[kNrMeta];
slub_node g_meta_nodes[kNrMeta][platform::kMaxNodes];
// Every entry null, never written: a bootstrap cache's fast paths find no slot structure.
const slot_storage g_no_slots{};

std::atomic<bool> g_booted{false};
platform::mutex g_boot_lock;
} // namespace

std::atomic<slub_cpu *> *no_slots() {
    return const_cast<std::atomic<slub_cpu *> *>(g_no_slots.data());
}

void open_meta_cache(slub_cache *s, slub_node *nodes, const char *base_name, size_t size,
                     design named_for) {
    char name[kNameMax];
    internal_cache_name(named_for, base_name, name, sizeof name);
    // A SLUB cache whatever design it serves: every call on it dispatches to SLUB.
    setup_common(s, cache_args{name, size, kCacheLine, 0, nullptr}, design::slub);
    s->meta = true;
    set_cpu_partial(s, 0);
    s->cpu_slab = no_slots();
    for (unsigned n = 0; n < s->nr_nodes; ++n) s->node_slab[n] = &nodes[n];
    registry::add_internal(s);
}

slub_cache &cache_cache() {
    return g_meta[kMetaCache];
}
slub_cache &cpu_cache() {
    return g_meta[kMetaCpu];
}
slub_cache &node_cache() {
    return g_meta[kMetaNode];
}

void bootstrap() {
    if (SLABKIT_LIKELY(g_booted.load(std::memory_order_acquire))) return;
    platform::lock_guard guard(g_boot_lock);
    if (g_booted.load(std::memory_order_relaxed)) return;
    settings &st = g_settings;
    st.max_order = static_cast<unsigned>(
        platform::env_uint("SLABKIT_SLUB_MAX_ORDER", st.max_order, 0, kMaxOrder));
    st.min_objects =
        static_cast<unsigned>(platform::env_uint("SLABKIT_SLUB_MIN_OBJECTS", 0, 0, 32767));
    st.min_partial = platform::env_int("SLABKIT_SLUB_MIN_PARTIAL", -1, 0, 1u << 20);
    st.cpu_partial = platform::env_int("SLABKIT_SLUB_CPU_PARTIAL", -1, 0, 1u << 20);
    // The kernel counts present CPUs (possible ones when only one is present).
    st.cpus = platform::numa().cpus;
    for (unsigned m = 0; m < kNrMeta; ++m)
        open_meta_cache(&g_meta[m], g_meta_nodes[m], kMetaNames[m], kMetaSizes[m], design::slub);
    g_booted.store(true, std::memory_order_release);
}

// ---- create and destroy -------------------------------------------------------------------

bool make_nodes(slub_cache *s) {
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        void *mem = alloc_slow(&node_cache(), kNoSlot, static_cast<int>(n), false);
        if (!mem) mem = alloc_slow(&node_cache(), kNoSlot, kAnyNode, false);
        if (!mem) return false;
        s->node_slab[n] = new (mem) slub_node();
    }
    return true;
}

void free_nodes(slub_cache *s) {
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        if (!s->node_slab[n]) continue;
        s->node_slab[n]->~slub_node();
        free(&node_cache(), s->node_slab[n]);
        s->node_slab[n] = nullptr;
    }
}

namespace {

// Frees a cache's per-slot and per-node structures and its pointer array (all empty).
void free_structures(slub_cache *s, bool free_slot_array_too) {
    for (unsigned slot = 0; slot < kMaxSlots && free_slot_array_too; ++slot) {
        slub_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire);
        if (!c) continue;
        s->cpu_slab[slot].store(nullptr, std::memory_order_relaxed);
        c->~slub_cpu();
        free(&cpu_cache(), c);
    }
    free_nodes(s);
    if (free_slot_array_too && s->cpu_slab) {
        free_slot_array(s->cpu_slab);
        s->cpu_slab = nullptr;
    }
}

} // namespace

// Under nothing: frees node n's empty partial slabs (whatever min_partial says) and, when
// `sort`, puts the partial slabs with the fewest free objects first, so that allocations fill
// them up (the kernel's shrink sorts by free count into 32 buckets the same way).
void shrink_node(slub_cache *s, slub_node *n, bool sort) {
    constexpr unsigned kPromote = 32;
    release_chain chain;
    {
        platform::lock_guard guard(n->list_lock);
        page_list promote[kPromote];
        for (page *pg = n->partial.first, *next; pg; pg = next) {
            next = pg->next;
            counters cnt{load_word(&pg->priv[1])};
            uint32_t nfree = cnt.objects() - cnt.inuse();
            if (cnt.inuse() == 0) {
                remove_partial(n, pg);
                discard_slab(s, pg, chain);
            } else if (sort && nfree <= kPromote) {
                n->partial.remove(pg);
                promote[nfree - 1].push_back(pg);
            }
        }
        for (unsigned i = kPromote; i-- > 0;) {
            while (page *pg = promote[i].last) {
                promote[i].remove(pg);
                n->partial.push_front(pg);
            }
        }
        n->nr_partial.store(static_cast<uint32_t>(n->partial.count), std::memory_order_relaxed);
    }
    release_slabs(chain);
}

uint64_t slabs_held(slub_cache *s) {
    uint64_t slabs = 0;
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) slabs += s->node_slab[n]->nr_slabs.load(std::memory_order_relaxed);
    return slabs;
}

namespace {
struct leak_count {
    slub_cache *s;
    uint64_t objects = 0;
};
} // namespace

void report_leaks(slub_cache *s, uint64_t slabs) {
    // Full slabs are on no list: the arena's page descriptors find every slab of the cache.
    leak_count leaks{s};
    for_each_slab_in_arena(
        s,
        [](page *pg, void *arg) {
            auto *l = static_cast<leak_count *>(arg);
            l->objects += report_slab_leaks(l->s, pg);
        },
        &leaks);
    report("kmem_cache_destroy(%s): %llu object(s) still allocated in %llu slab(s); the cache's "
           "memory is kept",
           s->name, static_cast<unsigned long long>(leaks.objects),
           static_cast<unsigned long long>(slabs));
}

bool open_static(slub_cache *s, slot_storage *slots, const cache_args &args, const char **why) {
    bootstrap();
    setup_common(s, args, design::slub);
    s->cpu_slab = slots->data();
    if (!make_nodes(s)) {
        if (why) *why = "out of memory for the per-node structures";
        return false;
    }
    registry::add_internal(s);
    return true;
}

slub_cache *create(const cache_args &args, const char **why) {
    bootstrap();
    void *mem = alloc_slow(&cache_cache(), kNoSlot, kAnyNode, false);
    if (!mem) {
        if (why) *why = "out of memory for the cache descriptor";
        return nullptr;
    }
    slub_cache *s = new (mem) slub_cache();
    setup_common(s, args, design::slub);
    s->cpu_slab = alloc_slot_array<slub_cpu>();
    if (!s->cpu_slab || !make_nodes(s)) {
        if (why) *why = "out of memory for the per-slot and per-node structures";
        free_structures(s, s->cpu_slab != nullptr);
        s->~slub_cache();
        free(&cache_cache(), s);
        return nullptr;
    }
    if (!registry::add(s, why)) {
        free_structures(s, true);
        s->~slub_cache();
        free(&cache_cache(), s);
        return nullptr;
    }
    return s;
}

void destroy(slub_cache *s) {
    if (!s || s->dead) return;
    registry::remove(s);
    // No thread uses the cache any more (the caller's promise), so every slot's slabs may be
    // deactivated here, live threads' included.
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top; ++slot)
        if (slub_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire)) flush_cpu(s, c);
    for (unsigned n = 0; n < s->nr_nodes; ++n) shrink_node(s, s->node_slab[n], false);
    uint64_t slabs = slabs_held(s);
    if (slabs == 0) {
        free_structures(s, true);
        s->~slub_cache();
        free(&cache_cache(), s);
        return;
    }
    report_leaks(s, slabs);
    s->dead = true;
}

// ---- slots, shrink, trims ---------------------------------------------------------------------

void flush_slot(slub_cache *s, unsigned slot, bool release) {
    if (s->dead || s->meta || slot >= kMaxSlots) return;
    slub_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire);
    if (!c) return;
    flush_cpu(s, c);
    if (!release) return;
    // Nothing refers to a flushed structure: free it, so that memory follows the slots in use.
    // The designs layer calls this under the cache registry lock, which statistics readers hold
    // too: none is reading it.
    for (unsigned i = 0; i < NR_STATS; ++i) s->shared_stats[i].add_shared(c->stats[i].get());
    s->cpu_slab[slot].store(nullptr, std::memory_order_release);
    c->~slub_cpu();
    free(&cpu_cache(), c);
}

size_t reclaim(slub_cache *s) {
    if (!s || s->dead) return 0;
    unsigned me = slots::current_if_any();
    if (me != kNoSlot && !s->meta) {
        if (slub_cpu *c = s->cpu_slab[me].load(std::memory_order_relaxed)) flush_cpu(s, c);
    }
    // Other live slots deactivate their slabs at their next slow path (there is no IPI).
    s->shrink_gen.fetch_add(1, std::memory_order_relaxed);
    for (unsigned n = 0; n < s->nr_nodes; ++n) shrink_node(s, s->node_slab[n], true);
    return slabs_held(s);
}

void trim(slub_cache *) {
    // Nothing: SLUB keeps no queues and no trimmer; idle slots are flushed by the designs layer
    // (flush_slot), and the node lists keep what min_partial allows until a shrink.
}

// ---- tunables -------------------------------------------------------------------------------

bool set_order(slub_cache *s, unsigned order, const char **why) {
    if (order <= kMaxOrder && (kPageSize << order) / s->size > kMaxObjsPerSlab) {
        *why = "a slab of that order would hold more than 32767 objects, SLUB's most (the "
               "kernel keeps the count in 15 bits)";
        return false;
    }
    if (!set_slab_order(s, order, slabs_held(s), why)) return false;
    set_cpu_partial(s, s->cpu_partial); // its bound in slabs follows objects per slab
    return true;
}

bool tune(slub_cache *s, const char *name, unsigned long value, const char **why) {
    if (strcmp(name, "order") == 0)
        return set_order(s, value > UINT32_MAX ? UINT32_MAX : static_cast<unsigned>(value), why);
    if (strcmp(name, "min_partial") == 0 || strcmp(name, "cpu_partial") == 0) {
        if (value > (1u << 20)) {
            *why = "the value is too large (at most 1048576)";
            return false;
        }
        if (s->meta) {
            *why = "a bootstrap cache keeps its settings";
            return false;
        }
        if (name[0] == 'm')
            s->min_partial = static_cast<uint32_t>(value);
        else
            set_cpu_partial(s, static_cast<uint32_t>(value));
        return true;
    }
    *why = "unknown tunable (SLUB has order, min_partial, cpu_partial)";
    return false;
}

// ---- statistics -----------------------------------------------------------------------------

void statistics(slub_cache *s, design_stats *out) {
    for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] = s->shared_stats[i].get();
    uint64_t queued = 0;
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top && !s->meta; ++slot) {
        slub_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire);
        if (!c) continue;
        for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] += c->stats[i].get();
        queued += freelist_length(c);
    }
    uint64_t free_on_partial = 0;
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        slub_node *node = s->node_slab[n];
        if (!node) continue;
        out->slabs += node->nr_slabs.load(std::memory_order_relaxed);
        out->objects += node->total_objects.load(std::memory_order_relaxed);
        platform::lock_guard guard(node->list_lock);
        for (page *pg = node->partial.first; pg; pg = pg->next) {
            counters cnt{load_word(&pg->priv[1])};
            free_on_partial += cnt.objects() - cnt.inuse();
        }
    }
    // As the kernel's /proc/slabinfo under SLUB: every object not free on a node partial slab
    // counts as active, so the free objects of the slots' slabs are in it; those on the slots'
    // own freelists are the queued ones.
    out->active_objects = out->objects > free_on_partial ? out->objects - free_on_partial : 0;
    out->queued_objects = queued < out->active_objects ? queued : out->active_objects;
    out->nr_counters = NR_STATS;
    out->counter_names = kStatNames;
    out->alloc_slow = out->counters[ALLOC_SLOWPATH];
    out->allocs = out->counters[ALLOC_FASTPATH] + out->alloc_slow;
    out->free_slow = out->counters[FREE_SLOWPATH];
    out->frees = out->counters[FREE_FASTPATH] + out->free_slow;
    out->nr_tunables = 3;
    out->tunable_names[0] = "order";
    out->tunables[0] = s->order;
    out->tunable_names[1] = "min_partial";
    out->tunables[1] = s->min_partial;
    out->tunable_names[2] = "cpu_partial";
    out->tunables[2] = s->cpu_partial;
    // SLUB's /proc/slabinfo printed zeros in the SLAB tunables columns.
}

// ---- fork -----------------------------------------------------------------------------------
//
// The designs layer takes SLUB's boot lock (fork_boot, at platform::kForkRankSlabBoot) and,
// under the cache registry lock, each cache's node list locks (fork_cache). Slab freelists take
// no lock: a swap is whole or not done. A slot's structure that a fork catches in the middle of
// a slow path (in a thread that does not exist in the child) can leave the child one slab it
// cannot reach - memory lost in the child, nothing corrupted.

void fork_boot(fork_op op) {
    apply_fork_op(g_boot_lock, op);
}

void fork_cache(slub_cache *s, fork_op op) {
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) apply_fork_op(s->node_slab[n]->list_lock, op);
}

} // namespace slabkit::slub
