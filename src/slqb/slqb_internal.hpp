// slqb_internal.hpp - pieces shared by SLQB's slow paths (alloc, free, cache management).
#pragma once

#include "core/slab_release.hpp"
#include "slqb/slqb.hpp"

namespace slabkit::slqb {

// The list that owns slab pg (priv[1] of a slab page).
inline slqb_list *list_of(const page *pg) {
    return reinterpret_cast<slqb_list *>(pg->priv[1]);
}

// Under l->page_lock: puts obj back on its slab's freelist; an emptied slab goes on `chain`,
// a full slab gaining a free object rejoins the partial list. `actor` counts the events.
void free_object_to_page(slqb_cache *s, slqb_list *l, page *pg, void *obj, release_chain &chain,
                         slqb_list *actor);
// Under l->page_lock: one object from the first partial slab, or nullptr.
void *take_from_partial(slqb_cache *s, slqb_list *l);

// Appends the list [head..tail] of n objects to l's queue.
void queue_append(slqb_cache *s, kmlist &q, void *head, void *tail, uint32_t n);
// Takes l's whole inbox under its lock (its chains into heads) and lowers its flag; returns how
// many objects the inbox held.
uint32_t take_inbox(slqb_list *l, void *(&heads)[kInboxChains]);
// Calls fn(obj) for every object on the chains that start at heads (emptied on the way), the
// chains in step: one object of each in turn, so that the reads of their links, each likely a
// line another CPU wrote, are in flight together (inbox_chains). Each object's next is read,
// and fetched for writing, before fn sees it: fn may overwrite the link.
template <class Fn>
SLABKIT_ALWAYS_INLINE void walk_chains(const slqb_cache *s, void *(&heads)[kInboxChains], Fn &&fn) {
    for (bool any = true; any;) {
        any = false;
        for (void *&at : heads) {
            void *obj = at;
            if (!obj) continue;
            any = true;
            void *next = get_freepointer(s, obj);
            prefetch_object(next);
            at = next;
            fn(obj);
        }
    }
}
// Moves l's whole inbox onto its queue (the owner, or a holder of the node list_lock).
uint32_t claim_remote_list(slqb_cache *s, slqb_list *l);
// Returns l's whole inbox straight to l's slabs (anyone: takes the inbox lock, then page_lock).
void drain_inbox_to_pages(slqb_cache *s, slqb_list *l);
// Sends obj (of slab pg, owned by another list) to c's outbox.
void free_to_remote(slqb_cache *s, slqb_cpu *c, page *pg, void *obj);
// Empties c's outbox into its target's inbox (or slabs).
void flush_remote(slqb_cache *s, slqb_cpu *c);
// Flushes every object of l's queue (objects of other lists' slabs go through c's outbox; c may
// be null for a node list, whose queue only holds its own slabs' objects).
void flush_free_list_all(slqb_cache *s, slqb_list *l, slqb_cpu *c);
// One batch (freebatch objects) from the hot end of slot c's queue back to the slabs (their
// owners' through the outbox), without counting towards queue growth (flush_free_list's).
void flush_batch(slqb_cache *s, slqb_cpu *c);
// One batch (freebatch objects) from the hot end of node list l's queue back to its slabs (the
// trimmer; the caller holds the node's list_lock).
void flush_node_batch(slqb_cache *s, slqb_list *l);
// Everything a slot holds for cache s: its inbox, its queue, its outbox.
void flush_cpu(slqb_cache *s, slqb_cpu *c);
// The trimmer's share: the inbox (flagged or not), one batch of the queue, the outbox.
void trim_cpu(slqb_cache *s, slqb_cpu *c);

// Counting: a slot's counters have one writer; node lists' several.
inline void count(slqb_list *l, stat_item item, uint64_t n = 1) {
    if (l->is_node_list)
        l->stats[item].add_shared(n);
    else
        l->stats[item].add(n);
}

// The bootstrap caches (static).
slqb_cache &cpu_cache();
slqb_cache &node_cache();
slqb_cache &cache_cache();
// A bootstrap cache's static per-slot structure for `slot` (uninitialised until get_cpu).
slqb_cpu *meta_cpu_storage(slqb_cache *s, unsigned slot);

// An object from the caller's node list (shared by all slots): the bootstrap caches' objects
// are long-lived and made by whichever thread comes first, so packing them into shared slabs
// keeps them from pinning one slab per slot. Taken from the first partial slab, given back to
// its slab at once (free_shared): no queue scatters them over slabs.
void *alloc_shared(slqb_cache *s);
void free_shared(slqb_cache *s, void *obj);
// A debug cache's slot-less paths (cache::debug_alloc, debug_free).
void *debug_slot_alloc(cache *c, int node);
void debug_slot_free(cache *c, void *slot);
// The slot's per-cache structure, made on first use; nullptr when memory is short.
slqb_cpu *get_cpu(slqb_cache *s, unsigned slot);
void init_list(slqb_list *l, slqb_cache *s, unsigned node, bool node_list);

} // namespace slabkit::slqb
