// kmalloc.hpp - general-purpose allocation by size over a design's caches.
//
//   size 0                      the zero-size pointer (16): unique, never dereferenceable
//   1 .. 8192                   a size class's cache (below)
//   8193 .. 4 MiB               a block from the page allocator (2^order pages, naturally aligned)
//   above                       a mapping from the OS (large.hpp)
//
// Two tables of size classes, each with its own caches:
//   kernel  the kernel's kmalloc classes, kmalloc-8 16 32 64 96 128 192 256 512 1k 2k 4k 8k:
//           slabkit_kmalloc and the kernel-names API, memalign and friends (power-of-two classes
//           are naturally aligned).
//   malloc  denser classes for the malloc family (malloc, calloc, realloc, operator new):
//           steps of 16 from 16 to 128, then four classes per doubling (160 192 224 256,
//           320 384 448 512, ... 7168 8192), as jemalloc and mimalloc space theirs: a request
//           wastes at most a fifth of its block instead of half (a 1 KiB value with a small
//           header takes 1280 bytes, not 2048);
//           and up to kNrHotClasses "hot" classes of one exact size each (a multiple of 16),
//           made while the process runs for a size that keeps refilling a class it wastes a
//           sixteenth or more of (hot_class.cpp): a store of 1040-byte values gets a malloc-1040
//           class whose slabs are packed, not 1280-byte blocks.
//
// A block's kind is found from its address alone (the page descriptor, else the OS block
// table), so free needs no size and no header.
//
// Alignment: power-of-two classes are naturally aligned (each cache's alignment is its size,
// up to a page), 96 and 192 are 16-aligned.
//
// Every design has its own set of kmalloc caches (class_set<D>), static descriptors opened on
// first use, so that objects of several designs live in one process: allocation goes to the set
// of the design asked for (the process's design, in the C API and malloc), and kfree finds a
// block's design from its slab page's owner cache.
#pragma once

#include "base/bits.hpp"
#include "core/cache.hpp"
#include "core/failslab.hpp"
#include "core/free_key.hpp"
#include "designs/designs.hpp"

#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace slabkit::kmalloc {

inline constexpr size_t kMaxCacheSize = 8192;
// The malloc table's blocks above this come from the large blocks' region (large.hpp): exact
// in pages, where a page block rounds up to a power of two, and one pool of kept memory with the
// bigger blocks, where page blocks and region blocks kept each other's memory from reuse (a
// program cycling blocks of 1 to 32 MiB faulted twice the pages it needed, bench/pattern_bench
// large-random, 2026-12-03). The kernel table keeps the kernel's rule: page blocks up to the
// largest order.
inline constexpr size_t kMallocRegionFrom = size_t{1} << 20;
inline void *const kZeroSizePtr = reinterpret_cast<void *>(16);

enum class class_table : uint8_t { kernel, malloc };

inline constexpr unsigned kNrClasses = 13;            // the kernel table
inline constexpr unsigned kNrFixedMallocClasses = 32; // the malloc table's own
inline constexpr unsigned kNrHotClasses = 32;         // ... and its hot ones
inline constexpr unsigned kNrMallocClasses = kNrFixedMallocClasses + kNrHotClasses;
// The malloc table maps sizes to classes in steps of this many bytes (its finest spacing).
inline constexpr unsigned kMallocStepShift = 4;
inline constexpr unsigned kNrMallocSteps = kMaxCacheSize >> kMallocStepShift;

namespace detail {
// Sizes 1..192 by (size - 1) / 8, kernel table.
inline constexpr uint8_t kSmallIndex[24] = {0, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4,
                                            5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6};
// The malloc table's class of size (1..kMaxCacheSize): steps of 16 to 128 ((size - 1) / 16),
// then four classes per doubling from 160 (index 8): the doubling is the top bit of size - 1,
// the class within it the next two bits. A handful of ALU instructions: the malloc pair's time
// follows its instruction count (a byte table's load measured no faster; an 8-byte class and
// a second branch for it cost a tenth of the pair at 256 B).
SLABKIT_ALWAYS_INLINE constexpr unsigned malloc_class_by_formula(size_t size) {
    const size_t x = size - 1;
    if (x < 128) return static_cast<unsigned>(x >> 4);
    const unsigned lg = floor_log2(x); // 7..12
    // x >> (lg - 2) is the top three bits, 4 + the class within the doubling.
    return lg * 4 - 24 + static_cast<unsigned>(x >> (lg - 2));
}

// The malloc table's class of each step of 16 bytes, (size - 1) >> 4: the formula's class,
// or a hot class once one is made for that step (hot_class.cpp). One byte load on the fast
// path, where the formula took a branch and up to seven instructions. Its bytes are read and
// written as relaxed atomics (__atomic builtins: the table is initialised at compile time,
// which an array of std::atomic cannot be), as a hot class is published while other threads
// read the table.
extern SLABKIT_HIDDEN std::array<uint8_t, kNrMallocSteps> g_malloc_class;

// One design's caches of one table: static descriptors, the design's static per-slot storage
// for each, and which are open (set, with release order, once the cache is usable).
template <class D, unsigned N>
struct class_set {
    typename D::cache_type caches[N];
    std::atomic<bool> open[N];
    typename D::slot_storage slots[N];
};
// A design's two sets.
template <class D>
struct design_classes {
    class_set<D, kNrClasses> kernel;
    class_set<D, kNrMallocClasses> malloc;
};
// Every design's sets, one static object (zero until classes are opened: the per-slot storage
// costs no memory until slots use it).
struct all_classes {
#define SLABKIT_DESIGN_SET(name) design_classes<name::ops> name;
    SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_SET)
#undef SLABKIT_DESIGN_SET
};
extern SLABKIT_HIDDEN all_classes g_classes;
// The sets of design D.
template <class D>
design_classes<D> &classes_of();
#define SLABKIT_DESIGN_SET_OF(name)                                                                \
    template <>                                                                                    \
    SLABKIT_ALWAYS_INLINE design_classes<name::ops> &classes_of<name::ops>() {                     \
        return g_classes.name;                                                                     \
    }
SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_SET_OF)
#undef SLABKIT_DESIGN_SET_OF

// The shortcut entry (slot/slot.hpp) of class i of table T, for the design that has shortcuts:
// the malloc table's 1 to 64, the kernel's 65 to 77.
template <class_table T>
SLABKIT_ALWAYS_INLINE constexpr size_t shortcut_entry(size_t i) {
    return T == class_table::malloc ? 1 + i : 1 + kNrMallocClasses + i;
}
static_assert(shortcut_entry<class_table::kernel>(kNrClasses - 1) < kNrShortcuts);

// Design D's set of table T.
template <class_table T, class D>
SLABKIT_ALWAYS_INLINE auto &set_of() {
    if constexpr (T == class_table::kernel)
        return classes_of<D>().kernel;
    else
        return classes_of<D>().malloc;
}

// Everything the inline paths below do not serve: size 0, sizes above the caches, an explicit
// node, a class not opened yet; and frees the fast check did not accept.
void *alloc_slow(design d, class_table t, size_t size, bool zero, int node);
// `caller` names the entry point in a bad-free report ("kfree", "free", ...).
void free_slow(void *p, const char *caller);
} // namespace detail

// The kernel table's class index serving `size` (1..kMaxCacheSize).
SLABKIT_ALWAYS_INLINE constexpr unsigned class_of(size_t size) {
    if (size <= 192) return detail::kSmallIndex[(size - 1) / 8];
    // 193..8192: powers of two from 256 (index 7).
    return floor_log2(size - 1);
}
// The malloc table's class index serving `size` (1..kMaxCacheSize) now: a hot class once one
// serves its step.
SLABKIT_ALWAYS_INLINE unsigned malloc_class_of(size_t size) {
    return __atomic_load_n(&detail::g_malloc_class[(size - 1) >> kMallocStepShift],
                           __ATOMIC_RELAXED);
}
// The malloc table's class of `size` without hot classes: 16 to 128 in steps of 16, then four
// per doubling.
SLABKIT_ALWAYS_INLINE constexpr unsigned malloc_fixed_class_of(size_t size) {
    return detail::malloc_class_by_formula(size);
}
template <class_table T>
SLABKIT_ALWAYS_INLINE unsigned index_of(size_t size) {
    if constexpr (T == class_table::kernel)
        return class_of(size);
    else
        return malloc_class_of(size);
}
// The bytes of class i of a table.
size_t class_size(unsigned i, class_table t = class_table::kernel);
unsigned nr_classes(class_table t);

// The design's cache of class i of a table (opened on first call); nullptr if it could not be.
cache *cache_for(design d, unsigned i, class_table t = class_table::kernel);

template <class_table T = class_table::kernel>
SLABKIT_ALWAYS_INLINE void *alloc(design d, size_t size, bool zero, int node) {
    // size - 1 wraps for 0, so one compare sends 0 and large sizes to the slow path.
    if (SLABKIT_LIKELY(size - 1 < kMaxCacheSize && node == kAnyNode)) {
        const size_t i = index_of<T>(size);
        void *p;
        bool open = designs::visit(d, [&](auto ops) SLABKIT_LAMBDA_INLINE {
            // The thread's shortcut to its structure of the class (alloc_fast_or); an empty one
            // goes on below, to the design's alloc and its slow path. A zeroing allocation
            // (calloc, kzalloc) zeroes here: the design's alloc sends every one to its slow path.
            if constexpr (shortcut_v<decltype(ops)>) {
                if (void *e = slots::shortcut(detail::shortcut_entry<T>(i));
                    SLABKIT_LIKELY(e != nullptr)) {
                    if ((p = ops.template pop_shortcut<false>(e)) != nullptr) {
                        auto &c = detail::set_of<T, decltype(ops)>().caches[i];
                        if (zero)
                            memset(p, 0, c.object_size);
                        else
                            free_key::fresh(&c, p);
                        return true;
                    }
                }
            }
            // A design with its own kmalloc (SLOB) is served on the slow path.
            if constexpr (own_kmalloc_v<decltype(ops)>) return false;
            auto &set = detail::set_of<T, decltype(ops)>();
            if (SLABKIT_UNLIKELY(!set.open[i].load(std::memory_order_acquire))) return false;
            // A class with anything to do at allocation - init on alloc (core/hardening.hpp),
            // SLABKIT_FREE_KEY=2's check (core/free_key.hpp), fault injection (core/
            // failslab.hpp) - goes to the slow path, which does each: one test of its init
            // byte here, and no call (a call made the callers save registers).
            constexpr unsigned kSlowInit =
                hardening::kInitOnAlloc | free_key::kCheckOnAlloc | failslab::kInitBit;
            if (SLABKIT_UNLIKELY(init_bits(&set.caches[i]) & kSlowInit)) return false;
            p = ops.alloc(&set.caches[i], zero);
            if (!zero) free_key::fresh(&set.caches[i], p);
            return true;
        });
        if (SLABKIT_LIKELY(open)) return p;
    }
    return detail::alloc_slow(d, T, size, zero, node);
}

namespace detail {
// Class i's object from the CPU's slot for a thread without a slot of its own, else
// fallback(size), for a design without alloc_cpu_or (core/design.hpp). Out of line:
// alloc_fast_or's tail call.
template <class_table T>
SLABKIT_NOINLINE void *alloc_on_cpu_or(design d, unsigned i, size_t size,
                                       void *(*fallback)(size_t)) {
    void *p = designs::visit(d, [&](auto ops) -> void * {
        auto &set = detail::set_of<T, decltype(ops)>();
        return free_key::fresh(&set.caches[i], ops.alloc_cpu(&set.caches[i], &set.slots[i]),
                               init_bits(&set.caches[i]));
    });
    return p ? p : fallback(size);
}
} // namespace detail

// The fast path for a caller with a slow path of its own, fallback(size) (the malloc family):
// the slot's object, or a tail call - to the CPU's slot for a thread on the CPUs' slots, to
// fallback otherwise - so that the caller makes no call of its own and needs no stack frame
// (a call back from the CPU's path to fallback made the caller keep `size` in a saved register).
//
// A thread that owns a slot finds its structure of a malloc class in its shortcut entry
// (slot/slot.hpp, core/design.hpp), one thread-local load, where the rest reads the class's
// gate and its per-slot array: the entry is only ever set for a plain class of the design
// that has shortcuts (open_class), so one compare of the process's design replaces the switch.
template <class_table T>
SLABKIT_ALWAYS_INLINE void *alloc_fast_or(design d, size_t size, void *(*fallback)(size_t)) {
    // The malloc table's classes are keyed whenever their gate is open (free_key::fresh).
    static_assert(T == class_table::malloc);
    if (SLABKIT_LIKELY(size - 1 < kMaxCacheSize)) {
        // size_t: the class byte is zero-extended once, and its entry's +1 is a displacement.
        const size_t i = index_of<T>(size);
        if constexpr (!std::is_void_v<designs::shortcut_design>) {
            // Only that design's processes look: the other designs' malloc pairs took 10 more
            // instructions when every process loaded the entry first (callgrind, SLUB's pair
            // at 64 B: 102 to 112 with the free's load below, 103 without).
            if (void *e = d == designs::shortcut_design::kind
                              ? slots::shortcut(detail::shortcut_entry<T>(i))
                              : nullptr;
                SLABKIT_LIKELY(e != nullptr)) {
                if (void *p = designs::shortcut_design::pop_shortcut(e); SLABKIT_LIKELY(p))
                    return free_key::fresh(p);
                return fallback(size);
            }
        }
        return designs::visit(d, [&](auto ops) SLABKIT_LAMBDA_INLINE -> void * {
            using D = decltype(ops);
            auto &set = detail::set_of<T, D>();
            if (SLABKIT_UNLIKELY(gate_word(&set.caches[i]) != gate_open_word(D::kind)))
                return fallback(size);
            return ops.alloc_fast(
                &set.caches[i], &set.slots[i],
                [&]() SLABKIT_LAMBDA_INLINE {
                    // (The fallback's block is fresh already; its second clearing is cheap
                    // beside the CPU's section. NULL when the fallback found no memory.)
                    if constexpr (requires {
                                      D::alloc_cpu_or(&set.caches[i], &set.slots[i], size,
                                                      fallback);
                                  }) {
                        void *p = D::alloc_cpu_or(&set.caches[i], &set.slots[i], size, fallback);
                        return SLABKIT_LIKELY(p != nullptr) ? free_key::fresh(p) : p;
                    } else
                        return detail::alloc_on_cpu_or<T>(d, i, size, fallback);
                },
                [&]() SLABKIT_LAMBDA_INLINE { return fallback(size); },
                [](void *p) SLABKIT_LAMBDA_INLINE { return free_key::fresh(p); });
        });
    }
    return fallback(size);
}

// A block of `size` (>= 1) bytes aligned to `align` (a power of two): the smallest kernel class
// whose natural alignment is enough, else a page block of the right order (for the malloc
// table, one up to kMallocRegionFrom), else a block of the region.
// The kernel class an allocation of `size` aligned to `align` gets (alloc_aligned), or 0 when
// it is not served by a class.
size_t aligned_class_size(size_t size, size_t align);
void *alloc_aligned(design d, size_t size, size_t align, bool zero,
                    class_table t = class_table::kernel);

SLABKIT_ALWAYS_INLINE void free(void *p, const char *caller = "kfree") {
    cache *owner;
    page *pg = slab_page_check<true>(nullptr, p, &owner);
    if (SLABKIT_UNLIKELY(!pg)) return detail::free_slow(p, caller);
    // The block's design is its slab's cache's: objects of several designs may meet here. A
    // plain cache (its gate open) goes straight to its design's push.
    return designs::visit_gated(
        owner,
        [&](auto ops, auto *s) SLABKIT_LAMBDA_INLINE {
            // A kmalloc class's block, freed by a thread that owns a slot with a structure for
            // it: the push on the thread's shortcut entry (alloc_fast_or). Every other cache's
            // entry number is 0, whose entry is always null. After the gate, not before: the
            // other designs' frees paid 0.5 ns for the entry's load and test (SLUB's and SLAB's
            // malloc pairs, 4.3-4.6 to 4.8-5.1 ns).
            // Every double free of a keyed class's block (core/free_key.hpp).
            if (SLABKIT_UNLIKELY(!free_key::mark(s, p, caller))) return;
            if constexpr (shortcut_v<decltype(ops)>) {
                if (void *e = slots::shortcut(s->shortcut); SLABKIT_LIKELY(e != nullptr))
                    return ops.push_shortcut(s, e, p);
            }
            ops.free_gated(s, pg, p);
        },
        [&]() SLABKIT_LAMBDA_INLINE {
            // Init on free (core/hardening.hpp): the slow path zeroes (a call here would cost
            // the fast path a stack frame).
            if (SLABKIT_UNLIKELY(init_bits(owner) & hardening::kInitOnFree))
                return detail::free_slow(p, caller);
            return designs::visit(owner, [&](auto ops, auto *s) SLABKIT_LAMBDA_INLINE {
                if constexpr (own_kmalloc_v<decltype(ops)>) {
                    // A design with its own kmalloc (SLOB's size headers) checks its blocks
                    // itself and reports one it does not know, naming the caller.
                    return ops.kfree(s, pg, p, caller);
                } else {
                    // A keyed class whose gate is closed (more than one node) checks its key
                    // as above; a debugged class has none.
                    if (SLABKIT_UNLIKELY(!free_key::mark(s, p, caller))) return;
                    ops.free_to_slab(s, pg, p);
                }
            });
        });
}

// The bytes usable at p: its class's size, page block or OS block size; 0 for NULL, the
// zero-size pointer, and anything kmalloc did not hand out.
size_t usable_size(const void *p);
// While debugging: the caller of p's allocation (or of its resize in place) asked for `size`
// bytes. A debug cache's object then red-zones the rest of its class (debug::set_request), and
// its usable size is `size`. The malloc family calls it on its slow paths, where every block is
// served while debugging; nothing for other blocks.
void note_request(void *p, size_t size);
// While debugging: p was made by operator new (or new[]), so that the other form of delete is
// reported (debug::set_origin). Nothing for blocks of caches without red zones.
void note_origin(void *p, bool array);
// While debugging: when p is a freed block that waits in the quarantine (a debug cache's object,
// or SLOB's debugged block), reports a use after free by `op` (malloc_usable_size, realloc,
// krealloc: calls that read its size) and returns true; false for anything else.
bool report_if_freed(const void *p, const char *op);
// True for a design that serves kmalloc itself (SLOB: size-headed blocks, not size classes).
bool has_own_kmalloc(design d);

// True when SLABKIT_DEBUG (read at the first call) asks for debugging: blocks above the caches'
// sizes are then guarded OS blocks, and sized frees are checked (override/malloc.hpp).
namespace detail {
extern SLABKIT_HIDDEN std::atomic<int> g_debugging; // -1 until decided
}
bool debugging();
// debugging() once decided (false before): one load, for the sized frees' fast path.
SLABKIT_ALWAYS_INLINE bool debugging_decided() {
    return detail::g_debugging.load(std::memory_order_relaxed) > 0;
}
// Resizes in place when the block can hold `size` (shrinking included, as the kernel's krealloc);
// otherwise allocates (kernel table), copies and frees. nullptr (p untouched) on failure.
void *realloc(design d, void *p, size_t size, bool zero);

} // namespace slabkit::kmalloc
