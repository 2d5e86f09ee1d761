// slab_release.hpp - giving emptied slabs back to the page allocator outside the slab layer's
// locks.
//
// A design empties slabs under its own locks (a node's list lock, a list's page lock) and while
// trims hold the slot registry or the cache registry. Page allocator work (zone locks, decommit
// system calls, its own drain of idle slots, which would find the registry lock taken) stays
// outside those locks: emptied slabs go on a release_chain while the lock is held and are freed
// after it is dropped, or, inside a deferred_release scope, when the outermost scope ends.
#pragma once

#include "page/page.hpp"

namespace slabkit {

// Slabs emptied under a lock, linked through page::next, released once the lock is dropped.
struct release_chain {
    page *first = nullptr;
    void add(page *pg) {
        pg->next = first;
        first = pg;
    }
};

// Clears the slab marks of the chain's slabs and gives them back to the page allocator (or,
// inside a deferred_release scope, keeps them until the outermost scope ends).
void release_slabs(release_chain &chain);

// A scope in which released slabs are kept back: open it before taking the slot registry, the
// cache registry lock for a trim, or a node's list lock, so that no page is freed while they
// are held. Scopes nest; the outermost one frees what was kept.
class deferred_release {
  public:
    deferred_release();
    ~deferred_release();
    deferred_release(const deferred_release &) = delete;
    deferred_release &operator=(const deferred_release &) = delete;

  private:
    bool outer_;
};

} // namespace slabkit
