// sheaves_internal.hpp - pieces shared by the sheaves' slow paths (alloc, free, barn, cache
// management).
#pragma once

#include "sheaves/sheaves.hpp"
#include "slub/slub_internal.hpp"

namespace slabkit::sheaves {

// Counting: on the slot's structure (one writer) or, without one, on the cache's shared
// counters (atomic adds).
SLABKIT_ALWAYS_INLINE void count(sheaves_cache *s, sheaves_cpu *pcs, stat_item item,
                                 uint64_t n = 1) {
    if (pcs)
        pcs->stats[item].add(n);
    else
        s->pcs_stats[item].add_shared(n);
}

// The slow paths moved n objects into (n > 0) or out of the slot's sheaves (sheaves_cpu's
// slow_delta).
SLABKIT_ALWAYS_INLINE void moved(sheaves_cpu *pcs, int64_t n) {
    if (pcs)
        pcs->slow_delta.store(pcs->slow_delta.load(std::memory_order_relaxed) + n,
                              std::memory_order_relaxed);
}
// The objects the slot's sheaves hold, from its counters (exact for a thread's own slot; a CPU's
// slot's rseq sections may count an aborted operation twice, which anchor_empty corrects).
int64_t queued_objects(const sheaves_cpu *pcs);
// The caller found the slot's sheaves empty (or just emptied them): their count reads 0 again.
void anchor_empty(sheaves_cpu *pcs);

// The slot's structure for s, made on first use (the kernel's init_percpu_sheaves, per slot
// instead of per possible CPU at creation), its main the bootstrap sheaf until the slot's first
// slow path installs one of the cache's; nullptr when memory is short.
sheaves_cpu *get_pcs(sheaves_cache *s, unsigned slot);
// The slot's barn: its node's.
SLABKIT_ALWAYS_INLINE node_barn *barn_of(sheaves_cache *s, const sheaves_cpu *pcs) {
    return s->barn[pcs->node];
}

// ---- sheaves ----------------------------------------------------------------------------------

// An empty sheaf of the cache's capacity (alloc_empty_sheaf, SHEAF_ALLOC), nullptr when memory
// is short; and its end (free_empty_sheaf, SHEAF_FREE; an oversize sheaf too).
sheaf *alloc_empty_sheaf(sheaves_cache *s, sheaves_cpu *pcs);
void free_empty_sheaf(sheaves_cache *s, sheaves_cpu *pcs, sheaf *sh);
// Fills sh up to its capacity from slabs (refill_sheaf: refill_objects, SHEAF_REFILL). False
// when memory ran short before it was full (sh keeps what it got).
bool refill_sheaf_from_slabs(sheaves_cache *s, sheaves_cpu *pcs, sheaf *sh);
// `max` objects from slabs into p (refill_objects): the node's partial slabs' whole freelists,
// other nodes' when they have more than min_partial partial slabs, then new slabs. Returns the
// number taken (fewer only when memory is short).
uint32_t refill_objects(sheaves_cache *s, unsigned node, void **p, uint32_t max);
// p[0 .. n) back to their slabs, a slab's objects among the next few as one detached list
// (__kmem_cache_free_bulk, build_detached_freelist). p is reordered.
void free_to_slabs(sheaves_cache *s, void **p, uint32_t n);
// Every object of sh back to its slab (sheaf_flush_unused), counted SHEAF_FLUSH.
void sheaf_flush(sheaves_cache *s, sheaves_cpu *pcs, sheaf *sh);
// The slot's main sheaf flushed in place, kBatchMax pointers at a time copied off it, as the
// kernel does so that the slab work runs outside its local lock (sheaf_flush_main).
void sheaf_flush_main(sheaves_cache *s, sheaves_cpu *pcs);
// main flushed, the spare flushed and freed (pcs_flush_all); `drop_main`: main freed too and
// the bootstrap sheaf in its place (a trim or a shrink wants the memory; the slot's next slow
// path installs a sheaf again), as the kernel's pcs_destroy does for a cache going away.
void pcs_flush(sheaves_cache *s, sheaves_cpu *pcs, bool drop_main);

// ---- barns (each under its lock) ----------------------------------------------------------------

sheaf *barn_get_empty(node_barn *b);         // nullptr when it has none
sheaf *barn_get_full(node_barn *b);          // nullptr when it has none
sheaf *barn_get_full_or_empty(node_barn *b); // a full one first
// Those that take a slot's sheaf take the slot's word that holds it (its main) and change the
// word under the barn's lock too, so that a fork, which takes every barn's lock first, never
// finds one sheaf both in a barn and in a slot (the child would free it twice).
// The sheaf in `slot` to the barn's empty (full) list, and `next` into `slot`.
void barn_put_empty(node_barn *b, owned_word<sheaf *> &slot, sheaf *next);
void barn_put_full(node_barn *b, owned_word<sheaf *> &slot, sheaf *next);
// A full sheaf that no slot holds (a returned prefilled one).
void barn_put_full(node_barn *b, sheaf *sh);
// A full sheaf into `slot` for its empty one, which the barn keeps (its limit not checked: the
// number of sheaves stays the same); nullptr (nothing changed) when it has no full sheaf.
sheaf *barn_replace_empty(node_barn *b, owned_word<sheaf *> &slot);
// An empty sheaf into `slot` for its full one; nullptr (nothing changed) when the barn has
// kMaxFullSheaves full sheaves already (*too_many set) or no empty one.
sheaf *barn_replace_full(node_barn *b, owned_word<sheaf *> &slot, bool *too_many);
// Every sheaf the barn holds: full ones flushed to slabs, all freed (barn_shrink).
// `only_untouched`: only if no sheaf came or went since the last such call (the trimmer's).
void barn_shrink(sheaves_cache *s, node_barn *b, bool only_untouched = false);

// ---- the bootstrap caches (static; SLUB's slab layer, no per-slot structures) ----------

slub::slub_cache &cache_cache(); // sheaves_cache descriptors
slub::slub_cache &cpu_cache();   // sheaves_cpu
slub::slub_cache &barn_cache();  // node_barn

} // namespace slabkit::sheaves
