// cache_handle.hpp - what the C API's files share about a cache handle: its conversion to the
// cache descriptor, and when an allocation from it is a zeroing one.
#pragma once

#include "core/cache.hpp"
#include "core/hardening.hpp"
#include "slabkit/slabkit.h"

namespace slabkit::api {

SLABKIT_ALWAYS_INLINE cache *to_cache(slabkit_cache *c) {
    return reinterpret_cast<cache *>(c);
}
SLABKIT_ALWAYS_INLINE const cache *to_cache(const slabkit_cache *c) {
    return reinterpret_cast<const cache *>(c);
}

// Init on alloc (core/hardening.hpp) is a zeroing allocation.
SLABKIT_ALWAYS_INLINE bool zeroing(const cache *c, unsigned gfp) {
    return (gfp & SLABKIT_GFP_ZERO) || (init_bits(c) & hardening::kInitOnAlloc);
}

} // namespace slabkit::api
