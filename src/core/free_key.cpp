// free_key.cpp - the default double-free check's switch, placement and report (free_key.hpp).
#include "core/free_key.hpp"

#include "core/report.hpp"
#include "platform/platform.hpp"

#include <atomic>

namespace slabkit::free_key {

bool enabled() {
    // (No function-local static: its guard would need the C++ runtime, which the malloc
    // replacement does without.)
    static constinit std::atomic<int> on{-1};
    int v = on.load(std::memory_order_relaxed);
    if (v < 0) {
        v = platform::env_uint("SLABKIT_FREE_KEY", 1, 0, 1) != 0;
        on.store(v, std::memory_order_relaxed);
    }
    return v != 0;
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

} // namespace slabkit::free_key
