// failslab_test.cpp - fault injection (core/failslab.hpp, docs/failslab.md) through the C API,
// every design: the settings' grammar and its refusals, the cache filter and the cache flag,
// the kernel's order of the tests (times, space, interval, probability) with exact counts, the
// bulk allocation's all or nothing, kmalloc's classes, the counts in the statistics, and that
// "off" fails nothing more and disarms (each test ends with it, so that the tests after it in
// the same process find the caches' fast paths open).
#include "api/api_support.hpp"

#include <slabkit/kernel.h>
#include <slabkit/slabkit.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace slabkit::apitest {
namespace {

// Sets the settings or fails the test with the library's reason.
void set(const char *spec, const char *caches) {
    const char *why = nullptr;
    ASSERT_EQ(slabkit_set_failslab(spec, caches, &why), 0) << spec << ": " << (why ? why : "?");
}

struct off_at_end {
    ~off_at_end() { slabkit_set_failslab("off", "", nullptr); }
};

TEST(FailslabSettings, BadSettingsAreRefusedNamingWhatWasWrong) {
    off_at_end guard;
    struct bad {
        const char *spec, *caches, *says;
    } cases[] = {
        {"abc", "", "the probability must be a percentage from 0 to 100"},
        {"101", "", "the probability must be a percentage from 0 to 100"},
        {"1.1234567", "", "up to six decimals"},
        {"5:0", "", "the interval (after the first ':') must be a whole number of 1 or more"},
        {"5:1:-2", "", "times (after the second ':') must be -1 (no limit) or a whole number"},
        {"5:1:3:x", "", "space (after the third ':') must be a whole number of bytes"},
        {"5:1:3:4:5", "", "unexpected text after the settings"},
        {"5", ",kmalloc-64", "each cache name in the list must have 1 to 31 characters"},
        {"5", "a-name-that-is-longer-than-a-cache-name-can-be", "1 to 31 characters"},
        {nullptr, "", "no settings given"},
    };
    for (const bad &b : cases) {
        const char *why = nullptr;
        EXPECT_EQ(slabkit_set_failslab(b.spec, b.caches, &why), -1) << (b.spec ? b.spec : "NULL");
        ASSERT_NE(why, nullptr);
        EXPECT_NE(std::string(why).find(b.says), std::string::npos) << why;
    }
    // Refused settings change nothing: none were ever set here, so nothing fails.
    EXPECT_EQ(slabkit_set_failslab("abc", nullptr, nullptr), -1);
}

class Failslab : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        const std::string d = GetParam();
        a_ = slabkit_cache_create_in(d.c_str(), ("fs-a-" + d).c_str(), 100, 0, 0, nullptr);
        b_ = slabkit_cache_create_in(d.c_str(), ("fs-b-" + d).c_str(), 100, 0, 0, nullptr);
        ASSERT_NE(a_, nullptr);
        ASSERT_NE(b_, nullptr);
        filter_ = "fs-a-" + d;
    }
    void TearDown() override {
        slabkit_set_failslab("off", "", nullptr);
        for (void *p : live_) slabkit_cache_free(owner(p), p);
        slabkit_cache_destroy(a_);
        slabkit_cache_destroy(b_);
    }
    slabkit_cache *owner(void *p) { return owned_by_a_[p] ? a_ : b_; }
    // n allocations from c: which failed (true), the rest kept until TearDown.
    std::vector<bool> allocate(slabkit_cache *c, int n) {
        std::vector<bool> failed;
        for (int i = 0; i < n; ++i) {
            void *p = slabkit_cache_alloc(c, 0);
            failed.push_back(p == nullptr);
            if (p) {
                live_.push_back(p);
                owned_by_a_[p] = c == a_;
            }
        }
        return failed;
    }
    static int count(const std::vector<bool> &v) {
        int n = 0;
        for (bool b : v) n += b;
        return n;
    }
    slabkit_cache *a_ = nullptr, *b_ = nullptr;
    std::string filter_;
    std::vector<void *> live_;
    std::map<void *, bool> owned_by_a_;
};

TEST_P(Failslab, TheFilterNamesTheCachesThatFail) {
    set("100", filter_.c_str());
    EXPECT_EQ(count(allocate(a_, 50)), 50);
    EXPECT_EQ(count(allocate(b_, 50)), 0);
    EXPECT_EQ(slabkit_failslab_failures(a_), 50u);
    EXPECT_EQ(slabkit_failslab_failures(b_), 0u);
    // The node and zeroing calls ask too.
    EXPECT_EQ(slabkit_cache_alloc_node(a_, 0, -1), nullptr);
    EXPECT_EQ(slabkit_cache_alloc(a_, SLABKIT_GFP_ZERO), nullptr);
    EXPECT_EQ(slabkit_failslab_failures(a_), 52u);
    // Off: the cache serves again.
    set("off", nullptr);
    EXPECT_EQ(count(allocate(a_, 50)), 0);
    EXPECT_EQ(slabkit_failslab_failures(a_), 52u);
}

TEST_P(Failslab, TheIntervalFailsEveryNth) {
    set("100:3", filter_.c_str());
    std::vector<bool> failed = allocate(a_, 30);
    for (int i = 0; i < 30; ++i) EXPECT_EQ(failed[i], i % 3 == 2) << "allocation " << i;
}

TEST_P(Failslab, TimesBoundsTheFailures) {
    set("100:1:4", filter_.c_str());
    std::vector<bool> failed = allocate(a_, 20);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(failed[i], i < 4) << "allocation " << i;
    EXPECT_EQ(slabkit_failslab_failures(a_), 4u);
}

TEST_P(Failslab, SpaceIsABudgetBeforeAnyFailure) {
    // 1000 bytes of 100-byte objects: the budget is taken while it is larger than the size, as
    // the kernel's should_fail does: nine allocations, then failures.
    set("100:1:-1:1000", filter_.c_str());
    std::vector<bool> failed = allocate(a_, 15);
    for (int i = 0; i < 15; ++i) EXPECT_EQ(failed[i], i >= 9) << "allocation " << i;
}

TEST_P(Failslab, TheProbabilityIsAPercentage) {
    set("25", filter_.c_str());
    int failed = 0;
    for (int i = 0; i < 8000; ++i) {
        void *p = slabkit_cache_alloc(a_, 0);
        if (!p)
            ++failed;
        else
            slabkit_cache_free(a_, p);
    }
    // 2000 expected, standard deviation about 39: 20 of them either side.
    EXPECT_GT(failed, 1200);
    EXPECT_LT(failed, 2800);
    set("0", nullptr);
    EXPECT_EQ(count(allocate(a_, 100)), 0);
}

TEST_P(Failslab, AFlaggedCachePassesAnyFilter) {
    const std::string d = GetParam();
    slabkit_cache *f =
        slabkit_cache_create_in(d.c_str(), ("fs-flag-" + d).c_str(), 64, 0, SLAB_FAILSLAB, nullptr);
    ASSERT_NE(f, nullptr);
    set("100", "flagged");
    EXPECT_EQ(slabkit_cache_alloc(f, 0), nullptr);
    EXPECT_EQ(count(allocate(a_, 10)), 0);
    set("off", nullptr);
    void *p = slabkit_cache_alloc(f, 0);
    EXPECT_NE(p, nullptr);
    slabkit_cache_free(f, p);
    slabkit_cache_destroy(f);
}

TEST_P(Failslab, ABulkAllocationIsAllOrNothing) {
    set("100:5", filter_.c_str());
    void *objs[10];
    EXPECT_EQ(slabkit_cache_alloc_bulk(a_, 0, 10, objs), 0u);
    slabkit_cache_stats st;
    slabkit_get_cache_stats(a_, &st);
    EXPECT_EQ(st.active_objects - st.queued_objects, 0u) << "the four allocated were freed";
    set("off", nullptr);
    EXPECT_EQ(slabkit_cache_alloc_bulk(a_, 0, 10, objs), 10u);
    slabkit_cache_free_bulk(a_, 10, objs);
}

TEST_P(Failslab, TheStatisticsCountTheFailures) {
    set("100:1:3", filter_.c_str());
    allocate(a_, 5);
    std::string text(1 << 22, '\0');
    text.resize(slabkit_stats_json(text.data(), text.size()));
    const auto j = nlohmann::json::parse(text);
    ASSERT_TRUE(j.contains("failslab"));
    EXPECT_TRUE(j["failslab"]["armed"].get<bool>());
    EXPECT_EQ(j["failslab"]["caches"], filter_);
    EXPECT_EQ(j["failslab"]["times"].get<int64_t>(), 0);
    bool found = false;
    for (const auto &c : j["caches"]) {
        if (c["name"] != filter_) continue;
        found = true;
        EXPECT_EQ(c["activity"]["failslab_failures"].get<uint64_t>(), 3u);
    }
    EXPECT_TRUE(found);
}

INSTANTIATE_TEST_SUITE_P(FailslabDesigns, Failslab, ::testing::ValuesIn(designs()),
                         design_param_name);

// kmalloc's classes (the process's design: ctest runs this once per design, api_failslab_
// kmalloc_<design>, armed at start by SLABKIT_FAILSLAB=0) by their names; SLOB serves kmalloc
// from its own blocks, named "slob-pages" by the filter, and blocks above the caches are
// "large". Armed at start, as SLQB's classes opened before arming keep their shortcuts.
TEST(FailslabKmalloc, ClassesAndBlocksByName) {
    if (!getenv("SLABKIT_FAILSLAB")) GTEST_SKIP() << "run with SLABKIT_FAILSLAB=0 (ctest does)";
    off_at_end guard;
    const bool slob = std::string(slabkit_allocator()) == "slob";
    set("100", slob ? "slob-pages" : "kmalloc-64");
    EXPECT_EQ(slabkit_kmalloc(64, 0), nullptr);
    void *other = slabkit_kmalloc(slob ? 100000 : 128, 0);
    EXPECT_NE(other, nullptr);
    slabkit_kfree(other);
    set("100", "large");
    EXPECT_EQ(slabkit_kmalloc(100000, 0), nullptr);
    void *small = slabkit_kmalloc(64, 0);
    EXPECT_NE(small, nullptr);
    slabkit_kfree(small);
}

} // namespace
} // namespace slabkit::apitest
