// slub_free.cpp - SLUB's free slow path (an object straight back onto its slab's freelist with a
// compare-and-swap), the node partial lists, deactivating a slot's current slab, the slot's
// partial chain and freeing slabs.
#include "core/debug.hpp"
#include "page/page_allocator.hpp"
#include "slub/slub_internal.hpp"

namespace slabkit::slub {

void add_partial(slub_node *n, page *pg, list_end where) {
    if (where == list_end::head)
        n->partial.push_front(pg);
    else
        n->partial.push_back(pg);
    pg->aux |= kOnPartial;
    n->nr_partial.store(static_cast<uint32_t>(n->partial.count), std::memory_order_relaxed);
}

void remove_partial(slub_node *n, page *pg) {
    n->partial.remove(pg);
    pg->aux &= ~kOnPartial;
    n->nr_partial.store(static_cast<uint32_t>(n->partial.count), std::memory_order_relaxed);
}

void discard_slab(slub_cache *s, page *pg, release_chain &chain) {
    slub_node *n = node_of(s, pg);
    n->nr_slabs.fetch_sub(1, std::memory_order_relaxed);
    n->total_objects.fetch_sub(s->objects, std::memory_order_relaxed);
    chain.add(pg);
}

void anchor_empty_freelist(slub_cpu *c) {
    c->slow_delta.store(static_cast<int64_t>(c->stats[ALLOC_FASTPATH].get()) -
                            static_cast<int64_t>(c->stats[FREE_FASTPATH].get()),
                        std::memory_order_relaxed);
}

uint64_t freelist_length(const slub_cpu *c) {
    int64_t n = c->slow_delta.load(std::memory_order_relaxed) +
                static_cast<int64_t>(c->stats[FREE_FASTPATH].get()) -
                static_cast<int64_t>(c->stats[ALLOC_FASTPATH].get());
    return n > 0 ? static_cast<uint64_t>(n) : 0; // a racing read can undershoot
}

void deactivate_slab(slub_cache *s, slub_cpu *c, page *pg, void *freelist) {
    slub_node *n = node_of(s, pg);
    list_end where = list_end::head;
    if (load_word(&pg->priv[0]) != 0) {
        // Other slots freed into it meanwhile: to the tail, where it is taken last.
        count(s, c, DEACTIVATE_REMOTE_FREES);
        where = list_end::tail;
    }
    // Stage one: count the slot's objects and find the last, to splice them in one swap.
    uint32_t free_delta = 0;
    void *tail = nullptr;
    for (void *it = freelist; it; it = get_freepointer(s, it)) {
        tail = it;
        ++free_delta;
    }
    if (c && freelist) anchor_empty_freelist(c); // it was the slot's whole freelist
    // Stage two: unfreeze, with the slot's objects in front of the slab's own. A slab headed
    // for the partial list has the list lock taken before the swap, so that a free emptying it
    // meanwhile (which takes the lock) finds it on the list.
    enum { to_free, to_partial, to_full } mode;
    counters cnt;
    void *new_freelist;
    for (;;) {
        freelist_counters old = read_pair(pg);
        cnt = old.cnt;
        cnt.set_frozen(false);
        if (tail) {
            cnt.set_inuse(cnt.inuse() - free_delta);
            set_freepointer(s, tail, old.freelist);
            new_freelist = freelist;
        } else {
            new_freelist = old.freelist;
        }
        if (cnt.inuse() == 0 && n->nr_partial.load(std::memory_order_relaxed) >= s->min_partial)
            mode = to_free;
        else if (new_freelist)
            mode = to_partial;
        else
            mode = to_full;
        if (mode == to_partial) n->list_lock.lock();
        if (update_pair(pg, old, new_freelist, cnt)) break;
        if (mode == to_partial) n->list_lock.unlock();
        count(s, c, CMPXCHG_DOUBLE_FAIL);
    }
    // Stage three: the lists.
    if (mode == to_partial) {
        add_partial(n, pg, where);
        n->list_lock.unlock();
        count(s, c, where == list_end::head ? DEACTIVATE_TO_HEAD : DEACTIVATE_TO_TAIL);
    } else if (mode == to_free) {
        count(s, c, DEACTIVATE_EMPTY);
        release_chain chain;
        discard_slab(s, pg, chain);
        release_slabs(chain);
        count(s, c, FREE_SLAB);
    } else {
        count(s, c, DEACTIVATE_FULL);
    }
}

void unfreeze_partials(slub_cache *s, slub_cpu *c, page *chain) {
    slub_node *n = nullptr;
    release_chain discard;
    uint64_t discarded = 0;
    while (page *pg = chain) {
        chain = pg->next;
        pg->next = nullptr;
        slub_node *n2 = node_of(s, pg);
        if (n2 != n) {
            if (n) n->list_lock.unlock();
            n = n2;
            n->list_lock.lock();
        }
        freelist_counters old;
        counters cnt;
        for (;;) {
            old = read_pair(pg);
            cnt = old.cnt;
            cnt.set_frozen(false);
            if (update_pair(pg, old, old.freelist, cnt)) break;
            count(s, c, CMPXCHG_DOUBLE_FAIL);
        }
        if (cnt.inuse() == 0 && n->nr_partial.load(std::memory_order_relaxed) >= s->min_partial) {
            discard_slab(s, pg, discard);
            ++discarded;
        } else if (old.freelist) {
            add_partial(n, pg, list_end::tail);
            count(s, c, FREE_ADD_PARTIAL);
        } else {
            // Not reached: a slab joins a partial chain with free objects, and frees only add.
            count(s, c, DEACTIVATE_FULL);
        }
    }
    if (n) n->list_lock.unlock();
    if (discarded) {
        count(s, c, DEACTIVATE_EMPTY, discarded);
        count(s, c, FREE_SLAB, discarded);
        release_slabs(discard);
    }
}

void put_cpu_partial(slub_cache *s, slub_cpu *c, page *pg, bool drain) {
    page *to_unfreeze = nullptr;
    uint32_t slabs = c->partial_slabs.load(std::memory_order_relaxed);
    if (c->partial && drain && slabs >= s->cpu_partial_slabs) {
        // The chain is full: it goes to the node lists, and this slab starts a new one.
        to_unfreeze = c->partial;
        c->partial = nullptr;
        slabs = 0;
    }
    pg->next = c->partial;
    c->partial = pg;
    c->partial_slabs.store(slabs + 1, std::memory_order_relaxed);
    if (to_unfreeze) {
        unfreeze_partials(s, c, to_unfreeze);
        count(s, c, CPU_PARTIAL_DRAIN);
    }
}

void flush_cpu(slub_cache *s, slub_cpu *c) {
    if (page *pg = c->slab.load(std::memory_order_relaxed)) {
        void *freelist = c->freelist;
        c->freelist = nullptr;
        c->slab.store(nullptr, std::memory_order_relaxed);
        deactivate_slab(s, c, pg, freelist);
        count(s, c, CPUSLAB_FLUSH);
    }
    if (page *chain = c->partial) {
        c->partial = nullptr;
        c->partial_slabs.store(0, std::memory_order_relaxed);
        unfreeze_partials(s, c, chain);
    }
}

void slab_free(slub_cache *s, page *pg, void *obj) {
    // A debug cache's objects all come here (it has no per-slot structures): the debug layer
    // checks and quarantines them, then gives them back through debug_slot_free.
    if (SLABKIT_UNLIKELY(s->debug)) return debug::free(s, obj, "kmem_cache_free");
    slab_free_object(s, pg, obj);
}

void debug_slot_free(cache *c, void *slot) {
    slab_free_object(static_cast<slub_cache *>(c), virt_to_head_page(slot), slot);
}

void slab_free_object(slub_cache *s, page *pg, void *obj) {
    slab_free_list(s, pg, obj, obj, 1, true);
}

void slab_free_list(slub_cache *s, page *pg, void *head, void *tail, uint32_t nr, bool count_free) {
    slots::hold held; // until the end
    unsigned slot = held.slot();
    // A full slab gaining an object is frozen onto this slot's partial chain (no lock), if the
    // cache keeps chains and this thread has a slot; otherwise it joins its node's list.
    bool to_chain = s->cpu_partial != 0 && !s->meta && !s->debug && slot != kNoSlot;
    slub_cpu *c = nullptr;
    if (to_chain)
        c = get_cpu(s, slot);
    else if (slot != kNoSlot)
        c = s->cpu_slab[slot].load(std::memory_order_relaxed);
    if (!c) to_chain = false;
    // Hardening: the slot's freelist's first object, freed again (a CPU's slot whose critical
    // section gave up lands here).
    if (kFreelistCheck && c && SLABKIT_UNLIKELY(head == c->freelist))
        return report_double_free(s, head);
    if (count_free) count(s, c, FREE_SLOWPATH);

    slub_node *n = nullptr;
    freelist_counters old;
    counters cnt;
    bool was_frozen;
    for (;;) {
        if (n) {
            n->list_lock.unlock();
            n = nullptr;
        }
        old = read_pair(pg);
        if (kFreelistCheck && SLABKIT_UNLIKELY(head == old.freelist)) {
            if (n) n->list_lock.unlock();
            return report_double_free(s, head);
        }
        set_freepointer(s, tail, old.freelist);
        cnt = old.cnt;
        was_frozen = cnt.frozen();
        cnt.set_inuse(cnt.inuse() - nr);
        if ((cnt.inuse() == 0 || !old.freelist) && !was_frozen) {
            if (to_chain && !old.freelist) {
                // It was full, on no list: freeze it instead of taking any list lock.
                cnt.set_frozen(true);
            } else {
                // It needs list work (off the partial list, or onto it): take the lock first,
                // speculatively - dropped if the swap fails.
                n = node_of(s, pg);
                n->list_lock.lock();
            }
        }
        if (update_pair(pg, old, head, cnt)) break;
        count(s, c, CMPXCHG_DOUBLE_FAIL);
    }

    if (!n) {
        if (was_frozen) {
            // Some slot's slab: its owner takes the object with the rest of the slab's freelist.
            count(s, c, FREE_FROZEN);
        } else if (cnt.frozen()) {
            put_cpu_partial(s, c, pg, true);
            count(s, c, CPU_PARTIAL_FREE);
        }
        return;
    }
    if (cnt.inuse() == 0 && n->nr_partial.load(std::memory_order_relaxed) >= s->min_partial) {
        // Empty, and the node keeps enough partial slabs: the slab goes.
        if (pg->aux & kOnPartial) {
            remove_partial(n, pg);
            count(s, c, FREE_REMOVE_PARTIAL);
        }
        n->list_lock.unlock();
        release_chain chain;
        discard_slab(s, pg, chain);
        release_slabs(chain);
        count(s, c, FREE_SLAB);
        return;
    }
    if (!(pg->aux & kOnPartial)) {
        // It was full (no chains here): it has a free object now.
        add_partial(n, pg, list_end::tail);
        count(s, c, FREE_ADD_PARTIAL);
    }
    n->list_lock.unlock();
}

void free_checked(slub_cache *s, void *obj) {
    if (page *pg = checked_slab_page(s, obj)) free_to_slab(s, pg, obj);
}

// The same push on the CPU's freelist, the slab compared inside the critical section; anything
// else goes back to its slab.
void free_to_cpu_freelist(slub_cache *s, page *pg, void *obj) {
#if SLABKIT_HAVE_RSEQ
    unsigned cpu = platform::rseq_cpu_start();
    uint32_t pushed = platform::rseq_push_list_if<kFreelistDisp, kSlabDisp, kFreeFastpathDisp>(
        &s->cpu_slab[cpu], slots::lock_word(cpu), cpu, s->offset, obj, pg,
        freepointer_key(s, static_cast<char *>(obj) + s->offset));
    if (SLABKIT_UNLIKELY(pushed == platform::kRseqDoubleFree)) return report_double_free(s, obj);
    if (SLABKIT_LIKELY(pushed != 0)) return;
#endif
    return slab_free(s, pg, obj);
}

} // namespace slabkit::slub
