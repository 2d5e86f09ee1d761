// slub_alloc.cpp - SLUB's allocation slow paths: refilling the slot's freelist from its current
// slab, its partial chain, the node partial lists or a new slab; the locked one-object path of
// the bootstrap caches and of threads without a slot; making a slot's structure.
#include "core/debug.hpp"
#include "core/trimmer.hpp"
#include "page/page_allocator.hpp"
#include "slub/slub_internal.hpp"

#include <cstring>
#include <new>

namespace slabkit::slub {

unsigned caller_node(slub_cache *s) {
    if (!s->numa) return 0;
    const platform::topology &topo = platform::numa();
    unsigned cpu = platform::current_cpu();
    return cpu < topo.cpus ? topo.cpu_node[cpu] % s->nr_nodes : 0;
}

namespace {

// Takes the current slab's whole freelist (objects other slots freed into it) for the slot:
// inuse becomes objects, and the slab stays frozen only if there was something to take - an
// empty one is left unfrozen and full, on no list (get_freelist).
void *get_freelist(slub_cache *s, slub_cpu *c, page *pg) {
    for (;;) {
        freelist_counters old = read_pair(pg);
        counters cnt = old.cnt;
        cnt.set_inuse(cnt.objects());
        cnt.set_frozen(old.freelist != nullptr);
        if (update_pair(pg, old, nullptr, cnt)) {
            if (old.freelist)
                c->slow_delta.store(c->slow_delta.load(std::memory_order_relaxed) +
                                        (old.cnt.objects() - old.cnt.inuse()),
                                    std::memory_order_relaxed);
            return old.freelist;
        }
        count(s, c, CMPXCHG_DOUBLE_FAIL);
    }
}

// Under n->list_lock: freezes node partial slab pg and takes it off the list. `take_all`: its
// whole freelist is returned (it becomes the slot's current slab); otherwise the freelist stays
// on the slab (it goes to the slot's partial chain) and the old head is returned.
void *acquire_slab(slub_cache *s, slub_cpu *c, slub_node *n, page *pg, bool take_all) {
    freelist_counters old;
    for (;;) {
        old = read_pair(pg);
        counters cnt = old.cnt;
        void *freelist = old.freelist;
        if (take_all) {
            cnt.set_inuse(cnt.objects());
            freelist = nullptr;
        }
        cnt.set_frozen(true);
        if (update_pair(pg, old, freelist, cnt)) break;
        count(s, c, CMPXCHG_DOUBLE_FAIL);
    }
    remove_partial(n, pg);
    if (take_all && old.freelist)
        c->slow_delta.store(c->slow_delta.load(std::memory_order_relaxed) +
                                (old.cnt.objects() - old.cnt.inuse()),
                            std::memory_order_relaxed);
    return old.freelist;
}

// Slabs from node n's partial list (get_partial_node): the first becomes the slot's current
// slab (*slab_out, its freelist returned), and more go to the slot's partial chain until it
// holds more than half of cpu_partial_slabs.
void *get_partial_node(slub_cache *s, slub_cpu *c, slub_node *n, page **slab_out) {
    if (!n || n->nr_partial.load(std::memory_order_relaxed) == 0) return nullptr;
    void *object = nullptr;
    uint32_t chained = 0;
    platform::lock_guard guard(n->list_lock);
    for (page *pg = n->partial.first, *next; pg; pg = next) {
        next = pg->next;
        void *t = acquire_slab(s, c, n, pg, object == nullptr);
        if (!t) break; // a partial slab always has free objects; stop rather than loop
        if (!object) {
            *slab_out = pg;
            count(s, c, ALLOC_FROM_PARTIAL);
            object = t;
        } else {
            put_cpu_partial(s, c, pg, false);
            count(s, c, CPU_PARTIAL_NODE);
            ++chained;
        }
        if (s->cpu_partial == 0 || chained > s->cpu_partial_slabs / 2) break;
    }
    return object;
}

// This node's partial slabs, then (when no node was asked for) another node's, if it has more
// than min_partial of them (get_any_partial, without the kernel's defrag-ratio lottery).
void *get_partial(slub_cache *s, slub_cpu *c, int node, page **slab_out) {
    unsigned first = node == kAnyNode ? c->node : static_cast<unsigned>(node);
    if (void *obj = get_partial_node(s, c, s->node_slab[first], slab_out)) return obj;
    if (node != kAnyNode) return nullptr;
    for (unsigned i = 1; i < s->nr_nodes; ++i) {
        slub_node *n = s->node_slab[(first + i) % s->nr_nodes];
        if (!n || n->nr_partial.load(std::memory_order_relaxed) <= s->min_partial) continue;
        if (void *obj = get_partial_node(s, c, n, slab_out)) return obj;
    }
    return nullptr;
}

// ___slab_alloc: the slot's freelist is empty (or a node was asked for, or the caller wants it
// zeroed). Counted ALLOC_SLOWPATH.
void *slot_alloc(slub_cache *s, slub_cpu *c, int node) {
    count(s, c, ALLOC_SLOWPATH);
    uint64_t gen = s->shrink_gen.load(std::memory_order_relaxed);
    if (SLABKIT_UNLIKELY(gen != c->shrink_seen)) {
        // A shrink asked every slot to give back its slabs (the kernel's flush_all).
        c->shrink_seen = gen;
        flush_cpu(s, c);
    }
    void *freelist;
    page *pg;
    if (!c->freelist) anchor_empty_freelist(c);
    for (;;) {
        pg = c->slab.load(std::memory_order_relaxed);
        if (!pg) break;
        if (node != kAnyNode && page_to_nid(pg) != static_cast<unsigned>(node)) {
            count(s, c, ALLOC_NODE_MISMATCH);
            void *cpu_freelist = c->freelist;
            c->freelist = nullptr;
            c->slab.store(nullptr, std::memory_order_relaxed);
            deactivate_slab(s, c, pg, cpu_freelist);
            break;
        }
        freelist = c->freelist;
        if (freelist) {
            // A zeroing or explicit-node allocation with objects still on the slot's freelist.
            c->slow_delta.store(c->slow_delta.load(std::memory_order_relaxed) - 1,
                                std::memory_order_relaxed);
            c->freelist = get_freepointer(s, freelist);
            return freelist;
        }
        freelist = get_freelist(s, c, pg);
        if (freelist) {
            count(s, c, ALLOC_REFILL);
            goto load_freelist;
        }
        // Full: no list takes it; a free into it will put it on some slot's partial chain.
        c->slab.store(nullptr, std::memory_order_relaxed);
        count(s, c, DEACTIVATE_BYPASS);
        break;
    }

    // New slab: the next one of the slot's partial chain (checked like a current slab above).
    while (page *next = c->partial) {
        c->partial = next->next;
        next->next = nullptr;
        c->partial_slabs.store(c->partial_slabs.load(std::memory_order_relaxed) - 1,
                               std::memory_order_relaxed);
        count(s, c, CPU_PARTIAL_ALLOC);
        if (node != kAnyNode && page_to_nid(next) != static_cast<unsigned>(node)) {
            count(s, c, ALLOC_NODE_MISMATCH);
            deactivate_slab(s, c, next, nullptr);
            continue;
        }
        c->slab.store(next, std::memory_order_relaxed);
        freelist = get_freelist(s, c, next);
        if (freelist) goto load_freelist;
        c->slab.store(nullptr, std::memory_order_relaxed);
        count(s, c, DEACTIVATE_BYPASS);
    }

    // Then the node partial lists.
    pg = nullptr;
    freelist = get_partial(s, c, node, &pg);
    if (!freelist) {
        // Then a new slab: objects linked in address order, taken whole and frozen. Nobody else
        // knows the slab yet, so no compare-and-swap.
        trimmer::maybe_run();
        pg = new_slab(s, node);
        if (!pg) return nullptr;
        count(s, c, ALLOC_SLAB);
        freelist = slab_freelist(pg);
        set_slab_freelist(pg, nullptr);
        pg->priv[1] = counters::make(s->objects, s->objects, true).word;
        c->slow_delta.store(c->slow_delta.load(std::memory_order_relaxed) + s->objects,
                            std::memory_order_relaxed);
    }
    c->slab.store(pg, std::memory_order_relaxed);

load_freelist:
    // The first object is the caller's; the rest become the slot's freelist.
    c->slow_delta.store(c->slow_delta.load(std::memory_order_relaxed) - 1,
                        std::memory_order_relaxed);
    c->freelist = get_freepointer(s, freelist);
    return freelist;
}

} // namespace

// One object under a node's list_lock, for the bootstrap caches (which have no per-slot
// structures, as the kernel's debug caches) and for threads without a slot: from the first
// partial slab of this node (then of the others, when no node was asked for), else from a new
// slab, which then joins its node's partial list unfrozen.
void *alloc_single(slub_cache *s, int node) {
    unsigned first = node == kAnyNode ? caller_node(s) : static_cast<unsigned>(node);
    unsigned tries = node == kAnyNode ? s->nr_nodes : 1;
    count(s, nullptr, ALLOC_SLOWPATH);
    for (unsigned i = 0; i < tries; ++i) {
        slub_node *n = s->node_slab[(first + i) % s->nr_nodes];
        if (!n || n->nr_partial.load(std::memory_order_relaxed) == 0) continue;
        platform::lock_guard guard(n->list_lock);
        page *pg = n->partial.first;
        if (!pg) continue;
        // Other slots may push onto this unfrozen slab's freelist meanwhile, but only holders
        // of the list lock take from it. A slab this allocation fills leaves the list *before*
        // the swap: once full, a free may freeze it onto a slot's partial chain without any
        // lock (slab_free), relinking it through page::next while it would still be on this
        // list. (Found by the CPUs' slots stress, where slow paths without a slot are common.)
        // While it still has a free object nobody else freezes it, so a failed swap can put it
        // back.
        for (;;) {
            freelist_counters old = read_pair(pg);
            counters cnt = old.cnt;
            cnt.set_inuse(cnt.inuse() + 1);
            void *next = get_freepointer(s, old.freelist);
            if (!next) remove_partial(n, pg); // about to be full: on no list
            if (update_pair(pg, old, next, cnt)) return old.freelist;
            if (!next) add_partial(n, pg, list_end::head);
            count(s, nullptr, CMPXCHG_DOUBLE_FAIL);
        }
    }
    page *pg = new_slab(s, node == kAnyNode ? static_cast<int>(first) : node);
    if (!pg) return nullptr;
    count(s, nullptr, ALLOC_SLAB);
    void *obj = slab_freelist(pg);
    set_slab_freelist(pg, get_freepointer(s, obj));
    pg->priv[1] = counters::make(1, s->objects, false).word;
    if (s->objects > 1) {
        slub_node *n = node_of(s, pg);
        platform::lock_guard guard(n->list_lock);
        add_partial(n, pg, list_end::head);
    }
    return obj;
}

void *debug_slot_alloc(cache *c, int node) {
    return alloc_single(static_cast<slub_cache *>(c), node);
}

slub_cpu *get_cpu(slub_cache *s, unsigned slot) {
    slub_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire);
    if (SLABKIT_LIKELY(c) || s->meta) return c;
    void *mem = alloc_single(&cpu_cache(), kAnyNode);
    if (!mem) return nullptr;
    c = new (mem) slub_cpu();
    c->node = s->numa ? slots::node_of(slot) % s->nr_nodes : 0;
    c->shrink_seen = s->shrink_gen.load(std::memory_order_relaxed);
    s->cpu_slab[slot].store(c, std::memory_order_release);
    return c;
}

page *new_slab(slub_cache *s, int node) {
    void *mem = page_allocator::global().alloc(s->order, node, 0);
    if (!mem) return nullptr;
    page *pg = virt_to_page(mem);
    // SLUB has no colouring: objects start at the slab's first byte.
    init_slab(s, pg, 0, counters::make(0, s->objects, false).word);
    pg->aux = 0;
    slub_node *n = node_of(s, pg);
    n->nr_slabs.fetch_add(1, std::memory_order_relaxed);
    n->total_objects.fetch_add(s->objects, std::memory_order_relaxed);
    return pg;
}

void *alloc_slow(slub_cache *s, unsigned slot, int node, bool zero) {
    if (node != kAnyNode && (node < 0 || static_cast<unsigned>(node) >= s->nr_nodes))
        return nullptr; // no such node
    // A debug cache has no per-slot structures, as in the kernel: one object at a time under
    // the list lock (debug_slot_alloc), checked by the debug layer.
    if (SLABKIT_UNLIKELY(s->debug)) return debug::alloc(s, node, zero);
    slots::hold held; // for the caller's slot (kNoSlot), until the end
    if (slot == kNoSlot) slot = held.slot();
    slub_cpu *c = slot == kNoSlot ? nullptr : get_cpu(s, slot);
    void *obj = c ? slot_alloc(s, c, node) : alloc_single(s, node);
    if (obj && zero) memset(obj, 0, s->object_size);
    return obj;
}

void *alloc_from_cpu_freelist(slub_cache *s, const std::atomic<slub_cpu *> *cpu_slab) {
#if SLABKIT_HAVE_RSEQ
    unsigned cpu = platform::rseq_cpu_start(); // the section fails if the thread moved since
    return platform::rseq_pop_list<kFreelistDisp, kAllocFastpathDisp>(
        &cpu_slab[cpu], slots::lock_word(cpu), cpu, s->offset, &s->freelist_secret);
#else
    (void)s;
    (void)cpu_slab;
    return nullptr;
#endif
}

void *alloc_on_cpu(slub_cache *s, bool zero) {
    if (!zero) {
        if (void *obj = alloc_from_cpu_freelist(s, s->cpu_slab)) return obj;
    }
    return alloc_slow(s, kNoSlot, kAnyNode, zero);
}

} // namespace slabkit::slub
