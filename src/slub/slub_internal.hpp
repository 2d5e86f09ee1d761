// slub_internal.hpp - pieces shared by SLUB's slow paths (alloc, free, cache management).
#pragma once

#include "core/slab_release.hpp"
#include "slub/slub.hpp"

namespace slabkit::slub {

// A slab's {freelist, counters} as one compare-and-swap reads and writes them.
struct freelist_counters {
    void *freelist;
    counters cnt;
};

// The pair as it is now. The freelist head is read with acquire, so that a reader that then
// follows the objects' free pointers sees what the freeing thread wrote before its swap.
SLABKIT_ALWAYS_INLINE freelist_counters read_pair(const page *pg) {
    void *fl = reinterpret_cast<void *>(load_word_acquire(&pg->priv[0]));
    return {fl, counters{load_word(&pg->priv[1])}};
}

// Replaces the pair if it still holds `old`; false otherwise (the caller rereads and retries).
SLABKIT_ALWAYS_INLINE bool update_pair(page *pg, const freelist_counters &old, void *freelist,
                                       counters cnt) {
    return dwcas(pg->priv, reinterpret_cast<uintptr_t>(old.freelist), old.cnt.word,
                 reinterpret_cast<uintptr_t>(freelist), cnt.word);
}

// Counting: on the slot's structure (one writer) or, without one, on the cache's shared
// counters (atomic adds).
SLABKIT_ALWAYS_INLINE void count(slub_cache *s, slub_cpu *c, stat_item item, uint64_t n = 1) {
    if (c)
        c->stats[item].add(n);
    else
        s->shared_stats[item].add_shared(n);
}

inline slub_node *node_of(slub_cache *s, const page *pg) {
    return s->node_slab[page_to_nid(pg) % s->nr_nodes];
}

// Node partial lists, under n->list_lock; aux bit 0 marks a slab on its node's partial list.
inline constexpr uint32_t kOnPartial = 1;
enum class list_end { head, tail };
void add_partial(slub_node *n, page *pg, list_end where);
void remove_partial(slub_node *n, page *pg);

// A new slab for the cache from the page allocator on `node` (kAnyNode: the caller's), its
// objects linked in address order, unfrozen and on no list; counted in its node's totals.
page *new_slab(slub_cache *s, int node);
// A slab whose last object came back (inuse 0, unfrozen, on no list): uncounted from its node
// and put on `chain` to go back to the page allocator once no lock is held.
void discard_slab(slub_cache *s, page *pg, release_chain &chain);

// The slot's structure for s, made on first use; nullptr for a bootstrap cache or when memory
// is short.
slub_cpu *get_cpu(slub_cache *s, unsigned slot);

// Deactivates a slot's current slab: the objects of `freelist` (the slot's) go back onto the
// slab's freelist and the slab is unfrozen - freed if empty and its node has min_partial
// partial slabs, onto the node's partial list if it has free objects, else on no list (full).
// c (may be null: a slab being dropped by a thread without a slot) is counted and its freelist
// length adjusted.
void deactivate_slab(slub_cache *s, slub_cpu *c, page *pg, void *freelist);
// Unfreezes every slab of a partial chain onto its node's partial list (or frees it, empty,
// when its node already has min_partial partial slabs).
void unfreeze_partials(slub_cache *s, slub_cpu *c, page *chain);
// Puts frozen slab pg on c's partial chain; `drain`: if the chain is already at
// cpu_partial_slabs, it goes to the node lists first (the free path; get_partial does not).
void put_cpu_partial(slub_cache *s, slub_cpu *c, page *pg, bool drain);
// slab_free without the debug layer's hand-off.
void slab_free_object(slub_cache *s, page *pg, void *obj);
// __slab_free of a detached freelist: nr objects of slab pg, linked from head to tail through
// their free pointers (tail's is overwritten), back onto the slab's freelist with one
// compare-and-swap, the list work as for one object. count_free: counted FREE_SLOWPATH (the
// sheaves count their flushes as SHEAF_FLUSH instead: src/sheaves).
void slab_free_list(slub_cache *s, page *pg, void *head, void *tail, uint32_t nr, bool count_free);
// One object under a node's list_lock (kAnyNode: the caller's node first, then the others):
// the path of the bootstrap caches, of debug caches and threads without a slot, and the
// sheaves' slow path (src/sheaves) - the kernel's ___slab_alloc of 2026, which has no per-CPU
// slab. Counted ALLOC_SLOWPATH.
void *alloc_single(slub_cache *s, int node);
// The node a thread allocating now would take objects from.
unsigned caller_node(slub_cache *s);
// A debug cache's slot-less paths (cache::debug_alloc, debug_free).
void *debug_slot_alloc(cache *c, int node);
void debug_slot_free(cache *c, void *slot);
// The slot's whole share: its current slab and freelist, then its partial chain.
void flush_cpu(slub_cache *s, slub_cpu *c);

// The length of c's freelist (exact when its owner is not using it: see slub_cpu::slow_delta).
uint64_t freelist_length(const slub_cpu *c);
// Sets slow_delta so that the length reads 0: the caller found the slot's freelist empty (or
// just took it whole). In CPU mode a fast-path counter may count a pop or push twice (an rseq
// section aborted between its counter and its commit); anchoring on every empty freelist keeps
// that error from lasting.
void anchor_empty_freelist(slub_cpu *c);

// ---- what the sheaves (src/sheaves) share: SLUB's slab layer, with no per-slot structures ----
//
// A cache made with `meta` set has no per-slot structures: every object comes from its node
// lists (alloc_single) and goes back with slab_free_object/slab_free_list. That is the
// bootstrap caches' mode, and the 2026 kernel's slab layer under its per-CPU sheaves.

// Fills in descriptor s for args as a cache of design `kind` over SLUB's slab layer: layout,
// order (calculate_order), min_partial and cpu_partial from the boot settings, nodes, gate tag.
void setup_cache(slub_cache *s, const cache_args &args, design kind);
// A static SLUB cache with no per-slot structures (`meta`), named as an internal cache of
// design `named_for`: its descriptor and per-node structures are the caller's statics;
// registered as internal. Call under the caller's boot lock.
void open_meta_cache(slub_cache *s, slub_node *nodes, const char *base_name, size_t size,
                     design named_for);
// Every entry null: the per-slot array of a cache with no per-slot structures.
std::atomic<slub_cpu *> *no_slots();
// The per-node structures of s (from node_cache()); false when memory is short (those made are
// kept for free_nodes).
bool make_nodes(slub_cache *s);
void free_nodes(slub_cache *s);
// Frees node n's empty partial slabs (whatever min_partial says); `sort`: the partial slabs with
// the fewest free objects first (shrink).
void shrink_node(slub_cache *s, slub_node *n, bool sort);
// The slabs the cache holds now.
uint64_t slabs_held(slub_cache *s);
// destroy's report of a cache that still has `slabs` slabs: each leaked object, then one line.
void report_leaks(slub_cache *s, uint64_t slabs);

// The bootstrap caches (static).
slub_cache &cache_cache();
slub_cache &cpu_cache();
slub_cache &node_cache();

} // namespace slabkit::slub
