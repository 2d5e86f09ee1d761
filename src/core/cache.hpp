// cache.hpp - the cache descriptor all four designs share, its object layout, and the registry.
//
// A cache hands out objects of one size. Every design embeds a `cache` at the start of its own
// descriptor (slqb_cache, ...), so code that only knows an object's page (kfree, ksize, bad-free
// reports, slabinfo) can still read the common part.
//
// Object layout within a slab (`size` bytes per object, objects back to back from the slab's
// start plus its colour offset):
//
//   | object (object_size, rounded up to a word) | free pointer, if ctor | pad |
//   |<-------------------------------- size ------------------------------->|
//
// A debug cache's slots have another layout (core/debug.hpp): the design's word first, then the
// left red zone, the object at debug_offset, the right red zone, the state word and the tracks.
//
// The free pointer of a free object lives in its first word (offset 0), or, when the cache has a
// constructor, right after the object so that constructed state survives being free. `inuse`
// marks where metadata starts: the red zones and owner tracking of the debugging layer go there.
//
// Slab pages (the page allocator's head descriptor of each slab) carry:
//   state    PG_head | PG_slab | order
//   owner    the cache (a `cache *`). Set only while the page is a slab's first page
//            (mark_slab/init_slab, cleared by clear_slab), so a free's fast check reads it alone
//            to tell a slab's first page from any other; the public header's inline free
//            (include/slabkit/inline.h, version 1) relies on it too.
//   aux      the design's: SLQB's inuse (objects of this slab not on its own freelist)
//   priv[0]  the slab's own freelist (first free object, linked through free pointers)
//   priv[1]  the design's: SLQB's owner list of the slab, SLUB's counters word (inuse,
//            objects, frozen), swapped with priv[0] as one double word
//   priv[2]  the colour offset: where the first object starts
//   next/prev  links on the design's slab lists
//
// Registry: every live cache is on one list under the registry lock, in creation order; names
// are unique among live caches. Lock order: slot registry -> cache registry -> design locks.
#pragma once

#include "base/compiler.hpp"
#include "core/design_list.hpp"
#include "core/hardening.hpp"
#include "core/report.hpp"
#include "page/page.hpp"
#include "platform/lock.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit {

// The designs of this build are listed in core/design_list.hpp.
const char *design_name(design d);
// The names of every design, separated by spaces ("slqb slub").
const char *design_names();
// The name of one of design d's own caches (bootstrap caches, kmalloc's): `base` for the
// process's design, "<design>-<base>" for the others, so that several designs' caches can live
// side by side under distinct names.
void internal_cache_name(design d, const char *base, char *buf, size_t size);
// Parses a design name; false when unknown.
bool parse_design(const char *name, design *out);

// The process's design: SLABKIT_ALLOCATOR, read at the first call (which may come before any
// constructor, from the malloc override) and again by a load-time constructor so that a bad name
// is caught at start. An unknown name ends the process with status 1 and a message naming it.
namespace detail {
extern SLABKIT_HIDDEN std::atomic<int> g_process_design;  // -1 until read
extern SLABKIT_HIDDEN std::atomic<uint8_t> g_design_hint; // the design once read; slqb until then
design resolve_process_design();
} // namespace detail
SLABKIT_ALWAYS_INLINE design process_design() {
    int d = detail::g_process_design.load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(d >= 0)) return static_cast<design>(d);
    return detail::resolve_process_design();
}
// The process's design without the check that it was read: for fast paths that only use what a
// slow path opened after reading it (kmalloc's classes), so that before the first read the
// default sends them to that slow path. One load, no branch.
SLABKIT_ALWAYS_INLINE design process_design_hint() {
    return static_cast<design>(detail::g_design_hint.load(std::memory_order_relaxed));
}

// Cache flags: the public SLABKIT_* / kernel SLAB_* values.
enum cache_flag : unsigned {
    kConsistencyChecks = 0x00000100u,
    kRedZone = 0x00000400u,
    kPoison = 0x00000800u,
    kHwcacheAlign = 0x00002000u,
    kStoreUser = 0x00010000u,
    kPanic = 0x00040000u,
    kTrace = 0x00200000u,
    // The cache's allocations may be failed on purpose (core/failslab.hpp), whatever
    // SLABKIT_FAILSLAB_CACHES names: the kernel's SLAB_FAILSLAB.
    kFailslab = 0x02000000u,
    // Any of these makes a debug cache (core/debug.hpp).
    kDebugFlags = kConsistencyChecks | kRedZone | kPoison | kStoreUser | kTrace,
    kKnownFlags = kDebugFlags | kHwcacheAlign | kPanic | kFailslab,
    // Not a user's flag: set by the library on the caches it makes for users (the API's and
    // kmalloc's classes), which fault injection may arm (core/failslab.hpp); a design's own
    // internal caches never fail on purpose.
    kFailslabEligible = 0x80000000u,
};

inline constexpr size_t kMinAlign = 8;
inline constexpr size_t kNameMax = 32; // including the terminating NUL
// The largest object a cache may hold: what one max-order slab holds once.
inline constexpr size_t kMaxObjectSize = kPageSize << kMaxOrder;

// What the caller asked for, checked by cache_args_invalid().
struct cache_args {
    const char *name;
    size_t size;
    size_t align;
    unsigned flags;
    void (*ctor)(void *);
    // At most this many bytes of free objects parked per slot to start with (0: the design's own
    // sizing). For caches that many threads share with mixed sizes (the malloc table's): a
    // design whose per-slot queues are sized for throughput alone (SLQB's hiwater is up to 1 MiB
    // per slot for objects of 1 KiB and up) would otherwise hold that much per thread and class.
    // A design may let the bound grow under bursts of frees, up to its own sizing (SLQB does).
    size_t queue_bytes = 0;
    // What that growth may add, in bytes of bound (objects x object size), shared by every cache
    // given the same counter and taken from it as they grow (nullptr: no limit but the design's
    // sizing). The malloc table's classes share one, so that the few classes a program's
    // bursts need grow rather than every class that ever saw one.
    std::atomic<int64_t> *queue_growth_budget = nullptr;
    // The objects per sheaf asked for (the kernel's kmem_cache_args::sheaf_capacity): the sheaves
    // design takes at least this many (calculate_sheaf_capacity); the others ignore it.
    unsigned sheaf_capacity = 0;
};
// The most objects per sheaf a cache may ask for (a sheaf of them fits a 256 KiB block).
inline constexpr unsigned kMaxSheafCapacity = 32768;
// A readable reason why the arguments cannot make a cache, or nullptr when they can.
const char *cache_args_invalid(const cache_args &args);

// A value a fast path may read while another thread's slow path writes it (a gate byte, a queue
// bound): relaxed atomic loads and stores (plain moves), and copyable with the descriptor that
// holds it.
template <class T>
struct relaxed {
    std::atomic<T> v{0};
    relaxed() = default;
    relaxed(const relaxed &o) : v(o.load()) {}
    relaxed &operator=(const relaxed &o) {
        store(o.load());
        return *this;
    }
    T load() const { return v.load(std::memory_order_relaxed); }
    void store(T x) { v.store(x, std::memory_order_relaxed); }
};
using relaxed_byte = relaxed<uint8_t>;
static_assert(sizeof(relaxed<uint32_t>) == sizeof(uint32_t));

// cache::free_key of a cache whose frees are not keyed: 0, so that static descriptors (kmalloc's
// classes) stay in .bss (a nonzero default put 3 MiB of them in .data, mapped from the file).
inline constexpr uint8_t kNoFreeKey = 0;

struct cache {
    // Hot: read by the design's fast paths and by every free.
    uint32_t size = 0;    // bytes per object slot in a slab
    uint32_t offset = 0;  // of the free pointer within a free object
    uint32_t objects = 0; // per slab
    uint8_t order = 0;    // pages per slab = 1 << order
    design kind = design::slqb;
    bool numa = false; // more than one node: frees compare the page's node
    // Exact test "is `off` a multiple of size": size = odd << shift, inverse of odd mod 2^64.
    uint8_t size_shift = 0;
    uint64_t size_odd_inverse = 0;
    uint64_t size_limit = 0; // (2^64 - 1) / size
    // Hardening (core/hardening.hpp): the key free pointers are stored under (0 when the build
    // does not obfuscate them, but for a keyed cache: its free keys' secret, core/free_key.hpp),
    // and init on alloc / on free (hardening::init_mode bits; 0 for
    // debug caches, which zero in their own way, and for caches with a constructor).
    uint64_t freelist_secret = 0;
    // Relaxed atomic only because kmalloc's fast path reads it before it knows the class is
    // open (a relaxed load is a plain one).
    relaxed_byte init;
    // The gate tag (gate_tag_of below; 0: none). With `init` it makes the gate word the
    // library's gated paths and the public header's inline paths compare: open only while
    // `init` is 0 too. Set once, when the design makes the cache; a relaxed atomic like `init`,
    // as fast paths read the gate word of a class while another thread opens it.
    relaxed_byte inline_abi;
    // The thread-local shortcut entry (slot/slot.hpp) where a thread that owns a slot keeps its
    // per-slot structure of this cache, or 0 (none: every cache but kmalloc's classes of the
    // design that has shortcuts). Set before the cache is published; in the hot line, in
    // what `init`'s word leaves before the next pointer, for free's one extra load.
    uint8_t shortcut = 0;
    // Where a free block keeps its double-free key (core/free_key.hpp): its byte offset plus
    // one, or kNoFreeKey (every cache but kmalloc's and malloc's classes). Set before the class is
    // published; in the hot line, as every kfree reads it.
    uint8_t free_key = kNoFreeKey;

    void (*ctor)(void *) = nullptr;
    uint32_t object_size = 0; // as created
    uint32_t inuse = 0;       // where metadata starts
    uint32_t align = 0;
    unsigned flags = 0;
    uint32_t colour_off = 0;   // colour step
    uint32_t colour_range = 0; // slack of a slab: colour offsets stay below it
    char name[kNameMax] = {};

    // Debugging (core/debug.hpp); all zero for a cache without it. A debug cache has no
    // per-slot structures: every allocation and free takes its design's slow path, which hands
    // it to the debug layer, which calls back the design's slot-less paths below.
    bool debug = false;        // flags & kDebugFlags
    bool debug_fresh = false;  // the design reuses a free slot's bytes (SLOB): no checks at alloc
    uint32_t debug_offset = 0; // the object's offset in its slot
    uint32_t debug_meta = 0;   // the state word's offset in its slot (the tracks follow it)
    void *(*debug_alloc)(cache *c, int node) = nullptr; // one slot, no per-slot structure
    void (*debug_free)(cache *c, void *slot) = nullptr; // gives back one slot
    // Calls fn(c, slot, arg) for every allocated slot, for a design whose slabs the debug layer
    // cannot walk (SLOB's shared pages: its slots carry a tag, debug::is_live_slot); nullptr
    // for the others.
    void (*debug_walk)(cache *c, void (*fn)(cache *c, char *slot, void *arg), void *arg) = nullptr;
    // Lists (debug::block_leak) and counts the debugged blocks still allocated of a design's own
    // kmalloc (SLOB's arena); nullptr for the others.
    uint64_t (*debug_block_leaks)(cache *c, const char *op) = nullptr;

    // Registry links (under the registry lock).
    cache *reg_next = nullptr;
    cache *reg_prev = nullptr;
    bool registered = false;
    bool dead = false; // destroyed with live objects: kept, unusable

    // Index of the object at byte offset `off` from its slab's first object, or -1 when `off` is
    // not a slot boundary of this cache. With size = odd << shift: off is a multiple of size iff
    // rotating off * odd^-1 (mod 2^64) right by shift gives at most (2^64 - 1) / size, and that
    // value is then off / size - one multiply and one rotate, no division.
    SLABKIT_ALWAYS_INLINE long object_index(uintptr_t off) const {
        uint64_t q = rotated_quotient(off);
        if (q > size_limit) return -1;
        return static_cast<long>(q);
    }
    // The rotated product above: off / size when off is a multiple of size, else a value above
    // size_limit - and so above `objects`, which lets the fast check make one comparison.
    SLABKIT_ALWAYS_INLINE uint64_t rotated_quotient(uintptr_t off) const {
        uint64_t q = off * size_odd_inverse;
        return (q >> size_shift) | (q << ((64 - size_shift) & 63));
    }
};

// Order selection policies.
struct order_policy {
    unsigned min_order = 0;   // never below
    unsigned max_order = 1;   // first pass: search up to here
    unsigned waste_den = 4;   // first pass: accept waste <= slab_bytes / waste_den
    unsigned min_objects = 1; // objects per slab at least
};

// Where a free object keeps its free pointer when nothing forces it outside the object (a
// constructor, poisoning): its first word (SLQB, SLAB), or the word at the middle of the object
// (SLUB since Linux 5.7: a small overflow from the object before does not reach it); `none`
// for a design that keeps its free objects' indices outside them (SLAB's index arrays): no free
// pointer, so a constructor's state needs no extra word.
enum class freeptr_place : uint8_t { start, middle, none };

// Fills what the caller asked for into c: object size, alignment, flags, constructor and name
// (truncated to kNameMax - 1), and c's design. Every design's setup starts here.
void describe_cache(cache *c, const cache_args &args, design d);
// Fills the object layout of c (size, offset, inuse, align and the division constants) from its
// object_size, align, flags and ctor.
void compute_object_layout(cache *c, freeptr_place place);
// Sets c's slot size (bytes per object in a slab) and the division constants object_index
// derives from it; for a design whose slots differ from compute_object_layout's (SLOB's units,
// SLAB's smallest object).
void set_slot_size(cache *c, size_t size);
// The order `policy` picks for objects of `size` bytes.
unsigned order_by_waste(size_t size, const order_policy &policy);
// Sets c's slab order and what follows from it (objects per slab, colour step and range).
void apply_order(cache *c, unsigned order);
// compute_object_layout (free pointer at the start), then the order `policy` picks.
void compute_layout(cache *c, const order_policy &policy);

// Sets the slab order of c: false, with *why set, while the cache holds slabs (`slabs_held`,
// which the design counts), or when the order is above kMaxOrder or its slabs could not hold one
// object.
bool set_slab_order(cache *c, unsigned order, uint64_t slabs_held, const char **why);

// ---- slab pages ---------------------------------------------------------------------------

inline constexpr uint32_t PG_slab_flag = PG_slab;

SLABKIT_ALWAYS_INLINE void *slab_freelist(const page *pg) {
    return reinterpret_cast<void *>(pg->priv[0]);
}
SLABKIT_ALWAYS_INLINE void set_slab_freelist(page *pg, void *obj) {
    pg->priv[0] = reinterpret_cast<uintptr_t>(obj);
}
SLABKIT_ALWAYS_INLINE uintptr_t slab_base(const page *pg) {
    return reinterpret_cast<uintptr_t>(page_to_virt(pg)) + pg->priv[2];
}

// The cache that owns slab page pg.
SLABKIT_ALWAYS_INLINE cache *slab_cache(const page *pg) {
    return static_cast<cache *>(pg->owner.load(std::memory_order_relaxed));
}

// The slab page of `obj` if it is a slab page of cache c, else nullptr (not in the arena, not a
// slab, or another cache's slab).
SLABKIT_ALWAYS_INLINE page *slab_page_of(const void *obj) {
    page *pg = virt_to_head_page(obj);
    if (SLABKIT_UNLIKELY(!pg)) return nullptr;
    if (SLABKIT_UNLIKELY(!(pg->flags() & PG_slab))) return nullptr;
    return pg;
}

// The fast check of a free: obj lies in a slab of cache c (owner == c, or any cache when
// kAnyCache) and is an object start; *owner_out (if given) is then set to the cache. nullptr for
// anything else: the caller then takes its full check (which names a bad free).
template <bool kAnyCache>
SLABKIT_ALWAYS_INLINE page *slab_page_check(const cache *c, const void *obj,
                                            cache **owner_out = nullptr) {
    uintptr_t addr = reinterpret_cast<uintptr_t>(obj);
    uintptr_t index = addr >> kChunkShift;
    if (SLABKIT_UNLIKELY(index >= kMaxChunks)) return nullptr;
    if (SLABKIT_UNLIKELY(!detail::g_chunk_map[index].load(std::memory_order_acquire)))
        return nullptr;
    // Pages of the chunk's metadata have no descriptor.
    if (SLABKIT_UNLIKELY((addr & (kChunkSize - 1)) < kMetaPages * kPageSize)) return nullptr;
    page *pg = reinterpret_cast<page *>(addr & ~(kChunkSize - 1)) + chunk_pfn(obj);
    // A page's owner is set only while it is the first page of a slab (mark_slab, init_slab;
    // clear_slab resets it), so it alone tells a slab's first page from any other: tails, page
    // blocks and free pages have none. obj's offset from the slab's first object wraps to a huge
    // value, rejected below, if obj is before it.
    cache *owner = slab_cache(pg);
    uintptr_t off;
    if (SLABKIT_LIKELY(kAnyCache ? owner != nullptr : owner == c)) {
        // The slab's first page: the offset in the page, less the colour.
        off = (addr & (kPageSize - 1)) - pg->priv[2];
    } else {
        // A later page of an order > 0 slab (SLUB's orders 1 to 3, the malloc table's hot
        // classes): from its head, a few instructions more than the first page's case.
        if (owner != nullptr || !(pg->flags() & PG_tail)) return nullptr;
        pg = pg->head;
        if (SLABKIT_UNLIKELY(pg == nullptr)) return nullptr;
        owner = slab_cache(pg);
        if (SLABKIT_UNLIKELY(kAnyCache ? owner == nullptr : owner != c)) return nullptr;
        off = addr - slab_base(pg);
    }
    if constexpr (!kAnyCache) owner = const_cast<cache *>(c); // known without the load
    if (SLABKIT_UNLIKELY(owner->rotated_quotient(off) >= owner->objects)) return nullptr;
    // The owner as loaded once (an atomic load is not merged with a later one): kfree's
    // dispatch on its design reads it from here.
    if (owner_out) *owner_out = owner;
    return pg;
}

// The full check of a kmem_cache_free that a design's inline check did not accept (a bad free,
// a debug cache's object, or, through the public header's inline path, an object in a later page
// of an order > 0 slab): obj's slab page when obj is an object
// start of c's; otherwise the bad free is reported, naming c, and nullptr returned. nullptr for
// NULL too, which frees nothing (as kfree(NULL)).
page *checked_slab_page(cache *c, const void *obj);

// True when obj is the start of an object slot of its slab page pg (of cache c).
SLABKIT_ALWAYS_INLINE bool is_object_start(const cache *c, const page *pg, const void *obj) {
    uintptr_t p = reinterpret_cast<uintptr_t>(obj);
    uintptr_t base = slab_base(pg);
    if (SLABKIT_UNLIKELY(p < base)) return false;
    long idx = c->object_index(p - base);
    return SLABKIT_LIKELY(idx >= 0 && static_cast<uint64_t>(idx) < c->objects);
}

// The gate word: `init` (low byte) and `inline_abi`, the cache's gate tag (high byte), read as
// one 16-bit word. It is open - the tag set and init 0 - only for a plain cache in plain use
// (not debugged, one node, no init on alloc or free), and then names which paths may run on it
// with no further test:
//   kInlineAbi (1), kInlineAbiSlub (2), kInlineAbiSlab (3)
//                    SLQB's own-slot queues, SLUB's own-slot freelists, SLAB's own-slot
//                    arrays, whose layouts the public header's inline paths mirror
//                    (include/slabkit/inline.h, version 1: offsets asserted in
//                    api/inline_abi.cpp), and the library's own gated paths below. SLQB's and
//                    SLUB's not in builds that obfuscate free pointers, SLAB's not in builds
//                    that check the array's last entry on every free (the header does neither).
//   0x80 | design    the library's gated paths only: kmalloc's free and the malloc family's
//                    fast paths go straight to the design's own-slot paths, with no design
//                    switch and no init or node test (designs::visit_gated). A header compares
//                    with its own version's values and never opens for these.
// Each design that has gated paths sets its caches' tag when it makes them (gate_tag_for);
// SLOB's blocks keep their own checks and its tag stays 0.
inline constexpr uint8_t kInlineAbi = 1;
inline constexpr uint8_t kInlineAbiSlub = 2;
inline constexpr uint8_t kInlineAbiSlab = 3;
SLABKIT_ALWAYS_INLINE constexpr uint8_t gate_tag_of(design d) {
    if (d == design::slqb && !hardening::kFreelistHardened) return kInlineAbi;
    if (d == design::slub && !hardening::kFreelistHardened) return kInlineAbiSlub;
    if (d == design::slab && !kSlabArrayCheck) return kInlineAbiSlab;
    return static_cast<uint8_t>(0x80u | static_cast<unsigned>(d));
}
SLABKIT_ALWAYS_INLINE constexpr uint16_t gate_open_word(design d) {
    return static_cast<uint16_t>(gate_tag_of(d) << 8);
}
inline constexpr uint16_t kInlineGateOpen = uint16_t{kInlineAbi} << 8;
SLABKIT_ALWAYS_INLINE uint8_t gate_tag_for(const cache *c) {
    return c->debug || c->numa ? 0 : gate_tag_of(c->kind);
}
// The gate word. A relaxed atomic load, as `init` may be written while other threads read it.
SLABKIT_ALWAYS_INLINE uint16_t gate_word(const cache *c) {
    using word = uint16_t __attribute__((may_alias));
    return __atomic_load_n(reinterpret_cast<const word *>(&c->init), __ATOMIC_RELAXED);
}

// The cache's init-on-alloc / init-on-free bits (hardening::init_mode).
SLABKIT_ALWAYS_INLINE unsigned init_bits(const cache *c) {
    return c->init.load();
}

// Free pointers: where a free object keeps the next free object, stored obfuscated in hardened
// builds (hardening.hpp): xor-ed with the cache's secret and the byte-swapped address of the word
// that holds it, so a stored value is never a plain heap address.
SLABKIT_ALWAYS_INLINE uintptr_t freepointer_key(const cache *c, const void *where) {
    return hardening::kFreelistHardened
               ? c->freelist_secret ^ __builtin_bswap64(reinterpret_cast<uintptr_t>(where))
               : 0;
}
SLABKIT_ALWAYS_INLINE void *get_freepointer(const cache *c, void *obj) {
    auto *where = reinterpret_cast<uintptr_t *>(static_cast<char *>(obj) + c->offset);
    return reinterpret_cast<void *>(*where ^ freepointer_key(c, where));
}
SLABKIT_ALWAYS_INLINE void set_freepointer(const cache *c, void *obj, void *next) {
    auto *where = reinterpret_cast<uintptr_t *>(static_cast<char *>(obj) + c->offset);
    *where = reinterpret_cast<uintptr_t>(next) ^ freepointer_key(c, where);
}

// Marks a freshly allocated block as a slab of c whose first object is `colour` bytes in: its
// owner, colour offset and PG_slab (set last). The design fills priv[0..1] before.
void mark_slab(cache *c, page *pg, unsigned colour);
// Marks a freshly allocated block as a slab of c and links its objects in address order into
// its freelist, running the constructor on each. colour: offset of the first object. priv[1] is
// set to `priv1` (the design's).
void init_slab(cache *c, page *pg, unsigned colour, uintptr_t priv1);
// Clears the slab marks before the block goes back to the page allocator.
void clear_slab(page *pg);

// The number of objects on slab pg's own freelist (stops counting past c->objects, so that a
// corrupted, cyclic list cannot hang the caller).
uint32_t count_slab_free(const cache *c, const page *pg);
// Reports, one line each, the objects of slab pg that are not on its own freelist ("object %p is
// still allocated", for destroy); returns how many.
uint64_t report_slab_leaks(const cache *c, const page *pg);
// The line of one leaked object (its slot): "kmem_cache_destroy(<cache>): object <p> is still
// allocated", and for a debug cache with owner tracking where it was allocated.
void report_leaked_object(const cache *c, void *slot);
// Calls fn(pg, arg) for every slab of cache c in the global page allocator's arena, found from
// the page descriptors (for designs that do not keep every slab on a list). The caller makes
// sure c's slabs do not change meanwhile (destroy: no thread uses the cache); other caches'
// slabs may.
void for_each_slab_in_arena(const cache *c, void (*fn)(page *pg, void *arg), void *arg);

// ---- registry -----------------------------------------------------------------------------

namespace registry {
platform::mutex &lock();
// Adds c (name must be unique among live caches): false, with *why set, if the name is taken.
bool add(cache *c, const char **why);
// Adds one of a design's own caches (bootstrap, kmalloc): always, even if a user's cache took
// its name first - the allocator must not fail because of a name.
void add_internal(cache *c);
void remove(cache *c);
// Under the registry lock: fn(c, arg) for every live cache in creation order.
void for_each(void (*fn)(cache *c, void *arg), void *arg);
// The same, for a caller that already holds the registry lock (fork hooks).
void for_each_locked(void (*fn)(cache *c, void *arg), void *arg);
size_t count();
} // namespace registry

} // namespace slabkit
