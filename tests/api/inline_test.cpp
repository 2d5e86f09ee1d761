// inline_test.cpp - the fast paths include/slabkit/inline.h inlines into callers (interface
// version 1): which caches open them, that they pop and push the slot's queue as the library
// does (so its statistics, limits and reports stay true), and that everything they do not serve
// reaches the library. Every other API test calls the same inline paths too (they include the
// header); here they are looked at through the interface's own offsets.
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
bool gates_may_open() {
#if SLABKIT_FREELIST_HARDENED
    return false;
#else
    return std::getenv("SLABKIT_FAKE_NUMA") == nullptr && std::getenv("SLABKIT_INIT") == nullptr &&
           std::getenv("SLABKIT_DEBUG") == nullptr;
#endif
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

TEST(InlineGates, OpenOnlyForPlainSlqbCaches) {
    struct want {
        const char *design;
        unsigned flags;
        bool open;
    };
    const want cases[] = {{"slqb", 0, true},
                          {"slqb", SLABKIT_HWCACHE_ALIGN, true},
                          {"slqb", SLABKIT_RED_ZONE, false}, // a debug cache: no queues
                          {"slqb", SLABKIT_POISON, false},
                          {"slub", 0, false},
                          {"slab", 0, false},
                          {"slob", 0, false}};
    const std::string have = slabkit_designs();
    int n = 0;
    for (const want &w : cases) {
        if (have.find(w.design) == std::string::npos) continue;
        std::string name = std::string("inline-gate-") + std::to_string(n++);
        slabkit_cache *c = slabkit_cache_create_in(w.design, name.c_str(), 64, 0, w.flags, nullptr);
        ASSERT_NE(c, nullptr) << w.design;
        const bool open = gate_of(c) == SLABKIT_INLINE_V1_GATE_OPEN;
        EXPECT_EQ(open, w.open && gates_may_open()) << w.design << " flags " << w.flags;
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

} // namespace

#else

TEST(InlineGates, HeaderHasNoInlinePathsHere) {
    GTEST_SKIP() << "include/slabkit/inline.h inlines nothing on this platform or compiler";
}

#endif
