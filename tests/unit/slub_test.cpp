// SLUB internals: the order table against the kernel's formula, the defaults by size, the free
// pointer's place, the fast paths, the frozen/unfrozen transitions of a slab, the slot's partial
// chain and the node partial lists with their bounds, remote frees onto slab freelists from
// several threads while the owner allocates, statistics, and the invariant checker after each
// phase.
#include "designs/designs.hpp"
#include "page/page_allocator.hpp"
#include "slub/slub_internal.hpp"

#include "support/thread_churn.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace slabkit::slub {
namespace {

::testing::AssertionResult valid(slub_cache *s) {
    char report[1024];
    unsigned problems = validate(s, report, sizeof report);
    if (problems == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << problems << " problem(s):\n" << report;
}

design_stats stats_of(slub_cache *s) {
    design_stats st;
    statistics(s, &st);
    return st;
}

uint64_t stat(slub_cache *s, stat_item item) {
    return stats_of(s).counters[item];
}

counters counters_of(const page *pg) {
    return counters{pg->priv[1]};
}

page *slab_of(const void *obj) {
    return virt_to_head_page(obj);
}

class Slub : public ::testing::Test {
  protected:
    slub_cache *make(const char *name, size_t size, void (*ctor)(void *) = nullptr,
                     unsigned flags = 0) {
        const char *why = nullptr;
        slub_cache *s = create(cache_args{name, size, 0, flags, ctor}, &why);
        EXPECT_NE(s, nullptr) << (why ? why : "");
        made_.push_back(s);
        return s;
    }
    slub_cpu *mine(slub_cache *s) { return s->cpu_slab[slots::current()].load(); }
    void TearDown() override {
        for (slub_cache *s : made_) {
            designs::trim_all();
            EXPECT_TRUE(valid(s));
            destroy(s);
        }
    }
    std::vector<slub_cache *> made_;
};

// ---- sizing ----------------------------------------------------------------------------------

// The kernel's calculate_order (v6.7), worked out by hand for these sizes: min_objects =
// 4 * (fls(cpus) + 1), capped by what an order-3 slab holds; min_order = get_order(min_objects
// * size); the first order from there up to slub_max_order (3) whose leftover is at most 1/16,
// then 1/8, 1/4, 1/2 of the slab; else get_order(size). E.g. 2 CPUs (12 objects), 1500 B:
// get_order(18000) = 3, 32768 % 1500 = 1268 <= 2048 -> order 3 (21 objects); 4 CPUs (16), 3000 B:
// capped to 10 objects, get_order(30000) = 3, leftover 2768 > 2048 but <= 4096 -> order 3.
TEST(SlubOrder, MatchesTheKernelsFormula) {
    const struct {
        size_t size;
        unsigned cpus2, cpus4, cpus16;
    } table[] = {
        {8, 0, 0, 0},     {16, 0, 0, 0},    {64, 0, 0, 0},   {96, 0, 0, 0},   {192, 0, 0, 1},
        {256, 0, 0, 1},   {512, 1, 1, 2},   {700, 2, 2, 3},  {1024, 2, 2, 3}, {1500, 3, 3, 3},
        {2048, 3, 3, 3},  {3000, 3, 3, 3},  {4096, 3, 3, 3}, {5000, 3, 3, 3}, {8192, 3, 3, 3},
        {10000, 3, 3, 3}, {40000, 4, 4, 4}, // larger than an order-3 slab: the order of one object
    };
    for (const auto &row : table) {
        EXPECT_EQ(calculate_order(row.size, 2, 0, 3), row.cpus2) << row.size << " B, 2 CPUs";
        EXPECT_EQ(calculate_order(row.size, 4, 0, 3), row.cpus4) << row.size << " B, 4 CPUs";
        EXPECT_EQ(calculate_order(row.size, 16, 0, 3), row.cpus16) << row.size << " B, 16 CPUs";
    }
    // slub_max_order=0 (seed 001's order-0 runs): order 0 wherever one object fits a page.
    for (size_t size : {8, 700, 2048, 4096}) EXPECT_EQ(calculate_order(size, 16, 0, 0), 0u);
    EXPECT_EQ(calculate_order(5000, 16, 0, 0), 1u);
    EXPECT_EQ(calculate_order(10000, 16, 0, 0), 2u);
    // slub_min_objects overrides the CPU-derived count.
    EXPECT_EQ(calculate_order(256, 2, 64, 3), 2u);
}

// A slab holds at most 32767 objects (MAX_OBJS_PER_PAGE): when min_objects asks for an order
// that would hold more, the kernel takes get_order(size * 32767) - 1. 8 B and 32767 objects:
// get_order(262136) = 6 would hold 32768, so order 5 (16384 objects); 16 B: order 7 would hold
// 32768, so 6. Below the bound nothing changes: 32 B and 8192 objects, order 6 (8192 objects).
TEST(SlubOrder, ASlabHoldsAtMost32767Objects) {
    EXPECT_EQ(calculate_order(8, 2, 32767, kMaxOrder), 5u);
    EXPECT_EQ(calculate_order(16, 2, 32767, kMaxOrder), 6u);
    EXPECT_EQ(calculate_order(32, 2, 8192, kMaxOrder), 6u);
    for (size_t size : {8, 16, 24, 40, 64})
        for (unsigned min_objects : {1000u, 20000u, 32767u}) {
            unsigned order = calculate_order(size, 2, min_objects, kMaxOrder);
            EXPECT_LE((kPageSize << order) / size, kMaxObjsPerSlab)
                << size << " B, min_objects " << min_objects << ": order " << order;
        }
}

TEST(SlubOrder, DefaultsBySize) {
    // min_partial = clamp(ilog2(size) / 2, 5, 10).
    EXPECT_EQ(default_min_partial(8), 5u);
    EXPECT_EQ(default_min_partial(2048), 5u);
    EXPECT_EQ(default_min_partial(4096), 6u);
    EXPECT_EQ(default_min_partial(65536), 8u);
    EXPECT_EQ(default_min_partial(size_t{1} << 22), 10u);
    // cpu_partial: 120 objects below 256 bytes, 52 below 1 KiB, 24 below a page, then 6.
    EXPECT_EQ(default_cpu_partial(64), 120u);
    EXPECT_EQ(default_cpu_partial(255), 120u);
    EXPECT_EQ(default_cpu_partial(256), 52u);
    EXPECT_EQ(default_cpu_partial(1024), 24u);
    EXPECT_EQ(default_cpu_partial(4096), 6u);
}

TEST_F(Slub, CacheSizingFollowsTheBootSettings) {
    slub_cache *s = make("slub-size", 700);
    const settings &st = boot_settings();
    EXPECT_EQ(s->order, calculate_order(s->size, st.cpus, st.min_objects, st.max_order));
    EXPECT_EQ(s->objects, (kPageSize << s->order) / s->size);
    if (st.min_partial < 0) {
        EXPECT_EQ(s->min_partial, default_min_partial(s->size));
    }
    if (st.cpu_partial < 0) {
        EXPECT_EQ(s->cpu_partial, default_cpu_partial(s->size));
    }
    EXPECT_EQ(s->cpu_partial_slabs, (2 * s->cpu_partial + s->objects - 1) / s->objects);
}

// In the middle of the object (a neighbour's small overflow does not reach it), outside it when
// the object must keep its contents while free (a constructor, poisoning).
TEST_F(Slub, FreePointerPlacement) {
    slub_cache *mid = make("slub-fp-mid", 64);
    EXPECT_EQ(mid->offset, 32u);
    slub_cache *odd = make("slub-fp-odd", 100);
    EXPECT_EQ(odd->offset, 48u); // ALIGN_DOWN(100 / 2, 8)
    slub_cache *tiny = make("slub-fp-tiny", 8);
    EXPECT_EQ(tiny->offset, 0u);
    slub_cache *ctor = make("slub-fp-ctor", 64, [](void *p) { memset(p, 1, 64); });
    EXPECT_EQ(ctor->offset, 64u);
    EXPECT_EQ(ctor->size, 72u);
    // A poisoned cache is a debug cache (core/debug.hpp): the free pointer is the design's word
    // at the slot's start, before the object.
    slub_cache *poison = make("slub-fp-poison", 64, nullptr, kPoison);
    EXPECT_TRUE(poison->debug);
    EXPECT_EQ(poison->offset, 0u);
    EXPECT_EQ(poison->debug_offset, 8u);
    // Every object still works as a linked list member.
    std::vector<void *> objs;
    for (int i = 0; i < 1000; ++i) objs.push_back(alloc(mid));
    for (void *p : objs) memset(p, 0xee, 64);
    for (void *p : objs) free(mid, p);
    EXPECT_TRUE(valid(mid));
}

// ---- the fast paths and the slot's current slab ------------------------------------------------

TEST_F(Slub, FastPathsPopAndPushTheSlotsFreelist) {
    slub_cache *s = make("slub-fast", 64);
    void *a = alloc(s);
    ASSERT_NE(a, nullptr);
    slub_cpu *c = mine(s);
    ASSERT_NE(c, nullptr);
    page *pg = c->slab.load();
    EXPECT_EQ(slab_of(a), pg);
    EXPECT_TRUE(counters_of(pg).frozen());
    EXPECT_EQ(counters_of(pg).inuse(), s->objects); // the slot holds them all
    EXPECT_EQ(stat(s, ALLOC_SLAB), 1u);
    EXPECT_EQ(stat(s, ALLOC_SLOWPATH), 1u);
    EXPECT_EQ(stats_of(s).queued_objects, s->objects - 1);
    void *b = alloc(s);
    EXPECT_EQ(stat(s, ALLOC_FASTPATH), 1u);
    free(s, b);
    free(s, a);
    EXPECT_EQ(stat(s, FREE_FASTPATH), 2u);
    EXPECT_EQ(alloc(s), a); // LIFO
    EXPECT_EQ(alloc(s), b);
    EXPECT_EQ(stats_of(s).queued_objects, s->objects - 2);
    free(s, a);
    free(s, b);
    EXPECT_TRUE(valid(s));
}

// A slab's life: frozen as the slot's current slab; full and unfrozen on no list when the slot
// has taken every object (DEACTIVATE_BYPASS); frozen onto the freeing slot's partial chain when
// an object comes back (CPU_PARTIAL_FREE); frees into a frozen slab go to its own freelist
// (FREE_FROZEN) and come back to the owner in one refill (ALLOC_REFILL); a flush unfreezes it.
TEST_F(Slub, FrozenAndUnfrozenTransitions) {
    slub_cache *s = make("slub-states", 256);
    const uint32_t n = s->objects;
    std::vector<void *> first(n);
    for (auto &p : first) p = alloc(s);
    page *pg1 = slab_of(first[0]);
    slub_cpu *c = mine(s);
    EXPECT_EQ(c->slab.load(), pg1);
    EXPECT_EQ(c->freelist, nullptr);
    EXPECT_TRUE(valid(s));

    // The slot's freelist is empty and so is the slab's: it is dropped, full, on no list.
    void *x = alloc(s);
    page *pg2 = slab_of(x);
    EXPECT_NE(pg2, pg1);
    EXPECT_EQ(stat(s, DEACTIVATE_BYPASS), 1u);
    EXPECT_FALSE(counters_of(pg1).frozen());
    EXPECT_EQ(counters_of(pg1).inuse(), n);
    EXPECT_FALSE(pg1->aux & kOnPartial);
    EXPECT_TRUE(valid(s));

    // A free into the full slab freezes it onto this slot's partial chain: no lock.
    free(s, first[0]);
    EXPECT_EQ(stat(s, CPU_PARTIAL_FREE), 1u);
    EXPECT_TRUE(counters_of(pg1).frozen());
    EXPECT_EQ(c->partial, pg1);
    EXPECT_EQ(c->partial_slabs.load(), 1u);
    EXPECT_TRUE(valid(s));
    for (uint32_t i = 1; i < n; ++i) free(s, first[i]);
    EXPECT_EQ(stat(s, FREE_FROZEN), n - 1);
    EXPECT_EQ(counters_of(pg1).inuse(), 0u);

    // Another thread frees into this slot's current slab: onto the slab's own freelist.
    void *y = alloc(s);
    std::thread([&] { free(s, y); }).join();
    EXPECT_EQ(stat(s, FREE_FROZEN), n);
    EXPECT_NE(slab_freelist(pg2), nullptr);
    // Drain the slot's freelist: the next slow path refills from the slab's freelist.
    std::vector<void *> rest;
    while (c->freelist) rest.push_back(alloc(s));
    uint64_t refills = stat(s, ALLOC_REFILL);
    void *z = alloc(s);
    EXPECT_EQ(z, y);
    EXPECT_EQ(stat(s, ALLOC_REFILL), refills + 1);
    EXPECT_TRUE(valid(s));

    // A flush (shrink) deactivates the current slab and unfreezes the chain.
    rest.push_back(z);
    rest.push_back(x);
    for (void *p : rest) free(s, p);
    uint64_t flushes = stat(s, CPUSLAB_FLUSH);
    EXPECT_EQ(designs::shrink(s), 0u);
    EXPECT_EQ(stat(s, CPUSLAB_FLUSH), flushes + 1);
    EXPECT_GE(stat(s, DEACTIVATE_EMPTY) + stat(s, DEACTIVATE_TO_HEAD), 1u);
    EXPECT_EQ(c->slab.load(), nullptr);
    EXPECT_EQ(c->partial, nullptr);
    EXPECT_EQ(stats_of(s).slabs, 0u);
    EXPECT_TRUE(valid(s));
}

// Deactivating a slab that other slots freed into sends it to the tail of the partial list.
TEST_F(Slub, DeactivationAfterRemoteFreesGoesToTheTail) {
    slub_cache *s = make("slub-tail", 128);
    std::vector<void *> objs(s->objects / 2);
    for (auto &p : objs) p = alloc(s);
    std::thread([&] { free(s, objs[0]); }).join();
    uint64_t remote = stat(s, DEACTIVATE_REMOTE_FREES);
    flush_slot(s, slots::current(), false);
    EXPECT_EQ(stat(s, DEACTIVATE_REMOTE_FREES), remote + 1);
    EXPECT_EQ(stat(s, DEACTIVATE_TO_TAIL), 1u);
    page *pg = slab_of(objs[1]);
    EXPECT_TRUE(pg->aux & kOnPartial);
    EXPECT_FALSE(counters_of(pg).frozen());
    EXPECT_TRUE(valid(s));
    for (size_t i = 1; i < objs.size(); ++i) free(s, objs[i]);
    EXPECT_TRUE(valid(s));
}

// ---- partial lists and their bounds ----------------------------------------------------------

// Frees into many full slabs from one slot: its chain grows to cpu_partial_slabs, then moves to
// the node lists (CPU_PARTIAL_DRAIN); the checker verifies the bound after each phase.
TEST_F(Slub, PartialChainIsBoundedByCpuPartial) {
    slub_cache *s = make("slub-chain", 512);
    const char *why = nullptr;
    ASSERT_TRUE(tune(s, "cpu_partial", s->objects * 2, &why)); // 4 slabs
    EXPECT_EQ(s->cpu_partial_slabs, 4u);
    // 12 full slabs, dropped by this slot one after another.
    std::vector<std::vector<void *>> slabs(12);
    for (auto &objs : slabs)
        for (uint32_t i = 0; i < s->objects; ++i) objs.push_back(alloc(s));
    // Past the last slab, so the slot's current slab is none of them.
    void *guard = alloc(s);
    EXPECT_TRUE(valid(s));
    // One object back into each: each full slab is frozen onto the chain.
    for (auto &objs : slabs) {
        free(s, objs.back());
        objs.pop_back();
        EXPECT_LE(mine(s)->partial_slabs.load(), s->cpu_partial_slabs);
        ASSERT_TRUE(valid(s));
    }
    EXPECT_EQ(stat(s, CPU_PARTIAL_FREE), 12u);
    EXPECT_EQ(stat(s, CPU_PARTIAL_DRAIN), 2u); // at the 5th and 9th slab
    EXPECT_EQ(stat(s, FREE_ADD_PARTIAL), 8u);  // the drained chains, onto the node list
    // Taking from the chain first, then the node partial list (each of those slabs has one free
    // object), once the guard's slab is used up.
    uint64_t from_chain = stat(s, CPU_PARTIAL_ALLOC);
    std::vector<void *> again;
    while (mine(s)->freelist) again.push_back(alloc(s));
    for (int i = 0; i < 12; ++i) again.push_back(alloc(s));
    EXPECT_GT(stat(s, CPU_PARTIAL_ALLOC), from_chain);
    EXPECT_GT(stat(s, ALLOC_FROM_PARTIAL), 0u);
    EXPECT_TRUE(valid(s));
    for (void *p : again) free(s, p);
    for (auto &objs : slabs)
        for (void *p : objs) free(s, p);
    free(s, guard);
    EXPECT_TRUE(valid(s));
}

// With cpu_partial 0 the slot keeps no chain: a full slab gaining an object goes onto its node's
// partial list under the list lock.
TEST_F(Slub, NoChainWithCpuPartialZero) {
    slub_cache *s = make("slub-nochain", 256);
    const char *why = nullptr;
    ASSERT_TRUE(tune(s, "cpu_partial", 0, &why));
    std::vector<void *> objs(3 * s->objects);
    for (auto &p : objs) p = alloc(s);
    void *last = alloc(s);
    free(s, objs[0]);
    EXPECT_EQ(stat(s, CPU_PARTIAL_FREE), 0u);
    EXPECT_EQ(stat(s, FREE_ADD_PARTIAL), 1u);
    EXPECT_TRUE(slab_of(objs[0])->aux & kOnPartial);
    EXPECT_EQ(mine(s)->partial, nullptr);
    EXPECT_TRUE(valid(s));
    for (size_t i = 1; i < objs.size(); ++i) free(s, objs[i]);
    free(s, last);
    EXPECT_TRUE(valid(s));
}

// A node keeps empty slabs only while fewer than min_partial slabs are partial: the rest go back
// to the page allocator at once (FREE_REMOVE_PARTIAL, FREE_SLAB); shrink frees the kept ones.
TEST_F(Slub, EmptySlabsBeyondMinPartialAreFreed) {
    slub_cache *s = make("slub-minpartial", 1024);
    const char *why = nullptr;
    ASSERT_TRUE(tune(s, "min_partial", 2, &why));
    ASSERT_TRUE(tune(s, "cpu_partial", 0, &why));
    const size_t kSlabs = 8;
    std::vector<std::vector<void *>> slabs(kSlabs);
    for (auto &objs : slabs)
        for (uint32_t i = 0; i < s->objects; ++i) objs.push_back(alloc(s));
    void *guard = alloc(s);
    EXPECT_EQ(stats_of(s).slabs, kSlabs + 1);
    // Half of each slab back: all eight are partial.
    for (auto &objs : slabs)
        for (size_t i = 0; i < objs.size() / 2; ++i) free(s, objs[i]);
    slub_node *n = node_of(s, slab_of(guard));
    EXPECT_EQ(n->nr_partial.load(), kSlabs);
    // The other halves: each slab empties while 8, 7, ..., 1 are partial; it is freed while at
    // least min_partial (2) are, so the last one is kept.
    for (auto &objs : slabs)
        for (size_t i = objs.size() / 2; i < objs.size(); ++i) free(s, objs[i]);
    EXPECT_EQ(stat(s, FREE_REMOVE_PARTIAL), kSlabs - 1);
    EXPECT_EQ(stat(s, FREE_SLAB), kSlabs - 1);
    EXPECT_EQ(n->nr_partial.load(), 1u);
    EXPECT_TRUE(valid(s));
    // Another empty slab, flushed from the slot while fewer than 2 are partial: kept too.
    free(s, guard);
    flush_slot(s, slots::current(), false);
    EXPECT_EQ(n->nr_partial.load(), 2u);
    EXPECT_EQ(stat(s, DEACTIVATE_TO_HEAD), 1u);
    EXPECT_TRUE(valid(s));
    EXPECT_EQ(designs::shrink(s), 0u); // shrink frees it whatever min_partial says
    EXPECT_EQ(n->nr_partial.load(), 0u);
    EXPECT_TRUE(valid(s));
}

TEST_F(Slub, TunablesAreCheckedAndNamed) {
    slub_cache *s = make("slub-tune", 64);
    const char *why = nullptr;
    EXPECT_TRUE(tune(s, "min_partial", 7, &why));
    EXPECT_EQ(s->min_partial, 7u);
    EXPECT_TRUE(tune(s, "cpu_partial", 30, &why));
    EXPECT_EQ(s->cpu_partial_slabs, (60 + s->objects - 1) / s->objects);
    EXPECT_FALSE(tune(s, "cpu_partial", 1ul << 40, &why));
    EXPECT_NE(std::string(why).find("too large"), std::string::npos);
    EXPECT_FALSE(tune(s, "hiwater", 8, &why));
    EXPECT_NE(std::string(why).find("min_partial"), std::string::npos);
    EXPECT_TRUE(tune(s, "order", 2, &why));
    EXPECT_EQ(s->objects, (kPageSize << 2) / s->size);
    void *p = alloc(s);
    EXPECT_EQ(slab_of(p)->order(), 2u);
    EXPECT_FALSE(tune(s, "order", 0, &why));
    EXPECT_NE(std::string(why).find("empty"), std::string::npos);
    free(s, p);
    EXPECT_EQ(designs::shrink(s), 0u);
    EXPECT_TRUE(tune(s, "order", 0, &why));
    // An order whose slab would hold more than 32767 objects is refused, and says why (64-byte
    // objects: order 9 would hold 32768); the cache keeps the order it had.
    ASSERT_EQ(s->size, 64u);
    EXPECT_TRUE(tune(s, "order", 8, &why));
    EXPECT_FALSE(tune(s, "order", 9, &why));
    EXPECT_NE(std::string(why).find("32767"), std::string::npos) << why;
    EXPECT_FALSE(tune(s, "order", 10, &why));
    EXPECT_EQ(s->order, 8u);
    EXPECT_EQ(s->objects, 32768u / 2);
    EXPECT_TRUE(tune(s, "order", 0, &why));
    design_stats st = stats_of(s);
    ASSERT_EQ(st.nr_tunables, 3u);
    EXPECT_STREQ(st.tunable_names[1], "min_partial");
    EXPECT_EQ(st.tunables[1], 7u);
}

// ---- threads ---------------------------------------------------------------------------------

// The owner allocates without pause while several threads free its objects: every remote free
// is one compare-and-swap on a slab freelist (some of them the owner's current slab, racing its
// refills). Nothing is lost: afterwards every slab is accounted for and all memory comes back.
TEST_F(Slub, RemoteFreesFromSeveralThreadsWhileTheOwnerAllocates) {
    slub_cache *s = make("slub-remote", 96);
    constexpr int kFreers = 3;
#if defined(SLABKIT_SANITIZED)
    constexpr int kObjects = 20000;
#else
    constexpr int kObjects = 200000;
#endif
    struct mailbox {
        std::mutex mu;
        std::vector<void *> items;
        bool done = false;
    } boxes[kFreers];
    std::atomic<uint64_t> freed{0};
    std::vector<std::thread> freers;
    for (int t = 0; t < kFreers; ++t) {
        freers.emplace_back([&, t] {
            std::vector<void *> batch;
            for (;;) {
                bool done;
                {
                    std::lock_guard<std::mutex> lock(boxes[t].mu);
                    batch.swap(boxes[t].items);
                    done = boxes[t].done;
                }
                for (void *p : batch) {
                    // The object's last word was written by the owner: it must be intact.
                    uint64_t tag;
                    memcpy(&tag, static_cast<char *>(p) + 88, 8);
                    EXPECT_EQ(tag, reinterpret_cast<uintptr_t>(p));
                    free(s, p);
                    freed.fetch_add(1, std::memory_order_relaxed);
                }
                batch.clear();
                if (done) {
                    std::lock_guard<std::mutex> lock(boxes[t].mu);
                    if (boxes[t].items.empty()) return;
                }
                std::this_thread::yield();
            }
        });
    }
    std::mt19937 rng(7);
    std::vector<void *> pending[kFreers];
    for (int i = 0; i < kObjects; ++i) {
        void *p = alloc(s);
        ASSERT_NE(p, nullptr);
        uint64_t tag = reinterpret_cast<uintptr_t>(p);
        memcpy(static_cast<char *>(p) + 88, &tag, 8);
        int t = static_cast<int>(rng() % kFreers);
        pending[t].push_back(p);
        if (pending[t].size() == 64) {
            std::lock_guard<std::mutex> lock(boxes[t].mu);
            boxes[t].items.insert(boxes[t].items.end(), pending[t].begin(), pending[t].end());
            pending[t].clear();
        }
    }
    for (int t = 0; t < kFreers; ++t) {
        std::lock_guard<std::mutex> lock(boxes[t].mu);
        boxes[t].items.insert(boxes[t].items.end(), pending[t].begin(), pending[t].end());
        boxes[t].done = true;
    }
    for (auto &th : freers) th.join();
    EXPECT_EQ(freed.load(), static_cast<uint64_t>(kObjects));
    design_stats st = stats_of(s);
    EXPECT_EQ(st.counters[FREE_SLOWPATH], static_cast<uint64_t>(kObjects));
    // The last objects allocated are in the owner's current slab, frozen until the trim below,
    // and are freed after the owner stopped: into a frozen slab. (How many frees meet the owner
    // while it still allocates depends on the threads' timing.)
    EXPECT_GT(st.counters[FREE_FROZEN], 0u);
    EXPECT_TRUE(valid(s));
    designs::trim_all();
    EXPECT_TRUE(valid(s));
    EXPECT_EQ(stats_of(s).slabs, 0u);
}

// Threads come and go, each allocating, freeing some of its own objects and some of the others':
// the slots they leave are drained by trims, and the checker holds after every phase.
TEST_F(Slub, ThreadChurnKeepsInvariants) {
    slub_cache *s = make("slub-churn", 200);
    testsupport::thread_churn([&] { return alloc(s); }, [&](void *p) { free(s, p); },
                              [&](int phase) { EXPECT_TRUE(valid(s)) << "phase " << phase; });
    designs::trim_all();
    EXPECT_EQ(stats_of(s).slabs, 0u);
}

// Objects of SLUB's bootstrap caches (descriptors, per-slot and per-node structures) come and go
// with the caches and the slots that use them.
TEST_F(Slub, BootstrapCachesHoldTheStructures) {
    uint64_t before = stats_of(&cache_cache()).active_objects;
    slub_cache *s = make("slub-meta", 32);
    EXPECT_GE(stats_of(&cache_cache()).active_objects, before + 1);
    std::thread([&] { free(s, alloc(s)); }).join();
    EXPECT_GE(stats_of(&cpu_cache()).active_objects, 1u);
    EXPECT_TRUE(valid(&cache_cache()));
    EXPECT_TRUE(valid(&cpu_cache()));
    EXPECT_TRUE(valid(&node_cache()));
}

TEST(SlubDestroy, LeakedObjectsInFullAndPartialSlabsAreReportedAndKept) {
    const char *why = nullptr;
    slub_cache *s = create(cache_args{"slub-leak", 512, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr);
    std::vector<void *> kept;
    for (uint32_t i = 0; i < 2 * s->objects + 1; ++i) kept.push_back(alloc(s)); // full slabs too
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
    for (void *p : kept) memset(p, 1, 512); // still ours: no use-after-free
}

} // namespace
} // namespace slabkit::slub
