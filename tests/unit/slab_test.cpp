// SLAB internals: the order table against the kernel's formula, the defaults by size, where the
// index array lives, the fast paths, refills and flushes in batches, the shared array between
// slots, the free-slab bound, the reaper, colouring, alien caches under fake NUMA and their
// memory, tunables, statistics, leaks at destroy, and the invariant checker after each phase.
#include "core/trimmer.hpp"
#include "designs/designs.hpp"
#include "page/page_allocator.hpp"
#include "slab/slab_internal.hpp"
#include "slabkit/slabkit.h"

#include "support/thread_churn.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace slabkit::slab {
namespace {

::testing::AssertionResult valid(slab_kmem_cache *s) {
    char report[1024];
    unsigned problems = validate(s, report, sizeof report);
    if (problems == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << problems << " problem(s):\n" << report;
}

design_stats stats_of(slab_kmem_cache *s) {
    design_stats st;
    statistics(s, &st);
    return st;
}

uint64_t stat(slab_kmem_cache *s, stat_item item) {
    return stats_of(s).counters[item];
}

class Slab : public ::testing::Test {
  protected:
    slab_kmem_cache *make(const char *name, size_t size, void (*ctor)(void *) = nullptr,
                          unsigned flags = 0) {
        const char *why = nullptr;
        slab_kmem_cache *s = create(cache_args{name, size, 0, flags, ctor}, &why);
        EXPECT_NE(s, nullptr) << (why ? why : "");
        made_.push_back(s);
        return s;
    }
    bool set(slab_kmem_cache *s, const char *name, unsigned long value) {
        const char *why = nullptr;
        bool ok = tune(s, name, value, &why);
        EXPECT_TRUE(ok) << name << ": " << (why ? why : "");
        return ok;
    }
    slab_cpu *mine(slab_kmem_cache *s) { return s->cpu_cache[slots::current()].load(); }
    slab_node *my_node(slab_kmem_cache *s) { return s->node_slab[mine(s)->node]; }
    void TearDown() override {
        for (slab_kmem_cache *s : made_) {
            designs::trim_all();
            EXPECT_TRUE(valid(s));
            destroy(s);
        }
    }
    std::vector<slab_kmem_cache *> made_;
};

// ---- sizing ----------------------------------------------------------------------------------

// The kernel's calculate_slab_order (v6.7), worked out by hand: from order 0 up, the first order
// that holds an object (at most 255 of them, SLAB_OBJ_MAX_NUM for a one-byte index; off the slab
// only while the index array's kmalloc block is at most half the object), stopping at
// slab_max_order (1) or at a leftover of at most 1/8. An on-slab array costs 1 byte per object.
TEST(SlabOrder, MatchesTheKernelsFormula) {
    struct row {
        size_t size;
        freelist_place place;
        bool found;
        unsigned order;
        uint32_t objects;
        size_t left;
    };
    const row rows[] = {
        {64, freelist_place::objfreelist, true, 0, 64, 0},
        {72, freelist_place::objfreelist, true, 0, 56, 64},
        {3000, freelist_place::objfreelist, true, 1, 2, 2192},   // 1096 * 8 > 4096 at order 0
        {5000, freelist_place::objfreelist, true, 1, 1, 3192},   // order 0 holds none
        {40000, freelist_place::objfreelist, true, 4, 1, 25536}, // the first order that holds one
        {16, freelist_place::objfreelist, false, 0, 0, 0},       // 256 > 255 at order 0: stop
        {16, freelist_place::on_slab, true, 0, 240, 16},         // 4096 / 17
        {64, freelist_place::on_slab, true, 0, 63, 1},           // 4096 / 65
        {1024, freelist_place::off_slab, true, 0, 4, 0},         // a 4-byte array, kmalloc-32
        {64, freelist_place::off_slab, false, 0, 0, 0},          // never worth it
    };
    for (const row &r : rows) {
        slab_geometry g;
        bool found = calculate_slab_order(r.size, r.size, r.place, 1, &g);
        EXPECT_EQ(found, r.found) << r.size;
        if (!found || !r.found) continue;
        EXPECT_EQ(g.order, r.order) << r.size;
        EXPECT_EQ(g.objects, r.objects) << r.size;
        EXPECT_EQ(g.left_over, r.left) << r.size;
    }
    // A larger slab_max_order lets a wasteful size climb.
    slab_geometry g;
    ASSERT_TRUE(calculate_slab_order(3000, 3000, freelist_place::objfreelist, 3, &g));
    EXPECT_EQ(g.order, 2u); // 16384 % 3000 = 1384, 1384 * 8 <= 16384
    EXPECT_EQ(g.objects, 5u);
    // The off-slab test halves the size the cache was asked for, not its slot: 40-byte objects
    // in 128-byte slots (align 128) would have a 32-byte block for 32 indices, more than 20.
    EXPECT_TRUE(calculate_slab_order(128, 128, freelist_place::off_slab, 1, &g));
    EXPECT_FALSE(calculate_slab_order(128, 40, freelist_place::off_slab, 1, &g));
    // kmalloc_slab's blocks under CONFIG_SLAB: kmalloc-32 is the smallest, kmalloc-96's objects
    // are cache-line aligned (128 bytes).
    EXPECT_EQ(freelist_block_size(1), 32u);
    EXPECT_EQ(freelist_block_size(32), 32u);
    EXPECT_EQ(freelist_block_size(33), 64u);
    EXPECT_EQ(freelist_block_size(65), 128u);
    EXPECT_EQ(freelist_block_size(129), 192u);
    EXPECT_EQ(freelist_block_size(193), 256u);
}

TEST(SlabOrder, DefaultLimitsBySize) {
    EXPECT_EQ(default_limit(32), 120u);
    EXPECT_EQ(default_limit(256), 120u);
    EXPECT_EQ(default_limit(257), 54u);
    EXPECT_EQ(default_limit(1024), 54u);
    EXPECT_EQ(default_limit(1025), 24u);
    EXPECT_EQ(default_limit(4096), 24u);
    EXPECT_EQ(default_limit(4097), 8u);
    EXPECT_EQ(default_limit(131072), 8u);
    EXPECT_EQ(default_limit(131073), 1u);
}

void nop_ctor(void *) {}

// Objects per slab and where the index array lives, for every kind of size, against what
// __kmem_cache_create of v6.7 gives on x86-64 (4 KiB pages, slab_max_order 1, a 64-byte colour
// step). Each row was worked out by hand from the kernel's code:
//   - the slot is the size rounded up to 8 and to the alignment, and at least 16 bytes
//     (SLAB_OBJ_MIN_SIZE: KMALLOC_MIN_SIZE is 32 under CONFIG_SLAB, so FREELIST_BYTE_INDEX is 1);
//   - set_objfreelist_slab_cache, unless there is a constructor or init on free:
//     calculate_slab_order with num = slab / slot, left = slab % slot; accepted if num <= 255 and
//     num one-byte indices fit in object_size bytes;
//   - else set_off_slab_cache: the same num and left, but an order is skipped while the
//     kmalloc block of num bytes (32, 64, 128 for kmalloc-96, 128, 192, 256) is more than half
//     of object_size; accepted only if left < num (else the array goes on the slab);
//   - else set_on_slab_cache: num = slab / (slot + 1), left = slab % (slot + 1);
//   - in each, the order loop stops at order 1 (slab_max_order) or once left * 8 <= slab.
// For example 64 bytes: 4096 / 64 = 64 objects and 64 index bytes fit in one object, so
// objfreelist; with a constructor, off-slab needs a 64-byte block (> 32) at order 0 and a
// 128-byte one at order 1, and 256 objects at order 2 are too many, so on-slab: 4096 / 65 = 63,
// 1 byte left. 700 bytes: slot 704, 5 objects leave 576 bytes (more than 1/8 of a page), so
// order 1: 8192 / 704 = 11, 448 left (7 colours).
TEST(SlabOrder, ObjectsPerSlabAndIndexPlaceAsTheKernelLaysThemOut) {
    if (boot_settings().max_order != 1) GTEST_SKIP() << "SLABKIT_SLAB_MAX_ORDER is set";
    using fp = freelist_place;
    constexpr fp objfl = fp::objfreelist, off = fp::off_slab, on = fp::on_slab;
    struct row {
        size_t object_size;
        size_t align;
        bool ctor;
        bool init_on_free;
        uint32_t slot;
        fp place;
        unsigned order;
        uint32_t objects;
        uint32_t left; // colour_range
    };
    const row rows[] = {
        // No constructor: objfreelist where num <= object_size, else on the slab.
        {1, 0, false, false, 16, on, 0, 240, 16},         // 256 > 255: 4096 / 17
        {8, 0, false, false, 16, on, 0, 240, 16},         // 16-byte slots
        {16, 0, false, false, 16, on, 0, 240, 16},        //
        {24, 0, false, false, 24, on, 0, 163, 21},        // 170 > 24; off: 192 > 12; 4096 / 25
        {32, 0, false, false, 32, on, 0, 124, 4},         // 128 > 32; off: 128 > 16; 4096 / 33
        {40, 0, false, false, 40, on, 0, 99, 37},         // 102 > 40; 4096 / 41
        {48, 0, false, false, 48, on, 0, 83, 29},         // 85 > 48; 4096 / 49
        {56, 0, false, false, 56, on, 0, 71, 49},         // 73 > 56; 4096 / 57
        {64, 0, false, false, 64, objfl, 0, 64, 0},       // 64 <= 64
        {72, 0, false, false, 72, objfl, 0, 56, 64},      //
        {96, 0, false, false, 96, objfl, 0, 42, 64},      //
        {100, 0, false, false, 104, objfl, 0, 39, 40},    // slot 104
        {128, 0, false, false, 128, objfl, 0, 32, 0},     //
        {192, 0, false, false, 192, objfl, 0, 21, 64},    //
        {200, 0, false, false, 200, objfl, 0, 20, 96},    //
        {256, 0, false, false, 256, objfl, 0, 16, 0},     //
        {300, 0, false, false, 304, objfl, 0, 13, 144},   //
        {512, 0, false, false, 512, objfl, 0, 8, 0},      //
        {700, 0, false, false, 704, objfl, 1, 11, 448},   // 576 * 8 > 4096 at order 0
        {1024, 0, false, false, 1024, objfl, 0, 4, 0},    //
        {2048, 0, false, false, 2048, objfl, 0, 2, 0},    //
        {3000, 0, false, false, 3000, objfl, 1, 2, 2192}, // 1096 * 8 > 4096 at order 0
        {4096, 0, false, false, 4096, objfl, 0, 1, 0},    //
        {5000, 0, false, false, 5000, objfl, 1, 1, 3192}, // order 0 holds none
        // A constructor: off the slab where the block is small and the leftover too.
        {8, 0, true, false, 16, on, 0, 240, 16},      //
        {32, 0, true, false, 32, on, 0, 124, 4},      //
        {64, 0, true, false, 64, on, 0, 63, 1},       // blocks 64, 128 > 32; 256 > 255
        {96, 0, true, false, 96, on, 0, 42, 22},      // blocks 64, 128, 192 > 48; 4096 / 97
        {128, 0, true, false, 128, off, 0, 32, 0},    // block 32 <= 64, left 0 < 32
        {192, 0, true, false, 192, on, 0, 21, 43},    // off: left 64 >= 21; 4096 / 193
        {200, 0, true, false, 200, on, 0, 20, 76},    // off: left 96 >= 20; 4096 / 201
        {256, 0, true, false, 256, off, 0, 16, 0},    //
        {700, 0, true, false, 704, on, 1, 11, 437},   // off: 448 >= 11; 8192 / 705
        {1024, 0, true, false, 1024, off, 0, 4, 0},   //
        {3000, 0, true, false, 3000, on, 1, 2, 2190}, // off: 2192 >= 2; 8192 / 3001
        {4096, 0, true, false, 4096, off, 0, 1, 0},   //
        {40, 128, true, false, 128, on, 0, 31, 97},   // block 32 > 40 / 2; 4096 / 129
        // Init on free: as with a constructor (slab_want_init_on_free).
        {8, 0, false, true, 16, on, 0, 240, 16},    //
        {64, 0, false, true, 64, on, 0, 63, 1},     //
        {96, 0, false, true, 96, on, 0, 42, 22},    //
        {256, 0, false, true, 256, off, 0, 16, 0},  //
        {1024, 0, false, true, 1024, off, 0, 4, 0}, //
    };
    const bool process_init_on_free = hardening::init_mode() & hardening::kInitOnFree;
    for (const row &r : rows) {
        const std::string what = std::to_string(r.object_size) + (r.align ? " aligned" : "") +
                                 (r.ctor ? " ctor" : "") + (r.init_on_free ? " init-on-free" : "");
        const cache_args args{"slab-layout", r.object_size, r.align, 0,
                              r.ctor ? nop_ctor : nullptr};
        slab_kmem_cache d;
        describe_cache(&d, args, design::slab);
        d.init.store(r.init_on_free ? hardening::kInitOnFree : 0);
        ASSERT_TRUE(lay_out(&d, true)) << what;
        EXPECT_EQ(d.size, r.slot) << what;
        EXPECT_EQ(d.place, r.place) << what;
        EXPECT_EQ(d.order, r.order) << what;
        EXPECT_EQ(d.objects, r.objects) << what;
        EXPECT_EQ(d.colour_range, r.left) << what;
        EXPECT_EQ(d.freelist_size, r.objects) << what; // one byte an object
        EXPECT_EQ(d.colour_off, r.align > kCacheLine ? r.align : kCacheLine) << what;
        EXPECT_EQ(d.object_index(uint64_t{r.slot} * 3), 3) << what; // the division follows
        EXPECT_EQ(d.object_index(uint64_t{r.slot} * 3 - 8), -1) << what;
        // A cache made the usual way lays out the same (where the process's SLABKIT_INIT
        // matches the row).
        if (r.init_on_free != process_init_on_free && !r.ctor) continue;
        const char *why = nullptr;
        slab_kmem_cache *s = create(args, &why);
        ASSERT_NE(s, nullptr) << what << ": " << (why ? why : "");
        EXPECT_EQ(s->size, r.slot) << what;
        EXPECT_EQ(s->place, r.place) << what;
        EXPECT_EQ(s->order, r.order) << what;
        EXPECT_EQ(s->objects, r.objects) << what;
        EXPECT_EQ(s->colour_range, r.left) << what;
        // Its slabs hold that many objects, each index one byte.
        void *p = alloc(s);
        ASSERT_NE(p, nullptr) << what;
        EXPECT_EQ(stats_of(s).objects, r.objects) << what;
        free(s, p);
        EXPECT_TRUE(valid(s)) << what;
        destroy(s);
    }
}

// Init on free keeps the index array out of the objects (the kernel's slab_want_init_on_free
// in set_objfreelist_slab_cache): a cache that zeroes freed objects never chooses objfreelist;
// init on alloc alone does not matter.
TEST(SlabOrder, InitOnFreeKeepsTheIndexArrayOutOfTheObjects) {
    for (size_t size : {64, 72, 96, 128, 200, 256, 512, 1024, 2048, 4096, 5000}) {
        const cache_args args{"slab-init", size, 0, 0, nullptr};
        for (unsigned init :
             {0u, unsigned{hardening::kInitOnAlloc}, unsigned{hardening::kInitOnFree},
              unsigned{hardening::kInitOnAlloc | hardening::kInitOnFree}}) {
            slab_kmem_cache d;
            describe_cache(&d, args, design::slab);
            d.init.store(static_cast<uint8_t>(init));
            ASSERT_TRUE(lay_out(&d, true)) << size;
            if (init & hardening::kInitOnFree)
                EXPECT_NE(d.place, freelist_place::objfreelist) << size << " init " << init;
            else
                EXPECT_EQ(d.place, freelist_place::objfreelist) << size << " init " << init;
        }
    }
    // The process's own setting reaches the caches it makes: with SLABKIT_INIT=free (or
    // alloc,free) in the environment, 256-byte objects keep their arrays off the slab.
    const char *why = nullptr;
    slab_kmem_cache *s = create(cache_args{"slab-init-real", 256, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr) << (why ? why : "");
    if (hardening::init_mode() & hardening::kInitOnFree)
        EXPECT_EQ(s->place, freelist_place::off_slab);
    else
        EXPECT_EQ(s->place, freelist_place::objfreelist);
    destroy(s);
}

int g_ctor_calls = 0;
void count_ctor(void *obj) {
    ++g_ctor_calls;
    memset(obj, 0x5c, 8);
}

// The index array inside a free object for caches without a constructor, off the slab for a
// constructor and large objects, on the slab for a constructor and small ones.
TEST_F(Slab, IndexArrayPlacesFollowTheKernel) {
    if (hardening::init_mode() & hardening::kInitOnFree) GTEST_SKIP() << "SLABKIT_INIT=free";
    // 128 B: the 32-byte array of 32 indices fits an object; so does 64 B's array of 64
    // one-byte indices (kmalloc-64 is objfreelist in the kernel too), but not 32 B's 128.
    slab_kmem_cache *plain = make("slab-objfl", 128);
    EXPECT_EQ(plain->place, freelist_place::objfreelist);
    EXPECT_EQ(plain->objects, 32u);
    slab_kmem_cache *plain64 = make("slab-objfl-64", 64);
    EXPECT_EQ(plain64->place, freelist_place::objfreelist);
    EXPECT_EQ(plain64->objects, 64u);
    EXPECT_EQ(make("slab-onslab-32", 32)->place, freelist_place::on_slab);
    slab_kmem_cache *big = make("slab-offslab", 1024, count_ctor);
    EXPECT_EQ(big->place, freelist_place::off_slab);
    EXPECT_EQ(big->objects, 4u);
    EXPECT_EQ(big->freelist_size, 4u);
    slab_kmem_cache *small = make("slab-onslab", 64, count_ctor);
    EXPECT_EQ(small->place, freelist_place::on_slab);
    EXPECT_EQ(small->objects, 63u);
    EXPECT_EQ(small->size, 64u); // no free pointer word: SLAB keeps indices, not links

    for (slab_kmem_cache *s : {plain, plain64, big, small}) {
        g_ctor_calls = 0;
        std::vector<void *> objs;
        for (uint32_t i = 0; i < 3 * s->objects + 1; ++i) {
            void *p = alloc(s);
            ASSERT_NE(p, nullptr);
            if (s->ctor) {
                // Constructed once, when its slab was made, and intact in every object.
                uint8_t expect[8];
                memset(expect, 0x5c, 8);
                EXPECT_EQ(memcmp(p, expect, 8), 0) << s->name;
            }
            memset(p, 0xab, s->object_size);
            objs.push_back(p);
        }
        if (s->ctor) {
            EXPECT_EQ(g_ctor_calls % static_cast<int>(s->objects), 0) << s->name;
        }
        // Full slabs: an objfreelist slab has no array until an object comes back.
        EXPECT_TRUE(valid(s)) << s->name;
        for (void *p : objs) {
            if (s->ctor) memset(p, 0x5c, 8); // the object's state as its constructor left it
            free(s, p);
        }
        flush_slot(s, slots::current(), false);
        EXPECT_TRUE(valid(s)) << s->name;
        metadata_bytes md;
        metadata(s, &md);
        uint64_t off_slab = s->place == freelist_place::off_slab
                                ? stats_of(s).slabs * meta_size_for(s->freelist_size)
                                : 0;
        EXPECT_EQ(md.off_slab_freelists, off_slab);
    }
}

// An objfreelist slab filled up, then emptied in another order: the array moves into the first
// object freed into the full slab, which is handed out last.
TEST_F(Slab, ObjfreelistArrayMovesIntoTheFirstObjectBack) {
    if (hardening::init_mode() & hardening::kInitOnFree)
        GTEST_SKIP() << "SLABKIT_INIT=free: no cache keeps its index array in an object";
    slab_kmem_cache *s = make("slab-objfl-move", 128);
    set(s, "limit", 1); // every free reaches the slab at once
    set(s, "shared", 0);
    std::vector<void *> objs;
    page *pg = nullptr;
    // Node 0 by name: with fake nodes the thread may move to another node's CPU between calls.
    const int node = 0;
    for (uint32_t i = 0; i < s->objects; ++i) {
        void *p = alloc_single(s, node); // straight from the slabs, in index order
        if (!pg) pg = virt_to_head_page(p);
        ASSERT_EQ(virt_to_head_page(p), pg);
        objs.push_back(p);
    }
    EXPECT_EQ(slab_active(pg), s->objects);
    EXPECT_EQ(pg->priv[0], 0u); // full: no array
    void *first_back = objs[5];
    free_single(s, pg, first_back);
    EXPECT_EQ(reinterpret_cast<void *>(pg->priv[0]), first_back);
    free_single(s, pg, objs[9]);
    EXPECT_TRUE(valid(s));
    EXPECT_EQ(alloc_single(s, node), objs[9]);    // LIFO within the slab
    EXPECT_EQ(alloc_single(s, node), first_back); // the array's home goes last
    EXPECT_EQ(pg->priv[0], 0u);
    for (void *p : objs) free_single(s, pg, p);
    EXPECT_TRUE(valid(s));
}

TEST_F(Slab, TunablesFollowTheKernelsDefaults) {
    slab_kmem_cache *s = make("slab-defaults", 100);
    const settings &st = boot_settings();
    EXPECT_EQ(s->limit, 120u);
    EXPECT_EQ(s->batchcount, 60u);
    EXPECT_EQ(s->shared, st.cpus > 1 ? 8u : 0u);
    EXPECT_EQ(s->alien_limit, 12u);
    slab_kmem_cache *big = make("slab-defaults-big", 200000);
    EXPECT_EQ(big->limit, 1u);
    EXPECT_EQ(big->batchcount, 1u);
    EXPECT_EQ(big->shared, 0u);
    EXPECT_EQ(big->alien_limit, 1u);
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        unsigned cpus = s->nr_nodes > 1 ? platform::numa().node_cpus[n] : platform::numa().cpus;
        EXPECT_EQ(s->node_slab[n]->free_limit, (1 + cpus) * 60u + s->objects);
        EXPECT_EQ(s->node_slab[n]->shared != nullptr, s->shared > 0);
    }
}

// ---- fast paths, refills and flushes ----------------------------------------------------------

TEST_F(Slab, FastPathsPopAndPushTheSlotsArray) {
    slab_kmem_cache *s = make("slab-fast", 64);
    void *a = alloc(s);
    ASSERT_NE(a, nullptr);
    slab_cpu *c = mine(s);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(stat(s, ALLOCMISS), 1u);
    EXPECT_EQ(stat(s, GROWN), 1u);
    // A fresh array was not touched: its first refill is at most 16 objects.
    EXPECT_EQ(stat(s, ALLOCS), 16u);
    EXPECT_EQ(c->ac.count(), 15u);
    EXPECT_EQ(c->ac.touched, 1u);
    void *b = alloc(s);
    EXPECT_EQ(stat(s, ALLOCHIT), 1u);
    free(s, b);
    free(s, a);
    EXPECT_EQ(stat(s, FREEHIT), 2u);
    EXPECT_EQ(alloc(s), a); // LIFO: the hot end is the top
    EXPECT_EQ(alloc(s), b);
    free(s, a);
    free(s, b);
    EXPECT_TRUE(valid(s));
}

// Refills take up to batchcount objects (16 while the array is untouched); a full array moves
// batchcount objects from its cold end (the oldest) back to the slabs when there is no shared
// array.
TEST_F(Slab, RefillAndFlushInBatches) {
    slab_kmem_cache *s = make("slab-batches", 64);
    set(s, "shared", 0);
    std::vector<void *> objs;
    for (int i = 0; i < 400; ++i) objs.push_back(alloc(s));
    slab_cpu *c = mine(s);
    design_stats st = stats_of(s);
    uint64_t misses = st.counters[ALLOCMISS], taken = st.counters[ALLOCS];
    EXPECT_GE(misses, 400u / 60u);
    EXPECT_LE(taken, 16 + 60 * (misses - 1)); // no refill took more than a batch
    EXPECT_EQ(taken, 400u + c->ac.count());   // every object taken is out or in the array
    EXPECT_LE(c->ac.count(), c->ac.limit);
    // Drain the array, then free in a known order: the array fills to its limit, and each
    // flush gives back the 60 freed first.
    flush_slot(s, slots::current(), false);
    ASSERT_EQ(c->ac.count(), 0u);
    uint64_t frees_before = stat(s, FREES);
    for (uint32_t i = 0; i < 121; ++i) free(s, objs[i]);
    EXPECT_EQ(stat(s, FREEMISS), 1u);
    EXPECT_EQ(stat(s, FREES) - frees_before, 60u);
    ASSERT_EQ(c->ac.count(), 61u);
    for (uint32_t i = 0; i < 61; ++i) EXPECT_EQ(c->entry()[i], objs[60 + i]) << i;
    for (uint32_t i = 121; i < objs.size(); ++i) free(s, objs[i]);
    EXPECT_EQ(stat(s, FREES) - frees_before, 60u * stat(s, FREEMISS));
    EXPECT_TRUE(valid(s));
}

// A flush goes to the node's shared array first; another slot's refill takes from it.
TEST_F(Slab, SharedArrayHandsObjectsBetweenSlots) {
    slab_kmem_cache *s = make("slab-shared", 64);
    set(s, "shared", 8); // 8 x 60 entries, whatever the CPU count
    std::set<void *> freed;
    std::thread([&] {
        std::vector<void *> objs;
        for (int i = 0; i < 300; ++i) objs.push_back(alloc(s));
        for (void *p : objs) {
            free(s, p);
            freed.insert(p);
        }
    }).join();
    EXPECT_GT(stat(s, SHARED_FREE), 0u);
    uint64_t in_shared = stats_of(s).shared_avail;
    EXPECT_EQ(in_shared, stat(s, SHARED_FREE));
    std::vector<void *> got;
    std::thread([&] {
        // This thread may inherit the first one's slot and its full array: empty it first, so
        // that the allocations refill.
        free(s, alloc(s));
        flush_slot(s, slots::current(), false);
        for (int i = 0; i < 10; ++i) got.push_back(alloc(s));
        for (void *p : got) free(s, p);
    }).join();
    EXPECT_GT(stat(s, SHARED_ALLOC), 0u);
    for (void *p : got) EXPECT_TRUE(freed.count(p)) << p;
    EXPECT_TRUE(valid(s));
}

// Free slabs stay on the node only while its free objects are within free_limit.
TEST_F(Slab, FreeSlabsBeyondFreeLimitGoBack) {
    slab_kmem_cache *s = make("slab-free-limit", 256);
    set(s, "shared", 0);
    std::vector<void *> objs;
    for (uint32_t i = 0; i < 40 * s->objects; ++i) objs.push_back(alloc(s));
    slab_node *n = my_node(s);
    for (void *p : objs) free(s, p);
    flush_slot(s, slots::current(), false);
    EXPECT_LE(n->free_objects.load(), n->free_limit);
    EXPECT_GT(n->free_slabs.load(), 0u); // but some are kept for the next allocations
    EXPECT_GT(stat(s, FREE_SLAB), 0u);
    EXPECT_TRUE(valid(s));
}

// ---- the reaper ------------------------------------------------------------------------------

// The reaper's clock in the test's hands (set_reap_clock): it starts at the real time and moves
// only when the test moves it.
std::atomic<uint64_t> g_test_now{0};
uint64_t test_now() {
    return g_test_now.load();
}
struct test_clock {
    test_clock() {
        g_test_now.store(platform::now_coarse_ms());
        set_reap_clock(test_now);
    }
    ~test_clock() { set_reap_clock(nullptr); }
    uint64_t now() const { return g_test_now.load(); }
    void set(uint64_t ms) {
        ASSERT_GE(ms, now()); // time goes forward
        g_test_now.store(ms);
    }
};

// A refill of `other` on this thread's slot: the slot's reaper has its turn, if it is due.
void refill_once(slab_kmem_cache *other) {
    flush_slot(other, slots::current(), false);
    void *o = alloc_slow(other, kNoSlot, kAnyNode, false);
    ASSERT_NE(o, nullptr);
    free(other, o);
}

// The reaper keeps the kernel's clock: a slot's pass (its array) every REAPTIMEOUT_AC, 2 s, and
// a node's (its shared array and free slabs) every REAPTIMEOUT_NODE, 4 s from its next_reap,
// however many slow paths or trimmer passes come in between.
TEST_F(Slab, ReaperKeepsTheKernelsIntervals) {
    slab_kmem_cache *s = make("slab-reap-clock", 64);
    slab_kmem_cache *other = make("slab-reap-clock-other", 32); // its refills run the reaper
    set(s, "shared", 8);
    test_clock clock;
    refill_once(other); // the slot's reaper has started (its first slow path starts it)
    std::vector<void *> objs;
    for (int i = 0; i < 2000; ++i) objs.push_back(alloc(s));
    for (void *p : objs) free(s, p);
    slab_cpu *c = mine(s);
    slab_node *n = my_node(s);
    const unsigned slot = slots::current();
    ASSERT_GT(c->ac.count(), 0u);
    ASSERT_EQ(c->ac.touched, 1u); // allocations touched it

    // The slot: not before its time, however many refills come.
    const uint64_t due = slot_next_reap_ms(slot);
    ASSERT_GT(due, 0u);
    const uint32_t full = c->ac.count();
    clock.set(due - 1);
    for (int i = 0; i < 3; ++i) refill_once(other);
    EXPECT_EQ(c->ac.count(), full);
    EXPECT_EQ(c->ac.touched, 1u);
    // At its time: a touched array is only marked untouched, and the next pass is 2 s on.
    clock.set(due);
    refill_once(other);
    EXPECT_EQ(c->ac.count(), full);
    EXPECT_EQ(c->ac.touched, 0u);
    EXPECT_EQ(slot_next_reap_ms(slot), due + kReapSlotMs);
    clock.set(due + kReapSlotMs - 1);
    for (int i = 0; i < 3; ++i) refill_once(other);
    EXPECT_EQ(c->ac.count(), full);
    // 2 s on: a fifth of the limit from the cold end.
    clock.set(due + kReapSlotMs);
    refill_once(other);
    EXPECT_EQ(full - c->ac.count(), (c->ac.limit + 4) / 5);
    EXPECT_EQ(slot_next_reap_ms(slot), due + 2 * kReapSlotMs);

    // The node: not before its next_reap, however many trimmer passes and slot passes come.
    uint64_t next_reap = n->next_reap_ms.load();
    ASSERT_GT(next_reap, clock.now());
    {
        platform::lock_guard guard(n->list_lock);
        n->shared->ac.touched = 0; // a refill may have taken from it
        n->free_touched = false;
    }
    const uint32_t shared = n->shared->ac.count();
    ASSERT_GT(shared, 0u);
    const uint32_t step = (n->shared->ac.limit + 4) / 5;
    ASSERT_GE(shared, step);
    const uint64_t reaped = stat(s, REAPED);
    clock.set(next_reap - 1);
    for (int i = 0; i < 3; ++i) {
        trimmer::maybe_run(true);
        refill_once(other);
    }
    EXPECT_EQ(n->shared->ac.count(), shared);
    EXPECT_EQ(stat(s, REAPED), reaped);
    // At next_reap: a fifth of the shared array, and the next node pass 4 s on.
    clock.set(next_reap);
    trimmer::maybe_run(true);
    EXPECT_EQ(n->shared->ac.count(), shared - step);
    EXPECT_EQ(n->next_reap_ms.load(), next_reap + kReapNodeMs);
    // 2 s on, a slot's pass: the node's turn has not come again.
    clock.set(next_reap + kReapSlotMs);
    trimmer::maybe_run(true);
    refill_once(other);
    EXPECT_EQ(n->shared->ac.count(), shared - step);
    // 4 s on: its turn, from the slot's pass as from the trimmer's.
    clock.set(next_reap + kReapNodeMs);
    refill_once(other);
    uint32_t now_shared = shared - 2 * step;
    if (shared - step < step) now_shared = shared - step - (shared - step + 1) / 2;
    EXPECT_EQ(n->shared->ac.count(), now_shared);
    EXPECT_EQ(n->next_reap_ms.load(), next_reap + 2 * kReapNodeMs);
    EXPECT_TRUE(valid(s));
}

// The reaper's bound, pass by pass (each 4 s apart, so that the slot's and the node's passes
// both come): an array not touched since the last pass gives back a fifth of its limit (half of
// what it holds, when that is less); the shared array the same; free slabs a fifth of what
// free_limit allows, unless the node used one since. So with nothing allocated, everything
// parked goes back within a bounded number of passes.
TEST_F(Slab, ReaperDrainsUntouchedArraysAndFreeSlabs) {
    slab_kmem_cache *s = make("slab-reap", 64);
    slab_kmem_cache *other = make("slab-reap-other", 32); // its refills run the slot's reaper
    set(s, "shared", 8);
    test_clock clock;
    refill_once(other); // the slot's reaper has started
    std::vector<void *> objs;
    for (int i = 0; i < 2000; ++i) objs.push_back(alloc(s));
    for (void *p : objs) free(s, p);
    slab_cpu *c = mine(s);
    slab_node *n = my_node(s);
    ASSERT_GT(c->ac.count(), 0u);
    ASSERT_GT(n->shared->ac.count(), 0u);
    const uint32_t step = (c->ac.limit + 4) / 5;
    for (int pass = 0; pass < 60; ++pass) {
        clock.set(clock.now() + kReapNodeMs);
        const bool slot_due = slot_next_reap_ms(slots::current()) <= clock.now();
        const bool node_due = n->next_reap_ms.load() <= clock.now();
        uint32_t before = c->ac.count();
        uint32_t shared_before = n->shared->ac.count();
        bool shared_touched = n->shared->ac.touched;
        bool array_touched = c->ac.touched;
        refill_once(other);       // this slot's pass, and the node's when due
        trimmer::maybe_run(true); // the node's pass, if the slot's did not take it
        uint32_t after = c->ac.count();
        if (!slot_due || !before) {
            EXPECT_EQ(after, before) << "pass " << pass;
        } else if (array_touched) {
            EXPECT_EQ(after, before) << "pass " << pass;
            EXPECT_EQ(c->ac.touched, 0u);
        } else {
            uint32_t expect = step <= before ? step : (before + 1) / 2;
            EXPECT_EQ(before - after, expect) << "pass " << pass;
        }
        if (node_due && !shared_touched && shared_before) {
            uint32_t sstep = (n->shared->ac.limit + 4) / 5;
            uint32_t expect = sstep <= shared_before ? sstep : (shared_before + 1) / 2;
            EXPECT_EQ(shared_before - n->shared->ac.count(), expect) << "pass " << pass;
        } else if (!node_due) {
            EXPECT_EQ(n->shared->ac.count(), shared_before) << "pass " << pass;
        }
        EXPECT_TRUE(n->free_objects.load() <= n->free_limit || n->free_slabs.load() == 0);
    }
    EXPECT_EQ(c->ac.count(), 0u);
    EXPECT_EQ(n->shared->ac.count(), 0u);
    EXPECT_EQ(n->free_slabs.load(), 0u);
    EXPECT_EQ(stats_of(s).slabs, 0u);
    EXPECT_GT(stat(s, REAPED), 0u);
    EXPECT_TRUE(valid(s));
}

// ---- colouring -------------------------------------------------------------------------------

TEST_F(Slab, ColouringCyclesThroughTheLeftover) {
    slab_kmem_cache *s = make("slab-colour", 300); // 304 B slots: 13 per page, 144 B left
    unsigned colours = s->colour_range / s->colour_off;
    ASSERT_GE(colours, 2u);
    set(s, "limit", 1); // one object per refill: each new slab is the next colour
    set(s, "shared", 0);
    std::vector<void *> objs;
    std::vector<uintptr_t> seen;
    page *last = nullptr;
    for (uint32_t i = 0; i < 6 * s->objects; ++i) {
        void *p = alloc(s);
        objs.push_back(p);
        page *pg = virt_to_head_page(p);
        if (pg != last) {
            seen.push_back(pg->priv[2]);
            last = pg;
            // Objects start at the colour offset (the first handed out may be any of them:
            // the freelist order may be random).
            EXPECT_EQ((reinterpret_cast<uintptr_t>(p) % kPageSize - pg->priv[2]) % s->size, 0u);
            EXPECT_GE(reinterpret_cast<uintptr_t>(p) % kPageSize, pg->priv[2]);
        }
    }
    ASSERT_GE(seen.size(), 4u);
    for (size_t i = 1; i < seen.size(); ++i)
        EXPECT_EQ(seen[i], ((seen[i - 1] / s->colour_off + 1) % colours) * s->colour_off) << i;
    for (void *p : objs) free(s, p);
}

// cache_grow_begin steps a node's colour_next (0 in a new node) before it uses it, wrapping at
// the number of colours: a cache's first slabs have colours 1, 2, ..., colours - 1, 0, 1, ...,
// and every slab colour 0 when the leftover holds fewer than two colour steps.
TEST_F(Slab, ColoursOfTheFirstSlabsStartAtOne) {
    struct row {
        size_t size;
        unsigned colours; // leftover / 64 (worked out in ObjectsPerSlabAndIndexPlace...)
    };
    const row rows[] = {
        {700, 7}, // 448 bytes left of an order-1 slab
        {300, 2}, // 144 left
        {96, 1},  // 64 left: one colour, 0
        {64, 0},  // none left
    };
    if (hardening::init_mode() & hardening::kInitOnFree) GTEST_SKIP() << "SLABKIT_INIT=free";
    for (const row &r : rows) {
        slab_kmem_cache *s = make(("slab-colours-" + std::to_string(r.size)).c_str(), r.size);
        ASSERT_EQ(s->colour_range / s->colour_off, r.colours) << r.size;
        const int node = 0; // one node's sequence, whatever CPU the thread runs on
        EXPECT_EQ(s->node_slab[node]->colour_next.load(), 0u);
        std::vector<void *> objs;
        std::vector<uintptr_t> colours; // of each new slab, in the order they were made
        for (uint32_t i = 0; i < 9 * s->objects; ++i) {
            void *p = alloc_single(s, node); // straight from the node's slabs: one slab at a time
            ASSERT_NE(p, nullptr);
            objs.push_back(p);
            page *pg = virt_to_head_page(p);
            if (i % s->objects == 0) colours.push_back(pg->priv[2]);
        }
        ASSERT_EQ(colours.size(), 9u);
        for (size_t k = 0; k < colours.size(); ++k) {
            uintptr_t expect = r.colours > 1 ? (k + 1) % r.colours * s->colour_off : 0;
            EXPECT_EQ(colours[k], expect) << r.size << " slab " << k;
        }
        for (void *p : objs) free_single(s, virt_to_head_page(p), p);
    }
}

// ---- NUMA: alien caches -----------------------------------------------------------------------

// Objects of another node's slabs freed on this slot's node go to this node's alien cache for
// that node (NODEFREES), which drains into that node's shared array and slabs when full
// (ALIENOVERFLOW). Runs with SLABKIT_FAKE_NUMA=2 (ctest designs_tests_fake_numa_2).
TEST_F(Slab, AlienCachesReturnObjectsToTheirNode) {
    slab_kmem_cache *s = make("slab-alien", 64);
    if (s->nr_nodes < 2) GTEST_SKIP() << "one node (ctest runs this with SLABKIT_FAKE_NUMA=2)";
    set(s, "shared", 0);
    free(s, alloc(s));
    unsigned here = mine(s)->node;
    unsigned there = (here + 1) % s->nr_nodes;
    std::vector<void *> objs;
    for (int i = 0; i < 40; ++i) {
        void *p = alloc_node(s, static_cast<int>(there), false);
        ASSERT_NE(p, nullptr);
        ASSERT_EQ(page_to_nid(virt_to_head_page(p)) % s->nr_nodes, there);
        objs.push_back(p);
    }
    EXPECT_EQ(stat(s, NODEALLOCS), 40u);
    alien_cache *alc = s->node_slab[here]->alien[there];
    ASSERT_NE(alc, nullptr);
    EXPECT_EQ(s->node_slab[here]->alien[here], nullptr);
    uint64_t free_there = s->node_slab[there]->free_objects.load();
    uint32_t own = mine(s)->ac.count();
    for (void *p : objs) free(s, p);
    EXPECT_EQ(stat(s, NODEFREES), 40u);
    EXPECT_EQ(stat(s, ALIENOVERFLOW), 40u / 12u); // 12 entries each
    EXPECT_EQ(alc->ac.count(), 40u % 12u);
    EXPECT_EQ(mine(s)->ac.count(), own); // none went to this slot's own array
    EXPECT_EQ(s->node_slab[there]->free_objects.load(), free_there + 36u);
    EXPECT_TRUE(valid(s));
    reclaim(s);
    EXPECT_EQ(alc->ac.count(), 0u);
    EXPECT_TRUE(valid(s));
}

// An alien cache per ordered pair of nodes: memory that grows with the square of the nodes.
// ctest runs this with 1, 2, 4 and 8 fake nodes (slab_alien_memory_N) and prints the figures.
TEST_F(Slab, AlienMemoryGrowsWithTheSquareOfTheNodes) {
    slab_kmem_cache *s = make("slab-alien-memory", 64);
    metadata_bytes md;
    metadata(s, &md);
    uint64_t nodes = s->nr_nodes;
    EXPECT_EQ(md.alien_count, nodes * (nodes - 1));
    size_t one = meta_size_for(sizeof(alien_cache) + 12 * sizeof(void *));
    EXPECT_EQ(md.alien_caches, md.alien_count * one);
    printf("SLAB alien caches with %llu node(s): %llu per cache, %llu bytes per cache "
           "(shared arrays %llu bytes, node structures %llu bytes)\n",
           static_cast<unsigned long long>(nodes), static_cast<unsigned long long>(md.alien_count),
           static_cast<unsigned long long>(md.alien_caches),
           static_cast<unsigned long long>(md.shared_arrays),
           static_cast<unsigned long long>(md.node_structures));
}

// ---- tunables, statistics ---------------------------------------------------------------------

TEST_F(Slab, TunablesAreCheckedAndNamed) {
    slab_kmem_cache *s = make("slab-tune", 128);
    const char *why = nullptr;
    EXPECT_FALSE(tune(s, "hiwater", 10, &why));
    EXPECT_NE(std::string(why).find("limit, batchcount, shared"), std::string::npos) << why;
    EXPECT_FALSE(tune(s, "limit", 0, &why));
    EXPECT_NE(std::string(why).find("at least 1"), std::string::npos) << why;
    EXPECT_FALSE(tune(s, "batchcount", 121, &why));
    EXPECT_NE(std::string(why).find("limit"), std::string::npos) << why;
    EXPECT_FALSE(tune(s, "limit", 5000, &why));
    EXPECT_FALSE(tune(s, "shared", 100, &why)); // 100 x 60 entries
    EXPECT_NE(std::string(why).find("shared x batchcount"), std::string::npos) << why;
    EXPECT_FALSE(tune(&cache_cache(), "limit", 10, &why));
    EXPECT_EQ(s->limit, 120u); // nothing changed

    // A new limit: the slot remakes its array (the caller's at once, others at their next slow
    // path), and batchcount follows it down.
    free(s, alloc(s));
    set(s, "limit", 10);
    EXPECT_EQ(s->batchcount, 5u);
    EXPECT_EQ(mine(s)->ac.limit, 10u);
    std::vector<void *> objs;
    for (int i = 0; i < 50; ++i) objs.push_back(alloc(s));
    for (void *p : objs) free(s, p);
    EXPECT_LE(mine(s)->ac.count(), 10u);
    set(s, "batchcount", 3);
    set(s, "shared", 4);
    design_stats st = stats_of(s);
    EXPECT_EQ(st.slabinfo_tunables[0], 10u);
    EXPECT_EQ(st.slabinfo_tunables[1], 3u);
    EXPECT_EQ(st.slabinfo_tunables[2], 4u);
    ASSERT_EQ(st.nr_tunables, 4u);
    EXPECT_STREQ(st.tunable_names[1], "limit");
    EXPECT_TRUE(valid(s));
}

// The slabinfo line fills SLAB's tunables and slabdata columns as the kernel did: active slabs
// leave out the free ones, sharedavail counts the shared arrays' objects.
TEST_F(Slab, SlabinfoFillsTheSlabdataColumns) {
    slab_kmem_cache *s = make("slab-info", 512);
    set(s, "shared", 2);
    std::vector<void *> objs;
    for (int i = 0; i < 600; ++i) objs.push_back(alloc(s));
    for (void *p : objs) free(s, p);
    design_stats st = stats_of(s);
    EXPECT_GT(st.shared_avail, 0u);
    EXPECT_GT(st.free_slabs, 0u);
    static char text[1 << 16];
    slabkit_slabinfo(text, sizeof text);
    std::string all(text);
    size_t at = all.find("slab-info ");
    ASSERT_NE(at, std::string::npos) << all;
    std::string line = all.substr(at, all.find('\n', at) - at);
    char expect[160];
    snprintf(expect, sizeof expect, ": tunables %4u %4u %4u : slabdata %6llu %6llu %6llu", 54u, 27u,
             2u, static_cast<unsigned long long>(st.slabs - st.free_slabs),
             static_cast<unsigned long long>(st.slabs),
             static_cast<unsigned long long>(st.shared_avail));
    EXPECT_NE(line.find(expect), std::string::npos) << line << "\n" << expect;
}

// ---- threads ---------------------------------------------------------------------------------

TEST_F(Slab, ThreadChurnKeepsInvariants) {
    slab_kmem_cache *s = make("slab-churn", 200);
    testsupport::thread_churn([&] { return alloc(s); }, [&](void *p) { free(s, p); },
                              [&](int phase) { EXPECT_TRUE(valid(s)) << "phase " << phase; });
    designs::trim_all();
    EXPECT_EQ(stats_of(s).slabs, 0u);
}

// Objects of SLAB's bootstrap caches (descriptors, per-node structures, arrays) come and go with
// the caches and slots that use them.
TEST_F(Slab, BootstrapCachesHoldTheStructures) {
    uint64_t before = stats_of(&cache_cache()).active_objects;
    slab_kmem_cache *s = make("slab-meta", 32);
    EXPECT_GE(stats_of(&cache_cache()).active_objects, before + 1);
    std::thread([&] { free(s, alloc(s)); }).join();
    EXPECT_TRUE(valid(&cache_cache()));
    EXPECT_TRUE(valid(&node_cache()));
    EXPECT_GT(meta_bytes(s->node_slab[0]), 0u);
}

TEST(SlabDestroy, LeakedObjectsAreReportedAndKept) {
    for (void (*ctor)(void *) : {static_cast<void (*)(void *)>(nullptr), count_ctor}) {
        const char *why = nullptr;
        slab_kmem_cache *s = create(cache_args{"slab-leak", 1024, 0, 0, ctor}, &why);
        ASSERT_NE(s, nullptr);
        std::vector<void *> kept;
        for (uint32_t i = 0; i < 2 * s->objects + 1; ++i) kept.push_back(alloc(s));
        void *gone = alloc(s);
        free(s, gone);
        ::testing::internal::CaptureStderr();
        destroy(s);
        std::string err = ::testing::internal::GetCapturedStderr();
        for (void *p : kept) {
            char addr[32];
            snprintf(addr, sizeof addr, "%p", p);
            EXPECT_NE(err.find(addr), std::string::npos) << addr << "\n" << err;
        }
        char gone_addr[32];
        snprintf(gone_addr, sizeof gone_addr, "%p is", gone);
        EXPECT_EQ(err.find(gone_addr), std::string::npos) << err;
        EXPECT_NE(err.find(std::to_string(kept.size()) + " object(s) still allocated"),
                  std::string::npos)
            << err;
        for (void *p : kept) memset(p, 1, 1024); // still ours: no use-after-free
    }
}

} // namespace
} // namespace slabkit::slab
