// slab_internal.hpp - pieces shared by SLAB's slow paths (alloc, free, cache management).
#pragma once

#include "core/slab_release.hpp"
#include "slab/slab.hpp"

#include <cstring>

namespace slabkit::slab {

// ---- a slab's index array and lists ---------------------------------------------------------

// page::aux of a slab page: the node list it is on (bits 0..1); validate uses higher bits as
// scratch marks.
enum slab_list_mark : uint32_t { kOnNoList = 0, kOnFull = 1, kOnPartial = 2, kOnFree = 3 };
inline constexpr uint32_t kListMask = 3;

SLABKIT_ALWAYS_INLINE freelist_idx *index_array(const page *pg) {
    return reinterpret_cast<freelist_idx *>(pg->priv[0]);
}
SLABKIT_ALWAYS_INLINE uint32_t slab_active(const page *pg) {
    return static_cast<uint32_t>(pg->priv[1]);
}
SLABKIT_ALWAYS_INLINE void set_slab_active(page *pg, uint32_t n) {
    pg->priv[1] = n;
}
SLABKIT_ALWAYS_INLINE void *index_to_obj(const slab_kmem_cache *s, const page *pg, uint32_t idx) {
    return reinterpret_cast<void *>(slab_base(pg) + uint64_t{idx} * s->size);
}
SLABKIT_ALWAYS_INLINE uint32_t obj_to_index(const slab_kmem_cache *s, const page *pg,
                                            const void *obj) {
    return static_cast<uint32_t>(s->object_index(reinterpret_cast<uintptr_t>(obj) - slab_base(pg)));
}

// Under the node's list_lock: the next free object of slab pg (it has one), and one back.
void *slab_get_obj(slab_kmem_cache *s, page *pg);
void slab_put_obj(slab_kmem_cache *s, page *pg, void *obj);

inline slab_node *node_of(slab_kmem_cache *s, const page *pg) {
    return s->node_slab[page_to_nid(pg) % s->nr_nodes];
}

// Under n->list_lock: puts pg on the list its `active` says (full or partial; free slabs are
// placed by their callers).
void fix_slab_list(slab_node *n, page *pg, uint32_t objects);
void list_del(slab_node *n, page *pg);
void list_add(slab_node *n, page *pg, slab_list_mark where, bool at_tail);

// A new slab on `node` (kAnyNode: the caller's), its index array made and its objects
// constructed, on no list and not yet counted; nullptr when memory is short. Takes no lock
// beyond the page allocator's (and a bootstrap cache's, for an off-slab array).
page *grow_begin(slab_kmem_cache *s, int node);
// Under n->list_lock: a grown slab joins its node (its list by `active`, counts, GROWN).
void grow_end(slab_kmem_cache *s, slab_node *n, page *pg, slab_cpu *actor);

// Under n->list_lock: objs[0..nr) back to their slabs (all of node n). Emptied slabs go on the
// free list; while the node keeps more than free_limit free objects, free slabs go on `chain`.
void free_block(slab_kmem_cache *s, slab_node *n, void *const *objs, uint32_t nr,
                release_chain &chain, slab_cpu *actor);
// Under n->list_lock: gives back up to `nr` free slabs of node n (the coldest first) onto
// chain; returns how many.
uint32_t drain_free_slabs(slab_kmem_cache *s, slab_node *n, uint64_t nr, release_chain &chain);
// Frees the off-slab index arrays of the chain's slabs, then the slabs (no lock held).
void release(slab_kmem_cache *s, release_chain &chain);

// Moves up to `max` entries from the top of `from` to the top of `to` (as room allows);
// returns how many.
uint32_t transfer_objects(array_cache &to, void **to_entry, array_cache &from, void **from_entry,
                          uint32_t max);
// Under nothing: `nr` entries from the bottom (cold end) of a slot's array back to its node's
// slabs, or, when `to_shared` and the node's shared array has room, as many of them as fit into
// it instead; the rest of the array shifted down.
void flush_bottom(slab_kmem_cache *s, slab_cpu *c, uint32_t nr, bool to_shared);
// Under its lock: an alien cache's objects to node `node` (its shared array first, then its
// slabs); emptied slabs go on chain, to be released once the alien lock is dropped.
void drain_alien(slab_kmem_cache *s, alien_cache *alc, unsigned node, release_chain &chain,
                 slab_cpu *actor);

// Counting: on the slot's counters (one writer) or, without one, the cache's shared counters.
SLABKIT_ALWAYS_INLINE void count(slab_kmem_cache *s, slab_cpu *c, stat_item item, uint64_t n = 1) {
    if (c)
        c->stats[item].add(n);
    else
        s->shared_stats[item].add_shared(n);
}

// ---- metadata: the bootstrap caches ---------------------------------------------------------

slab_kmem_cache &cache_cache();
slab_kmem_cache &node_cache();
// SLAB's own kmalloc for its variable-size structures (per-slot arrays, shared arrays, alien
// caches, off-slab index arrays): bootstrap caches of 64 B to 16 KiB by powers of two.
inline constexpr size_t kMetaMinSize = 64;
inline constexpr size_t kMetaMaxSize = 16384;
// The size of the bootstrap cache that would hold `bytes` (0 when too large).
size_t meta_size_for(size_t bytes);
void *alloc_meta(size_t bytes, int node);
void free_meta(void *p);
// The bytes a structure from alloc_meta occupies.
size_t meta_bytes(const void *p);

// A bootstrap cache's object (or one for a thread without a slot): straight from the node's
// slabs under its list_lock. free_single gives one back the same way.
void *alloc_single(slab_kmem_cache *s, int node);
void free_single(slab_kmem_cache *s, page *pg, void *obj);
// A debug cache's slot-less paths (cache::debug_alloc, debug_free).
void *debug_slot_alloc(cache *c, int node);
void debug_slot_free(cache *c, void *slot);

// The slot's array for s, made on first use; nullptr for a bootstrap cache or when memory is
// short.
slab_cpu *get_cpu(slab_kmem_cache *s, unsigned slot);
// What a slot does at the start of each slow path: honour a shrink (give back its whole
// array) and a change of tunables (remake its array, which may fail: nullptr). Returns the
// slot's array.
slab_cpu *maintain(slab_kmem_cache *s, unsigned slot, slab_cpu *c);
// The slot's reaper (cache_reap), on refills and flushes: when its pass is due (kReapSlotMs
// apart), in every SLAB cache one alien cache of its node, its array (reap_cpu), and the node
// part (reap_node); skipped until the next pass when the cache registry is busy.
void reap_slot(unsigned slot);
// One alien cache of node n (the one of node `remote`), if its lock is free (reap_alien).
void reap_alien(slab_kmem_cache *s, slab_node *n, unsigned remote);
// The node part of the reaper, when node's next_reap has passed at `now` (false: not yet, or
// another reaper took this turn): a fifth of its shared array unless it was touched since,
// and a fifth of what free_limit allows of its free slabs unless one was used since.
bool reap_node(slab_kmem_cache *s, unsigned node, uint64_t now);
// Every object of a slot's array back to its node (shared array first unless `to_slabs`).
void drain_cpu(slab_kmem_cache *s, slab_cpu *c, bool to_slabs);
// The reaper's share of one array (drain_array): nothing if it is empty, or if it was touched
// since the last look (which clears `touched`), else a fifth of its limit (or half of what it
// holds, if less) from the cold end.
void reap_cpu(slab_kmem_cache *s, slab_cpu *c);

// A shared array or an alien cache of `entries` entries on node `node`.
shared_array *make_shared(uint32_t entries, int node);
alien_cache *make_alien(uint32_t capacity, uint32_t limit, int node);

// free_limit of node n: (1 + CPUs of the node) * batchcount + objects per slab.
uint64_t node_free_limit(const slab_kmem_cache *s, unsigned node);

} // namespace slabkit::slab
