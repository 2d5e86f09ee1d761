// slqb_alloc.cpp - SLQB's allocation slow paths: claiming the inbox, partial slabs, new slabs,
// the per-node lists, and making a slot's per-cache structure.
#include "core/debug.hpp"
#include "core/trimmer.hpp"
#include "page/page_allocator.hpp"
#include "slqb/slqb_internal.hpp"

#include <cstring>
#include <new>

namespace slabkit::slqb {

void init_list(slqb_list *l, slqb_cache *s, unsigned node, bool node_list) {
    l->cache = s;
    l->node = node;
    l->is_node_list = node_list;
}

static unsigned caller_node(slqb_cache *s);

slqb_cpu *get_cpu(slqb_cache *s, unsigned slot) {
    slqb_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire);
    if (SLABKIT_LIKELY(c)) {
        // The shortcut of a thread that owns the slot (set_shortcut checks): it may have taken
        // the slot since it last came here (kmalloc's acquire hook sets what the slot had then).
        if (s->shortcut) slots::set_shortcut(slot, s->shortcut, c);
        return c;
    }
    // The bootstrap caches' structures are static (allocating them would recurse).
    void *mem = s->meta ? meta_cpu_storage(s, slot) : alloc_shared(&cpu_cache());
    if (!mem) return nullptr;
    c = new (mem) slqb_cpu();
    init_list(&c->list, s, s->numa ? slots::node_of(slot) % s->nr_nodes : 0, false);
    c->list.freelist.packed = slots::is_cpu_slot(slot); // see slot_queue
    c->shrink_seen = s->shrink_gen.load(std::memory_order_relaxed);
    c->trim_seen = trimmer::epoch();
    {
        platform::lock_guard guard(s->slots_lock); // not while a fork takes the lists (fork_cache)
        s->cpu_slab[slot].store(c, std::memory_order_release);
    }
    // Its next allocations and frees of this class find it with one load (core/design.hpp).
    if (s->shortcut) slots::set_shortcut(slot, s->shortcut, c);
    return c;
}

// Pops one object from a list's queue, or nullptr.
static void *queue_pop(slqb_cache *s, slot_queue &q) {
    void *obj = q.head();
    if (obj) q.set(get_freepointer(s, obj), q.count() - 1);
    return obj;
}

// One object from list l's own sources, in SLQB's order: its queue; its inbox, claimed when
// flagged; one object from its first partial slab. The caller serialises the queue (it is the
// slot's owner, c, or holds the node's list_lock, c == nullptr).
static void *get_object(slqb_cache *s, slqb_list *l, slqb_cpu *c) {
    void *obj = queue_pop(s, l->freelist);
    if (!obj && l->remote_free_check.load(std::memory_order_relaxed)) {
        claim_remote_list(s, l);
        if (c && l->freelist.count() > s->hiwater.load()) flush_batch(s, c); // not a burst
        obj = queue_pop(s, l->freelist);
    }
    if (!obj) {
        {
            platform::lock_guard guard(l->page_lock);
            obj = take_from_partial(s, l);
        }
        if (obj) count(l, ALLOC_SLAB_FILL);
    }
    return obj;
}

// A new slab for list l (on l's node if it can be had, else wherever the page allocator finds
// one: then the slab joins that node's list), and one object from it.
static void *alloc_from_new_slab(slqb_cache *s, slqb_list *l, slqb_cpu *c, bool this_node) {
    page_allocator &pa = page_allocator::global();
    void *mem = pa.alloc(s->order, static_cast<int>(l->node), this_node ? kThisNode : 0u);
    if (!mem) return nullptr;
    page *pg = virt_to_page(mem);
    unsigned nid = page_to_nid(pg);
    if (nid != l->node && s->node_slab[nid]) l = &s->node_slab[nid]->list;

    unsigned colour = 0;
    if (c && l == &c->list && s->colour_range) {
        // Colouring uses only the slab's slack: successive slabs start their objects at
        // different cache-line offsets.
        if (c->colour_next > s->colour_range) c->colour_next = 0;
        colour = c->colour_next;
        c->colour_next += s->colour_off;
    }
    init_slab(s, pg, colour, reinterpret_cast<uintptr_t>(l));
    void *obj;
    {
        platform::lock_guard guard(l->page_lock);
        l->nr_slabs.store(l->nr_slabs.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
        l->partial.push_front(pg);
        obj = take_from_partial(s, l);
    }
    return obj;
}

// Allocation from node `node`'s list, under its list_lock: the path for an explicit other node,
// and for threads without a slot. Counted on the node list: a slot list's ALLOC counts only
// what it served itself (its FREE is derived from that, see stat_item).
static void *node_alloc(slqb_cache *s, unsigned node) {
    slqb_node *n = s->node_slab[node];
    slqb_list *l = &n->list;
    void *obj;
    {
        // A claimed inbox may empty slabs: they go back after the list lock is dropped.
        deferred_release defer;
        platform::lock_guard guard(n->list_lock);
        obj = get_object(s, l, nullptr);
    }
    if (!obj) {
        obj = alloc_from_new_slab(s, l, nullptr, false);
        if (obj) count(l, ALLOC_SLAB_NEW);
    }
    if (obj) count(l, ALLOC);
    return obj;
}

// The kernel's try_remote: no new slab could be made, so before failing take an object that
// the node lists already hold - this node's first, then the others' - under each list_lock.
static void *alloc_from_node_lists(slqb_cache *s, unsigned first) {
    for (unsigned i = 0; i < s->nr_nodes; ++i) {
        slqb_node *n = s->node_slab[(first + i) % s->nr_nodes];
        if (!n) continue;
        void *obj;
        {
            deferred_release defer;
            platform::lock_guard guard(n->list_lock);
            obj = get_object(s, &n->list, nullptr);
        }
        if (obj) {
            count(&n->list, ALLOC);
            return obj;
        }
    }
    return nullptr;
}

static unsigned caller_node(slqb_cache *s) {
    if (!s->numa) return 0;
    const platform::topology &topo = platform::numa();
    unsigned cpu = platform::current_cpu();
    return cpu < topo.cpus ? topo.cpu_node[cpu] % s->nr_nodes : 0;
}

void *alloc_shared(slqb_cache *s) {
    unsigned node = caller_node(s);
    slqb_list *l = &s->node_slab[node]->list;
    void *obj;
    {
        platform::lock_guard guard(l->page_lock);
        obj = take_from_partial(s, l);
    }
    if (obj) {
        count(l, ALLOC_SLAB_FILL);
    } else {
        obj = alloc_from_new_slab(s, l, nullptr, false);
        if (obj) count(l, ALLOC_SLAB_NEW);
    }
    if (obj) count(l, ALLOC);
    return obj;
}

// A debug cache's slot-less allocation of one slot (cache::debug_alloc).
void *debug_slot_alloc(cache *c, int node) {
    auto *s = static_cast<slqb_cache *>(c);
    unsigned target = node == kAnyNode ? caller_node(s) : static_cast<unsigned>(node);
    void *obj = node_alloc(s, target);
    if (!obj && node == kAnyNode) obj = alloc_from_node_lists(s, target);
    return obj;
}

void *alloc_slow(slqb_cache *s, unsigned slot, int node, bool zero) {
    if (node != kAnyNode && (node < 0 || static_cast<unsigned>(node) >= s->nr_nodes))
        return nullptr; // no such node
    // A debug cache has no per-slot structure: everything comes here, and goes to the debug
    // layer, which takes slots through debug_slot_alloc.
    if (SLABKIT_UNLIKELY(s->debug)) return debug::alloc(s, node, zero);
    slots::hold held; // for the caller's slot (kNoSlot), until the end
    if (slot == kNoSlot) slot = held.slot();
    slqb_cpu *c = slot == kNoSlot ? nullptr : get_cpu(s, slot);
    void *obj = nullptr;
    if (!c || (node != kAnyNode && static_cast<unsigned>(node) != c->list.node)) {
        unsigned target = node == kAnyNode ? caller_node(s) : static_cast<unsigned>(node);
        obj = node_alloc(s, target);
        if (!obj && node == kAnyNode) obj = alloc_from_node_lists(s, target);
    } else {
        slqb_list *l = &c->list;
        uint64_t gen = s->shrink_gen.load(std::memory_order_relaxed);
        uint64_t epoch = trimmer::epoch();
        if (SLABKIT_UNLIKELY(gen != c->shrink_seen)) {
            // A shrink asked every slot to give back what it parks.
            c->shrink_seen = gen;
            c->trim_seen = epoch;
            flush_cpu(s, c);
        } else if (SLABKIT_UNLIKELY(epoch != c->trim_seen)) {
            // The trimmer ran (SLQB's per-CPU trimmer, every few seconds): give back one batch.
            c->trim_seen = epoch;
            trim_cpu(s, c);
        }
        obj = get_object(s, l, c);
        if (!obj) {
            trimmer::maybe_run();
            obj = alloc_from_new_slab(s, l, c, false);
            if (obj) count(l, ALLOC_SLAB_NEW);
        }
        if (obj) {
            count(l, ALLOC);
        } else if (node == kAnyNode) {
            obj = alloc_from_node_lists(s, l->node);
        }
    }
    if (obj && zero) memset(obj, 0, s->object_size);
    return obj;
}

// The CPU's pop, inlined into this file's two out-of-line entries (each gets a critical
// section, and a descriptor, of its own).
static SLABKIT_ALWAYS_INLINE void *pop_cpu_queue(slqb_cache *s,
                                                 const std::atomic<slqb_cpu *> *cpu_slab) {
#if SLABKIT_HAVE_RSEQ
    unsigned cpu = platform::rseq_cpu_start(); // the section fails if the thread moved since
    return platform::rseq_pop_packed<kQueueDisp, kAllocStatDisp>(
        &cpu_slab[cpu], slots::lock_word(cpu), cpu, s->offset, &s->freelist_secret);
#else
    (void)s;
    (void)cpu_slab;
    return nullptr;
#endif
}

void *alloc_from_cpu_queue(slqb_cache *s, const std::atomic<slqb_cpu *> *cpu_slab) {
    return pop_cpu_queue(s, cpu_slab);
}

void *alloc_cpu_or(slqb_cache *s, const std::atomic<slqb_cpu *> *cpu_slab, size_t size,
                   void *(*fallback)(size_t)) {
    if (void *obj = pop_cpu_queue(s, cpu_slab); SLABKIT_LIKELY(obj != nullptr)) {
        // The queue's new head, from the link the section read (pop_from_queue says why).
        prefetch_object(get_freepointer(s, obj));
        return obj;
    }
    return fallback(size);
}

void *alloc_on_cpu(slqb_cache *s, bool zero) {
    if (!zero) {
        if (void *obj = alloc_from_cpu_queue(s, s->cpu_slab)) return obj;
    }
    return alloc_slow(s, kNoSlot, kAnyNode, zero);
}

} // namespace slabkit::slqb
