// large_extents.cpp - the free ranges of the large blocks' region (large_extents.hpp).
#include "kmalloc/large_extents.hpp"

#include "base/bits.hpp"

namespace slabkit::large {

void extent_map::insert_at(unsigned i, const extent &x) {
    if (n_ == kCapacity) __builtin_trap(); // every caller checks for room first
    for (unsigned k = n_; k > i; --k) e_[k] = e_[k - 1];
    e_[i] = x;
    ++n_;
    if (x.dirty) dirty_bytes_ += x.size;
}

void extent_map::erase(unsigned i) {
    if (e_[i].dirty) dirty_bytes_ -= e_[i].size;
    for (unsigned k = i + 1; k < n_; ++k) e_[k - 1] = e_[k];
    --n_;
}

void extent_map::merge_around(unsigned i) {
    // The next one first, so that i stays where it is.
    if (i + 1 < n_ && e_[i + 1].dirty == e_[i].dirty && e_[i].end() == e_[i + 1].addr) {
        const extent next = e_[i + 1];
        erase(i + 1);
        e_[i].size += next.size;
        if (next.dirty) dirty_bytes_ += next.size;
        if (next.freed_ms > e_[i].freed_ms) e_[i].freed_ms = next.freed_ms;
    }
    if (i > 0 && e_[i - 1].dirty == e_[i].dirty && e_[i - 1].end() == e_[i].addr) {
        const extent self = e_[i];
        erase(i);
        e_[i - 1].size += self.size;
        if (self.dirty) dirty_bytes_ += self.size;
        if (self.freed_ms > e_[i - 1].freed_ms) e_[i - 1].freed_ms = self.freed_ms;
    }
}

bool extent_map::add(uintptr_t addr, size_t size, bool dirty, uint64_t freed_ms) {
    unsigned i = 0;
    while (i < n_ && e_[i].addr < addr) ++i;
    const bool joins_prev = i > 0 && e_[i - 1].dirty == dirty && e_[i - 1].end() == addr;
    const bool joins_next = i < n_ && e_[i].dirty == dirty && addr + size == e_[i].addr;
    if (joins_prev || joins_next) {
        // Grows the neighbour in place (no new entry: this works in a full map too).
        const unsigned k = joins_prev ? i - 1 : i;
        if (!joins_prev) e_[k].addr = addr;
        e_[k].size += size;
        if (dirty) dirty_bytes_ += size;
        if (freed_ms > e_[k].freed_ms) e_[k].freed_ms = freed_ms;
        merge_around(k);
        return true;
    }
    if (n_ == kCapacity) return false;
    insert_at(i, extent{addr, size, freed_ms, dirty});
    return true;
}

uintptr_t extent_map::place(size_t size, size_t align, uintptr_t top, uintptr_t limit,
                            size_t *dirty_out) const {
    uintptr_t best = 0;
    size_t best_dirty = 0, best_run = 0;
    for (unsigned first = 0; first < n_;) {
        // The run [first, last]: ranges that touch one after the other.
        unsigned last = first;
        while (last + 1 < n_ && e_[last].end() == e_[last + 1].addr) ++last;
        const uintptr_t run_start = e_[first].addr;
        const uintptr_t run_end = e_[last].end() == top ? limit : e_[last].end();
        const size_t run = run_end - run_start;
        // Candidates: the run's start and each dirty range's start in it, aligned up.
        for (unsigned k = first; k <= last; ++k) {
            if (k != first && !e_[k].dirty) continue;
            const uintptr_t at = align_up(e_[k].addr, align);
            if (at < e_[k].addr || at + size < at || at + size > run_end) continue;
            size_t dirty = 0;
            for (unsigned j = k; j <= last && e_[j].addr < at + size; ++j) {
                if (!e_[j].dirty) continue;
                const uintptr_t lo = e_[j].addr > at ? e_[j].addr : at;
                const uintptr_t hi = e_[j].end() < at + size ? e_[j].end() : at + size;
                if (hi > lo) dirty += hi - lo;
            }
            if (!best || dirty > best_dirty || (dirty == best_dirty && run < best_run)) {
                best = at;
                best_dirty = dirty;
                best_run = run;
            }
        }
        first = last + 1;
    }
    *dirty_out = best_dirty;
    return best;
}

bool extent_map::take_span(uintptr_t at, size_t size) {
    const uintptr_t end = at + size;
    unsigned i = 0;
    while (i < n_ && e_[i].end() <= at) ++i;
    unsigned j = i;
    while (j + 1 < n_ && e_[j + 1].addr < end) ++j;
    // [i, j] cover [at, end): keep what lies before `at` in i and after `end` in j.
    const extent first = e_[i], last = e_[j];
    const bool keep_before = first.addr<at, keep_after = last.end()> end;
    if (keep_before && keep_after && i == j && n_ == kCapacity) return false;
    for (unsigned k = j + 1; k-- > i;) erase(k);
    if (keep_after) insert_at(i, extent{end, last.end() - end, last.freed_ms, last.dirty});
    if (keep_before) insert_at(i, extent{first.addr, at - first.addr, first.freed_ms, first.dirty});
    return true;
}

int extent_map::starting_at(uintptr_t addr) const {
    for (unsigned i = 0; i < n_; ++i)
        if (e_[i].addr == addr) return static_cast<int>(i);
    return -1;
}

int extent_map::holding(uintptr_t addr) const {
    for (unsigned i = 0; i < n_; ++i)
        if (addr >= e_[i].addr && addr < e_[i].end()) return static_cast<int>(i);
    return -1;
}

bool extent_map::make_clean(unsigned i, uintptr_t at, size_t size) {
    const extent x = e_[i];
    const size_t before = at - x.addr;
    const size_t after = x.end() - (at + size);
    if (n_ + (before != 0) + (after != 0) > kCapacity) return false;
    erase(i);
    if (after) insert_at(i, extent{at + size, after, x.freed_ms, true});
    insert_at(i, extent{at, size, x.freed_ms, false});
    if (before) {
        insert_at(i, extent{x.addr, before, x.freed_ms, true});
        ++i;
    }
    merge_around(i);
    return true;
}

int extent_map::oldest_dirty() const {
    int best = -1;
    for (unsigned i = 0; i < n_; ++i)
        if (e_[i].dirty && (best < 0 || e_[i].freed_ms < e_[best].freed_ms))
            best = static_cast<int>(i);
    return best;
}

unsigned extent_map::dirty_count() const {
    unsigned n = 0;
    for (unsigned i = 0; i < n_; ++i) n += e_[i].dirty;
    return n;
}

} // namespace slabkit::large
