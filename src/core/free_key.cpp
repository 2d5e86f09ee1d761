// free_key.cpp - the default double-free check's switch, placement and report (free_key.hpp).
#include "core/free_key.hpp"

#include "core/report.hpp"
#include "platform/platform.hpp"

#include <atomic>
#include <cstdio>

namespace slabkit::free_key {

unsigned mode() {
    // (No function-local static: its guard would need the C++ runtime, which the malloc
    // replacement does without.)
    static constinit std::atomic<int> on{-1};
    int v = on.load(std::memory_order_relaxed);
    if (v < 0) {
        v = static_cast<int>(platform::env_uint("SLABKIT_FREE_KEY", 1, 0, 2));
        on.store(v, std::memory_order_relaxed);
    }
    return static_cast<unsigned>(v);
}

uint8_t place_for(const cache *c) {
    if (!enabled() || c->object_size < 2 * sizeof(uint64_t) || c->ctor != nullptr || c->debug)
        return kNoFreeKey;
    // The free pointer is in the first word or beyond the second (SLUB's middle word of objects
    // of 32 bytes and more): the key takes the other of the first two.
    return c->offset == sizeof(uint64_t) ? 1 : sizeof(uint64_t) + 1;
}

void report_double_free(const cache *c, const void *obj, const char *caller) {
    report_bad_free(caller, c, obj,
                    "double free: the block is free already (its free key is set; "
                    "SLABKIT_DEBUG=1 says where it was freed)");
}

void *fresh_checked(const cache *c, void *obj) {
    if (obj == nullptr || c->free_key == kNoFreeKey) return obj;
    const uint64_t found =
        *reinterpret_cast<uint64_t *>(static_cast<char *>(obj) + c->free_key - 1);
    if (found != (c->freelist_secret ^ reinterpret_cast<uintptr_t>(obj)) && found != 0)
        return overwritten(c, obj, found);
    return fresh(obj);
}

void *overwritten(const cache *c, void *obj, uint64_t found) {
    char why[224];
    snprintf(why, sizeof why,
             "the free block was written while it was free: its free key at offset %u is gone "
             "(0x%016llx found): an overflow of the block before it, or a write after free",
             static_cast<unsigned>(c->free_key - 1), static_cast<unsigned long long>(found));
    report_bad_free("malloc", c, obj, why);
    return fresh(obj);
}

} // namespace slabkit::free_key
