// hardening.cpp - the hardening secrets and switches (hardening.hpp).
#include "core/hardening.hpp"

#include "platform/platform.hpp"

#include <atomic>
#include <cstring>

namespace slabkit::hardening {

namespace {

uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The process's secret, drawn at the first use (which may come before static initialisation:
// constinit). Racing first users may draw twice; the first store wins and both read it back.
constinit std::atomic<uint64_t> g_secret{0};
uint64_t process_secret() {
    uint64_t s = g_secret.load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(s != 0)) return s;
    uint64_t drawn = platform::random_u64() | 1; // never 0, the "not drawn" mark
    uint64_t expected = 0;
    if (g_secret.compare_exchange_strong(expected, drawn, std::memory_order_relaxed)) return drawn;
    return expected;
}

constinit std::atomic<uint64_t> g_shuffles{0};
constinit std::atomic<int> g_random{-1};
constinit std::atomic<int> g_init{-1};

} // namespace

uint64_t cache_key(const void *cache_descriptor) {
    return mix(process_secret() ^ reinterpret_cast<uintptr_t>(cache_descriptor));
}

uint64_t cache_secret(const void *cache_descriptor) {
    return kFreelistHardened ? cache_key(cache_descriptor) : 0;
}

uint64_t new_slab_seed() {
    if (!freelist_random()) return 0;
    // A Weyl sequence through the mixer: distinct for every slab, unpredictable without the secret.
    uint64_t n = g_shuffles.fetch_add(0x9e3779b97f4a7c15ull, std::memory_order_relaxed);
    return mix(process_secret() + n) | 1; // never 0, which means address order
}

bool freelist_random() {
    int v = g_random.load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(v >= 0)) return v != 0;
    // Off unless asked: it costs SLQB's and SLUB's cross-thread frees 1.3x to 1.7x (README).
    v = static_cast<int>(platform::env_uint("SLABKIT_FREELIST_RANDOM", 0, 0, 1));
    g_random.store(v, std::memory_order_relaxed);
    return v != 0;
}

unsigned init_mode() {
    int v = g_init.load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(v >= 0)) return static_cast<unsigned>(v);
    const char *e = platform::env("SLABKIT_INIT");
    unsigned mode = 0;
    if (e && *e && strcmp(e, "0") != 0) {
        if (strcmp(e, "alloc") == 0) {
            mode = kInitOnAlloc;
        } else if (strcmp(e, "free") == 0) {
            mode = kInitOnFree;
        } else if (strcmp(e, "alloc,free") == 0 || strcmp(e, "free,alloc") == 0) {
            mode = kInitOnAlloc | kInitOnFree;
        } else {
            platform::print_error("slabkit: SLABKIT_INIT=%s is not understood (accepted: alloc, "
                                  "free, alloc,free); ignored\n",
                                  e);
        }
    }
    g_init.store(static_cast<int>(mode), std::memory_order_relaxed);
    return mode;
}

} // namespace slabkit::hardening
