// slub_validate.cpp - SLUB's invariant checker, for tests and debugging (quiescent cache).
#include "core/slabinfo.hpp"
#include "slub/slub_internal.hpp"

namespace slabkit::slub {

namespace {

// Scratch marks in page::aux while checking (bit 0 is kOnPartial).
constexpr uint32_t kSlotSlab = 2; // some slot's current slab or on a slot's chain
constexpr uint32_t kListed = 4;   // found on its node's partial list

struct checker {
    slub_cache *s;
    text_out out;
    unsigned problems = 0;
    uint64_t slabs[platform::kMaxNodes] = {};
    uint64_t objects[platform::kMaxNodes] = {};

    void fail(const char *what, const void *where) {
        if (problems++ < 8) out.printf("%s: %s (%p)\n", s->name, what, where);
    }

    bool ours(const page *pg) {
        return (pg->flags() & PG_slab) && slab_cache(pg) == static_cast<cache *>(s);
    }

    // A slab's own counters against its freelist: inuse counts the objects not on it (those on
    // a slot's freelist included).
    void check_counters(page *pg) {
        counters cnt{pg->priv[1]};
        uint32_t nfree = count_slab_free(s, pg);
        if (cnt.objects() != s->objects) fail("a slab's objects differ from the cache's", pg);
        if (nfree > s->objects)
            fail("a slab's freelist is longer than the slab", page_to_virt(pg));
        else if (cnt.inuse() != s->objects - nfree)
            fail("a slab's inuse differs from objects - free objects", page_to_virt(pg));
        for (void *o = slab_freelist(pg); o; o = get_freepointer(s, o)) {
            if (!is_object_start(s, pg, o)) {
                fail("a slab's freelist holds something that is not one of its objects", o);
                break;
            }
        }
    }

    void check_slot(unsigned slot, slub_cpu *c) {
        page *pg = c->slab.load(std::memory_order_relaxed);
        if (!pg && c->freelist) fail("a slot has a freelist but no current slab", c);
        if (pg) {
            if (!ours(pg)) fail("a slot's current slab is not this cache's", pg);
            if (!counters{pg->priv[1]}.frozen()) fail("a slot's current slab is not frozen", pg);
            if (pg->aux & kSlotSlab) fail("a slab is held by two slots", pg);
            pg->aux |= kSlotSlab;
            uint32_t n = 0;
            for (void *o = c->freelist; o && n <= s->objects; o = get_freepointer(s, o), ++n) {
                if (virt_to_head_page(o) != pg || !is_object_start(s, pg, o)) {
                    fail("a slot's freelist holds an object of another slab", o);
                    break;
                }
            }
            if (n > s->objects) fail("a slot's freelist is longer than its slab", c);
            // A CPU's slot keeps its length in the fast-path counters, which a critical section
            // aborted between its count and its commit bumps once too often (platform/rseq.hpp):
            // exact only for a thread's own slot.
            if (!slots::is_cpu_slot(slot) && n != freelist_length(c))
                fail("a slot's freelist length differs from its counters", c);
        }
        uint32_t chained = 0;
        for (page *p = c->partial; p && chained <= s->objects + 64; p = p->next, ++chained) {
            if (!ours(p)) fail("a slot's partial chain holds another cache's slab", p);
            if (!counters{p->priv[1]}.frozen()) fail("a slot's partial slab is not frozen", p);
            if (!slab_freelist(p)) fail("a slot's partial slab has no free object", p);
            if (p->aux & kSlotSlab) fail("a slab is held by two slots", p);
            p->aux |= kSlotSlab;
        }
        if (chained != c->partial_slabs.load(std::memory_order_relaxed))
            fail("a slot's partial chain count differs from its length", c);
        uint32_t bound = s->cpu_partial_slabs > s->cpu_partial_slabs / 2 + 1
                             ? s->cpu_partial_slabs
                             : s->cpu_partial_slabs / 2 + 1;
        if (s->cpu_partial == 0) bound = 0;
        if (chained > bound) fail("a slot's partial chain is longer than cpu_partial allows", c);
    }

    void check_node(unsigned nid, slub_node *n) {
        platform::lock_guard guard(n->list_lock);
        uint64_t count = 0, empty = 0;
        for (page *pg = n->partial.first; pg && count <= n->partial.count; pg = pg->next, ++count) {
            counters cnt{pg->priv[1]};
            if (!ours(pg)) fail("a node partial slab is not this cache's", pg);
            if (cnt.frozen()) fail("a node partial slab is frozen", pg);
            if (!(pg->aux & kOnPartial)) fail("a node partial slab is not marked so", pg);
            if (pg->aux & (kSlotSlab | kListed)) fail("a node partial slab is also elsewhere", pg);
            pg->aux |= kListed;
            if (!slab_freelist(pg)) fail("a node partial slab has no free object", pg);
            if (page_to_nid(pg) % s->nr_nodes != nid) fail("a slab is on another node's list", pg);
            if (cnt.inuse() == 0) ++empty;
        }
        if (count != n->partial.count || count != n->nr_partial.load(std::memory_order_relaxed))
            fail("a node's partial count differs from its list", n);
        if (empty > s->min_partial) fail("a node keeps more empty slabs than min_partial", n);
    }

    // Every slab of the cache, found in the arena.
    void check_slab(page *pg) {
        unsigned nid = page_to_nid(pg) % s->nr_nodes;
        ++slabs[nid];
        objects[nid] += s->objects;
        check_counters(pg);
        counters cnt{pg->priv[1]};
        bool slot_slab = pg->aux & kSlotSlab, listed = pg->aux & kListed;
        if (cnt.frozen() != slot_slab)
            fail(cnt.frozen() ? "a frozen slab is no slot's" : "a slot holds an unfrozen slab",
                 page_to_virt(pg));
        if (!cnt.frozen() && (slab_freelist(pg) != nullptr) != listed)
            fail(listed ? "a full slab is on a partial list"
                        : "an unfrozen slab with free objects is on no partial list",
                 page_to_virt(pg));
        if (((pg->aux & kOnPartial) != 0) != listed)
            fail("a slab's partial mark disagrees with the lists", page_to_virt(pg));
    }
};

} // namespace

unsigned validate(slub_cache *s, char *report, size_t size) {
    checker ck{s, text_out{report, size}};
    if (report && size) report[0] = '\0';
    unsigned top = s->meta ? 0 : slots::high_water();
    for (unsigned slot = 0; slot < top; ++slot)
        if (slub_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire)) ck.check_slot(slot, c);
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) ck.check_node(n, s->node_slab[n]);
    for_each_slab_in_arena(
        s, [](page *pg, void *arg) { static_cast<checker *>(arg)->check_slab(pg); }, &ck);
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        slub_node *node = s->node_slab[n];
        if (!node) continue;
        if (ck.slabs[n] != node->nr_slabs.load(std::memory_order_relaxed))
            ck.fail("a node's slab count differs from its slabs", node);
        if (ck.objects[n] != node->total_objects.load(std::memory_order_relaxed))
            ck.fail("a node's object total differs from its slabs", node);
    }
    // The scratch marks go.
    for_each_slab_in_arena(
        s, [](page *pg, void *) { pg->aux &= kOnPartial; }, nullptr);
    return ck.problems;
}

} // namespace slabkit::slub
