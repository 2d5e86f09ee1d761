// SLQB internals: the queue, inbox and outbox flows, the synchronous remote path, node lists,
// idle-slot trims, destroy with leaks, and the invariant checker after each phase.
#include "core/trimmer.hpp"
#include "designs/designs.hpp"
#include "page/page_allocator.hpp"
#include "slqb/slqb_internal.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace slabkit::slqb {
namespace {

::testing::AssertionResult valid(slqb_cache *s) {
    char report[1024];
    unsigned problems = validate(s, report, sizeof report);
    if (problems == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << problems << " problem(s):\n" << report;
}

stats_totals totals(slqb_cache *s) {
    stats_totals t;
    gather_stats(s, &t);
    return t;
}

class Slqb : public ::testing::Test {
  protected:
    slqb_cache *make(const char *name, size_t size, void (*ctor)(void *) = nullptr) {
        const char *why = nullptr;
        slqb_cache *s = create(cache_args{name, size, 0, 0, ctor}, &why);
        EXPECT_NE(s, nullptr) << (why ? why : "");
        made_.push_back(s);
        return s;
    }
    void TearDown() override {
        for (slqb_cache *s : made_) {
            designs::trim_all();
            EXPECT_TRUE(valid(s));
            destroy(s);
        }
    }
    std::vector<slqb_cache *> made_;
};

TEST_F(Slqb, WatermarksFollowTheSlqbFormula) {
    // freebatch = max(4*PAGE/size, min(256, 64*PAGE/size)), hiwater = 4*freebatch.
    const struct {
        size_t size;
        uint32_t freebatch;
    } cases[] = {{8, 2048}, {16, 1024}, {32, 512}, {64, 256}, {1024, 256}, {2048, 128}};
    for (auto c : cases) {
        std::string name = "wm-" + std::to_string(c.size);
        slqb_cache *s = make(name.c_str(), c.size);
        EXPECT_EQ(s->freebatch.load(), c.freebatch) << c.size;
        EXPECT_EQ(s->hiwater.load(), 4 * c.freebatch) << c.size;
    }
    const char *why = nullptr;
    EXPECT_EQ(create(cache_args{"wm-8", 8, 0, 0, nullptr}, &why), nullptr);
    EXPECT_NE(std::string(why).find("name"), std::string::npos);
}

TEST_F(Slqb, QueueBytesBoundShortensTheQueue) {
    // cache_args::queue_bytes (the malloc table's 64 KiB): hiwater * size stays within it, four
    // batches long; caches under the bound keep the formula.
    const struct {
        size_t size, queue_bytes;
        uint32_t hiwater, freebatch;
    } cases[] = {{1024, 65536, 64, 16},
                 {2048, 65536, 32, 8},
                 {8192, 65536, 8, 2},
                 {32, 65536, 2048, 512},
                 {16384, 32768, 4, 1}};
    for (auto c : cases) {
        std::string name = "qb-" + std::to_string(c.size);
        const char *why = nullptr;
        cache_args args{name.c_str(), c.size, 0, 0, nullptr};
        args.queue_bytes = c.queue_bytes;
        slqb_cache *s = create(args, &why);
        ASSERT_NE(s, nullptr) << (why ? why : "");
        made_.push_back(s);
        EXPECT_EQ(s->hiwater.load(), c.hiwater) << c.size;
        EXPECT_EQ(s->freebatch.load(), c.freebatch) << c.size;
        // The queue really stops at hiwater: free more than that and count what is parked.
        std::vector<void *> objs;
        for (uint32_t i = 0; i < 3 * s->hiwater.load(); ++i) objs.push_back(alloc(s));
        for (void *p : objs) free(s, p);
        EXPECT_LE(totals(s).queued, s->hiwater.load()) << c.size;
    }
}

// A cache with a queue bound (the malloc table's) made with 1 KiB objects: queues start 64 long
// and may grow to the design's 1024 (freebatch 256).
slqb_cache *make_bounded(std::vector<slqb_cache *> &made, const char *name) {
    const char *why = nullptr;
    cache_args args{name, 1024, 0, 0, nullptr};
    args.queue_bytes = 65536;
    slqb_cache *s = create(args, &why);
    EXPECT_NE(s, nullptr) << (why ? why : "");
    if (s) made.push_back(s);
    return s;
}

TEST_F(Slqb, QueuesGrowUnderBurstsOfFrees) {
    slqb_cache *s = make_bounded(made_, "grow-burst");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->hiwater.load(), 64u);
    EXPECT_EQ(s->hiwater_max.load(), 1024u);
    // Allocate 2000, free them all: the frees outrun the queue, batch after batch with no
    // allocation between the flushes.
    std::vector<void *> objs;
    for (int i = 0; i < 2000; ++i) objs.push_back(alloc(s));
    for (void *p : objs) free(s, p);
    EXPECT_EQ(s->hiwater.load(), 1024u); // doubled four times, up to the design's sizing
    EXPECT_EQ(s->freebatch.load(), 256u);
    stats_totals t = totals(s);
    EXPECT_EQ(t.counters[QUEUE_GROW], 4u);
    EXPECT_LE(t.queued, 1024u);
    EXPECT_GT(t.queued, 512u);
    // The next round of the same burst is served from the queue it grew: 512 objects come
    // back without touching a slab.
    const uint64_t fills = t.counters[ALLOC_SLAB_FILL] + t.counters[ALLOC_SLAB_NEW];
    objs.clear();
    for (int i = 0; i < 512; ++i) objs.push_back(alloc(s));
    t = totals(s);
    EXPECT_EQ(t.counters[ALLOC_SLAB_FILL] + t.counters[ALLOC_SLAB_NEW], fills);
    for (void *p : objs) free(s, p);
}

TEST_F(Slqb, QueuesDoNotGrowWhenFreesAndAllocationsMix) {
    slqb_cache *s = make_bounded(made_, "grow-mixed");
    ASSERT_NE(s, nullptr);
    // Net one free in five operations (free 3, allocate 2): the queue reaches hiwater again and
    // again, but with two batches' worth of allocations between its flushes: no burst.
    std::vector<void *> live;
    for (int i = 0; i < 6000; ++i) live.push_back(alloc(s));
    for (int round = 0; round < 2000; ++round) {
        for (int k = 0; k < 3; ++k) {
            free(s, live.back());
            live.pop_back();
        }
        for (int k = 0; k < 2; ++k) live.push_back(alloc(s));
    }
    stats_totals t = totals(s);
    EXPECT_GT(t.counters[FLUSH_FREE_LIST], 10u); // it did overflow
    EXPECT_EQ(t.counters[QUEUE_GROW], 0u);
    EXPECT_EQ(s->hiwater.load(), 64u);
    for (void *p : live) free(s, p);
}

// A consumer's frees (objects of another slot's slabs, freed by a thread that allocates none
// itself) overflow its queue batch after batch too, but most of each flushed batch goes to the
// producer's slot: no burst of its own, so no growth (the queue would only park the producer's
// objects longer). The same frees by the producer's own thread grow them (QueuesGrowUnder...).
TEST_F(Slqb, QueuesDoNotGrowUnderAConsumersFrees) {
    slqb_cache *s = make_bounded(made_, "grow-consumer");
    ASSERT_NE(s, nullptr);
    std::vector<void *> objs;
    for (int i = 0; i < 2000; ++i) objs.push_back(alloc(s));
    const unsigned producer_node = slots::node_of(slots::current());
    unsigned consumer_node = producer_node;
    std::thread([&] {
        consumer_node = slots::node_of(slots::current());
        for (void *p : objs) free(s, p);
    }).join();
    stats_totals t = totals(s);
    // Skipped where the freeing thread found no slot of its own (a crowded process puts both
    // threads on one CPU's slot, and its objects are then its own), and where it ran on another
    // node (fake NUMA: objects of another node's slabs skip the queue for their node's lists).
    if (t.counters[FLUSH_FREE_LIST_REMOTE] + t.counters[FREE_REMOTE] == 0)
        GTEST_SKIP() << "the frees were not remote: both threads used one slot";
    if (consumer_node != producer_node)
        GTEST_SKIP() << "the freeing thread ran on node " << consumer_node << ", the objects' "
                     << "slabs are on node " << producer_node;
    EXPECT_GT(t.counters[FLUSH_FREE_LIST], 10u); // it did overflow, batch after batch
    EXPECT_EQ(t.counters[QUEUE_GROW], 0u);
    EXPECT_EQ(s->hiwater.load(), 64u);
    EXPECT_TRUE(valid(s));
}

TEST_F(Slqb, QueueGrowthTakesFromTheSharedBudget) {
    // Room for one doubling of a 1 KiB cache's queues (64 more objects, 64 KiB) and a little:
    // the first cache's burst takes it, the second's finds none left.
    std::atomic<int64_t> budget{65536 + 1000};
    slqb_cache *caches[2];
    for (int i = 0; i < 2; ++i) {
        const char *why = nullptr;
        cache_args args{i ? "budget-b" : "budget-a", 1024, 0, 0, nullptr};
        args.queue_bytes = 65536;
        args.queue_growth_budget = &budget;
        caches[i] = create(args, &why);
        ASSERT_NE(caches[i], nullptr) << (why ? why : "");
        made_.push_back(caches[i]);
    }
    for (slqb_cache *s : caches) {
        std::vector<void *> objs;
        for (int i = 0; i < 2000; ++i) objs.push_back(alloc(s));
        for (void *p : objs) free(s, p);
    }
    EXPECT_EQ(caches[0]->hiwater.load(), 128u);
    EXPECT_EQ(totals(caches[0]).counters[QUEUE_GROW], 1u);
    EXPECT_EQ(caches[1]->hiwater.load(), 64u);
    EXPECT_EQ(totals(caches[1]).counters[QUEUE_GROW], 0u);
    EXPECT_EQ(budget.load(), 1000);
}

TEST_F(Slqb, TunedQueuesDoNotGrow) {
    slqb_cache *s = make_bounded(made_, "grow-tuned");
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(tune(s, 32, 8));
    std::vector<void *> objs;
    for (int i = 0; i < 1000; ++i) objs.push_back(alloc(s));
    for (void *p : objs) free(s, p);
    EXPECT_EQ(s->hiwater.load(), 32u);
    EXPECT_EQ(totals(s).counters[QUEUE_GROW], 0u);
}

TEST_F(Slqb, AllocFreeKeepsInvariants) {
    slqb_cache *s = make("slqb-basic", 48);
    std::vector<void *> objs;
    for (int i = 0; i < 5000; ++i) {
        void *p = alloc(s);
        ASSERT_NE(p, nullptr);
        memset(p, 0xab, 48);
        objs.push_back(p);
    }
    EXPECT_TRUE(valid(s));
    stats_totals t = totals(s);
    EXPECT_EQ(t.counters[ALLOC], 5000u);
    EXPECT_GE(t.counters[ALLOC_SLAB_NEW], 5000u / s->objects);
    for (void *p : objs) free(s, p);
    EXPECT_TRUE(valid(s));
    t = totals(s);
    EXPECT_EQ(t.counters[FREE], 5000u);
    EXPECT_GT(t.counters[FLUSH_FREE_LIST], 0u);
    EXPECT_LE(t.queued, s->hiwater.load());
    EXPECT_EQ(designs::shrink(s), 0u);
    EXPECT_EQ(totals(s).queued, 0u);
}

TEST_F(Slqb, QueueIsLifo) {
    slqb_cache *s = make("slqb-lifo", 64);
    void *a = alloc(s);
    void *b = alloc(s);
    free(s, a);
    free(s, b);
    EXPECT_EQ(alloc(s), b);
    EXPECT_EQ(alloc(s), a);
    free(s, a);
    free(s, b);
}

TEST_F(Slqb, RemoteFreesFlowThroughOutboxToInboxAndAreClaimed) {
    slqb_cache *s = make("slqb-remote", 128);
    const uint32_t n = s->hiwater.load() + 4 * s->freebatch.load();
    std::vector<void *> objs(n);
    for (auto &p : objs) p = alloc(s);
    // Another thread frees them: they pile on its queue, and past hiwater its flushes send them
    // (objects of this thread's slabs) through its outbox to this thread's inbox.
    std::thread([&] {
        for (void *p : objs) free(s, p);
    }).join();
    stats_totals t = totals(s);
    // Same node: through the freeing slot's queue, then its outbox. With fake NUMA the freeing
    // thread may sit on the other node: then straight to the outbox (FREE_REMOTE).
    EXPECT_GT(t.counters[FLUSH_FREE_LIST_REMOTE] + t.counters[FREE_REMOTE], 0u);
    EXPECT_GT(t.counters[FLUSH_RFREE_LIST], 0u);
    EXPECT_TRUE(valid(s));
    // This thread's queue is empty and its inbox is flagged: the next allocation claims it.
    void *p = alloc(s);
    t = totals(s);
    EXPECT_GE(t.counters[CLAIM_REMOTE_LIST], 1u);
    EXPECT_GE(t.counters[CLAIM_REMOTE_LIST_OBJECTS], s->freebatch.load());
    free(s, p);
}

// The objects on an inbox's chains, chain by chain.
std::vector<std::vector<void *>> inbox_chains_of(slqb_cache *s, slqb_list *l) {
    std::vector<std::vector<void *>> out;
    platform::lock_guard guard(l->inbox_lock);
    for (void *head : l->inbox.head) {
        out.emplace_back();
        for (void *o = head; o && out.back().size() <= l->inbox.count(); o = get_freepointer(s, o))
            out.back().push_back(o);
    }
    return out;
}

TEST_F(Slqb, InboxDealsBatchesOverItsChainsAndAClaimTakesThemAll) {
    slqb_cache *s = make("slqb-chains", 128);
    // Three flushes of 5, 9 and 3 objects, each below freebatch: the inbox is not flagged, and
    // nothing claims it before the test does.
    const uint32_t batches[] = {5, 9, 3};
    uint32_t total = 0;
    for (uint32_t b : batches) total += b;
    ASSERT_LT(total, s->freebatch.load());
    std::vector<void *> objs(total);
    for (auto &p : objs) p = alloc(s);
    slqb_cpu *me = s->cpu_slab[slots::current()].load();
    std::thread([&] {
        size_t at = 0;
        for (uint32_t b : batches) {
            for (uint32_t i = 0; i < b; ++i) free(s, objs[at++]);
            flush_cpu(s, s->cpu_slab[slots::current()].load()); // queue -> outbox -> inbox
        }
    }).join();
    ASSERT_EQ(me->list.inbox.count(), total);
    EXPECT_FALSE(me->list.remote_free_check.load());
    EXPECT_TRUE(valid(s));
    // Dealt out in turn across every flush: the t-th object sent is on chain t % kInboxChains,
    // so the chains' lengths differ by one at most, and the first total % kInboxChains are the
    // longer ones.
    auto chains = inbox_chains_of(s, &me->list);
    std::vector<void *> seen;
    for (unsigned j = 0; j < kInboxChains; ++j) {
        EXPECT_EQ(chains[j].size(), total / kInboxChains + (j < total % kInboxChains ? 1 : 0))
            << "chain " << j;
        seen.insert(seen.end(), chains[j].begin(), chains[j].end());
    }
    std::vector<void *> sent = objs;
    std::sort(sent.begin(), sent.end());
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, sent);
    // The claim moves every chain onto the queue, as one list of the same objects.
    ASSERT_EQ(me->list.freelist.count(), 0u);
    EXPECT_EQ(claim_remote_list(s, &me->list), total);
    EXPECT_EQ(me->list.inbox.count(), 0u);
    for (void *head : me->list.inbox.head) EXPECT_EQ(head, nullptr);
    std::vector<void *> queued;
    for (void *o = me->list.freelist.head(); o && queued.size() <= total; o = get_freepointer(s, o))
        queued.push_back(o);
    EXPECT_EQ(me->list.freelist.count(), total);
    std::sort(queued.begin(), queued.end());
    EXPECT_EQ(queued, sent);
    EXPECT_TRUE(valid(s));
    EXPECT_EQ(totals(s).counters[CLAIM_REMOTE_LIST_OBJECTS], total);
}

TEST_F(Slqb, ValidateCountsEveryInboxChain) {
    slqb_cache *s = make("slqb-chains-check", 128);
    std::vector<void *> objs(2 * kInboxChains);
    for (auto &p : objs) p = alloc(s);
    slqb_cpu *me = s->cpu_slab[slots::current()].load();
    std::thread([&] {
        for (void *p : objs) free(s, p);
        flush_cpu(s, s->cpu_slab[slots::current()].load());
    }).join();
    ASSERT_TRUE(valid(s));
    // A count that misses one object of the last chain is found.
    me->list.inbox.set_count(me->list.inbox.count() - 1);
    char report[512];
    EXPECT_EQ(validate(s, report, sizeof report), 1u);
    EXPECT_NE(std::string(report).find("inbox's count"), std::string::npos) << report;
    me->list.inbox.set_count(me->list.inbox.count() + 1);
    EXPECT_TRUE(valid(s));
}

TEST(SlqbOrder, OrderZeroUnlessItLeavesMoreThanAnEighthUnused) {
    const settings plain{};
    // Order 0 where a page leaves at most 1/8 unused.
    EXPECT_EQ(calculate_order(64, plain), 0u);
    EXPECT_EQ(calculate_order(192, plain), 0u);  // 21 a page, 64 bytes left
    EXPECT_EQ(calculate_order(584, plain), 0u);  // 7 a page, 8 bytes left
    EXPECT_EQ(calculate_order(896, plain), 0u);  // 4 a page, 512 left: exactly 1/8
    EXPECT_EQ(calculate_order(4096, plain), 0u); // one, nothing left
    // Order 1 where order 0 leaves more and order 1 does not.
    EXPECT_EQ(calculate_order(1128, plain), 1u); // 3 a page (712 left), 7 in two (296)
    EXPECT_EQ(calculate_order(1536, plain), 1u); // 2 a page (1024 left), 5 in two (512)
    EXPECT_EQ(calculate_order(1600, plain), 1u);
    // Neither: the smallest order that holds one.
    EXPECT_EQ(calculate_order(2800, plain), 0u); // 1296 left of 4 KiB, 2592 of 8 KiB
    EXPECT_EQ(calculate_order(5000, plain), 1u);
    EXPECT_EQ(calculate_order(20000, plain), 3u);
}

TEST(SlqbOrder, BootSettingsRaiseTheOrder) {
    // slqb_min_order: no slab below it, whatever the waste.
    EXPECT_EQ(calculate_order(64, settings{3, 1}), 3u);
    EXPECT_EQ(calculate_order(1128, settings{3, 1}), 3u);
    EXPECT_EQ(calculate_order(20000, settings{1, 1}), 3u); // the order of one object wins
    // slqb_min_objects: the first order that holds that many.
    EXPECT_EQ(calculate_order(64, settings{0, 16}), 0u);   // 64 a page
    EXPECT_EQ(calculate_order(1128, settings{0, 16}), 3u); // 14 in 16 KiB, 29 in 32 KiB
    EXPECT_EQ(calculate_order(4096, settings{0, 16}), 4u); // 16 in 64 KiB
    EXPECT_EQ(calculate_order(1024, settings{0, 4}), 0u);  // 4 a page, nothing left
}

TEST_F(Slqb, CacheSizingFollowsTheBootSettings) {
    // Whatever SLABKIT_SLQB_MIN_ORDER and SLABKIT_SLQB_MIN_OBJECTS say (ctest runs these tests
    // with each set: slqb_tests_min_order_3, slqb_tests_min_objects_16).
    const settings &st = boot_settings();
    for (size_t size : {64, 232, 1128, 4096}) {
        std::string name = "slqb-size-" + std::to_string(size);
        slqb_cache *s = make(name.c_str(), size);
        EXPECT_EQ(s->order, calculate_order(s->size, st)) << size;
        EXPECT_GE(s->order, st.min_order) << size;
        EXPECT_GE(s->objects, st.min_objects) << size;
        EXPECT_EQ(s->objects, (kPageSize << s->order) / s->size) << size;
        void *p = alloc(s);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(virt_to_head_page(p)->order(), s->order) << size;
        free(s, p);
    }
}

TEST_F(Slqb, OrderCanChangeOnlyWhileEmpty) {
    slqb_cache *s = make("slqb-order", 1000);
    const char *why = nullptr;
    ASSERT_TRUE(set_order(s, 1, &why));
    EXPECT_EQ(s->objects, 8u);
    void *p = alloc(s);
    EXPECT_EQ(virt_to_head_page(p)->order(), 1u);
    EXPECT_FALSE(set_order(s, 0, &why));
    EXPECT_NE(std::string(why).find("empty"), std::string::npos);
    free(s, p);
    EXPECT_EQ(designs::shrink(s), 0u);
    EXPECT_TRUE(set_order(s, 0, &why));
    EXPECT_FALSE(set_order(s, kMaxOrder + 1, &why));
    slqb_cache *big = make("slqb-order-big", 5000);
    EXPECT_FALSE(set_order(big, 0, &why)); // 5000 bytes do not fit a 4 KiB slab
    EXPECT_TRUE(valid(s));
}

TEST_F(Slqb, FullInboxMakesRemoteFreesSynchronous) {
    slqb_cache *s = make("slqb-sync", 64);
    ASSERT_TRUE(tune(s, 8, 4));
    EXPECT_FALSE(tune(s, 8, 10)); // freebatch must be <= hiwater + 1
    EXPECT_FALSE(tune(s, 8, 0));
    // Several slabs' worth, whatever the boot settings made the order.
    std::vector<void *> objs(std::max<size_t>(400, 6 * size_t{s->objects}));
    for (auto &p : objs) p = alloc(s);
    std::thread([&] {
        for (void *p : objs) free(s, p);
    }).join();
    EXPECT_TRUE(valid(s));
    stats_totals t = totals(s);
    // The inbox stops growing past hiwater + one batch: the rest went straight to the slabs,
    // emptying them.
    EXPECT_LE(t.queued, 8u + 4u + 4u + 8u);
    EXPECT_GT(t.counters[FLUSH_SLAB_FREE], 0u);
}

TEST_F(Slqb, TrimmerMakesLiveSlotsClaimUnflaggedInboxes) {
    slqb_cache *s = make("slqb-trimmer", 64);
    const uint32_t k = s->freebatch.load() / 2; // below freebatch: the inbox will not be flagged
    std::vector<void *> objs(k);
    for (auto &p : objs) p = alloc(s);
    void *keep = alloc(s); // keeps a partial slab for the next allocation
    std::thread([&] {
        for (void *p : objs) free(s, p);
        // This thread's queue -> its outbox -> the first thread's inbox, unflagged.
        flush_cpu(s, s->cpu_slab[slots::current()].load());
    }).join();
    slqb_cpu *me = s->cpu_slab[slots::current()].load();
    ASSERT_EQ(me->list.inbox.count(), k);
    EXPECT_FALSE(me->list.remote_free_check.load());
    uint64_t claims = totals(s).counters[CLAIM_REMOTE_LIST];
    void *a = alloc(s); // queue empty, inbox unflagged: served from the partial slab
    EXPECT_EQ(totals(s).counters[CLAIM_REMOTE_LIST], claims);
    trimmer::maybe_run(true); // the trimmer runs: the next slow path claims the inbox anyway
    void *b = alloc(s);
    EXPECT_EQ(totals(s).counters[CLAIM_REMOTE_LIST], claims + 1);
    EXPECT_EQ(me->list.inbox.count(), 0u);
    free(s, a);
    free(s, b);
    free(s, keep);
    EXPECT_TRUE(valid(s));
}

TEST_F(Slqb, IdleSlotsAreDrainedByTrim) {
    slqb_cache *s = make("slqb-idle", 256);
    std::thread([&] {
        std::vector<void *> objs(300);
        for (auto &p : objs) p = alloc(s);
        for (void *p : objs) free(s, p);
    }).join();
    EXPECT_GT(totals(s).queued, 0u); // parked on the departed thread's slot
    designs::trim_all();
    stats_totals t = totals(s);
    EXPECT_EQ(t.queued, 0u);
    EXPECT_EQ(t.slabs, 0u);
}

TEST_F(Slqb, ExplicitNodeAllocationsComeFromThatNode) {
    slqb_cache *s = make("slqb-node", 96);
    std::vector<void *> objs;
    for (unsigned node = 0; node < s->nr_nodes; ++node) {
        for (int i = 0; i < 200; ++i) {
            void *p = alloc_slow(s, slots::current(), static_cast<int>(node), false);
            ASSERT_NE(p, nullptr);
            EXPECT_EQ(page_to_nid(virt_to_head_page(p)), node);
            objs.push_back(p);
        }
    }
    EXPECT_EQ(alloc_slow(s, slots::current(), static_cast<int>(s->nr_nodes), false), nullptr);
    EXPECT_EQ(alloc_slow(s, slots::current(), -5, false), nullptr);
    EXPECT_TRUE(valid(s));
    for (void *p : objs) free(s, p);
    EXPECT_TRUE(valid(s));
    EXPECT_EQ(designs::shrink(s), 0u);
}

// Objects of a node list's slabs that reach its inbox below freebatch (unflagged, so no
// allocation claims them) keep their slab until the trimmer's share of the node lists (SLQB's
// cache_trim_worker) claims the inbox and flushes a batch.
TEST_F(Slqb, TrimmerGivesBackWhatNodeListInboxesHold) {
    slqb_cache *s = make("slqb-node-trim", 64);
    designs::trim_all();
    const uint32_t k = s->freebatch.load() / 2;
    std::vector<void *> objs(k);
    for (auto &p : objs) {
        p = alloc_shared(s); // from the node list's slab (the caller's node)
        ASSERT_NE(p, nullptr);
    }
    slqb_list *node_list = list_of(virt_to_head_page(objs[0]));
    ASSERT_TRUE(node_list->is_node_list);
    // Freed by this slot: its queue, then (a flush) its outbox, then the node list's inbox.
    for (void *p : objs) free(s, p);
    flush_cpu(s, s->cpu_slab[slots::current()].load());
    EXPECT_EQ(node_list->inbox.count(), k);
    EXPECT_FALSE(node_list->remote_free_check.load());
    EXPECT_EQ(totals(s).slabs, (k + s->objects - 1) / s->objects);
    EXPECT_TRUE(valid(s));
    trim(s); // what the trimmer runs for every cache
    EXPECT_EQ(node_list->inbox.count(), 0u);
    EXPECT_EQ(totals(s).slabs, 0u);
    EXPECT_TRUE(valid(s));
}

int g_ctor_calls = 0;
void counting_ctor(void *p) {
    ++g_ctor_calls;
    memset(p, 0x5a, 40);
}

TEST_F(Slqb, CtorRunsOncePerObjectAndStateSurvivesFree) {
    g_ctor_calls = 0;
    slqb_cache *s = make("slqb-ctor", 40, counting_ctor);
    void *p = alloc(s);
    EXPECT_EQ(g_ctor_calls, static_cast<int>(s->objects));
    for (int i = 0; i < 40; ++i) ASSERT_EQ(static_cast<unsigned char *>(p)[i], 0x5a);
    free(s, p);
    void *q = alloc(s);
    EXPECT_EQ(q, p);
    for (int i = 0; i < 40; ++i) ASSERT_EQ(static_cast<unsigned char *>(q)[i], 0x5a);
    EXPECT_EQ(g_ctor_calls, static_cast<int>(s->objects));
    free(s, q);
}

TEST(SlqbDestroy, LeakedObjectsAreReportedAndKept) {
    const char *why = nullptr;
    slqb_cache *s = create(cache_args{"slqb-leak", 32, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr);
    void *kept = alloc(s);
    void *gone = alloc(s);
    free(s, gone);
    ::testing::internal::CaptureStderr();
    destroy(s);
    std::string err = ::testing::internal::GetCapturedStderr();
    char addr[32];
    snprintf(addr, sizeof addr, "%p", kept);
    EXPECT_NE(err.find(addr), std::string::npos) << err;
    EXPECT_NE(err.find("slqb-leak"), std::string::npos) << err;
    EXPECT_NE(err.find("1 object(s) still allocated"), std::string::npos) << err;
    memset(kept, 1, 32); // still ours: no use-after-free
    // The name is free again.
    slqb_cache *again = create(cache_args{"slqb-leak", 32, 0, 0, nullptr}, &why);
    ASSERT_NE(again, nullptr);
    destroy(again);
}

// When no new slab can be had (here: the arena's limit is reached), an allocation takes what the
// node lists hold before it fails (the kernel's try_remote). Runs in its own process with
// SLABKIT_ARENA_MAX_MB=1024 (ctest: slqb_arena_limit).
TEST(SlqbArenaLimit, AllocationFallsBackToTheNodeListsBeforeFailing) {
    page_allocator &pa = page_allocator::global();
    if (pa.settings().max_bytes != (uint64_t{1024} << 20))
        GTEST_SKIP() << "runs under SLABKIT_ARENA_MAX_MB=1024 (ctest: slqb_arena_limit)";
    const char *why = nullptr;
    slqb_cache *s = create(cache_args{"slqb-try-remote", 64, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr) << why;
    // One object free on a node list's slab, none on this slot's.
    void *held = alloc_shared(s);
    ASSERT_NE(held, nullptr);
    void *mine = alloc(s); // makes this slot's structure, and one slab of its own
    ASSERT_NE(mine, nullptr);
    // Fill this slot's slab, so that only the node list has free objects.
    std::vector<void *> fill;
    while (s->cpu_slab[slots::current()].load()->list.partial.first) fill.push_back(alloc(s));
    // Every page of the arena handed out (none touched: only their descriptors).
    std::vector<std::pair<void *, unsigned>> blocks;
    for (int order = kMaxOrder; order >= 0; --order)
        while (void *b = pa.alloc(static_cast<unsigned>(order)))
            blocks.emplace_back(b, static_cast<unsigned>(order));
    ASSERT_EQ(pa.alloc(0), nullptr);
    uint64_t node_allocs = totals(s).counters[ALLOC];
    void *p = alloc(s);
    EXPECT_NE(p, nullptr) << "no object from the node list once no slab could be made";
    if (p) {
        EXPECT_EQ(list_of(virt_to_head_page(p)), list_of(virt_to_head_page(held)));
        EXPECT_EQ(totals(s).counters[ALLOC], node_allocs + 1);
    }
    for (auto &b : blocks) pa.free(b.first, b.second);
    if (p) free(s, p);
    free(s, held);
    free(s, mine);
    for (void *q : fill) free(s, q);
    designs::trim_all();
    EXPECT_TRUE(valid(s));
    destroy(s);
}

} // namespace
} // namespace slabkit::slqb
