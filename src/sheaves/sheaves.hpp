// sheaves.hpp - the kernel's per-CPU sheaves (Vlastimil Babka, 2025: opt-in in Linux 6.18, every
// cache in 2026 mainline), for slots instead of CPUs, over SLUB's slab layer with no per-CPU
// slabs (src/slub, `meta` mode).
//
// Structures:
//   sheaf         an array of object pointers with its size and capacity (struct slab_sheaf).
//                 A full sheaf holds `capacity` free objects, an empty one none; a slot's main
//                 sheaf anything between. 32 bytes of header, as the kernel's, so that the
//                 capacities come out as the kernel's: calculate_sheaf_capacity below.
//   sheaves_cpu   per slot and cache, made on the slot's first use (slub_percpu_sheaves): `main`
//                 (never null: a cache with capacity 0 points it at the static empty bootstrap
//                 sheaf, whose capacity 0 sends both fast paths to their slow paths) and `spare`
//                 (empty, full, or null).
//   node_barn     per node and cache: lists of full and of empty sheaves, each at most
//                 kMaxFullSheaves / kMaxEmptySheaves long where the kernel checks it, under
//                 `lock`.
//   slabs         SLUB's, unchanged: a {freelist, counters} pair per slab changed by one
//                 double-word compare-and-swap, node partial lists under list_lock; no slab is
//                 ever frozen (there are no per-slot slabs).
//
// Paths (the kernel's alloc_from_pcs, free_to_pcs and their slow paths, in its order):
//   alloc  pop main's top entry. Empty main: the spare if it has objects (swap); else the barn
//          trades main for a full sheaf (BARN_GET); else the spare or an empty sheaf from the
//          barn (or a new one) is refilled from slabs with the internal bulk allocation
//          (SHEAF_REFILL: node partial slabs' whole freelists, then new slabs) and installed.
//          A node asked for that is not the slot's bypasses the sheaves (ALLOC_NODE_MISMATCH).
//   free   push on main when the object's slab is on the slot's node; another node's object
//          goes straight to its slab (SLUB's compare-and-swap path, FREE_SLOWPATH). Full main:
//          with no spare, an empty sheaf from the barn (or a new one) becomes main and main
//          the spare; a spare with room is swapped in; else the barn trades full main for an
//          empty sheaf (BARN_PUT), refused when it already holds kMaxFullSheaves full ones - then
//          the full spare is flushed to slabs and becomes the empty main (BARN_PUT_FAIL); with
//          no empty sheaf anywhere and none to be had, main is flushed in place, 32 pointers at
//          a time (SHEAF_FLUSH).
//   flush  a sheaf's objects go back to their slabs grouped by slab (build_detached_freelist:
//          a slab's objects among the next few become one detached list), one compare-and-swap
//          per group (slub::slab_free_list).
//
// Where objects can be (each in exactly one): a user, a sheaf (a slot's main or spare, a barn's,
// or a prefilled sheaf a user holds), its slab's freelist. A slab's inuse counts the objects
// not on its own freelist, so objects in sheaves count as in use, as the kernel's do.
//
// Lock order: slot registry -> cache registry -> a barn's lock -> a node's list_lock. A slot's
// sheaves have one user at a time (the slot's holder), as the kernel's local lock gives; its
// slow paths run inside a slots::hold and take the barn and list locks one at a time.
#pragma once

#include "core/cache.hpp"
#include "core/counter.hpp"
#include "core/design.hpp"
#include "core/report.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"
#include "platform/rseq.hpp"
#include "slot/slot.hpp"
#include "slub/slub.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit::sheaves {

// Statistics, as the 2026 kernel's CONFIG_SLUB_STATS names them, counted by the slot doing the
// work (threads without a slot count in the cache's shared counters). FREE_RCU_SHEAF and
// FREE_RCU_SHEAF_FAIL (slabkit has no kfree_rcu) and ORDER_FALLBACK (every slab has the cache's
// order) have no counterpart. The slab-layer events (ALLOC_SLOWPATH to CMPXCHG_DOUBLE_FAIL) are
// counted by SLUB's slab layer and read from there.
enum stat_item : unsigned {
    ALLOC_FASTPATH,         // from the slot's main sheaf
    ALLOC_SLOWPATH,         // an object straight from slabs (no sheaf could serve)
    FREE_FASTPATH,          // to the slot's main sheaf
    FREE_SLOWPATH,          // straight to its slab (another node's, or no sheaf could take it)
    FREE_ADD_PARTIAL,       // a free put a full slab on its node's partial list
    FREE_REMOVE_PARTIAL,    // a free emptied a node partial slab, which was freed
    ALLOC_SLAB,             // a new slab from the page allocator
    ALLOC_NODE_MISMATCH,    // a node was asked for that is not the slot's: sheaves bypassed
    FREE_SLAB,              // a slab went back to the page allocator
    CMPXCHG_DOUBLE_FAIL,    // a slab {freelist, counters} compare-and-swap was retried
    SHEAF_FLUSH,            // objects flushed from a sheaf to their slabs
    SHEAF_REFILL,           // objects refilled into a sheaf from slabs
    SHEAF_ALLOC,            // an empty sheaf was allocated
    SHEAF_FREE,             // an empty sheaf was freed
    BARN_GET,               // a full sheaf from the barn
    BARN_GET_FAIL,          // the barn had no full sheaf
    BARN_PUT,               // a full sheaf to the barn
    BARN_PUT_FAIL,          // the barn took no full sheaf (at its limit, or no empty to trade)
    SHEAF_PREFILL_FAST,     // a prefill took the slot's spare sheaf
    SHEAF_PREFILL_SLOW,     // a prefill found no spare sheaf
    SHEAF_PREFILL_OVERSIZE, // a prefill larger than the capacity: a one-off sheaf
    SHEAF_RETURN_FAST,      // a returned sheaf became the slot's spare
    SHEAF_RETURN_SLOW,      // a returned sheaf went to the barn, or was flushed and freed
    NR_STATS
};
extern const char *const kStatNames[NR_STATS];

struct sheaves_cache;

// A word its owner (the slot's holder) reads and writes and statistics read from other threads:
// relaxed atomic loads and stores, plain moves on x86, used with the syntax of a plain value.
template <class T>
struct owned_word {
    std::atomic<T> v;
    constexpr owned_word(T x = T{}) noexcept : v(x) {}
    owned_word(const owned_word &) = delete;
    owned_word &operator=(const owned_word &o) noexcept { return *this = static_cast<T>(o); }
    operator T() const noexcept { return v.load(std::memory_order_relaxed); }
    owned_word &operator=(T x) noexcept {
        v.store(x, std::memory_order_relaxed);
        return *this;
    }
    T operator->() const noexcept { return *this; }
    // One writer: read, then store.
    T operator++(int) noexcept {
        T old = *this;
        *this = static_cast<T>(old + 1);
        return old;
    }
    T operator++() noexcept {
        T now = static_cast<T>(*this + 1);
        *this = now;
        return now;
    }
    T operator--() noexcept {
        T now = static_cast<T>(*this - 1);
        *this = now;
        return now;
    }
    owned_word &operator+=(T d) noexcept { return *this = static_cast<T>(*this + d); }
};

// A sheaf: `size` objects in objects()[0 .. size), room for `capacity`. The first two words
// are what the fast paths and the rseq sections read (platform/rseq.hpp, rseq_pop_sheaf).
struct sheaf {
    owned_word<uint32_t> size{0};
    uint32_t capacity = 0;
    sheaf *next = nullptr;    // a barn's list
    cache *owner = nullptr;   // the cache it serves; null for the bootstrap sheaf
    uint32_t flags = 0;       // kOversize
    uint32_t block_order = 0; // where its memory came from (alloc_sheaf)
    void **objects() { return reinterpret_cast<void **>(this + 1); }
};
static_assert(sizeof(sheaf) == 32, "a sheaf's header is the kernel's 32 bytes");
static_assert(offsetof(sheaf, size) == 0 && offsetof(sheaf, capacity) == 4,
              "the rseq sections read a sheaf's size and capacity there");
inline constexpr uint32_t kOversize = 1; // a prefilled sheaf beyond the cache's capacity
inline constexpr int kEntriesDisp = static_cast<int>(sizeof(sheaf));

// The static empty sheaf every slot of a cache with capacity 0 has as its main.
extern sheaf g_bootstrap_sheaf;

inline constexpr uint32_t kMaxFullSheaves = 10;  // MAX_FULL_SHEAVES
inline constexpr uint32_t kMaxEmptySheaves = 10; // MAX_EMPTY_SHEAVES
inline constexpr unsigned kBatchMax = 32;        // PCS_BATCH_MAX: pointers flushed at a time

struct alignas(kCacheLine) sheaves_cpu {
    owned_word<sheaf *> main{&g_bootstrap_sheaf}; // never null
    owned_word<sheaf *> spare{nullptr};           // empty, full, or null
    counter stats[NR_STATS];
    unsigned node = 0;        // the slot's node
    uint64_t shrink_seen = 0; // last cache shrink generation this slot honoured
    // Objects the slow paths put into (refills, barn trades, returned sheaves) or took out of
    // (flushes, barn trades, prefills) the slot's two sheaves, so that the objects they hold
    // are this + FREE_FASTPATH - ALLOC_FASTPATH: statistics never read a live slot's sheaves,
    // which its owner may free meanwhile. Owner-written.
    std::atomic<int64_t> slow_delta{0};
};

// Where the fast paths' words are in a slot's structure, for the rseq sections.
inline constexpr int kMainDisp = static_cast<int>(offsetof(sheaves_cpu, main));
inline constexpr int kAllocFastpathDisp =
    static_cast<int>(offsetof(sheaves_cpu, stats) + ALLOC_FASTPATH * sizeof(counter));
inline constexpr int kFreeFastpathDisp =
    static_cast<int>(offsetof(sheaves_cpu, stats) + FREE_FASTPATH * sizeof(counter));

struct alignas(kCacheLine) node_barn {
    platform::mutex lock;
    sheaf *full = nullptr;  // LIFO through sheaf::next
    sheaf *empty = nullptr; // LIFO through sheaf::next
    std::atomic<uint32_t> nr_full{0};
    std::atomic<uint32_t> nr_empty{0};
    bool touched = false; // a sheaf came or went since the trimmer's last pass (under lock)
};

struct sheaves_cache : slub::slub_cache {
    // kMaxSlots + 1 pointers (the last, for slots::index()'s "no slot", always null), each made
    // on its slot's first use. The slab layer's own per-slot array (cpu_slab) is all null.
    std::atomic<sheaves_cpu *> *cpu_sheaves = nullptr;
    node_barn *barn[platform::kMaxNodes] = {};
    uint32_t sheaf_capacity = 0; // 0: no sheaves (debug and bootstrap caches)
    // Work done by threads without a slot, and the counts of freed slot structures.
    counter pcs_stats[NR_STATS];
};

// ---- the design interface (core/design.hpp; `ops` below) ------------------------------------

using slot_storage = std::array<std::atomic<sheaves_cpu *>, kMaxSlots + 1>;

// The kernel's calculate_sheaf_capacity: 4 objects per sheaf for objects of a page or more, 12
// from 1 KiB, 26 from 256 bytes, else 60 (half the old cpu_partial objects: there are two
// sheaves), raised so that the sheaf fills its kmalloc size exactly (60 -> 60 in 512 bytes,
// 26 -> 28 in 256, 12 -> 12 in 128, 4 -> 4 in 64), and at least `requested`. 0 for debug
// caches.
uint32_t calculate_sheaf_capacity(size_t size, uint32_t requested, bool debug);
// The kernel's kmalloc size for a block of `bytes` (kmalloc_size_roundup: 8, 16, 32, 64, 96,
// 128, 192, 256, then powers of two).
size_t kmalloc_size_roundup(size_t bytes);

void bootstrap();
sheaves_cache *create(const cache_args &args, const char **why);
bool open_static(sheaves_cache *s, slot_storage *slots, const cache_args &args, const char **why);
void destroy(sheaves_cache *s);
// Flushes `slot`'s main and spare sheaves to slabs (the spare's structure freed); with
// `release`, frees the main sheaf and the slot's structure too (an idle slot, under the cache
// registry lock).
void flush_slot(sheaves_cache *s, unsigned slot, bool release);
// Shrink's share beyond the idle slots: the caller's sheaves, every barn's sheaves (flushed and
// freed: barn_shrink), the node lists' empty slabs; bumps the shrink generation so that other
// live slots flush at their next slow path. Returns the slabs the cache still holds.
size_t reclaim(sheaves_cache *s);
// The trimmer's pass: a barn no sheaf came to or left since the last pass gives back its sheaves
// (full ones flushed to slabs), so that an idle process's memory goes back to the OS; barns in
// use keep theirs. (The kernel keeps barns until a shrink.)
void trim(sheaves_cache *s);
// "order", "min_partial".
bool tune(sheaves_cache *s, const char *name, unsigned long value, const char **why);
bool set_order(sheaves_cache *s, unsigned order, const char **why);
void fork_boot(fork_op op);
void fork_cache(sheaves_cache *s, fork_op op);
void statistics(sheaves_cache *s, design_stats *out);
// Checks the cache's invariants (quiescent cache): SLUB's checks of the slab layer, then every
// sheaf (slots' main and spare, barns' lists): its size within its capacity, its objects
// object starts of this cache's slabs that are not on their slab's freelist, no object in two
// places, the barn's counts its lists' lengths, no slab frozen.
unsigned validate(sheaves_cache *s, char *report, size_t size);

// ---- prefilled sheaves (kmem_cache_prefill_sheaf and its family) -----------------------------
//
// A sheaf of at least `size` objects the caller may then take one at a time with no chance of
// failure: the slot's spare (SHEAF_PREFILL_FAST), else one from the barn (full, or empty) or a
// new one, refilled to capacity; beyond the capacity a one-off "oversize" sheaf of exactly
// `size`. nullptr when memory is short (or size is 0).
sheaf *prefill_sheaf(sheaves_cache *s, unsigned size);
// Gives a prefilled sheaf back: it becomes the slot's spare if it has none (SHEAF_RETURN_FAST);
// else it is refilled and goes to the barn if the barn has room for a full sheaf; else (and
// always for an oversize one) its objects go back to slabs and the sheaf is freed.
void return_sheaf(sheaves_cache *s, sheaf *sh);
// Tops *sheafp up to at least `size` objects (to its capacity); one that must grow beyond its
// capacity is replaced by a new one (the old returned). False when memory is short: *sheafp is
// left as it was.
bool refill_sheaf(sheaves_cache *s, sheaf **sheafp, unsigned size);
// One object from a prefilled sheaf (zeroed when `zero`); nullptr once it is empty.
void *alloc_from_sheaf(sheaves_cache *s, sheaf *sh, bool zero);

// A one-off sheaf for `capacity` objects for any cache (the prefilled-sheaf API of the designs
// without sheaves uses them: every prefilled sheaf of theirs is an oversize one); nullptr when
// memory is short. free_sheaf_block frees one made by either.
sheaf *alloc_sheaf_block(uint32_t capacity);
void free_sheaf_block(sheaf *sh);

// Slow paths (out of line). alloc_slow: slot kNoSlot means "the caller's, taking one if the
// thread has none yet"; node kAnyNode or a node to allocate from.
void *alloc_slow(sheaves_cache *s, unsigned slot, int node, bool zero);
// An object main could not take (full, missing, another node's).
void free_slow(sheaves_cache *s, page *pg, void *obj);
SLABKIT_NOINLINE void free_checked(sheaves_cache *s, void *obj);

// ---- fast paths ----------------------------------------------------------------------------
//
// A pop or a push on the slot's main sheaf: loads of the slot's structure, its main sheaf and
// that sheaf's size, one store of the size, no lock and no atomic read-modify-write (the
// kernel's local_trylock is preemption off; a slot has one user). Anything else leaves through
// a tail call.

// A thread without a slot of its own, when the CPUs have slots, pops the main sheaf of the CPU
// it runs on in an rseq critical section (nullptr: empty, or the section failed, or the CPU has
// no structure yet: the slow path holds the CPU's slot and does the rest). Out of line, in one
// object file each (sheaves_alloc.cpp, sheaves_free.cpp): a critical section's descriptor
// cannot point into an inline function's copy that the linker may discard.
void *alloc_from_cpu_sheaf(const std::atomic<sheaves_cpu *> *cpu_sheaves);
// The same, then alloc_slow when it gives up: the whole allocation, in one tail call.
void *alloc_on_cpu(sheaves_cache *s, bool zero);
// The same push on the CPU's main sheaf, then free_slow when it is full, the section failed, or
// the object belongs to another node.
void free_to_cpu_sheaf(sheaves_cache *s, page *pg, void *obj);

// One object from the slot's main sheaf, or nullptr (empty, or no structure for this cache
// yet). `cpu_sheaves` is s->cpu_sheaves, or the static array a static cache was opened with
// (kmalloc's classes). on_cpu() serves a thread without a slot of its own while the CPUs have
// slots, on_empty() the rest (core/design.hpp, alloc_fast).
template <class OnCpu, class OnEmpty, class OnPop>
SLABKIT_ALWAYS_INLINE void *alloc_from_pcs(const std::atomic<sheaves_cpu *> *cpu_sheaves,
                                           OnCpu &&on_cpu, OnEmpty &&on_empty, OnPop &&on_pop) {
    sheaves_cpu *pcs = cpu_sheaves[slots::index()].load(std::memory_order_relaxed);
    if (SLABKIT_UNLIKELY(pcs == nullptr)) return slots::on_cpu_slot() ? on_cpu() : on_empty();
    sheaf *main = pcs->main;
    uint32_t n = main->size;
    if (SLABKIT_UNLIKELY(n == 0)) return on_empty();
    // The top is the object freed last: the hot end.
    main->size = n - 1;
    pcs->stats[ALLOC_FASTPATH].add();
    return on_pop(main->objects()[n - 1]);
}
SLABKIT_ALWAYS_INLINE void *alloc_from_pcs(const std::atomic<sheaves_cpu *> *cpu_sheaves) {
    return alloc_from_pcs(
        cpu_sheaves, [&]() SLABKIT_LAMBDA_INLINE { return alloc_from_cpu_sheaf(cpu_sheaves); },
        []() SLABKIT_LAMBDA_INLINE -> void * { return nullptr; },
        [](void *obj) SLABKIT_LAMBDA_INLINE { return obj; });
}

// Allocates one object (zeroed when `zero`: the slow path pops and clears it).
SLABKIT_ALWAYS_INLINE void *alloc(sheaves_cache *s, bool zero = false) {
    if (SLABKIT_LIKELY(!zero)) {
        sheaves_cpu *pcs = s->cpu_sheaves[slots::index()].load(std::memory_order_relaxed);
        if (SLABKIT_LIKELY(pcs != nullptr)) {
            sheaf *main = pcs->main;
            uint32_t n = main->size;
            if (SLABKIT_LIKELY(n != 0)) {
                main->size = n - 1;
                pcs->stats[ALLOC_FASTPATH].add();
                return main->objects()[n - 1];
            }
        } else if (slots::on_cpu_slot()) {
            return alloc_on_cpu(s, zero);
        }
    }
    return alloc_slow(s, kNoSlot, kAnyNode, zero);
}

SLABKIT_ALWAYS_INLINE void *alloc_node(sheaves_cache *s, int node, bool zero) {
    if (node == kAnyNode) return alloc(s, zero);
    return alloc_slow(s, kNoSlot, node, zero);
}

// Frees obj, whose slab page pg the caller found to be one of s's (object start checked).
// kNodeTest false: the caller knows the cache has one node (its gate is open, core/cache.hpp).
// main's own capacity is compared (the kernel compares the cache's sheaf_capacity: the same
// number, since a main sheaf always has the cache's capacity, and the bootstrap sheaf's 0 sends
// a cache without sheaves to the slow path without a load of the descriptor).
template <bool kNodeTest = true>
SLABKIT_ALWAYS_INLINE void free_to_slab(sheaves_cache *s, page *pg, void *obj) {
    sheaves_cpu *pcs = s->cpu_sheaves[slots::index()].load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(pcs != nullptr)) {
        if (SLABKIT_LIKELY(!kNodeTest || !s->numa || page_to_nid(pg) == pcs->node)) {
            sheaf *main = pcs->main;
            uint32_t n = main->size;
            if (SLABKIT_LIKELY(n < main->capacity)) {
                // Hardening: main's top entry freed again would be handed out twice.
                if (kSlabArrayCheck && SLABKIT_UNLIKELY(n && main->objects()[n - 1] == obj))
                    return report_double_free(s, obj);
                main->objects()[n] = obj;
                main->size = n + 1;
                pcs->stats[FREE_FASTPATH].add();
                return;
            }
        }
    } else if (slots::on_cpu_slot()) {
        return free_to_cpu_sheaf(s, pg, obj);
    }
    return free_slow(s, pg, obj);
}

SLABKIT_ALWAYS_INLINE void free(sheaves_cache *s, void *obj) {
    page *pg = slab_page_check<false>(s, obj);
    if (SLABKIT_UNLIKELY(!pg)) return free_checked(s, obj);
    return free_to_slab(s, pg, obj);
}

// The design interface (core/design.hpp), checked in designs/designs.hpp.
struct ops {
    using cache_type = sheaves_cache;
    using slot_storage = sheaves::slot_storage;
    static constexpr design kind = design::sheaves;
    static void bootstrap() { sheaves::bootstrap(); }
    static sheaves_cache *create(const cache_args &a, const char **why) {
        return sheaves::create(a, why);
    }
    static bool open_static(sheaves_cache *s, slot_storage *slots, const cache_args &a,
                            const char **why) {
        return sheaves::open_static(s, slots, a, why);
    }
    static void destroy(sheaves_cache *s) { sheaves::destroy(s); }
    static void flush_slot(sheaves_cache *s, unsigned slot, bool release) {
        sheaves::flush_slot(s, slot, release);
    }
    static size_t reclaim(sheaves_cache *s) { return sheaves::reclaim(s); }
    static void trim(sheaves_cache *s) { sheaves::trim(s); }
    static bool tune(sheaves_cache *s, const char *name, unsigned long value, const char **why) {
        return sheaves::tune(s, name, value, why);
    }
    static bool set_order(sheaves_cache *s, unsigned order, const char **why) {
        return sheaves::set_order(s, order, why);
    }
    static void statistics(sheaves_cache *s, design_stats *out) { sheaves::statistics(s, out); }
    static unsigned validate(sheaves_cache *s, char *buf, size_t size) {
        return sheaves::validate(s, buf, size);
    }
    static void fork_boot(fork_op op) { sheaves::fork_boot(op); }
    static void fork_cache(sheaves_cache *s, fork_op op) { sheaves::fork_cache(s, op); }
    SLABKIT_ALWAYS_INLINE static void *alloc(sheaves_cache *s, bool zero) {
        return sheaves::alloc(s, zero);
    }
    SLABKIT_ALWAYS_INLINE static void *alloc_fast(sheaves_cache *, const slot_storage *slots) {
        return sheaves::alloc_from_pcs(slots->data());
    }
    template <class OnCpu, class OnEmpty, class OnPop>
    SLABKIT_ALWAYS_INLINE static void *alloc_fast(sheaves_cache *, const slot_storage *slots,
                                                  OnCpu &&on_cpu, OnEmpty &&on_empty,
                                                  OnPop &&on_pop) {
        return sheaves::alloc_from_pcs(slots->data(), on_cpu, on_empty, on_pop);
    }
    static void *alloc_cpu(sheaves_cache *, const slot_storage *slots) {
        return sheaves::alloc_from_cpu_sheaf(slots->data());
    }
    SLABKIT_ALWAYS_INLINE static void *alloc_node(sheaves_cache *s, int node, bool zero) {
        return sheaves::alloc_node(s, node, zero);
    }
    SLABKIT_ALWAYS_INLINE static void free(sheaves_cache *s, void *obj) { sheaves::free(s, obj); }
    SLABKIT_ALWAYS_INLINE static void free_to_slab(sheaves_cache *s, page *pg, void *obj) {
        sheaves::free_to_slab(s, pg, obj);
    }
    // The gated free (core/design.hpp): free_to_slab without the node test.
    SLABKIT_ALWAYS_INLINE static void free_gated(sheaves_cache *s, page *pg, void *obj) {
        sheaves::free_to_slab<false>(s, pg, obj);
    }
};

} // namespace slabkit::sheaves
