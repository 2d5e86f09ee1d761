// slqb.hpp - SLQB, the queued slab allocator (Nick Piggin, 2008-09), for slots instead of CPUs.
//
// Structures (one slqb_cache per cache):
//   slqb_list   a source of objects: a LIFO queue of free objects linked through their free
//               pointers (`freelist`), the slabs this list owns (`partial` with free objects,
//               `full` without; under `page_lock`, since other slots return objects to them),
//               and an inbox (`remote_free`, under its own lock) that other slots flush objects
//               of this list's slabs into, with a flag saying the inbox passed `freebatch`
//               (kept as several chains, inbox_chains).
//   slqb_cpu    one per slot and cache, made on the slot's first use of the cache: its list (the
//               slabs it owns are all on its node), the colour of its next slab, and one outbox
//               (`rlist`) aimed at one foreign list at a time - one, not one per target, so
//               memory stays linear in slots.
//   slqb_node   one per NUMA node and cache: a list under `list_lock`, serving allocations for
//               a node other than the caller's, and owning slabs that landed off-node.
//
// Paths:
//   alloc  pop the slot's queue (no lock, no atomic); empty: claim the inbox if flagged, else
//          one object from the first partial slab (page_lock), else a new slab.
//   free   push on the *freeing* slot's queue whoever owns the slab (same node); past hiwater,
//          flush `freebatch` objects from the hot end: own slabs' objects to their slabs, other
//          lists' objects to the outbox. The outbox goes to its target's inbox when it holds
//          `freebatch` objects or changes target; if that inbox already holds more than
//          hiwater its objects go straight to the target's slabs under its page_lock.
//          An object from another node goes straight to the outbox.
//   A slab is released the moment its last object returns to it (no empty-slab cache).
//
// Where objects can be (each in exactly one): a user, some slot's queue, some outbox, some inbox,
// its slab's freelist. A slab's `aux` (inuse) counts the objects not on its freelist.
//
// Slots are threads: a departing thread leaves its queues to the next thread that takes the slot;
// slots idle for decay_ms are drained (core/trimmer.hpp), and shrink/destroy/trim flush the
// caller's and idle slots.
//
// Lock order: slot registry -> cache registry -> node list_lock -> a list's page_lock ->
// a list's inbox lock. Never two page_locks or two inbox locks at once.
#pragma once

#include "core/cache.hpp"
#include "core/counter.hpp"
#include "core/design.hpp"
#include "core/report.hpp"
#include "page/page_list.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"
#include "platform/rseq.hpp"
#include "slot/slot.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit::slqb {

// Statistics, as SLQB's CONFIG_SLQB_STATS named them. Counted by the slot (or node list) that
// does the work. A slot list's FREE is not counted on the free fast path: every free pushes on
// the queue or goes remote, and the queue's length only moves by pushes, pops, flushes and
// claims, so FREE = nr + pops + FLUSH_FREE_LIST_OBJECTS - CLAIM_REMOTE_LIST_OBJECTS + FREE_REMOTE
// with pops = ALLOC - ALLOC_SLAB_FILL - ALLOC_SLAB_NEW (see frees_of). Exact when the slot is
// quiet; a reader racing its owner may see it off by the operations in flight.
enum stat_item : unsigned {
    ALLOC,
    ALLOC_SLAB_FILL,
    ALLOC_SLAB_NEW,
    FREE,
    FREE_REMOTE,
    FLUSH_FREE_LIST,
    FLUSH_FREE_LIST_OBJECTS,
    FLUSH_FREE_LIST_REMOTE,
    FLUSH_SLAB_PARTIAL,
    FLUSH_SLAB_FREE,
    FLUSH_RFREE_LIST,
    FLUSH_RFREE_LIST_OBJECTS,
    CLAIM_REMOTE_LIST,
    CLAIM_REMOTE_LIST_OBJECTS,
    QUEUE_GROW, // slabkit's own: the cache's queues doubled (slqb_cache::hiwater_max)
    NR_STATS
};
extern const char *const kStatNames[NR_STATS];

// A singly linked list of free objects with a count and a tail. `nr` is atomic only so that
// statistics can read it from other threads; its writers use plain load/store. A slot's queue
// does not keep its tail (the fast paths would pay for it on every push): the rare appends to a
// non-empty queue find it by walking; outboxes and inboxes keep theirs.
struct kmlist {
    void *head = nullptr;
    void *tail = nullptr;
    std::atomic<uint32_t> nr{0};

    uint32_t count() const { return nr.load(std::memory_order_relaxed); }
    void set_count(uint32_t n) { nr.store(n, std::memory_order_relaxed); }
};

// A list's queue: a LIFO of free objects linked through their free pointers, in one of two
// layouts fixed when its list is made:
//   split   (a thread's own slot, a shared slot, a node list): the head in `word`, the count in
//           `nr` - the own-slot fast paths' plain loads and stores.
//   packed  (a CPU's slot): the head's address in the low 48 bits of `word` and the count in the
//           high 16 (platform::kPackedCountShift), so that a push or a pop is one store, as the
//           commit of an rseq critical section must be (platform/rseq.hpp). The count stays far
//           below 2^16: hiwater is at most kMaxHiwater, and a queue grows past it only by one
//           claimed inbox (at most hiwater + freebatch objects) before its owner flushes.
// Slow paths go through head(), count() and set(), which know both. `nr` is atomic only so that
// statistics can read it from other threads; its writers use plain loads and stores.
struct slot_queue {
    std::atomic<uint64_t> word{0};
    std::atomic<uint32_t> nr{0};
    bool packed = false;

    void *head() const {
        uint64_t w = word.load(std::memory_order_relaxed);
        return reinterpret_cast<void *>(packed ? w & platform::kPackedHeadMask : w);
    }
    uint32_t count() const {
        return packed ? static_cast<uint32_t>(word.load(std::memory_order_relaxed) >>
                                              platform::kPackedCountShift)
                      : nr.load(std::memory_order_relaxed);
    }
    void set(void *head, uint32_t n) {
        uint64_t h = reinterpret_cast<uint64_t>(head);
        if (packed) {
            word.store(h | uint64_t{n} << platform::kPackedCountShift, std::memory_order_relaxed);
        } else {
            word.store(h, std::memory_order_relaxed);
            nr.store(n, std::memory_order_relaxed);
        }
    }
};
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
inline constexpr uint32_t kMaxHiwater = 16384;

// An inbox: the objects other slots sent home to a list, on kInboxChains chains linked through
// the objects' free pointers, with their total count. The chains are a departure from SLQB's one
// list (docs/slqb.md): the owner that claims an inbox reads each object's link, written on the
// sender's CPU, so each read waits for a line to come from another CPU's cache. One chain makes
// those reads a dependent series, one transfer at a time; six chains walked in step keep six
// in flight (claim_remote_list, drain_inbox_to_pages). A sender deals its batch out over the
// chains and puts each part in front of its chain, so the inbox needs no tails. `nr` is atomic
// only so that the senders' hiwater test and statistics can read it without the lock.
inline constexpr unsigned kInboxChains = 6;
struct inbox_chains {
    std::atomic<uint32_t> nr{0};
    void *head[kInboxChains] = {};

    uint32_t count() const { return nr.load(std::memory_order_relaxed); }
    void set_count(uint32_t n) { nr.store(n, std::memory_order_relaxed); }
};

struct slqb_cache;

struct alignas(kCacheLine) slqb_list {
    // Owner's hot line: the queue, the flag it checks when the queue runs dry, and the first
    // counters (ALLOC lands in this line too).
    slot_queue freelist;
    std::atomic<bool> remote_free_check{false};
    counter stats[NR_STATS];
    slqb_cache *cache = nullptr;
    unsigned node = 0;
    bool is_node_list = false;
    // A slot list's queue growth test (slqb_cache::hiwater_max), in what the lines above leave
    // free (a slot's structure stays six lines): the low 32 bits of ALLOC at its last overflow
    // flush, and how many overflow flushes in a row looked like a burst.
    uint8_t burst_flushes = 0;
    uint32_t allocs_at_flush = 0;

    // Slabs, under page_lock.
    alignas(kCacheLine) platform::mutex page_lock;
    page_list partial; // slabs with objects on their own freelist
    page_list full;    // slabs without (kept so that destroy can find leaked objects)
    std::atomic<uint64_t> nr_slabs{0};

    // The inbox, under its lock, in a line of its own (its senders write it).
    alignas(kCacheLine) platform::mutex inbox_lock;
    inbox_chains inbox;
};

struct alignas(kCacheLine) slqb_cpu {
    slqb_list list;
    unsigned colour_next = 0;
    kmlist rlist;                      // the outbox
    slqb_list *rlist_target = nullptr; // whose slabs the outbox holds objects of
    uint64_t shrink_seen = 0;          // last cache shrink generation this slot honoured
    uint64_t trim_seen = 0;            // last trimmer epoch this slot honoured
};

static_assert(alignof(inbox_chains) + sizeof(inbox_chains) <= kCacheLine); // after the lock
// Six lines: one more for a field or two made the kmem_cache fast paths of slab_bench 10% to 35%
// slower at 64 B and up (slot structures placed differently within their pages).
static_assert(sizeof(slqb_cpu) == 6 * kCacheLine);

// Where the queue and its ALLOC counter are in a slot's structure, for the rseq sections.
inline constexpr int kQueueDisp =
    static_cast<int>(offsetof(slqb_cpu, list) + offsetof(slqb_list, freelist));
inline constexpr int kAllocStatDisp = static_cast<int>(
    offsetof(slqb_cpu, list) + offsetof(slqb_list, stats) + ALLOC * sizeof(counter));

struct alignas(kCacheLine) slqb_node {
    platform::mutex list_lock;
    slqb_list list;
};

struct slqb_cache : cache {
    // A slot queue's bound and the objects a flush moves (hiwater / 4 unless tuned). Read by the
    // fast paths; a slow path may raise both while they run (queue growth, below).
    relaxed<uint32_t> hiwater;
    relaxed<uint32_t> freebatch;
    // Queue growth: a cache made with a byte bound (cache_args::queue_bytes, the malloc
    // table's) starts its queues that short and doubles them, up to hiwater_max (the design's
    // own sizing), when a slot's queue overflows twice in a row with fewer than freebatch / 2
    // allocations between the flushes: frees in a burst longer than the queue, whose objects
    // would otherwise go back to their slabs one batch at a time only to be taken again. A slot
    // whose allocations and frees merely wander does not meet that test, so the bound, and the
    // memory parked, stays where it started. hiwater_max == hiwater: no growth (every other
    // cache, and one whose tunables were set). Each doubling takes what it adds from the
    // creator's budget (cache_args::queue_growth_budget), and does not happen without it.
    relaxed<uint32_t> hiwater_max;
    // kMaxSlots + 1 pointers (the last, for slots::index()'s "no slot", always null), each made
    // on its slot's first use (by the slot's owner; others read them for statistics and trims,
    // hence atomic; the fast path's relaxed load is a plain one).
    std::atomic<slqb_cpu *> *cpu_slab = nullptr;
    slqb_node *node_slab[platform::kMaxNodes] = {};
    unsigned nr_nodes = 0; // set when the cache is made (zero: static descriptors stay in .bss)
    bool meta = false;     // a bootstrap cache: its per-slot structures are static
    std::atomic<int64_t> *queue_growth_budget = nullptr; // see hiwater_max
    // Bumped by shrink: slots flush their queues at their next slow path when they see it move.
    std::atomic<uint64_t> shrink_gen{0};
    // Work done by threads without a slot, counted with atomic adds.
    counter shared_stats[NR_STATS];
    // Held to publish a slot's new structure in cpu_slab (get_cpu), and by fork from before it
    // takes the lists' locks until after it lets them go (fork_cache): the lists it unlocks in
    // the parent are then the ones it locked, and a child never inherits a list that was made,
    // and in use, while the fork took the others.
    platform::mutex slots_lock;
};

// ---- SLQB's side of the design interface (core/design.hpp; `ops` below) -----------------------

// The static per-slot pointer array of a static cache (kmalloc's): kMaxSlots + 1 pointers.
using slot_storage = std::array<std::atomic<slqb_cpu *>, kMaxSlots + 1>;

// Boot settings (read once, by bootstrap; the kernel's slqb_min_order= and slqb_min_objects=,
// which Nick Piggin added "to experiment with" the gigantic slabs SLUB had been measured with).
struct settings {
    unsigned min_order = 0;   // SLABKIT_SLQB_MIN_ORDER: no slab below this order
    unsigned min_objects = 1; // SLABKIT_SLQB_MIN_OBJECTS: objects per slab at least
};
const settings &boot_settings();

// SLQB's order for objects of `size` bytes (calculate_order): from the smallest order that holds
// one object (min_order at least), the first up to order 1 that holds min_objects and leaves at
// most 1/8 of the slab unused; failing that, the first order that holds min_objects.
unsigned calculate_order(size_t size, const settings &st);

// Sets up the three bootstrap caches (once; every entry point that needs them calls it).
void bootstrap();
slqb_cache *create(const cache_args &args, const char **why);
bool open_static(slqb_cache *s, slot_storage *slots, const cache_args &args, const char **why);
void destroy(slqb_cache *s);
// Flushes what `slot` holds in s (its inbox, queue and outbox); with `release`, frees the
// slot's structure once it holds nothing (an idle slot, under the cache registry lock).
void flush_slot(slqb_cache *s, unsigned slot, bool release);
// Shrink's share beyond the idle slots: the caller's slot, every inbox (straight to its slabs)
// and the node lists; bumps the shrink generation so that other live slots flush at their next
// slow path. Returns the slabs the cache still holds.
size_t reclaim(slqb_cache *s);
// The trimmer's share of the node lists: each claims its inbox and gives back one batch.
void trim(slqb_cache *s);
// Sets hiwater/freebatch (1 <= freebatch <= hiwater + 1, hiwater <= kMaxHiwater); false when out
// of range.
bool tune(slqb_cache *s, uint32_t hiwater, uint32_t freebatch);
// A tunable by name: "order", "hiwater", "freebatch".
bool tune(slqb_cache *s, const char *name, unsigned long value, const char **why);
// Changes the slab order. The cache must hold no slab (shrink first) and no thread may use it
// meanwhile; false with *why set otherwise.
bool set_order(slqb_cache *s, unsigned order, const char **why);
void fork_boot(fork_op op);
void fork_cache(slqb_cache *s, fork_op op);

struct stats_totals {
    uint64_t slabs = 0;
    uint64_t active_objects = 0; // not on a slab freelist
    uint64_t queued = 0;         // on queues, outboxes and inboxes
    uint64_t counters[NR_STATS] = {};
};
void gather_stats(slqb_cache *s, stats_totals *out);
void statistics(slqb_cache *s, design_stats *out);
// A slot list's FREE count, derived (see stat_item).
uint64_t frees_of(const slqb_list *l);

// Slow paths (out of line). alloc_slow: slot kNoSlot means "the caller's, taking one if the
// thread has none yet".
void *alloc_slow(slqb_cache *s, unsigned slot, int node, bool zero);
void free_slow(slqb_cache *s, page *pg, void *obj);
// A slot's queue past hiwater after a free: flushes a batch (and grows the cache's queues when
// the flushes come in a burst, see slqb_cache::hiwater_max).
void flush_free_list(slqb_cache *s, slqb_cpu *c);
// CPU mode: flushes a batch from the queue of the CPU whose slot the caller can hold, if that
// queue is past hiwater (after a push that took it there).
SLABKIT_NOINLINE void flush_cpu_queue(slqb_cache *s);
// The full check of a free the fast check did not accept (a bad free, or the debug layer's),
// then the free.
SLABKIT_NOINLINE void free_checked(slqb_cache *s, void *obj);

// ---- fast paths ----------------------------------------------------------------------------
//
// Each is a few loads and stores with no lock and no atomic read-modify-write, and leaves through
// a tail call whenever anything is unusual, so it needs no stack frame.

// A free object's next pointer, read or written where cache s keeps it; with kAtStart, where
// the caller knows it is: the object's first word, in the clear (a shortcut's cache, see
// shortcut_of), with no cache to read.
template <bool kAtStart>
SLABKIT_ALWAYS_INLINE void *next_free(const slqb_cache *s, void *obj) {
    if constexpr (kAtStart)
        return *static_cast<void **>(obj);
    else
        return get_freepointer(s, obj);
}
template <bool kAtStart>
SLABKIT_ALWAYS_INLINE void set_next_free(const slqb_cache *s, void *obj, void *next) {
    if constexpr (kAtStart)
        *static_cast<void **>(obj) = next;
    else
        set_freepointer(s, obj, next);
}

// Pops one object from slot list c's split queue (a thread's own or a shared slot), or nullptr;
// the caller may work on c (it owns or holds c's slot). kAtStart: see next_free (s unused).
template <bool kAtStart = false, bool kPrefetch = true>
SLABKIT_ALWAYS_INLINE void *pop_from_queue(const slqb_cache *s, slqb_cpu *c) {
    slqb_list &l = c->list;
    void *obj = reinterpret_cast<void *>(l.freelist.word.load(std::memory_order_relaxed));
    if (SLABKIT_LIKELY(obj != nullptr)) {
        // The pop touches only this slot's list and the object itself.
        void *next = next_free<kAtStart>(s, obj);
        // The next pop reads the next object's link: a remote free may have written its line
        // on another CPU, and the load would then stall that pop for the whole transfer.
        // Fetched now, the transfer overlaps the caller's work (SLUB's prefetch_freepointer).
        if constexpr (kPrefetch) prefetch_object(next);
        l.freelist.word.store(reinterpret_cast<uint64_t>(next), std::memory_order_relaxed);
        one_writer_add(l.freelist.nr, ~uint32_t{0}); // minus one
        l.stats[ALLOC].add();
    }
    return obj;
}

// Pushes obj on slot list c's split queue (the caller may work on c), flushing a batch past
// hiwater. kAtStart: see next_free.
template <bool kAtStart = false>
SLABKIT_ALWAYS_INLINE void push_to_queue(slqb_cache *s, slqb_cpu *c, void *obj) {
    slqb_list &l = c->list;
    void *head = reinterpret_cast<void *>(l.freelist.word.load(std::memory_order_relaxed));
    // Hardening: freeing the queue's first object again would make the list a cycle.
    if (kFreelistCheck && SLABKIT_UNLIKELY(obj == head)) return report_double_free(s, obj);
    set_next_free<kAtStart>(s, obj, head);
    l.freelist.word.store(reinterpret_cast<uint64_t>(obj), std::memory_order_relaxed);
    uint32_t n = l.freelist.nr.load(std::memory_order_relaxed) + 1;
    l.freelist.nr.store(n, std::memory_order_relaxed);
    if (SLABKIT_UNLIKELY(n > s->hiwater.load())) return flush_free_list(s, c);
}

// The fast paths of a thread without a slot of its own, when the CPUs have slots: the same pop
// and push as rseq critical sections on the queue of the CPU the thread runs on. They give up
// (nullptr, false) when the kernel aborts the section, when the CPU has no structure for this
// cache yet, when its slot is held by a slow path, or on an object of another node: the slow
// path then holds the CPU's slot and does the rest. Out of line: inlined, their registers and
// size cost the own-slot paths (the kmalloc switch stopped inlining the designs' fast paths);
// and in one object file each (slqb_alloc.cpp, slqb_free.cpp): a critical section's descriptor
// cannot point into an inline function's copy that the linker may discard.
void *alloc_from_cpu_queue(slqb_cache *s, const std::atomic<slqb_cpu *> *cpu_slab);
// The same pop, else fallback(size): the malloc family's CPU path, reached by a tail call from
// malloc and leaving by one, with no call or switch in between.
void *alloc_cpu_or(slqb_cache *s, const std::atomic<slqb_cpu *> *cpu_slab, size_t size,
                   void *(*fallback)(size_t));
// The same, then alloc_slow when it gives up: the whole allocation, in one tail call.
void *alloc_on_cpu(slqb_cache *s, bool zero);
// The push, then free_slow when it gives up.
void free_to_cpu_queue(slqb_cache *s, page *pg, void *obj);

// One object from the slot's queue, or nullptr when the slot has none queued (or no structure
// for this cache yet): the caller then takes a slow path.
// `cpu_slab` is s->cpu_slab, or the static array a static cache was opened with (kmalloc's
// classes), whose address the caller knows without loading it from the descriptor. on_cpu()
// serves a thread without a slot of its own while the CPUs have slots, on_empty() the rest
// (core/design.hpp, alloc_fast).
template <class OnCpu, class OnEmpty, class OnPop>
SLABKIT_ALWAYS_INLINE void *alloc_from_queue(slqb_cache *s, const std::atomic<slqb_cpu *> *cpu_slab,
                                             OnCpu &&on_cpu, OnEmpty &&on_empty, OnPop &&on_pop) {
    slqb_cpu *c = cpu_slab[slots::index()].load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(c != nullptr)) {
        if (void *obj = pop_from_queue(s, c); SLABKIT_LIKELY(obj != nullptr)) return on_pop(obj);
        return on_empty();
    }
    if (slots::on_cpu_slot()) return on_cpu();
    return on_empty();
}
SLABKIT_ALWAYS_INLINE void *alloc_from_queue(slqb_cache *s,
                                             const std::atomic<slqb_cpu *> *cpu_slab) {
    return alloc_from_queue(
        s, cpu_slab, [&]() SLABKIT_LAMBDA_INLINE { return alloc_from_cpu_queue(s, cpu_slab); },
        []() SLABKIT_LAMBDA_INLINE -> void * { return nullptr; },
        [](void *obj) SLABKIT_LAMBDA_INLINE { return obj; });
}

// Allocates one object (zeroed when `zero`); nullptr when memory is short.
SLABKIT_ALWAYS_INLINE void *alloc(slqb_cache *s, bool zero = false) {
    slqb_cpu *c = s->cpu_slab[slots::index()].load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(c != nullptr)) {
        if (!zero) {
            if (void *obj = pop_from_queue(s, c); SLABKIT_LIKELY(obj != nullptr)) return obj;
        }
    } else if (slots::on_cpu_slot()) {
        return alloc_on_cpu(s, zero);
    }
    return alloc_slow(s, kNoSlot, kAnyNode, zero);
}

// Frees obj, whose slab page pg the caller found to be one of s's (object start checked).
// kNodeTest false: the caller knows the cache has one node (its gate is open, core/cache.hpp).
template <bool kNodeTest = true>
SLABKIT_ALWAYS_INLINE void free_to_slot(slqb_cache *s, page *pg, void *obj) {
    slqb_cpu *c = s->cpu_slab[slots::index()].load(std::memory_order_relaxed);
    // Same node (always, with one node): the object joins this slot's queue, whoever owns its
    // slab, so a producer/consumer pair never touches the producer's structures.
    if (SLABKIT_LIKELY(c != nullptr)) {
        if (SLABKIT_LIKELY(!kNodeTest || !s->numa || page_to_nid(pg) == c->list.node))
            return push_to_queue(s, c, obj);
    } else if (slots::on_cpu_slot()) {
        return free_to_cpu_queue(s, pg, obj);
    }
    return free_slow(s, pg, obj);
}

SLABKIT_ALWAYS_INLINE void free(slqb_cache *s, void *obj) {
    page *pg = slab_page_check<false>(s, obj);
    if (SLABKIT_UNLIKELY(!pg)) return free_checked(s, obj);
    return free_to_slot(s, pg, obj);
}

// An object from node `node` (kAnyNode: the caller's); nullptr when the node does not exist.
SLABKIT_ALWAYS_INLINE void *alloc_node(slqb_cache *s, int node, bool zero) {
    if (node == kAnyNode) return alloc(s, zero);
    return alloc_slow(s, kNoSlot, node, zero);
}

} // namespace slabkit::slqb

namespace slabkit::slqb {
// Checks the cache's invariants; the cache must be quiescent (no thread using it). Every slab:
// on its list's partial list iff it has free objects, inuse == objects - |slab freelist|, marked
// as a slab of this cache; nr_slabs matches the lists; every queued object (queues, outboxes,
// inboxes) is an object start of this cache. Returns the number of problems, the first few
// described in report.
unsigned validate(slqb_cache *s, char *report, size_t size);

// The design interface (core/design.hpp), checked in designs/designs.hpp.
struct ops {
    using cache_type = slqb_cache;
    using slot_storage = slqb::slot_storage;
    static constexpr design kind = design::slqb;
    static void bootstrap() { slqb::bootstrap(); }
    static slqb_cache *create(const cache_args &a, const char **why) {
        return slqb::create(a, why);
    }
    static bool open_static(slqb_cache *s, slot_storage *slots, const cache_args &a,
                            const char **why) {
        return slqb::open_static(s, slots, a, why);
    }
    static void destroy(slqb_cache *s) { slqb::destroy(s); }
    static void flush_slot(slqb_cache *s, unsigned slot, bool release) {
        slqb::flush_slot(s, slot, release);
    }
    static size_t reclaim(slqb_cache *s) { return slqb::reclaim(s); }
    static void trim(slqb_cache *s) { slqb::trim(s); }
    static bool tune(slqb_cache *s, const char *name, unsigned long value, const char **why) {
        return slqb::tune(s, name, value, why);
    }
    static bool set_order(slqb_cache *s, unsigned order, const char **why) {
        return slqb::set_order(s, order, why);
    }
    static void statistics(slqb_cache *s, design_stats *out) { slqb::statistics(s, out); }
    static unsigned validate(slqb_cache *s, char *buf, size_t size) {
        return slqb::validate(s, buf, size);
    }
    static void fork_boot(fork_op op) { slqb::fork_boot(op); }
    static void fork_cache(slqb_cache *s, fork_op op) { slqb::fork_cache(s, op); }
    SLABKIT_ALWAYS_INLINE static void *alloc(slqb_cache *s, bool zero) {
        return slqb::alloc(s, zero);
    }
    SLABKIT_ALWAYS_INLINE static void *alloc_fast(slqb_cache *s, const slot_storage *slots) {
        return slqb::alloc_from_queue(s, slots->data());
    }
    template <class OnCpu, class OnEmpty, class OnPop>
    SLABKIT_ALWAYS_INLINE static void *alloc_fast(slqb_cache *s, const slot_storage *slots,
                                                  OnCpu &&on_cpu, OnEmpty &&on_empty,
                                                  OnPop &&on_pop) {
        return slqb::alloc_from_queue(s, slots->data(), on_cpu, on_empty, on_pop);
    }
    static void *alloc_cpu(slqb_cache *s, const slot_storage *slots) {
        return slqb::alloc_from_cpu_queue(s, slots->data());
    }
    static void *alloc_cpu_or(slqb_cache *s, const slot_storage *slots, size_t size,
                              void *(*fallback)(size_t)) {
        return slqb::alloc_cpu_or(s, slots->data(), size, fallback);
    }
    SLABKIT_ALWAYS_INLINE static void *alloc_node(slqb_cache *s, int node, bool zero) {
        return slqb::alloc_node(s, node, zero);
    }
    SLABKIT_ALWAYS_INLINE static void free(slqb_cache *s, void *obj) { slqb::free(s, obj); }
    SLABKIT_ALWAYS_INLINE static void free_to_slab(slqb_cache *s, page *pg, void *obj) {
        slqb::free_to_slot(s, pg, obj);
    }
    // The gated free (core/design.hpp): free_to_slab without the node test.
    SLABKIT_ALWAYS_INLINE static void free_gated(slqb_cache *s, page *pg, void *obj) {
        slqb::free_to_slot<false>(s, pg, obj);
    }
    // Shortcuts (core/design.hpp): an entry is the slot's structure itself (alloc_slow stores
    // it), for a cache whose free objects keep their next pointer in their first word in the
    // clear (kmalloc's classes: no constructor, no debugging; builds that obfuscate free
    // pointers have no shortcuts), so that the pop needs no cache at all. An own slot's queue is
    // split, so the pop and the push are the own-slot ones.
    static bool can_shortcut(slqb_cache *s) {
        return !hardening::kFreelistHardened && s->offset == 0 &&
               gate_word(s) == gate_open_word(kind);
    }
    static void *shortcut_of(slqb_cache *, const slot_storage *slots, unsigned slot) {
        return (*slots)[slot].load(std::memory_order_acquire);
    }
    template <bool kPrefetch = true>
    SLABKIT_ALWAYS_INLINE static void *pop_shortcut(void *entry) {
        return slqb::pop_from_queue<true, kPrefetch>(nullptr, static_cast<slqb_cpu *>(entry));
    }
    SLABKIT_ALWAYS_INLINE static void push_shortcut(slqb_cache *s, void *entry, void *obj) {
        slqb::push_to_queue<true>(s, static_cast<slqb_cpu *>(entry), obj);
    }
};

} // namespace slabkit::slqb
