// slqb_free.cpp - SLQB's free slow paths: queue flushes, the outbox, inboxes, returning objects
// to their slabs and releasing emptied slabs.
#include "core/debug.hpp"
#include "page/page_allocator.hpp"
#include "slqb/slqb_internal.hpp"

namespace slabkit::slqb {

void free_object_to_page(slqb_cache *s, slqb_list *l, page *pg, void *obj, release_chain &chain,
                         slqb_list *actor) {
    if (kFreelistCheck && SLABKIT_UNLIKELY(obj == slab_freelist(pg)))
        return report_double_free(s, obj);
    set_freepointer(s, obj, slab_freelist(pg));
    set_slab_freelist(pg, obj);
    uint32_t inuse = --pg->aux;
    if (inuse == 0) {
        // The last object came back: the slab goes at once (SLQB keeps no empty slabs).
        if (s->objects > 1)
            l->partial.remove(pg);
        else
            l->full.remove(pg);
        l->nr_slabs.store(l->nr_slabs.load(std::memory_order_relaxed) - 1,
                          std::memory_order_relaxed);
        chain.add(pg);
        count(actor, FLUSH_SLAB_FREE);
    } else if (inuse + 1 == s->objects) {
        l->full.remove(pg);
        l->partial.push_front(pg);
        count(actor, FLUSH_SLAB_PARTIAL);
    }
}

void *take_from_partial(slqb_cache *s, slqb_list *l) {
    page *pg = l->partial.first;
    if (!pg) return nullptr;
    void *obj = slab_freelist(pg);
    set_slab_freelist(pg, get_freepointer(s, obj));
    if (++pg->aux == s->objects) {
        l->partial.remove(pg);
        l->full.push_front(pg);
    }
    return obj;
}

void queue_append(slqb_cache *s, kmlist &q, void *head, void *tail, uint32_t n) {
    if (!n) return;
    if (q.head)
        set_freepointer(s, q.tail, head);
    else
        q.head = head;
    q.tail = tail;
    q.set_count(q.count() + n);
}

uint32_t take_inbox(slqb_list *l, void *(&heads)[kInboxChains]) {
    platform::lock_guard guard(l->inbox_lock);
    l->remote_free_check.store(false, std::memory_order_relaxed);
    for (unsigned j = 0; j < kInboxChains; ++j) {
        heads[j] = l->inbox.head[j];
        l->inbox.head[j] = nullptr;
    }
    const uint32_t n = l->inbox.count();
    l->inbox.set_count(0);
    return n;
}

uint32_t claim_remote_list(slqb_cache *s, slqb_list *l) {
    void *heads[kInboxChains];
    if (!take_inbox(l, heads)) return 0;
    // One chain of the inbox's objects, each put in front as the walk meets it: the walk meets
    // the newest of each chain first, so the chain starts with the oldest, which are popped
    // first, as from SLQB's one inbox list. Each link is written into an object whose line the
    // walk has just fetched for writing, so the pops that follow read links from this CPU's
    // cache.
    void *first = nullptr;
    uint32_t n = 0;
    walk_chains(s, heads, [&](void *obj) SLABKIT_LAMBDA_INLINE {
        set_freepointer(s, obj, first);
        first = obj;
        ++n;
    });
    if (!n) return 0;
    // The inbox goes after the queue's last object (the cold end), as SLQB did. The queue is
    // empty when an allocation claims; trims and destroy walk to its end.
    slot_queue &q = l->freelist;
    if (void *head = q.head()) {
        void *end = head;
        while (void *next = get_freepointer(s, end)) end = next;
        set_freepointer(s, end, first);
        q.set(head, q.count() + n);
    } else {
        q.set(first, n);
    }
    count(l, CLAIM_REMOTE_LIST);
    count(l, CLAIM_REMOTE_LIST_OBJECTS, n);
    return n;
}

void drain_inbox_to_pages(slqb_cache *s, slqb_list *l) {
    void *heads[kInboxChains];
    if (!take_inbox(l, heads)) return;
    release_chain chain;
    {
        platform::lock_guard guard(l->page_lock);
        walk_chains(s, heads, [&](void *obj) SLABKIT_LAMBDA_INLINE {
            free_object_to_page(s, l, virt_to_head_page(obj), obj, chain, l);
        });
    }
    release_slabs(chain);
}

void flush_remote(slqb_cache *s, slqb_cpu *c) {
    uint32_t n = c->rlist.count();
    if (!n) return;
    slqb_list *dst = c->rlist_target;
    slqb_list *me = &c->list;
    count(me, FLUSH_RFREE_LIST);
    count(me, FLUSH_RFREE_LIST_OBJECTS, n);
    set_freepointer(s, c->rlist.tail, nullptr);
    void *const head = c->rlist.head;
    // The outbox is emptied under the lock that hands its objects over: a fork (which takes
    // every list lock first) then never leaves a child in which they are both in the outbox
    // and in the owner's slabs or inbox (the child's thread that inherits this slot would free
    // them twice).
    auto empty_outbox = [c] {
        c->rlist.head = c->rlist.tail = nullptr;
        c->rlist.set_count(0);
    };
    // A whole queue's worth waiting means the owner is not draining its inbox: the objects go
    // straight back to its slabs. Half a queue was too little for a busy owner, which claims
    // only when its queue runs dry: a producer handing 4 KiB blocks (slabs of one object) to a
    // consumer on another CPU had half of them sent back that way, and freed and made 10,000
    // slabs in 500,000 blocks (pattern_bench --pattern pc-4096 --scale 0.25: 0.103 s; 0.092 s
    // with the whole queue, 5 interleaved rounds).
    if (dst->inbox.count() > s->hiwater.load()) {
        release_chain chain;
        {
            platform::lock_guard guard(dst->page_lock);
            for (void *obj = head; obj;) {
                void *next = get_freepointer(s, obj);
                free_object_to_page(s, dst, virt_to_head_page(obj), obj, chain, me);
                obj = next;
            }
            empty_outbox();
        }
        release_slabs(chain);
    } else {
        platform::lock_guard guard(dst->inbox_lock);
        uint32_t before = dst->inbox.count();
        // Dealt out over the inbox's chains, each object in front of its chain, starting where
        // the last sender stopped so that short batches (objects of a page or more) fill every
        // chain too. The objects are this CPU's lines: the relinking costs no transfer.
        unsigned j = before % kInboxChains;
        void *obj = head;
        for (uint32_t i = 0; i < n; ++i) {
            void *next = get_freepointer(s, obj);
            set_freepointer(s, obj, dst->inbox.head[j]);
            dst->inbox.head[j] = obj;
            j = j + 1 == kInboxChains ? 0 : j + 1;
            obj = next;
        }
        dst->inbox.set_count(before + n);
        // Flag the owner only when the inbox crosses a batch: it claims when its queue runs dry.
        const uint32_t batch = s->freebatch.load();
        if (before < batch && before + n >= batch)
            dst->remote_free_check.store(true, std::memory_order_relaxed);
        empty_outbox();
    }
}

void free_to_remote(slqb_cache *s, slqb_cpu *c, page *pg, void *obj) {
    slqb_list *dst = list_of(pg);
    if (c->rlist_target != dst) {
        flush_remote(s, c);
        c->rlist_target = dst;
    }
    set_freepointer(s, obj, nullptr);
    queue_append(s, c->rlist, obj, obj, 1);
    if (c->rlist.count() >= s->freebatch.load()) flush_remote(s, c);
}

// Flushes up to `limit` objects from the hot end of l's queue.
// Returns how many of the objects it took went to other slots (their slabs are not this list's).
static uint32_t flush_some(slqb_cache *s, slqb_list *l, slqb_cpu *c, uint32_t limit) {
    uint32_t n = l->freelist.count();
    if (n > limit) n = limit;
    if (!n) return 0;
    // Each object leaves the queue before it goes back: a fork that catches this thread
    // part-way must not leave a child whose queue still holds objects already back in their
    // slabs - the child's thread that inherits this slot would hand them out twice. Fork waits
    // for the list locks and for the holders of the CPUs' slots (packed queues), not for a
    // thread working on its own slot's queue: for that split layout the head moves object by
    // object (one store; the count, which flushes tolerate being too high, follows at the end).
    // Cutting the batch off in a first walk instead made remote frees of 1 KiB 20% slower.
    release_chain chain;
    bool locked = false;
    uint32_t done = 0, remote = 0;
    void *head = l->freelist.head();
    const uint32_t had = l->freelist.count();
    const bool split = !l->freelist.packed;
    for (; done < n; ++done) {
        void *obj = head;
        if (SLABKIT_UNLIKELY(!obj)) break; // a count left too high
        head = get_freepointer(s, obj);
        if (split) {
            l->freelist.word.store(reinterpret_cast<uint64_t>(head), std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_release); // the queue, then the slab
        }
        page *pg = virt_to_head_page(obj);
        slqb_list *owner = list_of(pg);
        if (owner == l) {
            if (!locked) {
                l->page_lock.lock();
                locked = true;
            }
            free_object_to_page(s, l, pg, obj, chain, l);
        } else {
            if (locked) {
                l->page_lock.unlock();
                locked = false;
            }
            count(l, FLUSH_FREE_LIST_REMOTE);
            free_to_remote(s, c, pg, obj);
            ++remote;
        }
    }
    if (locked) l->page_lock.unlock();
    l->freelist.set(head, head ? had - done : 0);
    count(l, FLUSH_FREE_LIST);
    count(l, FLUSH_FREE_LIST_OBJECTS, done);
    release_slabs(chain);
    return remote;
}

// Queue growth (slqb_cache::hiwater_max), at an overflow flush of slot c: a flush that follows
// the slot's previous one with fewer than half a batch of allocations between them is part of
// a burst of frees; two in a row (a burst that went on for two batches past a full queue)
// double the cache's queues, if the budget they share has room. A slot whose frees and
// allocations merely wander meets the test now and then where batches are short (4 objects for
// 4 KiB blocks), and a program's real bursts of frees may touch every class: the budget, not
// the test, is what keeps the sum of the bounds down, growing the classes whose bursts come
// first. One slot's bursts grow every slot's bound (the bound is the cache's, read by the fast
// paths); a slot only parks that much if its own frees outrun its allocations.
//
// Only a burst of the slot's own objects counts: a flush that sent most of its objects to other
// slots came from a consumer, a slot that frees what others allocate and never allocates as
// much itself. A longer queue does not save such a slot any refill, only parks more of the
// producers' objects before they go home. A server whose main thread frees the responses its
// worker threads allocate grew the queues of every response class to their bound that way and
// peaked at 9.3 MiB, against glibc's 4.1 (bench/pattern_bench --pattern server --scale 0.25).
static constexpr uint32_t kBurstFlushes = 2;

static void grow_queues(slqb_cache *s, slqb_cpu *c, uint32_t batch, bool own_objects) {
    slqb_list &l = c->list;
    const uint32_t allocs = static_cast<uint32_t>(l.stats[ALLOC].get());
    const bool burst = own_objects && allocs - l.allocs_at_flush < (batch + 1) / 2; // mod 2^32
    l.allocs_at_flush = allocs;
    l.burst_flushes = burst ? static_cast<uint8_t>(l.burst_flushes + 1) : 0;
    if (l.burst_flushes < kBurstFlushes) return;
    l.burst_flushes = 0;
    uint32_t hw = s->hiwater.load();
    const uint32_t max = s->hiwater_max.load();
    const uint32_t next = hw * 2 < max ? hw * 2 : max;
    if (next <= hw) return;
    // The growth's bytes from the shared budget first; none left: the queues stay as they are.
    const int64_t bytes = int64_t{next - hw} * s->size;
    std::atomic<int64_t> *budget = s->queue_growth_budget;
    if (budget && budget->fetch_sub(bytes, std::memory_order_relaxed) < bytes) {
        budget->fetch_add(bytes, std::memory_order_relaxed);
        return;
    }
    // Slots of other CPUs or threads may decide the same at once: one doubling wins.
    if (s->hiwater.v.compare_exchange_strong(hw, next, std::memory_order_relaxed)) {
        s->freebatch.store(next / 4);
        count(&c->list, QUEUE_GROW);
    } else if (budget) {
        budget->fetch_add(bytes, std::memory_order_relaxed);
    }
}

void flush_free_list(slqb_cache *s, slqb_cpu *c) {
    const uint32_t batch = s->freebatch.load();
    const uint32_t remote = flush_some(s, &c->list, c, batch);
    if (SLABKIT_UNLIKELY(s->hiwater.load() < s->hiwater_max.load()))
        grow_queues(s, c, batch, remote * 2 <= batch);
}

void flush_batch(slqb_cache *s, slqb_cpu *c) {
    flush_some(s, &c->list, c, s->freebatch.load());
}

void flush_node_batch(slqb_cache *s, slqb_list *l) {
    flush_some(s, l, nullptr, s->freebatch.load());
}

void flush_free_list_all(slqb_cache *s, slqb_list *l, slqb_cpu *c) {
    while (void *head = l->freelist.head()) {
        if (l->freelist.count() == 0) l->freelist.set(head, 1); // a count left too low
        flush_some(s, l, c, UINT32_MAX);
    }
}

void flush_cpu(slqb_cache *s, slqb_cpu *c) {
    claim_remote_list(s, &c->list);
    flush_free_list_all(s, &c->list, c);
    flush_remote(s, c);
}

void trim_cpu(slqb_cache *s, slqb_cpu *c) {
    claim_remote_list(s, &c->list);
    flush_batch(s, c);
    flush_remote(s, c);
}

void free_slow(slqb_cache *s, page *pg, void *obj) {
    if (SLABKIT_UNLIKELY(s->debug)) return debug::free(s, obj, "kmem_cache_free");
    slots::hold held; // until the end
    unsigned slot = held.slot();
    slqb_cpu *c = slot == kNoSlot ? nullptr : get_cpu(s, slot);
    if (!c) {
        // No slot (a thread being torn down, or more threads than slots) or no memory for one:
        // the object goes straight back to its slab.
        return free_shared(s, obj);
    }
    if (!s->numa || page_to_nid(pg) == c->list.node) {
        if (!c->list.freelist.packed) return push_to_queue(s, c, obj);
        // A CPU's queue, held: the same push in its layout.
        slot_queue &q = c->list.freelist;
        if (kFreelistCheck && SLABKIT_UNLIKELY(obj == q.head())) return report_double_free(s, obj);
        set_freepointer(s, obj, q.head());
        uint32_t n = q.count() + 1;
        q.set(obj, n);
        if (n > s->hiwater.load()) flush_free_list(s, c);
        return;
    }
    // Another node's object goes home through the outbox without visiting this slot's queue.
    count(&c->list, FREE_REMOTE);
    free_to_remote(s, c, pg, obj);
}

void flush_cpu_queue(slqb_cache *s) {
    slots::hold held;
    if (held.slot() == kNoSlot) return; // the slot's next slow path flushes
    slqb_cpu *c = s->cpu_slab[held.slot()].load(std::memory_order_acquire);
    if (c && c->list.freelist.count() > s->hiwater.load()) flush_free_list(s, c);
}

void free_shared(slqb_cache *s, void *obj) {
    page *pg = virt_to_head_page(obj);
    slqb_list *owner = list_of(pg);
    release_chain chain;
    {
        platform::lock_guard guard(owner->page_lock);
        free_object_to_page(s, owner, pg, obj, chain, owner);
    }
    s->shared_stats[FREE].add_shared();
    release_slabs(chain);
}

void debug_slot_free(cache *c, void *slot) {
    free_shared(static_cast<slqb_cache *>(c), slot);
}

void free_checked(slqb_cache *s, void *obj) {
    if (page *pg = checked_slab_page(s, obj)) free_to_slot(s, pg, obj);
}

#if SLABKIT_HAVE_RSEQ
// What follows a CPU's push that did not simply succeed: nr is the push's result (0: the
// section gave up; kRseqDoubleFree; else the queue's new count, above hiwater).
static SLABKIT_NOINLINE void after_cpu_push(slqb_cache *s, page *pg, void *obj, uint32_t nr) {
    if (nr == 0) return free_slow(s, pg, obj);
    if (nr == platform::kRseqDoubleFree) return report_double_free(s, obj);
    flush_cpu_queue(s);
}
#endif

void free_to_cpu_queue(slqb_cache *s, page *pg, void *obj) {
#if SLABKIT_HAVE_RSEQ
    unsigned cpu = platform::rseq_cpu_start();
    // The CPU's node, as its structure has it (get_cpu), without loading the structure.
    if (!s->numa || page_to_nid(pg) == slots::node_of(cpu) % s->nr_nodes) {
        uint32_t nr = platform::rseq_push_packed<kQueueDisp>(
            &s->cpu_slab[cpu], slots::lock_word(cpu), cpu, s->offset, obj,
            freepointer_key(s, static_cast<char *>(obj) + s->offset));
        // One test for the usual case (1 <= nr <= hiwater; kRseqDoubleFree is above any
        // hiwater); every other case leaves by a tail call to code out of line.
        if (SLABKIT_LIKELY(nr - 1 < s->hiwater.load())) return;
        return after_cpu_push(s, pg, obj, nr);
    }
#endif
    return free_slow(s, pg, obj);
}

} // namespace slabkit::slqb
