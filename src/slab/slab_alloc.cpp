// slab_alloc.cpp - SLAB's allocation slow paths: growing a slab, refilling a slot's array from
// the shared array or the slabs, objects straight from a node's slabs (another node asked for,
// bootstrap caches, threads without a slot), the slot's array itself, and the per-slot reaper.
#include "core/debug.hpp"
#include "core/free_key.hpp"
#include "core/trimmer.hpp"
#include "page/page_allocator.hpp"
#include "slab/slab_internal.hpp"

#include <new>

namespace slabkit::slab {

namespace {

// Refill batches of an array not touched since the reaper last looked stay this small
// (the kernel's BATCHREFILL_LIMIT).
constexpr uint32_t kBatchRefillLimit = 16;

unsigned caller_node(slab_kmem_cache *s) {
    if (!s->numa) return 0;
    const platform::topology &topo = platform::numa();
    unsigned cpu = platform::current_cpu();
    return cpu < topo.cpus ? topo.cpu_node[cpu] % s->nr_nodes : 0;
}

std::atomic<uint64_t (*)()> g_reap_clock{nullptr};

// Each slot's reaper, as each CPU's cache_reap work: when its next pass is due (0: not started),
// and the node whose alien caches it drains next (the kernel's slab_reap_node, which starts at
// the node after the CPU's own and moves on by one node a pass).
uint64_t g_next_reap_ms[kMaxSlots];
unsigned g_reap_node[kMaxSlots];

struct reap_visit {
    unsigned slot;
    unsigned node;      // the slot's node
    unsigned reap_node; // the node whose alien caches this pass drains
    uint64_t now;
};

// cache_reap's work on one cache, for one slot: one alien cache of the slot's node, the slot's
// array, and the node part when its next_reap has passed.
void reap_slot_of_cache(cache *c, void *arg) {
    if (c->kind != design::slab) return;
    auto *s = static_cast<slab_kmem_cache *>(c);
    if (s->dead) return;
    const reap_visit &v = *static_cast<reap_visit *>(arg);
    const unsigned node = v.node % s->nr_nodes;
    if (!s->meta) {
        if (s->numa) reap_alien(s, s->node_slab[node], v.reap_node % s->nr_nodes);
        if (slab_cpu *cpu = s->cpu_cache[v.slot].load(std::memory_order_relaxed)) reap_cpu(s, cpu);
    }
    reap_node(s, node, v.now);
}

// A slot's pass over every SLAB cache, every kReapSlotMs from its first slow path plus
// kReapFirstMs. As the kernel's cache_reap, it gives up its turn (the next is kReapSlotMs
// later) when the cache registry is busy.
void maybe_reap_slot(unsigned slot) {
    const uint64_t now = reap_clock_ms();
    const uint64_t due = g_next_reap_ms[slot];
    if (SLABKIT_LIKELY(now < due)) return;
    const unsigned nodes = page_allocator::global().nodes();
    const unsigned node = slots::node_of(slot) % nodes;
    if (due == 0) { // the slot's first slow path starts its reaper
        g_next_reap_ms[slot] = now + kReapFirstMs;
        g_reap_node[slot] = (node + 1) % nodes;
        return;
    }
    g_next_reap_ms[slot] = now + kReapSlotMs;
    deferred_release defer; // slabs emptied under the registry lock go back after it
    platform::mutex &reg = registry::lock();
    if (!reg.try_lock()) return;
    reap_visit v{slot, node, g_reap_node[slot], now};
    registry::for_each_locked(reap_slot_of_cache, &v);
    reg.unlock();
    g_reap_node[slot] = (g_reap_node[slot] + 1) % nodes;
}

// A slot's array remade for the cache's tunables now: its objects go back, it is freed and a
// new one made. Under the cache registry lock (statistics readers walk the arrays under it);
// when it is busy the slot keeps its array until a later slow path.
slab_cpu *remake_cpu(slab_kmem_cache *s, unsigned slot, slab_cpu *c) {
    deferred_release defer;
    platform::mutex &reg = registry::lock();
    if (!reg.try_lock()) return c;
    drain_cpu(s, c, true);
    for (unsigned i = 0; i < NR_STATS; ++i) s->shared_stats[i].add_shared(c->stats[i].get());
    s->cpu_cache[slot].store(nullptr, std::memory_order_release);
    c->~slab_cpu();
    free_meta(c);
    reg.unlock();
    return get_cpu(s, slot);
}

} // namespace

slab_cpu *maintain(slab_kmem_cache *s, unsigned slot, slab_cpu *c) {
    uint64_t gen = s->shrink_gen.load(std::memory_order_relaxed);
    if (SLABKIT_UNLIKELY(gen != c->shrink_seen)) {
        c->shrink_seen = gen;
        drain_cpu(s, c, true);
    }
    if (SLABKIT_UNLIKELY(c->tune_seen != s->tune_gen.load(std::memory_order_acquire))) {
        c = remake_cpu(s, slot, c);
        if (!c) return nullptr;
    }
    return c;
}

uint64_t reap_clock_ms() {
    uint64_t (*clock)() = g_reap_clock.load(std::memory_order_relaxed);
    return SLABKIT_LIKELY(!clock) ? platform::now_coarse_ms() : clock();
}

void set_reap_clock(uint64_t (*now_ms)()) {
    g_reap_clock.store(now_ms, std::memory_order_relaxed);
}

uint64_t slot_next_reap_ms(unsigned slot) {
    return slot < kMaxSlots ? g_next_reap_ms[slot] : 0;
}

void reap_slot(unsigned slot) {
    if (slot < kMaxSlots) maybe_reap_slot(slot);
}

namespace {

// cache_alloc_refill: the slot's array is empty. Up to batchcount objects (16 if the array was
// not touched lately) from the node's shared array, else from its partial then free slabs; else
// a new slab. Returns one object (the rest stay in the array), or nullptr.
void *refill(slab_kmem_cache *s, slab_cpu *c) {
    count(s, c, ALLOCMISS);
    uint32_t batch = c->ac.batchcount;
    if (!c->ac.touched && batch > kBatchRefillLimit) batch = kBatchRefillLimit;
    if (batch > c->ac.limit) batch = c->ac.limit;
    slab_node *n = s->node_slab[c->node];
    uint32_t avail = c->ac.count();
    {
        platform::lock_guard guard(n->list_lock);
        if (n->shared && n->shared->ac.count()) {
            uint32_t moved =
                transfer_objects(c->ac, c->entry(), n->shared->ac, n->shared->entry(), batch);
            n->shared->ac.touched = 1;
            count(s, c, SHARED_ALLOC, moved);
            avail = c->ac.count();
            batch = 0;
        }
        uint32_t taken = 0;
        while (batch > 0) {
            page *pg = n->slabs_partial.first;
            if (!pg) {
                pg = n->slabs_free.first;
                if (!pg) break;
                n->free_touched = true;
            }
            while (slab_active(pg) < s->objects && batch > 0) {
                c->entry()[avail++] = slab_get_obj(s, pg);
                ++taken;
                --batch;
            }
            fix_slab_list(n, pg, s->objects);
        }
        if (taken) {
            n->free_objects.fetch_sub(taken, std::memory_order_relaxed);
            count(s, c, ALLOCS, taken);
            c->ac.set_count(avail);
        }
    }
    if (avail == 0) {
        // Nothing on the node: grow (no lock held: the page allocator may take its time).
        trimmer::maybe_run();
        page *pg = grow_begin(s, static_cast<int>(c->node));
        if (!pg) {
            count(s, c, ERRORS);
            return nullptr;
        }
        uint32_t want = batch ? batch : 1;
        while (slab_active(pg) < s->objects && want-- > 0)
            c->entry()[avail++] = slab_get_obj(s, pg);
        count(s, c, ALLOCS, avail);
        // The array's count moves with the slab's joining its node, under the lock: a fork
        // sees both or neither.
        slab_node *gn = node_of(s, pg); // the page allocator may have fallen back to another node
        platform::lock_guard guard(gn->list_lock);
        grow_end(s, gn, pg, c);
        c->ac.set_count(avail);
    }
    c->ac.touched = 1;
    c->ac.set_count(avail - 1);
    return c->entry()[avail - 1];
}

} // namespace

// ---- growing ------------------------------------------------------------------------------

page *grow_begin(slab_kmem_cache *s, int node) {
    void *mem = page_allocator::global().alloc(s->order, node, 0);
    if (!mem) return nullptr;
    page *pg = virt_to_page(mem);
    slab_node *n = node_of(s, pg);
    // Colouring (cache_grow_begin): each new slab of a node starts its objects one colour step
    // further than the node's last, cycling through the colours the slab's leftover holds, so
    // that the slabs' first objects fall on different cache sets. The step comes first: a
    // node's first slab has colour 1 (0 when there are fewer than two colours).
    unsigned colours = s->colour_off ? s->colour_range / s->colour_off : 0;
    // Racy between growers of one node, as the kernel's: a colour used twice is harmless.
    unsigned colour = n->colour_next.load(std::memory_order_relaxed) + 1;
    if (colour >= colours) colour = 0;
    n->colour_next.store(colour, std::memory_order_relaxed);
    unsigned offset = colour * s->colour_off;
    char *base = static_cast<char *>(mem) + offset;
    freelist_idx *fl = nullptr;
    // Allocation hands the objects out in the array's order: address order, or a random one
    // (core/hardening.hpp, the kernel's shuffled freelist).
    const hardening::object_order order(s->objects, hardening::new_slab_seed());
    switch (s->place) {
    case freelist_place::objfreelist:
        // In the object handed out last.
        fl = reinterpret_cast<freelist_idx *>(base + uint64_t{order.last()} * s->size);
        break;
    case freelist_place::off_slab:
        fl = static_cast<freelist_idx *>(alloc_meta(s->freelist_size, node));
        if (!fl) {
            page_allocator::global().free(mem, s->order);
            return nullptr;
        }
        break;
    case freelist_place::on_slab:
        fl = reinterpret_cast<freelist_idx *>(static_cast<char *>(mem) + (kPageSize << s->order) -
                                              s->freelist_size);
        break;
    }
    if (s->ctor) {
        for (uint32_t i = 0; i < s->objects; ++i)
            s->ctor(base + uint64_t{i} * s->size + s->debug_offset);
    }
    // A checked class's free blocks all carry their key (core/free_key.hpp), a new slab's too;
    // an objfreelist slab's array then covers its holder's, which slab_get_obj puts back.
    if (free_key::keys_new_slabs(s))
        for (uint32_t i = 0; i < s->objects; ++i) free_key::set(s, base + uint64_t{i} * s->size);
    uint32_t next = 0;
    order.for_each([&](uint32_t i) { fl[next++] = static_cast<freelist_idx>(i); });
    pg->priv[0] = reinterpret_cast<uintptr_t>(fl);
    set_slab_active(pg, 0);
    mark_slab(s, pg, offset);
    return pg;
}

void grow_end(slab_kmem_cache *s, slab_node *n, page *pg, slab_cpu *actor) {
    n->total_slabs.fetch_add(1, std::memory_order_relaxed);
    uint32_t active = slab_active(pg);
    if (active == 0)
        list_add(n, pg, kOnFree, true);
    else
        list_add(n, pg, active == s->objects ? kOnFull : kOnPartial, false);
    n->free_objects.fetch_add(s->objects - active, std::memory_order_relaxed);
    count(s, actor, GROWN);
}

// ---- objects straight from a node's slabs -----------------------------------------------------

void *alloc_single(slab_kmem_cache *s, int node) {
    unsigned first = node == kAnyNode ? caller_node(s) : static_cast<unsigned>(node);
    slab_node *n = s->node_slab[first];
    {
        platform::lock_guard guard(n->list_lock);
        page *pg = n->slabs_partial.first;
        if (!pg) {
            pg = n->slabs_free.first;
            if (pg) n->free_touched = true;
        }
        if (pg) {
            void *obj = slab_get_obj(s, pg);
            fix_slab_list(n, pg, s->objects);
            n->free_objects.fetch_sub(1, std::memory_order_relaxed);
            count(s, nullptr, ALLOCS);
            count(s, nullptr, NODEALLOCS);
            return obj;
        }
    }
    page *pg = grow_begin(s, static_cast<int>(first));
    if (!pg) {
        count(s, nullptr, ERRORS);
        return nullptr;
    }
    void *obj = slab_get_obj(s, pg);
    count(s, nullptr, ALLOCS);
    count(s, nullptr, NODEALLOCS);
    n = node_of(s, pg);
    platform::lock_guard guard(n->list_lock);
    grow_end(s, n, pg, nullptr);
    return obj;
}

void *debug_slot_alloc(cache *c, int node) {
    return alloc_single(static_cast<slab_kmem_cache *>(c), node);
}

// ---- the slot's array -----------------------------------------------------------------------

slab_cpu *get_cpu(slab_kmem_cache *s, unsigned slot) {
    slab_cpu *c = s->cpu_cache[slot].load(std::memory_order_acquire);
    if (SLABKIT_LIKELY(c) || s->meta) return c;
    uint32_t limit = s->limit;
    void *mem = alloc_meta(sizeof(slab_cpu) + sizeof(void *) * limit, kAnyNode);
    if (!mem) return nullptr;
    c = new (mem) slab_cpu();
    c->ac.limit = limit;
    c->ac.batchcount = s->batchcount;
    c->node = s->numa ? slots::node_of(slot) % s->nr_nodes : 0;
    c->shrink_seen = s->shrink_gen.load(std::memory_order_relaxed);
    c->tune_seen = s->tune_gen.load(std::memory_order_acquire);
    s->cpu_cache[slot].store(c, std::memory_order_release);
    return c;
}

void drain_cpu(slab_kmem_cache *s, slab_cpu *c, bool to_slabs) {
    flush_bottom(s, c, c->ac.count(), !to_slabs);
}

void reap_cpu(slab_kmem_cache *s, slab_cpu *c) {
    // drain_array: an empty array is left as it is, touched or not.
    uint32_t avail = c->ac.count();
    if (!avail) return;
    if (c->ac.touched) {
        c->ac.touched = 0;
        return;
    }
    uint32_t nr = (c->ac.limit + 4) / 5;
    if (nr > avail) nr = (avail + 1) / 2;
    flush_bottom(s, c, nr, false);
}

void *alloc_slow(slab_kmem_cache *s, unsigned slot, int node, bool zero) {
    if (node != kAnyNode && (node < 0 || static_cast<unsigned>(node) >= s->nr_nodes))
        return nullptr; // no such node
    // A debug cache has no arrays: one object at a time from the slabs (debug_slot_alloc),
    // checked by the debug layer.
    if (SLABKIT_UNLIKELY(s->debug)) return debug::alloc(s, node, zero);
    void *obj = nullptr;
    if (s->meta) {
        obj = alloc_single(s, node);
    } else {
        slots::hold held; // for the caller's slot (kNoSlot), until the end of this branch
        if (slot == kNoSlot) slot = held.slot();
        slab_cpu *c = slot == kNoSlot ? nullptr : get_cpu(s, slot);
        if (c) c = maintain(s, slot, c);
        if (!c || (node != kAnyNode && static_cast<unsigned>(node) != c->node)) {
            // No array, or another node asked for: one object straight from that node's slabs
            // (____cache_alloc_node).
            obj = alloc_single(s, node);
        } else if (uint32_t avail = c->ac.count(); avail > 0) {
            // A zeroing allocation with objects in the array.
            count(s, c, ALLOCHIT);
            c->ac.touched = 1;
            c->ac.set_count(avail - 1);
            obj = c->entry()[avail - 1];
        } else {
            reap_slot(slot); // the reaper's turn comes on refills and flushes
            obj = refill(s, c);
        }
    }
    if (obj && zero) memset(obj, 0, s->object_size);
    return obj;
}

void *alloc_from_cpu_array(const std::atomic<slab_cpu *> *cpu_cache) {
#if SLABKIT_HAVE_RSEQ
    unsigned cpu = platform::rseq_cpu_start(); // the section fails if the thread moved since
    return platform::rseq_pop_array<kTouchedDisp, kAllocHitDisp, kEntriesDisp>(
        &cpu_cache[cpu], slots::lock_word(cpu), cpu);
#else
    (void)cpu_cache;
    return nullptr;
#endif
}

void *alloc_on_cpu(slab_kmem_cache *s, bool zero) {
    if (!zero) {
        if (void *obj = alloc_from_cpu_array(s->cpu_cache)) return obj;
    }
    return alloc_slow(s, kNoSlot, kAnyNode, zero);
}

} // namespace slabkit::slab
