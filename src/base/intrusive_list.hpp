// intrusive_list.hpp - a doubly linked list threaded through its elements, with a count.
//
// The elements carry the links (by default members `next` and `prev`), so linking and unlinking
// allocate nothing. Used for the page allocator's free lists and per-slot lists (page_list), SLQB's
// slab lists, and the cache registry. The front is the hot end: LIFO users push and pop there;
// the back holds what has waited longest.
#pragma once

#include <cstdint>

namespace slabkit {

template <class T, T *T::*Next = &T::next, T *T::*Prev = &T::prev>
struct intrusive_list {
    T *first = nullptr;
    T *last = nullptr;
    uint64_t count = 0;

    bool empty() const { return first == nullptr; }

    void push_front(T *e) {
        e->*Prev = nullptr;
        e->*Next = first;
        if (first)
            first->*Prev = e;
        else
            last = e;
        first = e;
        ++count;
    }
    void push_back(T *e) {
        e->*Next = nullptr;
        e->*Prev = last;
        if (last)
            last->*Next = e;
        else
            first = e;
        last = e;
        ++count;
    }
    void remove(T *e) {
        if (e->*Prev)
            (e->*Prev)->*Next = e->*Next;
        else
            first = e->*Next;
        if (e->*Next)
            (e->*Next)->*Prev = e->*Prev;
        else
            last = e->*Prev;
        e->*Next = e->*Prev = nullptr;
        --count;
    }
    T *pop_front() {
        T *e = first;
        if (e) remove(e);
        return e;
    }
    T *pop_back() {
        T *e = last;
        if (e) remove(e);
        return e;
    }
};

} // namespace slabkit
