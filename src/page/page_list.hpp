// page_list.hpp - an intrusive doubly linked list of page descriptors with a count.
//
// Used for buddy free lists, per-slot page lists and (later) slab partial lists. Hot end is the
// front: LIFO users push and pop there; the back holds what has waited longest.
#pragma once

#include "page/page.hpp"

namespace slabkit {

struct page_list {
    page *first = nullptr;
    page *last = nullptr;
    uint64_t count = 0;

    bool empty() const { return first == nullptr; }

    void push_front(page *pg) {
        pg->prev = nullptr;
        pg->next = first;
        if (first)
            first->prev = pg;
        else
            last = pg;
        first = pg;
        ++count;
    }
    void push_back(page *pg) {
        pg->next = nullptr;
        pg->prev = last;
        if (last)
            last->next = pg;
        else
            first = pg;
        last = pg;
        ++count;
    }
    void remove(page *pg) {
        if (pg->prev)
            pg->prev->next = pg->next;
        else
            first = pg->next;
        if (pg->next)
            pg->next->prev = pg->prev;
        else
            last = pg->prev;
        pg->next = pg->prev = nullptr;
        --count;
    }
    page *pop_front() {
        page *pg = first;
        if (pg) remove(pg);
        return pg;
    }
    page *pop_back() {
        page *pg = last;
        if (pg) remove(pg);
        return pg;
    }
};

} // namespace slabkit
