// slab_free.cpp - SLAB's free side: index arrays, the node slab lists, free_block and the free
// slab bound, flushing a full array (to the shared array or the slabs), alien caches, and the
// free slow path.
#include "core/debug.hpp"
#include "core/free_key.hpp"
#include "page/page_allocator.hpp"
#include "slab/slab_internal.hpp"

namespace slabkit::slab {

// ---- a slab's index array -----------------------------------------------------------------

void *slab_get_obj(slab_kmem_cache *s, page *pg) {
    uint32_t active = slab_active(pg);
    freelist_idx *fl = index_array(pg);
    void *obj = index_to_obj(s, pg, fl[active]);
    set_slab_active(pg, active + 1);
    // An objfreelist slab keeps its array in the object at position objects - 1, handed out
    // last: once it is out, the slab has no array until an object comes back.
    // A checked class's key (core/free_key.hpp) goes back over the array's first bytes.
    if (s->place == freelist_place::objfreelist && active + 1 == s->objects) {
        pg->priv[0] = 0;
        if (free_key::keys_new_slabs(s)) free_key::set(s, obj);
    }
    return obj;
}

void slab_put_obj(slab_kmem_cache *s, page *pg, void *obj) {
    uint32_t active = slab_active(pg) - 1;
    // A full objfreelist slab: the object coming back becomes the array's home (it sits at
    // position objects - 1, so it is the last to go out again).
    if (s->place == freelist_place::objfreelist && pg->priv[0] == 0)
        pg->priv[0] = reinterpret_cast<uintptr_t>(obj);
    index_array(pg)[active] = static_cast<freelist_idx>(obj_to_index(s, pg, obj));
    set_slab_active(pg, active);
}

// ---- node lists ---------------------------------------------------------------------------

namespace {
page_list &list_for(slab_node *n, uint32_t mark) {
    switch (mark) {
    case kOnFull:
        return n->slabs_full;
    case kOnPartial:
        return n->slabs_partial;
    default:
        return n->slabs_free;
    }
}
} // namespace

void list_del(slab_node *n, page *pg) {
    uint32_t mark = pg->aux & kListMask;
    if (mark == kOnNoList) return;
    list_for(n, mark).remove(pg);
    if (mark == kOnFree) n->free_slabs.fetch_sub(1, std::memory_order_relaxed);
    pg->aux &= ~kListMask;
}

void list_add(slab_node *n, page *pg, slab_list_mark where, bool at_tail) {
    page_list &l = list_for(n, where);
    if (at_tail)
        l.push_back(pg);
    else
        l.push_front(pg);
    if (where == kOnFree) n->free_slabs.fetch_add(1, std::memory_order_relaxed);
    pg->aux = (pg->aux & ~kListMask) | where;
}

void fix_slab_list(slab_node *n, page *pg, uint32_t objects) {
    list_del(n, pg);
    list_add(n, pg, slab_active(pg) == objects ? kOnFull : kOnPartial, false);
}

// ---- giving objects back to slabs -----------------------------------------------------------

void free_block(slab_kmem_cache *s, slab_node *n, void *const *objs, uint32_t nr,
                release_chain &chain, slab_cpu *actor) {
    n->free_objects.fetch_add(nr, std::memory_order_relaxed);
    for (uint32_t i = 0; i < nr; ++i) {
        void *obj = objs[i];
        page *pg = virt_to_head_page(obj);
        list_del(n, pg);
        slab_put_obj(s, pg, obj);
        if (slab_active(pg) == 0)
            list_add(n, pg, kOnFree, false);
        else
            // To the tail: the slab's other objects get the most time to come back too.
            list_add(n, pg, kOnPartial, true);
    }
    count(s, actor, FREES, nr);
    uint64_t over = n->free_objects.load(std::memory_order_relaxed);
    if (over > n->free_limit) {
        uint64_t slabs = (over - n->free_limit + s->objects - 1) / s->objects;
        drain_free_slabs(s, n, slabs, chain);
        (void)actor;
    }
}

uint32_t drain_free_slabs(slab_kmem_cache *s, slab_node *n, uint64_t nr, release_chain &chain) {
    uint32_t freed = 0;
    while (freed < nr) {
        page *pg = n->slabs_free.last; // the coldest
        if (!pg) break;
        list_del(n, pg);
        n->free_objects.fetch_sub(s->objects, std::memory_order_relaxed);
        n->total_slabs.fetch_sub(1, std::memory_order_relaxed);
        chain.add(pg);
        ++freed;
    }
    return freed;
}

void release(slab_kmem_cache *s, release_chain &chain) {
    if (!chain.first) return;
    uint64_t slabs = 0;
    for (page *pg = chain.first; pg; pg = pg->next, ++slabs) {
        if (s->place == freelist_place::off_slab && pg->priv[0]) {
            free_meta(index_array(pg));
            pg->priv[0] = 0;
        }
    }
    s->shared_stats[FREE_SLAB].add_shared(slabs);
    release_slabs(chain);
}

uint32_t transfer_objects(array_cache &to, void **to_entry, array_cache &from, void **from_entry,
                          uint32_t max) {
    uint32_t from_avail = from.count(), to_avail = to.count();
    uint32_t nr = from_avail < max ? from_avail : max;
    if (nr > to.limit - to_avail) nr = to.limit - to_avail;
    if (!nr) return 0;
    memcpy(to_entry + to_avail, from_entry + from_avail - nr, sizeof(void *) * nr);
    from.set_count(from_avail - nr);
    to.set_count(to_avail + nr);
    return nr;
}

void flush_bottom(slab_kmem_cache *s, slab_cpu *c, uint32_t nr, bool to_shared) {
    uint32_t avail = c->ac.count();
    if (nr > avail) nr = avail;
    if (!nr) return;
    slab_node *n = s->node_slab[c->node];
    release_chain chain;
    {
        platform::lock_guard guard(n->list_lock);
        uint32_t room = to_shared && n->shared ? n->shared->ac.limit - n->shared->ac.count() : 0;
        if (room) {
            // The cold end of the slot's array goes on top of the shared one: as many as fit,
            // and no more this time (cache_flusharray), so objects stay in arrays while the
            // shared one has room.
            array_cache &sh = n->shared->ac;
            if (nr > room) nr = room;
            memcpy(n->shared->entry() + sh.count(), c->entry(), sizeof(void *) * nr);
            sh.set_count(sh.count() + nr);
            count(s, c, SHARED_FREE, nr);
        } else {
            free_block(s, n, c->entry(), nr, chain, c);
        }
        // Still under the lock: a fork (which takes it first) never catches the objects both
        // back on their slabs and in the array, where the child's trims would free them twice.
        memmove(c->entry(), c->entry() + nr, sizeof(void *) * (avail - nr));
        c->ac.set_count(avail - nr);
    }
    release(s, chain);
}

void drain_alien(slab_kmem_cache *s, alien_cache *alc, unsigned node, release_chain &chain,
                 slab_cpu *actor) {
    uint32_t avail = alc->ac.count();
    if (!avail) return;
    slab_node *rn = s->node_slab[node];
    {
        platform::lock_guard guard(rn->list_lock);
        if (rn->shared) {
            uint32_t moved =
                transfer_objects(rn->shared->ac, rn->shared->entry(), alc->ac, alc->entry(), avail);
            count(s, actor, SHARED_FREE, moved);
            avail = alc->ac.count();
        }
        free_block(s, rn, alc->entry(), avail, chain, actor);
        alc->ac.set_count(0);
    }
}

// ---- the free slow path -------------------------------------------------------------------

namespace {

// An object of another node's slab, freed on slot c's node (cache_free_alien).
void free_alien(slab_kmem_cache *s, slab_cpu *c, page *pg, void *obj) {
    unsigned home = page_to_nid(pg) % s->nr_nodes;
    count(s, c, NODEFREES);
    alien_cache *alc = s->node_slab[c->node]->alien[home];
    if (alc) {
        release_chain chain;
        {
            platform::lock_guard guard(alc->lock);
            if (alc->ac.count() >= alc->ac.limit) {
                count(s, c, ALIENOVERFLOW);
                drain_alien(s, alc, home, chain, c);
            }
            alc->entry()[alc->ac.count()] = obj;
            alc->ac.set_count(alc->ac.count() + 1);
        }
        release(s, chain);
        return;
    }
    free_single(s, pg, obj); // no alien caches: straight to the remote node's slabs
}

} // namespace

void free_single(slab_kmem_cache *s, page *pg, void *obj) {
    slab_node *n = node_of(s, pg);
    release_chain chain;
    {
        platform::lock_guard guard(n->list_lock);
        free_block(s, n, &obj, 1, chain, nullptr);
    }
    release(s, chain);
}

void debug_slot_free(cache *c, void *slot) {
    free_single(static_cast<slab_kmem_cache *>(c), virt_to_head_page(slot), slot);
}

void free_slow(slab_kmem_cache *s, page *pg, void *obj) {
    if (SLABKIT_UNLIKELY(s->debug)) return debug::free(s, obj, "kmem_cache_free");
    if (s->meta) return free_single(s, pg, obj);
    slots::hold held; // until the end
    unsigned slot = held.slot();
    slab_cpu *c = slot == kNoSlot ? nullptr : get_cpu(s, slot);
    if (c) c = maintain(s, slot, c);
    if (!c) return free_single(s, pg, obj); // no slot, or no memory for its array
    if (s->numa && page_to_nid(pg) % s->nr_nodes != c->node) return free_alien(s, c, pg, obj);
    if (c->ac.count() >= c->ac.limit) {
        // cache_flusharray: batchcount from the cold end to the shared array, or the slabs.
        count(s, c, FREEMISS);
        flush_bottom(s, c, c->ac.batchcount, true);
        reap_slot(slot); // the reaper's turn comes on refills and flushes
    } else {
        count(s, c, FREEHIT); // the slot's array was just made
    }
    uint32_t avail = c->ac.count();
    if (kSlabArrayCheck && SLABKIT_UNLIKELY(avail && c->entry()[avail - 1] == obj))
        return report_double_free(s, obj);
    c->entry()[avail] = obj;
    c->ac.set_count(avail + 1);
}

void free_checked(slab_kmem_cache *s, void *obj) {
    if (page *pg = checked_slab_page(s, obj)) free_to_slab(s, pg, obj);
}

// The same push on the CPU's array; false when it is full, the section failed, or the object
// belongs to another node.
void free_to_cpu_array(slab_kmem_cache *s, page *pg, void *obj) {
#if SLABKIT_HAVE_RSEQ
    unsigned cpu = platform::rseq_cpu_start();
    // The CPU's node, as its array has it (get_cpu), without loading the array.
    if (!s->numa || page_to_nid(pg) == slots::node_of(cpu) % s->nr_nodes) {
        uint32_t pushed = platform::rseq_push_array<kLimitDisp, kFreeHitDisp, kEntriesDisp>(
            &s->cpu_cache[cpu], slots::lock_word(cpu), cpu, obj);
        if (SLABKIT_UNLIKELY(pushed == platform::kRseqDoubleFree))
            return report_double_free(s, obj);
        if (SLABKIT_LIKELY(pushed != 0)) return;
    }
#endif
    return free_slow(s, pg, obj);
}

} // namespace slabkit::slab
