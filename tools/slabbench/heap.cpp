// heap.cpp - the object source's slow parts: making caches, counting what is live (heap.hpp).
#include "heap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace slabbench {

heap::~heap() {
    for (cache *c : caches_) {
        if (slabkit_ && c->sc) slabkit_cache_destroy(c->sc);
        delete c;
    }
}

std::string heap::describe() const {
    if (!slabkit_) return "malloc";
    const char *d = std::getenv("SLABKIT_ALLOCATOR");
    return fmt::format("slabkit:{}", d && *d ? d : "slqb");
}

heap::cache *heap::make_cache(const std::string &name, size_t size, size_t align, unsigned flags) {
    auto *c = new cache;
    c->size = size;
    c->align = align;
    c->name = name;
    if (slabkit_) {
        c->sc = slabkit_cache_create(name.c_str(), size, align, flags, nullptr);
        if (!c->sc) {
            delete c;
            throw std::runtime_error(
                fmt::format("slabkit_cache_create(\"{}\", {}, {}) failed", name, size, align));
        }
    }
    caches_.push_back(c);
    return c;
}

long long heap::live_objects() const {
    if (!slabkit_) return -1;
    long long live = 0;
    for (const cache *c : caches_) {
        // Free objects parked on threads' and CPUs' slots count as active in some designs'
        // figures (SLUB's CPU slabs); a shrink gives them back first, so what is left is what
        // the workload did not free.
        slabkit_cache_shrink(c->sc);
        slabkit_cache_stats st{};
        slabkit_get_cache_stats(c->sc, &st);
        live +=
            static_cast<long long>(st.active_objects) - static_cast<long long>(st.queued_objects);
    }
    return live;
}

heap::activity heap::total_activity() const {
    activity a;
    if (!slabkit_) return a;
    const size_t n = slabkit_cache_count();
    std::vector<slabkit_cache_stats> all(n + 16);
    const size_t got = slabkit_stats(all.data(), all.size());
    for (size_t i = 0; i < got && i < all.size(); ++i) {
        a.allocs += all[i].allocs;
        a.alloc_slow += all[i].alloc_slow;
        a.frees += all[i].frees;
        a.free_slow += all[i].free_slow;
    }
    return a;
}

std::map<std::string, uint64_t> heap::design_counters() const {
    std::map<std::string, uint64_t> out;
    if (!slabkit_) return out;
    std::vector<slabkit_cache_stats> all(slabkit_cache_count() + 16);
    const size_t got = std::min(all.size(), slabkit_stats(all.data(), all.size()));
    for (size_t i = 0; i < got; ++i)
        for (unsigned c = 0; c < all[i].nr_counters && c < 24; ++c)
            if (all[i].counter_names[c]) out[all[i].counter_names[c]] += all[i].counters[c];
    return out;
}

uint64_t heap::slab_pages() const {
    if (!slabkit_) return 0;
    slabkit_heap_stats hs{};
    slabkit_get_heap_stats(&hs);
    return hs.slab_pages;
}

uint64_t heap::pages_in_use() const {
    if (!slabkit_) return 0;
    slabkit_page_stats ps{};
    slabkit_get_page_stats(&ps);
    return ps.pages_in_use;
}

} // namespace slabbench
