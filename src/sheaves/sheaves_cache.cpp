// sheaves_cache.cpp - the sheaves' cache management: sheaf capacity, the static bootstrap,
// create, destroy, flushing slots, shrink, tunables, statistics, fork and validation.
#include "core/report.hpp"
#include "core/slabinfo.hpp"
#include "core/slot_array.hpp"
#include "page/page_allocator.hpp"
#include "sheaves/sheaves_internal.hpp"

#include <cstring>
#include <new>

namespace slabkit::sheaves {

void open_sheaf_caches(); // sheaves_barn.cpp

const char *const kStatNames[NR_STATS] = {
    "ALLOC_FASTPATH",
    "ALLOC_SLOWPATH",
    "FREE_FASTPATH",
    "FREE_SLOWPATH",
    "FREE_ADD_PARTIAL",
    "FREE_REMOVE_PARTIAL",
    "ALLOC_SLAB",
    "ALLOC_NODE_MISMATCH",
    "FREE_SLAB",
    "CMPXCHG_DOUBLE_FAIL",
    "SHEAF_FLUSH",
    "SHEAF_REFILL",
    "SHEAF_ALLOC",
    "SHEAF_FREE",
    "BARN_GET",
    "BARN_GET_FAIL",
    "BARN_PUT",
    "BARN_PUT_FAIL",
    "SHEAF_PREFILL_FAST",
    "SHEAF_PREFILL_SLOW",
    "SHEAF_PREFILL_OVERSIZE",
    "SHEAF_RETURN_FAST",
    "SHEAF_RETURN_SLOW",
};
static_assert(NR_STATS <= design_stats::kMaxCounters);

uint32_t calculate_sheaf_capacity(size_t size, uint32_t requested, bool debug) {
    if (debug) return 0;
    uint32_t capacity = size >= kPageSize ? 4 : size >= 1024 ? 12 : size >= 256 ? 26 : 60;
    // The sheaf exactly fills its kmalloc size.
    size_t bytes = kmalloc_size_roundup(sizeof(sheaf) + capacity * sizeof(void *));
    capacity = static_cast<uint32_t>((bytes - sizeof(sheaf)) / sizeof(void *));
    return capacity > requested ? capacity : requested;
}

// ---- the bootstrap: the descriptors', slots' and barns' caches, and the sheaves' blocks -------

namespace {
enum meta_index { kMetaCache, kMetaCpu, kMetaBarn, kNrMeta };
const char *const kMetaNames[kNrMeta] = {"kmem_cache", "sheaves_cpu", "node_barn"};
const size_t kMetaSizes[kNrMeta] = {sizeof(sheaves_cache), sizeof(sheaves_cpu), sizeof(node_barn)};

slub::slub_cache g_meta[kNrMeta];
slub::slub_node g_meta_nodes[kNrMeta][platform::kMaxNodes];

std::atomic<bool> g_booted{false};
platform::mutex g_boot_lock;
} // namespace

slub::slub_cache &cache_cache() {
    return g_meta[kMetaCache];
}
slub::slub_cache &cpu_cache() {
    return g_meta[kMetaCpu];
}
slub::slub_cache &barn_cache() {
    return g_meta[kMetaBarn];
}

void bootstrap() {
    if (SLABKIT_LIKELY(g_booted.load(std::memory_order_acquire))) return;
    slub::bootstrap(); // SLUB's node structures and boot settings
    platform::lock_guard guard(g_boot_lock);
    if (g_booted.load(std::memory_order_relaxed)) return;
    for (unsigned m = 0; m < kNrMeta; ++m)
        slub::open_meta_cache(&g_meta[m], g_meta_nodes[m], kMetaNames[m], kMetaSizes[m],
                              design::sheaves);
    open_sheaf_caches();
    g_booted.store(true, std::memory_order_release);
}

// ---- create and destroy -------------------------------------------------------------------

namespace {

void setup(sheaves_cache *s, const cache_args &args) {
    slub::setup_cache(s, args, design::sheaves);
    // The slab layer keeps no per-slot slabs: objects come from the node lists (alloc_single)
    // and go back onto slab freelists. cpu_partial has no meaning without per-CPU slabs.
    s->meta = true;
    s->cpu_partial = 0;
    s->cpu_partial_slabs = 0;
    s->cpu_slab = slub::no_slots();
    s->sheaf_capacity = calculate_sheaf_capacity(s->size, args.sheaf_capacity, s->debug);
}

bool make_barns(sheaves_cache *s) {
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        void *mem = slub::alloc_single(&barn_cache(), static_cast<int>(n));
        if (!mem) mem = slub::alloc_single(&barn_cache(), kAnyNode);
        if (!mem) return false;
        s->barn[n] = new (mem) node_barn();
    }
    return true;
}

void free_barns(sheaves_cache *s) {
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        if (!s->barn[n]) continue;
        s->barn[n]->~node_barn();
        slub::free(&barn_cache(), s->barn[n]);
        s->barn[n] = nullptr;
    }
}

void free_pcs(sheaves_cache *s, unsigned slot, sheaves_cpu *pcs) {
    s->cpu_sheaves[slot].store(nullptr, std::memory_order_release);
    for (unsigned i = 0; i < NR_STATS; ++i) s->pcs_stats[i].add_shared(pcs->stats[i].get());
    pcs->~sheaves_cpu();
    slub::free(&cpu_cache(), pcs);
}

// Frees the structures of a cache that holds no slab and no sheaf.
void free_structures(sheaves_cache *s) {
    free_barns(s);
    slub::free_nodes(s);
    if (s->cpu_sheaves) free_slot_array(s->cpu_sheaves);
    s->cpu_sheaves = nullptr;
}

} // namespace

bool open_static(sheaves_cache *s, slot_storage *slots, const cache_args &args, const char **why) {
    bootstrap();
    setup(s, args);
    s->cpu_sheaves = slots->data();
    if (!slub::make_nodes(s) || !make_barns(s)) {
        if (why) *why = "out of memory for the per-node structures";
        return false;
    }
    registry::add_internal(s);
    return true;
}

sheaves_cache *create(const cache_args &args, const char **why) {
    bootstrap();
    void *mem = slub::alloc_single(&cache_cache(), kAnyNode);
    if (!mem) {
        if (why) *why = "out of memory for the cache descriptor";
        return nullptr;
    }
    sheaves_cache *s = new (mem) sheaves_cache();
    setup(s, args);
    s->cpu_sheaves = alloc_slot_array<sheaves_cpu>();
    if (!s->cpu_sheaves || !slub::make_nodes(s) || !make_barns(s)) {
        if (why) *why = "out of memory for the per-slot and per-node structures";
        free_structures(s);
        s->~sheaves_cache();
        slub::free(&cache_cache(), s);
        return nullptr;
    }
    if (!registry::add(s, why)) {
        free_structures(s);
        s->~sheaves_cache();
        slub::free(&cache_cache(), s);
        return nullptr;
    }
    return s;
}

void destroy(sheaves_cache *s) {
    if (!s || s->dead) return;
    registry::remove(s);
    // No thread uses the cache any more (the caller's promise), so every slot's sheaves may be
    // flushed here, live threads' included (pcs_destroy).
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top; ++slot) {
        if (sheaves_cpu *pcs = s->cpu_sheaves[slot].load(std::memory_order_acquire)) {
            pcs_flush(s, pcs, true);
            free_pcs(s, slot, pcs);
        }
    }
    for (unsigned n = 0; n < s->nr_nodes; ++n) barn_shrink(s, s->barn[n]);
    for (unsigned n = 0; n < s->nr_nodes; ++n) slub::shrink_node(s, s->node_slab[n], false);
    uint64_t slabs = slub::slabs_held(s);
    if (slabs == 0) {
        free_structures(s);
        s->~sheaves_cache();
        slub::free(&cache_cache(), s);
        return;
    }
    slub::report_leaks(s, slabs);
    s->dead = true;
}

// ---- slots, shrink, trims ---------------------------------------------------------------------

void flush_slot(sheaves_cache *s, unsigned slot, bool release) {
    if (s->dead || slot >= kMaxSlots) return;
    sheaves_cpu *pcs = s->cpu_sheaves[slot].load(std::memory_order_acquire);
    if (!pcs) return;
    // A trim or an idle slot: its main sheaf goes too (the bootstrap sheaf takes its place).
    pcs_flush(s, pcs, true);
    // Nothing refers to a released structure: free it, so that memory follows the slots in use.
    // The designs layer calls this under the cache registry lock, which statistics readers hold
    // too: none is reading it.
    if (release) free_pcs(s, slot, pcs);
}

size_t reclaim(sheaves_cache *s) {
    if (!s || s->dead) return 0;
    {
        slots::hold held;
        unsigned me = held.slot();
        if (me != kNoSlot) {
            if (sheaves_cpu *pcs = s->cpu_sheaves[me].load(std::memory_order_relaxed)) {
                pcs->shrink_seen = s->shrink_gen.load(std::memory_order_relaxed) + 1;
                pcs_flush(s, pcs, true);
            }
        }
    }
    // Other live slots flush theirs at their next slow path (there is no IPI).
    s->shrink_gen.fetch_add(1, std::memory_order_relaxed);
    for (unsigned n = 0; n < s->nr_nodes; ++n) barn_shrink(s, s->barn[n]);
    for (unsigned n = 0; n < s->nr_nodes; ++n) slub::shrink_node(s, s->node_slab[n], true);
    return slub::slabs_held(s);
}

void trim(sheaves_cache *s) {
    // The kernel's barns keep their sheaves until a shrink. Here a barn left alone for a whole
    // trimmer period gives them back: a sheaf's objects are spread over many slabs, and 10 full
    // sheaves a class held each node's slabs resident in an idle process (preload_rss_drop: 72
    // MiB kept of 384 freed, 11 after a shrink). Idle slots are flushed by the designs layer.
    if (s->dead) return;
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->barn[n]) barn_shrink(s, s->barn[n], true);
}

// ---- tunables -------------------------------------------------------------------------------

bool set_order(sheaves_cache *s, unsigned order, const char **why) {
    return slub::set_order(s, order, why);
}

bool tune(sheaves_cache *s, const char *name, unsigned long value, const char **why) {
    if (strcmp(name, "order") == 0)
        return set_order(s, value > UINT32_MAX ? UINT32_MAX : static_cast<unsigned>(value), why);
    if (strcmp(name, "min_partial") == 0) {
        if (value > (1u << 20)) {
            *why = "the value is too large (at most 1048576)";
            return false;
        }
        s->min_partial = static_cast<uint32_t>(value);
        return true;
    }
    if (strcmp(name, "sheaf_capacity") == 0) {
        *why = "sheaf_capacity is set when the cache is made (the kernel's kmem_cache_args), "
               "not tuned";
        return false;
    }
    *why = "unknown tunable (the sheaves have order, min_partial)";
    return false;
}

// ---- statistics -----------------------------------------------------------------------------

namespace {

// The slab layer's events, counted by SLUB's code in its own numbering.
struct slab_event {
    stat_item ours;
    slub::stat_item slubs;
};
constexpr slab_event kSlabEvents[] = {
    {ALLOC_SLOWPATH, slub::ALLOC_SLOWPATH},
    {FREE_SLOWPATH, slub::FREE_SLOWPATH},
    {FREE_ADD_PARTIAL, slub::FREE_ADD_PARTIAL},
    {FREE_REMOVE_PARTIAL, slub::FREE_REMOVE_PARTIAL},
    {ALLOC_SLAB, slub::ALLOC_SLAB},
    {ALLOC_NODE_MISMATCH, slub::ALLOC_NODE_MISMATCH},
    {FREE_SLAB, slub::FREE_SLAB},
    {CMPXCHG_DOUBLE_FAIL, slub::CMPXCHG_DOUBLE_FAIL},
};

uint64_t barn_objects(node_barn *b, uint64_t *sheaves) {
    platform::lock_guard guard(b->lock);
    uint64_t objects = 0;
    for (sheaf *sh = b->full; sh; sh = sh->next, ++*sheaves) objects += sh->size;
    for (sheaf *sh = b->empty; sh; sh = sh->next, ++*sheaves) objects += sh->size;
    return objects;
}

} // namespace

void statistics(sheaves_cache *s, design_stats *out) {
    // The slab layer's figures (slabs, objects, active objects as SLUB's slabinfo counts them:
    // objects in sheaves are out of their slabs, so active).
    slub::statistics(s, out);
    uint64_t slub_counters[slub::NR_STATS];
    for (unsigned i = 0; i < slub::NR_STATS; ++i) slub_counters[i] = out->counters[i];
    for (unsigned i = 0; i < design_stats::kMaxCounters; ++i) out->counters[i] = 0;
    for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] = s->pcs_stats[i].get();
    uint64_t queued = 0;
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top; ++slot) {
        sheaves_cpu *pcs = s->cpu_sheaves[slot].load(std::memory_order_acquire);
        if (!pcs) continue;
        for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] += pcs->stats[i].get();
        // From the slot's counters: its sheaves may be freed by their owner meanwhile.
        queued += static_cast<uint64_t>(queued_objects(pcs));
    }
    for (const slab_event &e : kSlabEvents) out->counters[e.ours] += slub_counters[e.slubs];
    uint64_t sheaves_in_barns = 0;
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->barn[n]) queued += barn_objects(s->barn[n], &sheaves_in_barns);
    out->queued_objects = queued < out->active_objects ? queued : out->active_objects;
    // Objects in the barns are shared by the node's slots, as SLAB's shared arrays were.
    out->shared_avail = 0;
    out->nr_counters = NR_STATS;
    out->counter_names = kStatNames;
    // Every allocation and free, and as slow those that left the slot's two sheaves for the barn
    // or the slabs (a spare swap stays fast; a full main's trade for the barn's empty sheaf has
    // no kernel counter and is not among them).
    out->allocs = out->counters[ALLOC_FASTPATH] + out->counters[ALLOC_SLOWPATH];
    out->alloc_slow =
        out->counters[ALLOC_SLOWPATH] + out->counters[BARN_GET] + out->counters[BARN_GET_FAIL];
    out->frees = out->counters[FREE_FASTPATH] + out->counters[FREE_SLOWPATH];
    out->free_slow =
        out->counters[FREE_SLOWPATH] + out->counters[BARN_PUT] + out->counters[BARN_PUT_FAIL];
    if (out->alloc_slow > out->allocs) out->alloc_slow = out->allocs;
    if (out->free_slow > out->frees) out->free_slow = out->frees;
    out->nr_tunables = 3;
    out->tunable_names[0] = "order";
    out->tunables[0] = s->order;
    out->tunable_names[1] = "min_partial";
    out->tunables[1] = s->min_partial;
    out->tunable_names[2] = "sheaf_capacity";
    out->tunables[2] = s->sheaf_capacity;
}

// ---- fork -----------------------------------------------------------------------------------
//
// The designs layer takes the sheaves' boot lock (fork_boot) and, under the cache registry lock,
// each cache's barn locks and then its node list locks (fork_cache), in the lock order. A slot's
// sheaves have one user at a time; one caught in the middle of a slow path by a fork (in a
// thread the child does not have) leaves the child a sheaf it cannot reach: memory lost in the
// child, nothing corrupted.

void fork_boot(fork_op op) {
    apply_fork_op(g_boot_lock, op);
}

void fork_cache(sheaves_cache *s, fork_op op) {
    if (op == fork_op::reset) {
        // The child: a slot whose thread the fork caught half-way through moving main to spare
        // (a swap, or main becoming the spare) holds one sheaf in both words; the child may go
        // on using that slot, and a barn trade would then leave the spare pointing into the
        // barn, for the sheaf to be freed twice. One word keeps it.
        unsigned top = slots::high_water();
        for (unsigned slot = 0; slot < top; ++slot) {
            sheaves_cpu *pcs = s->cpu_sheaves[slot].load(std::memory_order_relaxed);
            if (pcs && pcs->spare == pcs->main) pcs->spare = nullptr;
        }
    }
    if (op == fork_op::unlock) {
        slub::fork_cache(s, op);
        for (unsigned n = s->nr_nodes; n-- > 0;)
            if (s->barn[n]) apply_fork_op(s->barn[n]->lock, op);
        return;
    }
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->barn[n]) apply_fork_op(s->barn[n]->lock, op);
    slub::fork_cache(s, op);
}

// ---- validation -------------------------------------------------------------------------------

namespace {

// Scratch marks in page::aux while checking (bit 0 is SLUB's kOnPartial, and SLUB's checker
// uses 2 and 4 while it runs): none needed here; objects found in sheaves are marked in a
// small open-addressing set instead.
struct sheaf_checker {
    sheaves_cache *s;
    text_out out;
    unsigned problems = 0;
    uint64_t objects = 0;

    void fail(const char *what, const void *where) {
        if (problems++ < 8) out.printf("%s: %s (%p)\n", s->name, what, where);
    }

    bool free_on_slab(page *pg, void *obj) {
        uint32_t n = 0;
        for (void *o = slab_freelist(pg); o && n <= s->objects; o = get_freepointer(s, o), ++n)
            if (o == obj) return true;
        return false;
    }

    void check_sheaf(sheaf *sh, const char *where, bool want_cache_capacity) {
        if (sh == &g_bootstrap_sheaf) {
            if (sh->size || sh->capacity) fail("the bootstrap sheaf is not empty", sh);
            return;
        }
        if (sh->owner != s) fail("a sheaf of another cache", sh);
        if (sh->size > sh->capacity) fail("a sheaf holds more than its capacity", sh);
        if (want_cache_capacity && sh->capacity != s->sheaf_capacity)
            fail("a sheaf's capacity differs from the cache's", sh);
        const uint32_t size = sh->size;
        uint32_t n = size <= sh->capacity ? size : sh->capacity;
        for (uint32_t i = 0; i < n; ++i) {
            void *obj = sh->objects()[i];
            page *pg = virt_to_head_page(obj);
            if (!(pg->flags() & PG_slab) || slab_cache(pg) != static_cast<cache *>(s) ||
                !is_object_start(s, pg, obj)) {
                fail(where, obj);
                continue;
            }
            if (free_on_slab(pg, obj))
                fail("an object in a sheaf is also on its slab's freelist", obj);
            for (uint32_t j = i + 1; j < n; ++j)
                if (sh->objects()[j] == obj) fail("an object twice in one sheaf", obj);
            ++objects;
        }
    }
};

} // namespace

unsigned validate(sheaves_cache *s, char *report, size_t size) {
    if (report && size) report[0] = '\0';
    unsigned problems = slub::validate(s, report, size);
    size_t used = report ? strlen(report) : 0;
    sheaf_checker ck{s, text_out{report ? report + used : nullptr, report ? size - used : 0}};
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top; ++slot) {
        sheaves_cpu *pcs = s->cpu_sheaves[slot].load(std::memory_order_acquire);
        if (!pcs) continue;
        if (!pcs->main) {
            ck.fail("a slot's main sheaf is null", pcs);
            continue;
        }
        if (s->sheaf_capacity == 0 && pcs->main != &g_bootstrap_sheaf)
            ck.fail("a slot of a cache without sheaves has a main sheaf", pcs);
        ck.check_sheaf(pcs->main, "a slot's main sheaf holds something not an object of its cache",
                       s->sheaf_capacity != 0);
        // The count statistics read: exact for a thread's own slot (a CPU's slot's rseq sections
        // may count an aborted operation twice).
        const uint64_t held =
            uint64_t{pcs->main->size} + (pcs->spare ? uint64_t{pcs->spare->size} : 0u);
        if (!slots::is_cpu_slot(slot) && static_cast<uint64_t>(queued_objects(pcs)) != held)
            ck.fail("a slot's counters differ from what its sheaves hold", pcs);
        if (pcs->spare) {
            if (pcs->spare == pcs->main) ck.fail("a slot's spare is its main sheaf", pcs);
            ck.check_sheaf(pcs->spare,
                           "a slot's spare sheaf holds something not an object of "
                           "its cache",
                           true);
        }
    }
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        node_barn *b = s->barn[n];
        if (!b) continue;
        platform::lock_guard guard(b->lock);
        uint32_t full = 0, empty = 0;
        for (sheaf *sh = b->full; sh && full <= 1u << 20; sh = sh->next, ++full) {
            if (sh->size == 0) ck.fail("an empty sheaf on a barn's full list", sh);
            ck.check_sheaf(sh, "a barn's full sheaf holds something not an object of its cache",
                           true);
        }
        for (sheaf *sh = b->empty; sh && empty <= 1u << 20; sh = sh->next, ++empty) {
            if (sh->size != 0) ck.fail("a sheaf with objects on a barn's empty list", sh);
            ck.check_sheaf(sh, "a barn's empty sheaf", true);
        }
        if (full != b->nr_full.load(std::memory_order_relaxed) ||
            empty != b->nr_empty.load(std::memory_order_relaxed))
            ck.fail("a barn's counts differ from its lists", b);
    }
    return problems + ck.problems;
}

} // namespace slabkit::sheaves
