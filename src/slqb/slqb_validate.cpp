// slqb_validate.cpp - SLQB's invariant checker, for tests and debugging.
#include "core/slabinfo.hpp"
#include "slqb/slqb_internal.hpp"

namespace slabkit::slqb {

namespace {
struct checker {
    slqb_cache *s;
    text_out out;
    unsigned problems = 0;

    void fail(const char *what, const void *where) {
        if (problems++ < 8) out.printf("%s: %s (%p)\n", s->name, what, where);
    }

    // Walks a chain of free objects from head, checking each, for at most limit + 1 objects;
    // returns how many it met (limit + 1: more than limit), or UINT64_MAX after a bad object.
    uint64_t walk_chain(void *head, uint64_t limit, const char *which) {
        uint64_t n = 0;
        for (void *o = head; o && n <= limit; o = get_freepointer(s, o), ++n) {
            page *pg = slab_page_of(o);
            if (!pg || pg->owner != static_cast<cache *>(s) || !is_object_start(s, pg, o)) {
                fail(which, o);
                return UINT64_MAX;
            }
        }
        return n;
    }

    template <class Queue>
    void check_queue(const Queue &q, const char *which) {
        void *head;
        if constexpr (requires { q.head(); })
            head = q.head();
        else
            head = q.head;
        uint64_t n = walk_chain(head, q.count(), which);
        if (n != UINT64_MAX && n != q.count()) fail("a queue's count differs from its length", &q);
    }

    void check_inbox(const inbox_chains &in) {
        uint64_t n = 0;
        for (void *head : in.head) {
            uint64_t k =
                walk_chain(head, in.count(), "an inbox object is not an object of this cache");
            if (k == UINT64_MAX) return;
            n += k;
        }
        if (n != in.count()) fail("an inbox's count differs from its chains' length", &in);
    }

    void check_slabs(slqb_list *l) {
        platform::lock_guard guard(l->page_lock);
        uint64_t seen = 0;
        for (const page_list *sl : {&l->partial, &l->full}) {
            uint64_t n = 0;
            for (page *pg = sl->first; pg; pg = pg->next, ++n) {
                uint32_t nfree = 0;
                for (void *o = slab_freelist(pg); o && nfree <= s->objects;
                     o = get_freepointer(s, o))
                    ++nfree;
                if (!(pg->flags() & PG_slab) || pg->owner != static_cast<cache *>(s))
                    fail("a slab is not marked as this cache's", page_to_virt(pg));
                if (list_of(pg) != l) fail("a slab is on another list than its owner", pg);
                if (pg->aux != s->objects - nfree)
                    fail("a slab's inuse differs from objects - free objects", page_to_virt(pg));
                if ((sl == &l->partial) != (nfree > 0))
                    fail("a slab is on the partial list iff it has free objects: broken",
                         page_to_virt(pg));
            }
            if (n != sl->count) fail("a slab list's count differs from its length", l);
            seen += n;
        }
        if (seen != l->nr_slabs.load(std::memory_order_relaxed))
            fail("nr_slabs differs from the slabs on the lists", l);
    }

    void check_list(slqb_list *l, slqb_cpu *c) {
        check_queue(l->freelist, "a queued object is not an object of this cache");
        {
            platform::lock_guard guard(l->inbox_lock);
            check_inbox(l->inbox);
        }
        if (c) check_queue(c->rlist, "an outbox object is not an object of this cache");
        check_slabs(l);
    }
};
} // namespace

unsigned validate(slqb_cache *s, char *report, size_t size) {
    checker ck{s, text_out{report, size}};
    if (report && size) report[0] = '\0';
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top; ++slot)
        if (slqb_cpu *c = s->cpu_slab[slot].load(std::memory_order_acquire))
            ck.check_list(&c->list, c);
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) ck.check_list(&s->node_slab[n]->list, nullptr);
    return ck.problems;
}

} // namespace slabkit::slqb
