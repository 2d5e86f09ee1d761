// compiler.hpp - attributes and branch hints used across slabkit (no OS calls, no includes).
#pragma once

#define SLABKIT_LIKELY(x) __builtin_expect(!!(x), 1)
#define SLABKIT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SLABKIT_NOINLINE __attribute__((noinline))
#define SLABKIT_ALWAYS_INLINE inline __attribute__((always_inline))
// The same for a lambda (after its parameter list): fast paths that dispatch through
// designs::visit with a lambda must not lose it to an out-of-line clone when it grows.
#define SLABKIT_LAMBDA_INLINE __attribute__((always_inline))
#define SLABKIT_COLD __attribute__((cold))
// For the C API's exported entry points of the hot pairs (kmalloc/kfree, the cache pair): each
// starts on a cache line of its own, so that where the linker happens to put it does not move its
// fast path's branches across line boundaries from one build to the next. Unaligned, an unrelated
// change elsewhere in the library once made SLUB's kfree straddle two lines and its kmalloc pair
// 1.04x-1.10x slower with the same instructions. The malloc replacement's malloc and free are left
// unaligned: there every alignment tried made one design slower (README, issue 10's ninth round).
#define SLABKIT_HOT_ENTRY __attribute__((aligned(64)))
// Thread-locals use the initial-exec model: no __tls_get_addr call (which may allocate) when
// slabkit is preloaded, and one instruction to reach them.
#define SLABKIT_TLS __attribute__((tls_model("initial-exec")))
// For extern declarations of the library's own globals: -fvisibility=hidden covers only
// definitions, so without it position-independent code reaches a global defined in another file
// through the GOT, one more dependent load on a fast path that indexes it.
#define SLABKIT_HIDDEN __attribute__((visibility("hidden")))

// Build choice (CMake option of the same name): free pointers stored obfuscated
// (core/hardening.hpp). Here because the platform layer's rseq sections load and store them too.
#ifndef SLABKIT_FREELIST_HARDENED
#define SLABKIT_FREELIST_HARDENED 0
#endif

// ThreadSanitizer builds (GCC says so with a macro, clang with a feature test): code it cannot
// see into (inline asm) falls back to the atomics it checks.
#if defined(__SANITIZE_THREAD__)
#define SLABKIT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLABKIT_TSAN 1
#endif
#endif

namespace slabkit {
inline constexpr unsigned kCacheLine = 64;
}

namespace slabkit {
// Asks for the line at p, to be written (a free object about to be handed out): never faults,
// whatever p is, so a null or stale link costs nothing but the instruction.
SLABKIT_ALWAYS_INLINE void prefetch_object(const void *p) {
#if defined(__x86_64__)
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char *>(p)));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}
} // namespace slabkit
