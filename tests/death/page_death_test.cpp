// Bad frees: by default the page allocator reports them on stderr (with the address and what
// was wrong) and aborts; with continue_on_error it reports them, counts them in errors() and
// goes on without freeing or corrupting anything.
#include "page/page_allocator.hpp"
#include "support/page_support.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace slabkit {
namespace {

page_allocator *make(const page_allocator_config &cfg) {
    return test::make_allocator(cfg);
}

using test::valid;

// An address in a report. Death tests run in a re-executed child whose addresses differ from
// the parent's (ASLR), so the exact address is checked by the continue_on_error tests below.
const std::string kHex = "0x[0-9a-f]+";

// The address as the report prints it (%p).
std::string addr_text(const void *p) {
    char buf[32];
    snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

unsigned char *as_bytes(void *p) {
    return static_cast<unsigned char *>(p);
}

// ---------------------------------------------------------------------------------------------
// Aborting (the default)
// ---------------------------------------------------------------------------------------------

class PageDeath : public ::testing::Test {
  protected:
    void SetUp() override {
        page_allocator_config cfg;
        cfg.nodes = 1;
        cfg.decay_ms = 0;
        pa_ = make(cfg);
    }
    void TearDown() override { page_allocator::destroy(pa_); }
    page_allocator *pa_ = nullptr;
};

TEST_F(PageDeath, FreeOfAStackAddress) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    int on_stack = 0;
    EXPECT_DEATH(pa_->free(&on_stack, 0),
                 "free of " + kHex + " \\(order 0\\): the address is not in slabkit's page arena");
    EXPECT_DEATH(pa_->free(&on_stack),
                 "free of " + kHex + ": the address is not in slabkit's page arena");
}

TEST_F(PageDeath, FreeOfAHeapAddress) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto on_heap = std::make_unique<long[]>(1024);
    EXPECT_DEATH(pa_->free(on_heap.get(), 1), "not in slabkit's page arena");
}

TEST_F(PageDeath, FreeOfAnUnalignedAddress) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    unsigned char *p = as_bytes(pa_->alloc(2));
    ASSERT_NE(p, nullptr);
    EXPECT_DEATH(pa_->free(p + 16, 2), "free of " + kHex + "10 \\(order 2\\): .*not page-aligned");
    EXPECT_DEATH(pa_->free(p + kPageSize + 1), "not page-aligned");
    pa_->free(p, 2);
}

TEST_F(PageDeath, FreeOfATailPage) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    unsigned char *p = as_bytes(pa_->alloc(3));
    ASSERT_NE(p, nullptr);
    EXPECT_DEATH(pa_->free(p + kPageSize, 0),
                 "free of " + kHex +
                     "1000 \\(order 0\\): the address is inside the allocated block at " + kHex +
                     "000 \\(order 3\\), not at its start");
    EXPECT_DEATH(pa_->free(p + 7 * kPageSize),
                 "free of " + kHex + "7000: .*inside the allocated block at");
    pa_->free(p, 3);
}

TEST_F(PageDeath, DoubleFree) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    void *p = pa_->alloc(3);
    ASSERT_NE(p, nullptr);
    pa_->free(p, 3);
    EXPECT_DEATH(pa_->free(p, 3), "free of " + kHex + " \\(order 3\\): .*\\(double free\\)");
    EXPECT_DEATH(pa_->free(p), "double free");
}

TEST_F(PageDeath, DoubleFreeOfAPageOnThePerSlotList) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    void *p = pa_->alloc(0);
    ASSERT_NE(p, nullptr);
    pa_->free(p, 0);
    ASSERT_EQ(virt_to_page(p)->flags(), uint32_t{PG_pcp});
    EXPECT_DEATH(pa_->free(p, 0), "double free");
    EXPECT_DEATH(pa_->free(p), "double free");
}

TEST_F(PageDeath, FreeOfAPageNeverHandedOut) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    unsigned char *p = as_bytes(pa_->alloc(4));
    ASSERT_NE(p, nullptr);
    // The pages after the block are free (its buddies), never handed out.
    EXPECT_DEATH(pa_->free(p + (kPageSize << 4), 4), "never handed out");
    EXPECT_DEATH(pa_->free(p + (kPageSize << 6)), "never handed out");
    pa_->free(p, 4);
}

TEST_F(PageDeath, FreeWithTheWrongOrder) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    void *p = pa_->alloc(3);
    ASSERT_NE(p, nullptr);
    EXPECT_DEATH(pa_->free(p, 2), "free of " + kHex +
                                      " \\(order 2\\): the block was allocated with "
                                      "order 3, not 2");
    EXPECT_DEATH(pa_->free(p, 4), "allocated with order 3, not 4");
    pa_->free(p, 3);
}

TEST_F(PageDeath, FreeOfMetadata) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    void *p = pa_->alloc(0);
    ASSERT_NE(p, nullptr);
    auto *base = reinterpret_cast<unsigned char *>(chunk_of(p));
    EXPECT_DEATH(pa_->free(base, 0), "metadata");
    EXPECT_DEATH(pa_->free(base + 100 * kPageSize), "metadata");
    EXPECT_DEATH(pa_->free(base + (kMetaPages - 1) * kPageSize, 0), "metadata");
    pa_->free(p);
}

TEST_F(PageDeath, FreeThroughAnotherInstance) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    page_allocator_config cfg;
    cfg.nodes = 1;
    page_allocator *other = make(cfg);
    void *p = other->alloc(1);
    ASSERT_NE(p, nullptr);
    EXPECT_DEATH(pa_->free(p, 1), "another page allocator instance");
    other->free(p, 1);
    page_allocator::destroy(other);
}

// The message ends with the abort notice.
TEST_F(PageDeath, ReportThenAbort) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    int on_stack = 0;
    EXPECT_DEATH(pa_->free(&on_stack, 0), "page arena\n.*aborting on a bad page free");
    EXPECT_EXIT(pa_->free(&on_stack, 0), ::testing::KilledBySignal(SIGABRT), "bad page free");
}

// ---------------------------------------------------------------------------------------------
// continue_on_error: report, count, change nothing
// ---------------------------------------------------------------------------------------------

class PageDeathContinueOnError : public ::testing::Test {
  protected:
    void SetUp() override {
        page_allocator_config cfg;
        cfg.nodes = 1;
        cfg.decay_ms = 0;
        cfg.continue_on_error = true;
        pa_ = make(cfg);
    }
    void TearDown() override { page_allocator::destroy(pa_); }

    // Runs a bad free, returns what it printed; checks that it was counted and changed nothing.
    template <typename Fn>
    std::string bad_free(Fn fn) {
        page_stats before, after;
        pa_->snapshot(&before);
        const uint64_t errors = pa_->errors();
        testing::internal::CaptureStderr();
        fn();
        std::string text = testing::internal::GetCapturedStderr();
        pa_->snapshot(&after);
        EXPECT_EQ(pa_->errors(), errors + 1);
        EXPECT_EQ(after.errors, errors + 1);
        EXPECT_EQ(after.in_use, before.in_use);
        EXPECT_EQ(after.in_pcp, before.in_pcp);
        EXPECT_EQ(after.free_pages, before.free_pages);
        EXPECT_EQ(after.pcp_frees, before.pcp_frees);
        EXPECT_TRUE(valid(*pa_));
        EXPECT_EQ(text.find("aborting"), std::string::npos) << text;
        return text;
    }
    page_allocator *pa_ = nullptr;
};

TEST_F(PageDeathContinueOnError, EveryKindOfBadFreeIsReportedAndIgnored) {
    int on_stack = 0;
    unsigned char *p = as_bytes(pa_->alloc(3));
    void *single = pa_->alloc(0);
    ASSERT_NE(p, nullptr);
    ASSERT_NE(single, nullptr);
    memset(p, 0x77, kPageSize << 3);
    auto *base = reinterpret_cast<unsigned char *>(chunk_of(p));

    struct bad_case {
        const char *expect;
        void *addr;
        int order; // -1: the free without an order
    } cases[] = {
        {"not in slabkit's page arena", &on_stack, 0},
        {"not in slabkit's page arena", &on_stack, -1},
        {"not page-aligned", p + 16, 3},
        {"inside the allocated block at", p + kPageSize, 0},
        {"inside the allocated block at", p + 2 * kPageSize, -1},
        {"allocated with order 3, not 2", p, 2},
        {"allocated with order 3, not 10", p, 10},
        {"metadata", base + kPageSize, 0},
        {"never handed out", p + (kPageSize << 9), 3}, // in a free order-9 buddy
    };
    for (const bad_case &c : cases) {
        SCOPED_TRACE(c.expect);
        std::string text = bad_free([&] {
            if (c.order < 0)
                pa_->free(c.addr);
            else
                pa_->free(c.addr, static_cast<unsigned>(c.order));
        });
        EXPECT_NE(text.find(c.expect), std::string::npos) << text;
        EXPECT_NE(text.find(addr_text(c.addr)), std::string::npos) << text;
    }
    // The block is untouched and still allocated with its order; it frees normally.
    EXPECT_EQ(pa_->block_order(p), 3);
    size_t changed = 0;
    for (size_t i = 0; i < (kPageSize << 3); ++i) changed += p[i] != 0x77;
    EXPECT_EQ(changed, 0u) << "bytes of the block changed";
    pa_->free(p, 3);
    pa_->free(single, 0);
    EXPECT_EQ(pa_->errors(), sizeof cases / sizeof cases[0]);
    EXPECT_TRUE(valid(*pa_));
}

// Keeps the calling thread on the CPU it runs on until destroyed. With the CPUs' slots
// (SLABKIT_SLOTS=cpu) a slot's page list is its CPU's: a test that frees a page onto it and
// expects the next allocation to take the page back must not move in between (it did, under
// load: "again" was another page).
class stay_on_this_cpu {
  public:
    stay_on_this_cpu() {
        if (pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) != 0) return;
        const int cpu = sched_getcpu();
        if (cpu < 0) return;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pinned_ = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    }
    ~stay_on_this_cpu() {
        if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
    }
    stay_on_this_cpu(const stay_on_this_cpu &) = delete;
    stay_on_this_cpu &operator=(const stay_on_this_cpu &) = delete;

  private:
    cpu_set_t saved_;
    bool pinned_ = false;
};

TEST_F(PageDeathContinueOnError, DoubleFreesAreReportedAndIgnored) {
    stay_on_this_cpu stay;
    void *block = pa_->alloc(5);
    void *page0 = pa_->alloc(0);
    ASSERT_NE(block, nullptr);
    ASSERT_NE(page0, nullptr);
    pa_->free(block, 5);
    pa_->free(page0, 0); // onto the per-slot list
    ASSERT_EQ(virt_to_page(page0)->flags(), uint32_t{PG_pcp});

    std::string text = bad_free([&] { pa_->free(block, 5); });
    EXPECT_NE(text.find("double free"), std::string::npos) << text;
    text = bad_free([&] { pa_->free(block); });
    EXPECT_NE(text.find("double free"), std::string::npos) << text;
    text = bad_free([&] { pa_->free(page0, 0); });
    EXPECT_NE(text.find("double free"), std::string::npos) << text;
    EXPECT_NE(text.find(addr_text(page0)), std::string::npos) << text;
    text = bad_free([&] { pa_->free(page0); });
    EXPECT_NE(text.find("double free"), std::string::npos) << text;
    EXPECT_EQ(virt_to_page(page0)->flags(), uint32_t{PG_pcp}) << "the page stays on the list";

    // Nothing was freed twice: the page is handed out once, and everything merges back.
    void *again = pa_->alloc(0);
    EXPECT_EQ(again, page0);
    void *next = pa_->alloc(0);
    EXPECT_NE(next, page0);
    pa_->free(again, 0);
    pa_->free(next, 0);
    pa_->drain();
    page_stats st;
    pa_->snapshot(&st);
    EXPECT_EQ(st.errors, 4u);
    EXPECT_EQ(st.in_use, 0u);
    EXPECT_EQ(st.in_pcp, 0u);
    EXPECT_EQ(st.free_pages, st.node[0].usable_pages);
    EXPECT_EQ(st.node[0].free_blocks[kMaxOrder] << kMaxOrder, st.free_pages);
    EXPECT_TRUE(valid(*pa_));
}

TEST_F(PageDeathContinueOnError, AnotherInstancesBlockIsLeftAlone) {
    page_allocator_config cfg;
    cfg.nodes = 1;
    page_allocator *other = make(cfg);
    void *p = other->alloc(2);
    ASSERT_NE(p, nullptr);
    std::string text = bad_free([&] { pa_->free(p, 2); });
    EXPECT_NE(text.find("another page allocator instance"), std::string::npos) << text;
    EXPECT_EQ(other->block_order(p), 2);
    EXPECT_EQ(other->errors(), 0u);
    other->free(p, 2);
    EXPECT_TRUE(valid(*other));
    page_allocator::destroy(other);
}

} // namespace
} // namespace slabkit
