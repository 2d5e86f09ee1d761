// inline_test.cpp - the fast paths include/slabkit/inline.h inlines into callers (interface
// version 1): which caches open them, that they pop and push the slot's queue (SLQB), freelist
// (SLUB) or array (SLAB) as the library does (so its statistics, limits and reports stay true), and
// that everything they do not serve reaches the library. Every other API test calls the same inline
// paths too (they include the header); here they are looked at through the interface's own offsets.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(SLABKIT_HAVE_INLINE)

namespace {

uint16_t gate_of(const slabkit_cache *c) {
    uint16_t g;
    std::memcpy(&g, reinterpret_cast<const char *>(c) + SLABKIT_INLINE_V1_CACHE_GATE, sizeof g);
    return g;
}

// The calling thread's queue of cache c (nullptr: none, the library serves).
const char *queue_of(const slabkit_cache *c) {
    void *const *queues;
    std::memcpy(&queues, reinterpret_cast<const char *>(c) + SLABKIT_INLINE_V1_CACHE_QUEUES,
                sizeof queues);
    return static_cast<const char *>(queues[slabkit_inline_v1_slot]);
}
void *queue_head(const char *q) {
    void *h;
    std::memcpy(&h, q + SLABKIT_INLINE_V1_QUEUE_HEAD, sizeof h);
    return h;
}
uint32_t queue_count(const char *q) {
    uint32_t n;
    std::memcpy(&n, q + SLABKIT_INLINE_V1_QUEUE_COUNT, sizeof n);
    return n;
}
uint32_t hiwater_of(const slabkit_cache *c) {
    uint32_t n;
    std::memcpy(&n, reinterpret_cast<const char *>(c) + SLABKIT_INLINE_V1_CACHE_HIWATER, sizeof n);
    return n;
}

// Open in this process: plain free pointers, one node, no init on alloc or free.
// The process's settings that close every gate: several nodes, init on alloc or free, debugging.
bool settings_close_gates() {
    return std::getenv("SLABKIT_FAKE_NUMA") != nullptr || std::getenv("SLABKIT_INIT") != nullptr ||
           std::getenv("SLABKIT_DEBUG") != nullptr;
}
bool gates_may_open() {
    return !SLABKIT_FREELIST_HARDENED && !settings_close_gates();
}

std::mutex g_reports_lock;
std::vector<std::string> g_reports;
void collect(const char *report) {
    std::lock_guard<std::mutex> g(g_reports_lock);
    g_reports.emplace_back(report);
}

// A cache whose inline paths are open, and a thread with a queue in it (made by a first
// allocation through the library), or a skip.
class InlinePaths : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!gates_may_open()) GTEST_SKIP() << "this process's settings keep the gates closed";
        c_ = slabkit_cache_create_in("slqb", "inline-objs", 48, 0, 0, nullptr);
        ASSERT_NE(c_, nullptr);
        ASSERT_EQ(gate_of(c_), SLABKIT_INLINE_V1_GATE_OPEN);
        slabkit_cache_free(c_, slabkit_cache_alloc(c_, 0));
        q_ = queue_of(c_);
        if (!q_) GTEST_SKIP() << "this thread uses the CPUs' slots: the library serves it";
    }
    void TearDown() override {
        if (c_) slabkit_cache_destroy(c_);
    }
    slabkit_cache *c_ = nullptr;
    const char *q_ = nullptr;
};

// The gate value a plain cache of `design` holds in this build and process (0: none the header
// opens for).
unsigned open_gate_of(const std::string &design) {
    // A build with every check on reads no design name below.
    static_cast<void>(design);
    // The process's settings close every gate; the build's hardening closes SLQB's and SLUB's
    // (obfuscated free pointers) and SLAB's (the array check) apart.
    if (settings_close_gates()) return 0;
#if !SLABKIT_FREELIST_HARDENED
    if (design == "slqb") return SLABKIT_INLINE_V1_GATE_OPEN;
    if (design == "slub") return SLABKIT_INLINE_V1_GATE_SLUB;
#endif
#if !SLABKIT_SLAB_ARRAY_CHECK
    if (design == "slab") return SLABKIT_INLINE_V1_GATE_SLAB;
#endif
    return 0;
}

bool is_header_gate(uint16_t g) {
    return g == SLABKIT_INLINE_V1_GATE_OPEN || g == SLABKIT_INLINE_V1_GATE_SLUB ||
           g == SLABKIT_INLINE_V1_GATE_SLAB;
}

TEST(InlineGates, OpenForPlainCachesOfEveryDesignButSlob) {
    struct want {
        const char *design;
        unsigned flags;
        bool plain;
    };
    const want cases[] = {{"slqb", 0, true},
                          {"slqb", SLABKIT_HWCACHE_ALIGN, true},
                          {"slqb", SLABKIT_RED_ZONE, false}, // a debug cache: no queues
                          {"slqb", SLABKIT_POISON, false},
                          {"slub", 0, true},
                          {"slub", SLABKIT_RED_ZONE, false},
                          {"slab", 0, true},
                          {"slab", SLABKIT_POISON, false},
                          {"slob", 0, false}};
    const std::string have = slabkit_designs();
    int n = 0;
    for (const want &w : cases) {
        if (have.find(w.design) == std::string::npos) continue;
        std::string name = std::string("inline-gate-") + std::to_string(n++);
        slabkit_cache *c = slabkit_cache_create_in(w.design, name.c_str(), 64, 0, w.flags, nullptr);
        ASSERT_NE(c, nullptr) << w.design;
        const unsigned want_gate = w.plain ? open_gate_of(w.design) : 0;
        if (want_gate)
            EXPECT_EQ(gate_of(c), want_gate) << w.design << " flags " << w.flags;
        else
            EXPECT_FALSE(is_header_gate(gate_of(c))) << w.design << " flags " << w.flags;
        // Either way the calls work.
        void *p = slabkit_cache_alloc(c, 0);
        ASSERT_NE(p, nullptr);
        slabkit_cache_free(c, p);
        slabkit_cache_destroy(c);
    }
}

TEST_F(InlinePaths, PushAndPopAreTheSlotsLifoQueue) {
    const uint32_t base = queue_count(q_);
    void *a = slabkit_cache_alloc(c_, 0);
    void *b = slabkit_cache_alloc(c_, 0);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    const uint32_t after_allocs = queue_count(q_);
    slabkit_cache_free(c_, a);
    EXPECT_EQ(queue_head(q_), a);
    EXPECT_EQ(queue_count(q_), after_allocs + 1);
    slabkit_cache_free(c_, b);
    EXPECT_EQ(queue_head(q_), b);
    EXPECT_EQ(queue_count(q_), after_allocs + 2);
    EXPECT_EQ(slabkit_cache_alloc(c_, 0), b); // newest first
    EXPECT_EQ(slabkit_cache_alloc(c_, 0), a);
    EXPECT_EQ(queue_count(q_), after_allocs);
    slabkit_cache_free(c_, a);
    slabkit_cache_free(c_, b);
    EXPECT_EQ(queue_count(q_), after_allocs + 2);
    (void)base;
}

TEST_F(InlinePaths, StatisticsSeeWhatTheInlinePathsDid) {
    constexpr int kObjects = 40;
    slabkit_cache_stats before{}, mid{}, after{};
    slabkit_get_cache_stats(c_, &before);
    std::vector<void *> objs;
    for (int i = 0; i < kObjects; ++i) objs.push_back(slabkit_cache_alloc(c_, 0));
    slabkit_get_cache_stats(c_, &mid);
    EXPECT_EQ(mid.active_objects - mid.queued_objects,
              before.active_objects - before.queued_objects + kObjects);
    for (void *p : objs) slabkit_cache_free(c_, p);
    slabkit_get_cache_stats(c_, &after);
    EXPECT_EQ(after.active_objects - after.queued_objects,
              before.active_objects - before.queued_objects);
}

TEST_F(InlinePaths, FreesPastTheLimitFlushAndTheQueueStaysBounded) {
    const uint32_t limit = hiwater_of(c_);
    ASSERT_GT(limit, 0u);
    std::vector<void *> objs;
    for (uint32_t i = 0; i < 3 * limit + 5; ++i) objs.push_back(slabkit_cache_alloc(c_, 0));
    uint32_t highest = 0;
    for (void *p : objs) {
        slabkit_cache_free(c_, p);
        highest = std::max(highest, queue_count(q_));
    }
    EXPECT_LE(highest, limit);
    EXPECT_GT(highest, 0u);
    slabkit_cache_stats st{};
    slabkit_get_cache_stats(c_, &st);
    EXPECT_LE(st.queued_objects, limit);
}

TEST_F(InlinePaths, ImmediateDoubleAndInvalidFreesReachTheLibrarysReports) {
    g_reports.clear();
    slabkit_set_error_hook(collect);
    void *p = slabkit_cache_alloc(c_, 0);
    slabkit_cache_free(c_, p);
    const uint32_t queued = queue_count(q_);
    slabkit_cache_free(c_, p); // the queue's first object again
    EXPECT_EQ(queue_count(q_), queued) << "the second free must not be queued";
    void *q = slabkit_cache_alloc(c_, 0);
    void *interior = static_cast<char *>(q) + 8;
    asm volatile("" : "+r"(interior));
    slabkit_cache_free(c_, interior); // not an object start
    slabkit_cache *other = slabkit_cache_create_in("slqb", "inline-other", 48, 0, 0, nullptr);
    ASSERT_NE(other, nullptr);
    slabkit_cache_free(other, q); // another cache's object
    slabkit_set_error_hook(nullptr);
    std::vector<std::string> reports;
    {
        std::lock_guard<std::mutex> g(g_reports_lock);
        reports = g_reports;
    }
    ASSERT_EQ(reports.size(), 3u);
    EXPECT_NE(reports[0].find("double free"), std::string::npos) << reports[0];
    EXPECT_NE(reports[1].find("inline-objs"), std::string::npos) << reports[1];
    EXPECT_NE(reports[2].find("inline-other"), std::string::npos) << reports[2];
    slabkit_cache_free(c_, q);
    slabkit_cache_destroy(other);
}

TEST_F(InlinePaths, ZeroingAllocationsGoToTheLibrary) {
    void *p = slabkit_cache_alloc(c_, 0);
    std::memset(p, 0xab, 48);
    slabkit_cache_free(c_, p);
    void *z = slabkit_cache_alloc(c_, SLABKIT_GFP_ZERO);
    ASSERT_EQ(z, p); // the same queue, through the library
    EXPECT_TRUE(slabkit::apitest::all_zero(z, 48));
    slabkit_cache_free(c_, z);
}

// Another thread has a queue of its own (or, on the CPUs' slots, none: the library then serves
// it); objects freed there are another queue's, and both threads' pairs stay whole.
TEST_F(InlinePaths, ThreadsUseTheirOwnQueues) {
    void *mine = slabkit_cache_alloc(c_, 0);
    const char *theirs = nullptr;
    void *freed_there = nullptr;
    std::thread([&] {
        for (int i = 0; i < 1000; ++i) slabkit_cache_free(c_, slabkit_cache_alloc(c_, 0));
        theirs = queue_of(c_);
        freed_there = slabkit_cache_alloc(c_, 0);
        slabkit_cache_free(c_, freed_there);
    }).join();
    EXPECT_NE(theirs, q_);
    if (theirs) {
        EXPECT_NE(queue_head(q_), freed_there);
    }
    slabkit_cache_free(c_, mine);
    EXPECT_EQ(queue_head(q_), mine);
}

// SLUB's and SLAB's inline paths, looked at through the header's offsets: a cache of the design
// whose gate is open, and this thread's per-slot structure in it (made by a first allocation),
// or a skip.
class InlineDesign : public ::testing::TestWithParam<const char *> {
  protected:
    void SetUp() override {
        const std::string design = GetParam();
        if (std::string(slabkit_designs()).find(design) == std::string::npos)
            GTEST_SKIP() << design << " is not in this build";
        gate_ = open_gate_of(design);
        if (!gate_) GTEST_SKIP() << "this build or process keeps " << design << "'s gate closed";
        c_ = slabkit_cache_create_in(design.c_str(), ("inline-" + design).c_str(), 48, 0, 0,
                                     nullptr);
        ASSERT_NE(c_, nullptr);
        ASSERT_EQ(gate_of(c_), gate_);
        slabkit_cache_free(c_, slabkit_cache_alloc(c_, 0));
        const unsigned off = gate_ == SLABKIT_INLINE_V1_GATE_SLUB ? SLABKIT_INLINE_V1_SLUB_CPUS
                                                                  : SLABKIT_INLINE_V1_SLAB_CPUS;
        void *const *cpus;
        std::memcpy(&cpus, reinterpret_cast<const char *>(c_) + off, sizeof cpus);
        slot_ = static_cast<const char *>(cpus[slabkit_inline_v1_slot]);
        if (!slot_) GTEST_SKIP() << "this thread uses the CPUs' slots: the library serves it";
    }
    void TearDown() override {
        if (c_) slabkit_cache_destroy(c_);
    }
    template <class T>
    T at(unsigned off) const {
        T v;
        std::memcpy(&v, slot_ + off, sizeof v);
        return v;
    }
    bool slub() const { return gate_ == SLABKIT_INLINE_V1_GATE_SLUB; }
    uint64_t allocs() const {
        return at<uint64_t>(slub() ? SLABKIT_INLINE_V1_SLUB_ALLOCS : SLABKIT_INLINE_V1_SLAB_ALLOCS);
    }
    uint64_t frees() const {
        return at<uint64_t>(slub() ? SLABKIT_INLINE_V1_SLUB_FREES : SLABKIT_INLINE_V1_SLAB_FREES);
    }
    // The object the next allocation's inline pop would return (nullptr: none, it calls).
    void *next_object() const {
        if (slub()) return at<void *>(SLABKIT_INLINE_V1_SLUB_FREELIST);
        const uint32_t n = at<uint32_t>(SLABKIT_INLINE_V1_SLAB_AVAIL);
        return n ? at<void *>(SLABKIT_INLINE_V1_SLAB_ENTRIES + (n - 1) * sizeof(void *)) : nullptr;
    }
    unsigned gate_ = 0;
    slabkit_cache *c_ = nullptr;
    const char *slot_ = nullptr;
};

TEST_P(InlineDesign, PopAndPushAreTheSlotsAndCountedAsItsFastPaths) {
    void *a = slabkit_cache_alloc(c_, 0);
    ASSERT_NE(a, nullptr);
    void *want = next_object();
    if (!want) { // the freelist or array ran dry: the library refills it
        slabkit_cache_free(c_, slabkit_cache_alloc(c_, 0));
        want = next_object();
    }
    ASSERT_NE(want, nullptr);
    const uint64_t allocs0 = allocs(), frees0 = frees();
    void *b = slabkit_cache_alloc(c_, 0);
    EXPECT_EQ(b, want) << "the inline pop takes the slot's next object";
    EXPECT_EQ(allocs(), allocs0 + 1);
    slabkit_cache_free(c_, b);
    EXPECT_EQ(next_object(), b) << "the inline push makes it the next again";
    EXPECT_EQ(frees(), frees0 + 1);
    if (!slub()) {
        EXPECT_EQ(at<uint32_t>(SLABKIT_INLINE_V1_SLAB_TOUCHED), 1u);
    }
    EXPECT_EQ(slabkit_cache_alloc(c_, 0), b); // newest first
    slabkit_cache_free(c_, b);
    slabkit_cache_free(c_, a);
}

TEST_P(InlineDesign, WhatThePathsCannotServeReachesTheLibrary) {
    // Many more objects than a slab or an array holds: under SLUB most are of slabs other than
    // the slot's current one, under SLAB the array fills; either way the library takes those
    // frees, and the slot's structure stays within its bounds.
    std::vector<void *> objs;
    for (int i = 0; i < 3000; ++i) objs.push_back(slabkit_cache_alloc(c_, 0));
    const uint64_t frees0 = frees();
    for (void *p : objs) {
        slabkit_cache_free(c_, p);
        if (!slub()) {
            ASSERT_LE(at<uint32_t>(SLABKIT_INLINE_V1_SLAB_AVAIL),
                      at<uint32_t>(SLABKIT_INLINE_V1_SLAB_LIMIT));
        }
    }
    EXPECT_LT(frees() - frees0, objs.size()) << "some frees went to the library";
    // Every object is free again: once the slots give back what they hold, no slab is left.
    slabkit_cache_shrink(c_);
    slabkit_cache_stats st{};
    slabkit_get_cache_stats(c_, &st);
    EXPECT_EQ(st.active_objects, 0u);
    EXPECT_EQ(st.slabs, 0u);
}

TEST_P(InlineDesign, InvalidFreesReachTheLibrarysReports) {
    g_reports.clear();
    slabkit_set_error_hook(collect);
    void *q = slabkit_cache_alloc(c_, 0);
    void *interior = static_cast<char *>(q) + 8;
    asm volatile("" : "+r"(interior));
    slabkit_cache_free(c_, interior); // not an object start
    size_t want = 1;
    if (slub()) {
        slabkit_cache_free(c_, q);
        slabkit_cache_free(c_, q); // the freelist's first object again
        ++want;
    }
    slabkit_set_error_hook(nullptr);
    std::vector<std::string> reports;
    {
        std::lock_guard<std::mutex> g(g_reports_lock);
        reports = g_reports;
    }
    ASSERT_EQ(reports.size(), want);
    EXPECT_NE(reports[0].find("not an object start"), std::string::npos) << reports[0];
    if (slub()) {
        EXPECT_NE(reports[1].find("double free"), std::string::npos) << reports[1];
    } else {
        slabkit_cache_free(c_, q);
    }
}

INSTANTIATE_TEST_SUITE_P(Designs, InlineDesign, ::testing::Values("slub", "slab"),
                         [](const ::testing::TestParamInfo<const char *> &i) {
                             return std::string(i.param);
                         });

} // namespace

#else

TEST(InlineGates, HeaderHasNoInlinePathsHere) {
    GTEST_SKIP() << "include/slabkit/inline.h inlines nothing on this platform or compiler";
}

#endif
