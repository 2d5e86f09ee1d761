// slab_validate.cpp - SLAB's invariant checker, for tests and debugging (quiescent cache).
#include "core/slabinfo.hpp"
#include "slab/slab_internal.hpp"

namespace slabkit::slab {

namespace {

// Scratch marks in page::aux while checking (bits 0..1 are the list mark).
constexpr uint32_t kListed = 4;      // found on one of its node's lists
constexpr uint32_t kQueuedShift = 8; // objects of this slab found in arrays, from bit 8

struct checker {
    slab_kmem_cache *s;
    text_out out;
    unsigned problems = 0;
    uint64_t slabs = 0;

    void fail(const char *what, const void *where) {
        if (problems++ < 8) out.printf("%s: %s (%p)\n", s->name, what, where);
    }

    bool ours(const page *pg) {
        return (pg->flags() & PG_slab) && slab_cache(pg) == static_cast<cache *>(s);
    }

    // One slab's index array: the free part holds distinct indices below objects, and an
    // objfreelist slab's array sits in the object at its last position.
    void check_index_array(page *pg) {
        uint32_t active = slab_active(pg);
        const freelist_idx *fl = index_array(pg);
        if (active > s->objects) {
            fail("a slab's active count is above its objects", page_to_virt(pg));
            return;
        }
        if (active == s->objects) {
            if (s->place == freelist_place::objfreelist && fl)
                fail("a full objfreelist slab still has an index array", page_to_virt(pg));
            return;
        }
        if (!fl) {
            fail("a slab with free objects has no index array", page_to_virt(pg));
            return;
        }
        if (s->place == freelist_place::objfreelist &&
            index_to_obj(s, pg, fl[s->objects - 1]) != static_cast<const void *>(fl))
            fail("an objfreelist slab's array is not in its last free object", page_to_virt(pg));
        // Distinct: a bitmap of the (at most 255) indices.
        uint64_t seen[(kMaxObjectsPerSlab + 64) / 64] = {};
        for (uint32_t i = active; i < s->objects; ++i) {
            uint32_t idx = fl[i];
            if (idx >= s->objects) {
                fail("a slab's index array holds an index past its objects", page_to_virt(pg));
                return;
            }
            uint64_t bit = uint64_t{1} << (idx % 64);
            if (seen[idx / 64] & bit) {
                fail("a slab's index array lists an object twice", index_to_obj(s, pg, idx));
                return;
            }
            seen[idx / 64] |= bit;
        }
    }

    void check_list(slab_node *n, page_list &l, uint32_t mark, uint64_t *free_objects,
                    uint64_t *count) {
        uint64_t nr = 0;
        for (page *pg = l.first; pg && nr <= l.count; pg = pg->next, ++nr) {
            if (!ours(pg)) {
                fail("a node list holds a page that is not this cache's slab", pg);
                continue;
            }
            if ((pg->aux & kListMask) != mark) fail("a slab's list mark differs from its list", pg);
            if (pg->aux & kListed) fail("a slab is on two lists", pg);
            pg->aux |= kListed;
            if (node_of(s, pg) != n) fail("a slab is on another node's list", pg);
            uint32_t active = slab_active(pg);
            bool right = mark == kOnFree   ? active == 0
                         : mark == kOnFull ? active == s->objects
                                           : active > 0 && active < s->objects;
            if (!right) fail("a slab is on the wrong list for its active count", page_to_virt(pg));
            check_index_array(pg);
            if (active <= s->objects) *free_objects += s->objects - active;
            ++*count;
        }
        if (nr != l.count) fail("a node list's count differs from its length", n);
    }

    void check_node(unsigned node, slab_node *n) {
        uint64_t free_objects = 0, total = 0, free_slabs = 0;
        check_list(n, n->slabs_full, kOnFull, &free_objects, &total);
        check_list(n, n->slabs_partial, kOnPartial, &free_objects, &total);
        check_list(n, n->slabs_free, kOnFree, &free_objects, &free_slabs);
        total += free_slabs;
        slabs += total;
        if (total != n->total_slabs.load(std::memory_order_relaxed))
            fail("a node's slab total differs from its lists", n);
        if (free_slabs != n->free_slabs.load(std::memory_order_relaxed))
            fail("a node's free slab count differs from its free list", n);
        if (free_objects != n->free_objects.load(std::memory_order_relaxed))
            fail("a node's free object count differs from its slabs", n);
        if (free_slabs && free_objects > n->free_limit)
            fail("a node keeps free slabs beyond its free_limit", n);
        if (n->shared) {
            if (n->shared->ac.count() > n->shared->ac.limit)
                fail("a shared array holds more than its limit", n->shared);
            check_array("shared array", n->shared->entry(), n->shared->ac.count(), node);
        }
        for (unsigned r = 0; r < s->nr_nodes; ++r) {
            alien_cache *alc = n->alien[r];
            if (!alc) continue;
            if (r == node) fail("a node has an alien cache for itself", alc);
            if (alc->ac.count() > alc->ac.limit)
                fail("an alien cache holds more than its limit", alc);
            check_array("alien cache", alc->entry(), alc->ac.count(), r);
        }
    }

    // Every entry is an object of this cache, out of its slab, on node `node` (kNoSlot: any).
    void check_array(const char *what, void *const *entry, uint32_t nr, unsigned node) {
        for (uint32_t i = 0; i < nr; ++i) {
            void *obj = entry[i];
            page *pg = slab_page_of(obj);
            if (!pg || !ours(pg) || !is_object_start(s, pg, obj)) {
                out.printf("%s: a %s holds something that is not one of its objects\n", s->name,
                           what);
                fail("bad array entry", obj);
                continue;
            }
            if (node != kNoSlot && page_to_nid(pg) % s->nr_nodes != node)
                fail("an array holds an object of another node than it serves", obj);
            uint32_t queued = (pg->aux >> kQueuedShift) + 1;
            pg->aux = (pg->aux & ((1u << kQueuedShift) - 1)) | (queued << kQueuedShift);
            if (queued > slab_active(pg))
                fail("arrays hold more objects of a slab than it has out (a double free?)", obj);
        }
    }
};

} // namespace

unsigned validate(slab_kmem_cache *s, char *report, size_t size) {
    checker ck{s, text_out{report, size}};
    if (report && size) report[0] = '\0';
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top && !s->meta; ++slot) {
        slab_cpu *c = s->cpu_cache[slot].load(std::memory_order_acquire);
        if (!c) continue;
        if (c->ac.count() > c->ac.limit) ck.fail("a slot's array holds more than its limit", c);
        if (c->ac.batchcount > c->ac.limit) ck.fail("a slot's batchcount is above its limit", c);
        ck.check_array("slot's array", c->entry(), c->ac.count(), c->node);
    }
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) ck.check_node(n, s->node_slab[n]);
    // Every slab of the cache in the arena is on a list.
    uint64_t in_arena = 0;
    struct walk {
        checker *ck;
        uint64_t *count;
    } w{&ck, &in_arena};
    for_each_slab_in_arena(
        s,
        [](page *pg, void *arg) {
            auto *wk = static_cast<walk *>(arg);
            ++*wk->count;
            if (!(pg->aux & kListed)) wk->ck->fail("a slab is on no list", page_to_virt(pg));
            pg->aux &= kListMask; // the scratch marks go
        },
        &w);
    if (in_arena != ck.slabs) ck.fail("the arena holds another number of slabs than the lists", s);
    return ck.problems;
}

} // namespace slabkit::slab
