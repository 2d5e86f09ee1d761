// kmalloc.cpp - size classes, the page and OS tiers, and the design dispatch of kmalloc.
#include "kmalloc/kmalloc.hpp"

#include "base/name_text.hpp"
#include "core/debug.hpp"
#include "core/failslab.hpp"
#include "core/hardening.hpp"

#include "core/report.hpp"
#include "kmalloc/hot_class.hpp"
#include "kmalloc/large.hpp"
#include "kmalloc/zero_blocks.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace slabkit::kmalloc {

namespace detail {
all_classes g_classes;
} // namespace detail

using detail::set_of;

namespace {
constexpr size_t kClassSizes[kNrClasses] = {8,   16,  32,   64,   96,   128, 192,
                                            256, 512, 1024, 2048, 4096, 8192};
const char *const kClassNames[kNrClasses] = {
    "kmalloc-8",   "kmalloc-16",  "kmalloc-32",  "kmalloc-64",  "kmalloc-96",
    "kmalloc-128", "kmalloc-192", "kmalloc-256", "kmalloc-512", "kmalloc-1k",
    "kmalloc-2k",  "kmalloc-4k",  "kmalloc-8k"};

// Steps of 16 from 16 to 128, then four per doubling (see kmalloc.hpp).
constexpr auto kMallocSizes = [] {
    std::array<size_t, kNrFixedMallocClasses> sizes{};
    unsigned n = 0;
    for (size_t s = 16; s <= 128; s += 16) sizes[n++] = s;
    for (size_t base = 128; base < kMaxCacheSize; base *= 2)
        for (size_t k = 1; k <= 4; ++k) sizes[n++] = base + k * base / 4;
    return sizes;
}();
static_assert(kMallocSizes[kNrFixedMallocClasses - 1] == kMaxCacheSize);

// The tables' class sizes are what class_of and the malloc formula compute: checked at compile
// time, every size.
template <class F>
constexpr bool table_matches(F index_of_size, const size_t *sizes, unsigned count) {
    for (size_t size = 1; size <= kMaxCacheSize; ++size) {
        unsigned i = index_of_size(size);
        if (i >= count || sizes[i] < size || (i > 0 && sizes[i - 1] >= size)) return false;
    }
    return true;
}
static_assert(table_matches([](size_t n) { return class_of(n); }, kClassSizes, kNrClasses));
static_assert(table_matches([](size_t n) { return malloc_fixed_class_of(n); }, kMallocSizes.data(),
                            kNrFixedMallocClasses));

platform::mutex g_open_lock;

// The malloc table's per-slot parking bound to start with (cache_args::queue_bytes; SLQB grows
// it under bursts of frees), SLABKIT_MALLOC_QUEUE_KB (0: the design's own sizing from the
// start); read once, under g_open_lock. 64 KiB: a queue of 1 KiB blocks starts 64 long, of
// 4 KiB blocks 16, where the design's sizing parks up to 1 MiB per class and slot.
constexpr size_t kMallocQueueKiB = 64;
size_t malloc_queue_bytes() {
    static size_t bytes = ~size_t{0};
    if (bytes == ~size_t{0})
        bytes = platform::env_uint("SLABKIT_MALLOC_QUEUE_KB", kMallocQueueKiB, 0, 1u << 20) * 1024;
    return bytes;
}

// What the malloc classes' queue bounds may grow by, all classes together
// (cache_args::queue_growth_budget), SLABKIT_MALLOC_QUEUE_GROW_KB; set under g_open_lock, before
// the first class is opened. 2 MiB: the 1 KiB class grown to the design's sizing (1024 objects)
// takes 960 KiB of it.
constexpr size_t kMallocQueueGrowKiB = 2048;
std::atomic<int64_t> g_malloc_queue_growth{0};
std::atomic<int64_t> *malloc_queue_growth_budget() {
    // A flag of its own, not a sentinel value: the budget may dip below zero for a moment while
    // a doubling that did not fit gives its bytes back.
    static bool read = false;
    if (!read) {
        read = true;
        g_malloc_queue_growth.store(
            static_cast<int64_t>(platform::env_uint("SLABKIT_MALLOC_QUEUE_GROW_KB",
                                                    kMallocQueueGrowKiB, 0, 1u << 30)) *
                1024,
            std::memory_order_relaxed);
    }
    return &g_malloc_queue_growth;
}

size_t class_align(size_t size) {
    if ((size & (size - 1)) == 0) return size < kPageSize ? size : kPageSize;
    return 16;
}

// A thread that has just taken a slot of its own (slots::set_acquire_hook): its shortcuts to the
// structures of the kmalloc classes (both tables) that the slot's last owner left in it. Without
// them it would pop and push on those through the class's per-slot array until a slow path of each
// class set its entry, which a thread whose allocations and frees balance may never take.
void set_shortcuts_of_slot(unsigned slot) {
    using D = designs::shortcut_design;
    if constexpr (!std::is_void_v<D>) {
        auto set_all = [slot](auto &set, unsigned n) {
            for (unsigned i = 0; i < n; ++i) {
                if (!set.open[i].load(std::memory_order_acquire) || !set.caches[i].shortcut)
                    continue;
                if (void *e = D::shortcut_of(&set.caches[i], &set.slots[i], slot))
                    slots::set_shortcut(slot, set.caches[i].shortcut, e);
            }
        };
        set_all(set_of<class_table::malloc, D>(), kNrMallocClasses);
        set_all(set_of<class_table::kernel, D>(), kNrClasses);
    }
}

// Class i's cache name in design d: the kernel table's name (kmalloc-N) or malloc-<size>, with
// the design in front when it is not the process's (internal_cache_name).
void class_cache_name(design d, class_table t, unsigned i, char *name, size_t size) {
    char base[kNameMax];
    if (t == class_table::kernel)
        name_text(base, sizeof base).add(kClassNames[i]);
    else
        name_text(base, sizeof base).add("malloc-").add(class_size(i, t));
    internal_cache_name(d, base, name, size);
}

template <class_table T>
SLABKIT_NOINLINE cache *open_class(design d, unsigned i) {
    // The malloc family allocates from the process's design only; its fast path relies on it
    // (alloc_fast: an open gate on a class of the gated design means that design is the
    // process's).
    if (T == class_table::malloc && d != process_design()) {
        report("the malloc table's classes serve the process's design (%s) only, not %s",
               design_name(process_design()), design_name(d));
        return nullptr;
    }
    platform::lock_guard guard(g_open_lock);
    return designs::visit(d, [&](auto ops) -> cache * {
        auto &set = set_of<T, decltype(ops)>();
        if (set.open[i].load(std::memory_order_relaxed)) return &set.caches[i];
        const size_t size = class_size(i, T);
        if (size == 0) return nullptr; // a hot class not made: no step names it
        char name[kNameMax];
        class_cache_name(d, T, i, name, sizeof name);
        const char *why = nullptr;
        (void)debugging(); // decided before the first block is handed out
        cache_args args{name, size, class_align(size), debug::spec_flags(name) | kFailslabEligible,
                        nullptr};
        // A power-of-two block is aligned to its size (the kernel's promise): a debug slot puts
        // red zones before the object, so its alignment must say so up to 8 KiB too.
        if ((args.flags & kDebugFlags) && (size & (size - 1)) == 0) args.align = size;
        // The malloc table serves whole programs, many threads at once: what a slot may park is
        // bounded in bytes (the kernel table keeps each design's own sizing).
        if constexpr (T == class_table::malloc) {
            args.queue_bytes = malloc_queue_bytes();
            args.queue_growth_budget = malloc_queue_growth_budget();
        }
        if (!ops.open_static(&set.caches[i], &set.slots[i], args, &why)) {
            // Out of memory is the caller's NULL (and the refusal is counted), not a report: a
            // program under an address-space limit meets it as it meets any full heap.
            if (!why || strncmp(why, "out of memory", 13) != 0)
                report("cannot open %s: %s", name, why ? why : "?");
            return nullptr;
        }
        // Its blocks' double frees are found by their key (core/free_key.hpp): placed, with its
        // secret, before the class is published.
        if constexpr (!own_kmalloc_v<decltype(ops)>) {
            cache &c = set.caches[i];
            c.free_key = free_key::place_for(&c);
            if (!hardening::kFreelistHardened && c.free_key != kNoFreeKey)
                c.freelist_secret = hardening::cache_key(&c);
            // SLABKIT_FREE_KEY=2: its keys checked as blocks go out, on the slow paths (the
            // nonzero init byte closes its gated fast paths, and it gets no shortcut below).
            if (c.free_key != kNoFreeKey && free_key::mode() == 2)
                c.init.store(static_cast<uint8_t>(c.init.load() | free_key::kCheckOnAlloc));
        }
        // Fault injection (SLABKIT_FAILSLAB): an armed class's init bit closes its gated fast
        // paths, and it gets no shortcut below, so every allocation asks on the slow path.
        failslab::arm_cache(&set.caches[i]);
        // A hot class (hot_class.hpp) holds many objects of one size: its slabs are packed.
        if (T == class_table::malloc && i >= kNrFixedMallocClasses &&
            !ops.set_order(&set.caches[i], hot_class_order(set.caches[i].size), &why))
            report("%s keeps its order: %s", name, why ? why : "?");
        // The classes of the design with shortcuts number their entries (0: none).
        using D = decltype(ops);
        if constexpr (shortcut_v<D>) {
            if (D::can_shortcut(&set.caches[i]) &&
                !(set.caches[i].init.load() & (free_key::kCheckOnAlloc | failslab::kInitBit))) {
                set.caches[i].shortcut = static_cast<uint8_t>(detail::shortcut_entry<T>(i));
                slots::set_acquire_hook(set_shortcuts_of_slot);
            }
        }
        set.open[i].store(true, std::memory_order_release);
        return &set.caches[i];
    });
}

template <class_table T>
cache *cache_of_table(design d, unsigned i) {
    cache *c = designs::visit(d, [&](auto ops) -> cache * {
        auto &set = set_of<T, decltype(ops)>();
        return set.open[i].load(std::memory_order_acquire) ? &set.caches[i] : nullptr;
    });
    return c ? c : open_class<T>(d, i);
}

// Fork: the open lock ranks first of all, as open_class allocates (and so takes every lock
// below) under it.
__attribute__((constructor)) void install_fork_hooks() {
    if (!platform::add_fork_hooks({platform::kForkRankClassOpen, [] { g_open_lock.lock(); },
                                   [] { g_open_lock.unlock(); },
                                   [] { g_open_lock.reset_after_fork(); }}))
        platform::fatal("slabkit: cannot register kmalloc's fork hooks\n");
}

unsigned order_for(size_t size) {
    unsigned order = 0;
    while ((kPageSize << order) < size) ++order;
    return order;
}
} // namespace

size_t class_size(unsigned i, class_table t) {
    if (t == class_table::kernel) return kClassSizes[i];
    return i < kNrFixedMallocClasses ? kMallocSizes[i] : hot_class_size(i - kNrFixedMallocClasses);
}

unsigned nr_classes(class_table t) {
    return t == class_table::kernel ? kNrClasses : kNrMallocClasses;
}

cache *cache_for(design d, unsigned i, class_table t) {
    return t == class_table::kernel ? cache_of_table<class_table::kernel>(d, i)
                                    : cache_of_table<class_table::malloc>(d, i);
}

namespace {
// The alignment a design's own kmalloc (SLOB's) is asked for: the malloc family's always 16
// (max_align_t); kmalloc's the kernel's minimum, 8 (SLOB's minalign: mm/slob.c). Power-of-two
// sizes are naturally aligned on top of it (the design's kmalloc).
size_t table_align(class_table t) {
    return t == class_table::malloc ? 16 : kMinAlign;
}
// The debug flags SLABKIT_DEBUG gives a design's own kmalloc blocks of `size` (SLOB's): those
// of the name the size's class would have in table t (kmalloc-64, malloc-48, ...), looked up
// once per class (stored plus one: 0 is "not looked up yet").
constinit std::atomic<uint32_t>
    g_own_debug[2][kNrMallocClasses > kNrClasses ? kNrMallocClasses : kNrClasses] = {};
unsigned own_block_debug(design d, class_table t, size_t size) {
    if (!debugging() || size == 0 || size > kMaxCacheSize) return 0;
    const unsigned ti = t == class_table::kernel ? 0 : 1;
    const unsigned i = t == class_table::kernel ? class_of(size) : malloc_fixed_class_of(size);
    uint32_t v = g_own_debug[ti][i].load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(v != 0)) return v - 1;
    char name[kNameMax];
    class_cache_name(d, t, i, name, sizeof name);
    const unsigned flags = debug::spec_flags(name) & kDebugFlags;
    g_own_debug[ti][i].store(flags + 1, std::memory_order_relaxed);
    return flags;
}

// A block from a design's own kmalloc (SLOB's) when it serves `size` at `align`: *served says so.
void *own_kmalloc(design d, class_table t, size_t size, size_t align, bool zero, int node,
                  bool *served) {
    return designs::visit(d, [&](auto ops) -> void * {
        if constexpr (own_kmalloc_v<decltype(ops)>) {
            // Header, size and the rounding to the alignment must fit a page wherever the
            // alignment puts the block; a debugged block has its red zone and rounding too.
            // (SLOB aligns a power-of-two size to itself.)
            const unsigned flags = own_block_debug(d, t, size);
            const size_t extra = flags ? debug::kBlockRedZone + debug::kBlockLeftRedZone +
                                             ((flags & kStoreUser) ? debug::kBlockTracks : 0)
                                       : 0;
            const size_t need = flags && (size & (size - 1)) == 0 && size > align ? size : align;
            // The kernel's kmalloc (the minimum alignment, no debugging): the kernel's bound,
            // below a page less that alignment (mm/slob.c, __do_kmalloc_node).
            const bool kernel = align == kMinAlign && !flags;
            if (kernel ? size < kPageSize - kMinAlign
                       : align < kPageSize / 4 && size < kPageSize &&
                             size + extra + 2 * need < kPageSize) {
                *served = true;
                // Fault injection's one question for this allocation (core/failslab.hpp).
                if (failslab::block_fails(size, "slob-pages")) return nullptr;
                return ops.kmalloc(size, align, zero, node, flags);
            }
        }
        *served = false;
        return nullptr;
    });
}
} // namespace

namespace {
SLABKIT_NOINLINE bool decide_debugging() {
    const bool on = debug::spec_any();
    large::set_guarded(on);
    detail::g_debugging.store(on ? 1 : 0, std::memory_order_relaxed);
    return on;
}
// Every block above the caches' sizes is an OS block with a guard page after it while
// debugging (large.hpp).
bool guard_blocks() {
    return debugging();
}

// A malloc-table block above kMallocRegionFrom from the region (nullptr otherwise, and when the
// region cannot serve it: the page allocator then does, up to its largest order). Page-aligned
// unless asked for more: malloc promises 16 bytes, and a block free to start at any page packs
// the region's kept ranges better than one aligned to its size.
void *region_block(class_table t, size_t size, size_t align, bool zero) {
    if (t != class_table::malloc || size <= kMallocRegionFrom || large::guarded()) return nullptr;
    return large::alloc(size, align < kPageSize ? kPageSize : align, zero);
}
} // namespace

std::atomic<int> detail::g_debugging{-1};

bool debugging() {
    int v = detail::g_debugging.load(std::memory_order_relaxed);
    return v < 0 ? decide_debugging() : v != 0;
}

void *detail::alloc_slow(design d, class_table t, size_t size, bool zero, int node) {
    (void)debugging(); // decided before the first block is handed out
    zero = zero || hardening::zero_on_alloc(hardening::init_mode());
    if (size == 0) return kZeroSizePtr;
    // Fault injection asks once per allocation: SLOB's blocks in own_kmalloc, a class's below,
    // page and OS blocks after them.
    if (has_own_kmalloc(d)) {
        // SLOB: blocks with a size header below a page; a page or more from the page allocator.
        bool served;
        void *p = own_kmalloc(d, t, size, table_align(t), zero, node, &served);
        if (served) return p;
    } else if (size <= kMaxCacheSize) {
        cache *c = t == class_table::kernel ? cache_for(d, class_of(size), t)
                                            : cache_for(d, malloc_class_of(size), t);
        if (SLABKIT_UNLIKELY(!c)) return nullptr;
        if (failslab::fails(c, init_bits(c), size)) return nullptr;
        void *p =
            designs::visit(c, [&](auto ops, auto *s) { return ops.alloc_node(s, node, zero); });
        return zero ? p : free_key::fresh(c, p, init_bits(c));
    }
    if (failslab::block_fails(size, "large")) return nullptr;
    if ((size > kMaxCacheSize || has_own_kmalloc(d)) && guard_blocks()) {
        // Guarded while debugging; if the OS refuses more mappings (each guarded block is two),
        // a page block does without the guard rather than failing. SLOB's from a page on (what
        // its debugged blocks, with their header and red zone, cannot hold): a page block has no
        // red zone, and an overflow of a 4 KiB block went unseen.
        if (void *p = large::alloc(size, 0, zero)) return p;
    }
    if (void *p = region_block(t, size, kPageSize, zero)) return p;
    if (size <= (kPageSize << kMaxOrder)) {
        return page_allocator::global().alloc(order_for(size), node, zero ? kZero : 0u);
    }
    return large::guarded() ? nullptr : large::alloc(size, 0, zero);
}

size_t aligned_class_size(size_t size, size_t align) {
    const size_t n = size < align ? align : size;
    if (n > kMaxCacheSize || align > kPageSize) return 0;
    // Power-of-two classes are aligned to their size (up to a page); 96 and 192 only to 16, so a
    // stricter alignment takes the next class (128, 256).
    unsigned i = class_of(n);
    if (class_align(kClassSizes[i]) < align) ++i;
    return kClassSizes[i];
}

void *alloc_aligned(design d, size_t size, size_t align, bool zero, class_table t) {
    zero = zero || hardening::zero_on_alloc(hardening::init_mode());
    const size_t n = size < align ? align : size;
    // Fault injection asks once: SLOB's blocks in own_kmalloc, a class's in alloc, page and OS
    // blocks after them.
    if (has_own_kmalloc(d)) {
        bool served;
        void *p = own_kmalloc(d, class_table::kernel, size, align < kMinAlign ? kMinAlign : align,
                              zero, kAnyNode, &served);
        if (served) return p;
    } else if (n <= kMaxCacheSize && align <= kPageSize) {
        return alloc(d, aligned_class_size(size, align), zero, kAnyNode);
    }
    if (failslab::block_fails(size, "large")) return nullptr;
    if (size > kMaxCacheSize && guard_blocks()) {
        if (void *p = large::alloc(size, align, zero)) return p;
    }
    if (void *p = region_block(t, size, align, zero)) return p;
    if (size <= (kPageSize << kMaxOrder) && align <= (kPageSize << kMaxOrder)) {
        // Blocks of order k are aligned to 2^k pages.
        unsigned order = order_for(size);
        while ((kPageSize << order) < align) ++order;
        return page_allocator::global().alloc(order, kAnyNode, zero ? kZero : 0u);
    }
    return large::guarded() ? nullptr : large::alloc(size, align, zero);
}

// Everything kfree's fast check did not accept: NULL, the zero-size pointer, debug caches'
// objects, page blocks, OS blocks, and bad frees.
void detail::free_slow(void *p, const char *caller) {
    if (p == nullptr || p == kZeroSizePtr) return;
    // free() must leave errno as it was (POSIX 2024); the paths below make system calls.
    struct errno_keeper {
        int saved = errno;
        ~errno_keeper() { errno = saved; }
    } keep;
    page *pg = virt_to_head_page(p);
    if (SLABKIT_LIKELY(pg != nullptr)) {
        uint32_t st = pg->flags();
        if (SLABKIT_LIKELY(st & PG_slab)) {
            cache *c = slab_cache(pg);
            // A debug cache's objects are never slot starts: all of them come here.
            if (c->debug) return debug::free(c, p, caller);
            if (SLABKIT_LIKELY(is_object_start(c, pg, p)))
                return designs::visit(c, [&](auto ops, auto *s) {
                    if constexpr (own_kmalloc_v<decltype(ops)>) {
                        return ops.kfree(s, pg, p, caller);
                    } else {
                        // A keyed class's double free (core/free_key.hpp); under init on free
                        // the key is stored again after the zeroing (the second mark finds
                        // zeros, not a key).
                        if (!free_key::mark(s, p, caller)) return;
                        if (init_bits(s) & hardening::kInitOnFree) {
                            memset(p, 0, s->object_size);
                            free_key::mark(s, p, caller);
                        }
                    }
                    ops.free_to_slab(s, pg, p);
                });
        } else if ((st & PG_head) && page_to_virt(pg) == p) {
            if (hardening::init_mode() & hardening::kInitOnFree)
                memset(p, 0, kPageSize << (st & PG_order_mask));
            return page_allocator::global().free(p);
        }
    } else if (!in_arena(p)) {
        if (zero_blocks::owns(p)) return zero_blocks::free(p, caller);
        if (large::free(p)) return;
        if (const char *why = large::why_not_a_block(p))
            return report_bad_free(caller, nullptr, p, why);
    }
    char what[256];
    report_bad_free(caller, nullptr, p, diagnose_free(nullptr, p, what, sizeof what));
}

bool has_own_kmalloc(design d) {
    return designs::visit(d, [](auto ops) { return own_kmalloc_v<decltype(ops)>; });
}

size_t usable_size(const void *p) {
    if (p == nullptr || p == kZeroSizePtr) return 0;
    page *pg = virt_to_head_page(p);
    if (pg) {
        uint32_t st = pg->flags();
        if (st & PG_slab) {
            cache *c = slab_cache(pg);
            // A debug cache's freed object has no usable bytes: callers report it.
            if (c->debug)
                return debug::is_live(c, pg, p) ? debug::usable(c, const_cast<void *>(p)) : 0;
            if (!is_object_start(c, pg, p)) return 0;
            return designs::visit(c, [&](auto ops, auto *s) -> size_t {
                if constexpr (own_kmalloc_v<decltype(ops)>) return ops.usable_size(s, p);
                return c->ctor ? c->offset : c->size;
            });
        }
        if ((st & PG_head) && page_to_virt(pg) == p) return kPageSize << (st & PG_order_mask);
        return 0;
    }
    return in_arena(p) ? 0 : large::size_of(p);
}

void note_request(void *p, size_t size) {
    page *pg = p ? virt_to_head_page(p) : nullptr;
    if (!pg || !(pg->flags() & PG_slab)) return;
    cache *c = slab_cache(pg);
    if (c->debug && debug::is_live(c, pg, p)) debug::set_request(c, p, size);
}

void note_origin(void *p, bool array) {
    page *pg = p ? virt_to_head_page(p) : nullptr;
    if (!pg || !(pg->flags() & PG_slab)) return;
    cache *c = slab_cache(pg);
    const debug::origin o = array ? debug::origin::new_array : debug::origin::new_object;
    if (c->debug && debug::is_live(c, pg, p)) return debug::set_origin(c, p, o);
    // SLOB's own debugged blocks keep it in their header.
    designs::visit(c, [&](auto ops, auto *s) {
        if constexpr (own_kmalloc_v<decltype(ops)>) ops.note_origin(s, p, o);
    });
}

bool report_if_freed(const void *p, const char *op) {
    if (debug::report_if_freed(p, op)) return true;
    page *pg = virt_to_head_page(p);
    if (!pg || !(pg->flags() & PG_slab)) return false;
    return designs::visit(slab_cache(pg), [&](auto ops, auto *s) -> bool {
        if constexpr (own_kmalloc_v<decltype(ops)>) return ops.report_if_freed(s, p, op);
        return false;
    });
}

void *realloc(design d, void *p, size_t size, bool zero) {
    if (p == nullptr || p == kZeroSizePtr) return alloc(d, size, zero, kAnyNode);
    if (size == 0) {
        free(p);
        return kZeroSizePtr;
    }
    size_t have = usable_size(p);
    if (have == 0) {
        if (report_if_freed(p, "krealloc")) return nullptr;
        char what[256];
        report_bad_free("krealloc", nullptr, p, diagnose_free(nullptr, p, what, sizeof what));
        return nullptr;
    }
    // In place whenever the block holds the new size, shrinking included (the kernel's rule; a
    // shrunk page or OS block keeps its pages until it is freed).
    if (size <= have) return p;
    void *q = alloc(d, size, false, kAnyNode);
    if (!q) return nullptr;
    memcpy(q, p, have < size ? have : size);
    if (zero && size > have) memset(static_cast<char *>(q) + have, 0, size - have);
    free(p);
    return q;
}

} // namespace slabkit::kmalloc
