// heap.hpp - the object source every in-process workload allocates from.
//
// The seeds' workloads are kernel code: objects from caches (an skb head from
// skbuff_head_cache) and buffers from kmalloc. Here the same workload code runs over either
//   - slabkit's kmem_cache API and kmalloc, in the process's design (SLABKIT_ALLOCATOR), for
//     the `cache` configurations, or
//   - the process's malloc/free, for glibc, the preloaded peers and slabkit's own preloaded
//     malloc replacement (a cache is then just its object size).
// The choice is one predictable branch per call, the same for every allocator, so the
// comparison stays fair; the calls are not virtual so that they inline into the workloads.
#pragma once

#include <slabkit/slabkit.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace slabbench {

class heap {
  public:
    // use_slabkit: the kmem_cache API and kmalloc; otherwise malloc/free.
    explicit heap(bool use_slabkit) : slabkit_(use_slabkit) {}
    heap(const heap &) = delete;
    heap &operator=(const heap &) = delete;
    ~heap();

    struct cache {
        slabkit_cache *sc = nullptr;
        size_t size = 0;
        size_t align = 0;
        std::string name;
    };

    bool slabkit() const { return slabkit_; }
    // "slabkit:<design>" or "malloc".
    std::string describe() const;

    // A cache of `size`-byte objects (align 0 or a power of two), kept until the heap goes;
    // throws std::runtime_error naming the cache when slabkit refuses it.
    cache *make_cache(const std::string &name, size_t size, size_t align = 0, unsigned flags = 0);

    void *alloc(const cache *c) {
        if (slabkit_) return slabkit_cache_alloc(c->sc, 0);
        return c->align > 16
                   ? std::aligned_alloc(c->align, (c->size + c->align - 1) & ~(c->align - 1))
                   : std::malloc(c->size);
    }
    void free(const cache *c, void *p) {
        if (slabkit_)
            slabkit_cache_free(c->sc, p);
        else
            std::free(p);
    }
    void *kmalloc(size_t n) { return slabkit_ ? slabkit_kmalloc(n, 0) : std::malloc(n); }
    void kfree(void *p) {
        if (slabkit_)
            slabkit_kfree(p);
        else
            std::free(p);
    }

    // Objects of this heap's caches allocated and not freed, after a shrink of each cache (so
    // that free objects parked on slots are not counted); -1 when it cannot tell (malloc). For
    // the end of a run: the shrink changes the caches' state.
    long long live_objects() const;
    // The design's activity over every cache of the process, kmalloc's included (slabkit_stats'
    // allocs, alloc_slow, frees, free_slow), as result notes "alloc_slow_pct" and so on; nothing
    // for malloc.
    struct activity {
        uint64_t allocs = 0, alloc_slow = 0, frees = 0, free_slow = 0;
    };
    activity total_activity() const;
    // Every statistics counter of the design (slabkit_cache_stats' counter_names), summed by
    // name over every cache of the process; empty for malloc.
    std::map<std::string, uint64_t> design_counters() const;
    // Pages slabkit holds for slabs, and for everything (slabkit_get_heap_stats); 0 for malloc.
    uint64_t slab_pages() const;
    uint64_t pages_in_use() const;

  private:
    bool slabkit_;
    std::vector<cache *> caches_;
};

} // namespace slabbench
