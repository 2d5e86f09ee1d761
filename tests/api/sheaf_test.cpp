// Prefilled sheaves through the public C API (the kernel's kmem_cache_prefill_sheaf family), for
// every design of the build: a prefill of n holds n objects (at least n under the sheaves
// design, whose sheaves are refilled to their capacity), each handed out once, distinct and
// writable, then NULL; refills to bigger sizes (a sheaf replaced when it must grow past its
// capacity); SLABKIT_GFP_ZERO; a constructor's state; a sheaf handed to the wrong cache is
// reported and nothing breaks; size 0 and sizes past the limit give NULL; a sheaf passed to
// another thread; and slabkit_cache_create_args with its sheaf_capacity (the sheaves design keeps
// at least that many objects per sheaf: a prefill up to it is no one-off sheaf).
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace slabkit::apitest {
namespace {

class Sheaf : public DesignTest {
  protected:
    bool sheaves() const { return GetParam() == "sheaves"; }
    // A cache made with slabkit_cache_create_args, destroyed at the end.
    slabkit_cache *create_with(const std::string &nm, size_t size, const slabkit_cache_args *args,
                               unsigned flags = 0) {
        slabkit_cache *c = slabkit_cache_create_args(design(), nm.c_str(), size, args, flags);
        if (c) with_args_.push_back(c);
        return c;
    }
    void TearDown() override {
        for (slabkit_cache *c : with_args_) slabkit_cache_destroy(c);
        with_args_.clear();
        DesignTest::TearDown();
    }
    // The size a prefill of n must have: exactly n, or at least n under the sheaves design.
    ::testing::AssertionResult holds_at_least(const slabkit_sheaf *sh, unsigned n) const {
        unsigned size = slabkit_sheaf_size(sh);
        if (sheaves() ? size >= n : size == n) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure()
               << "sheaf of " << size << " objects for " << n << " (" << GetParam() << ")";
    }

    // Objects out of the cache (active less queued) are exactly those handed out - except under
    // SLUB, whose slabinfo counts the free objects of the slots' frozen slabs as active, as the
    // kernel's does.
    ::testing::AssertionResult out_exactly(slabkit_cache *c, size_t n) const {
        cache_stats_t st = stats_of(c);
        if (GetParam() == "slub" || st.active_objects - st.queued_objects == n)
            return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << st.active_objects << " active, "
                                             << st.queued_objects << " queued, " << n << " out";
    }

  private:
    std::vector<slabkit_cache *> with_args_;
};

// Every object of the sheaf, each checked new (not handed out before, not among `live`) and
// filled with its pattern; then the sheaf is empty and gives NULL.
void take_all(slabkit_cache *c, slabkit_sheaf *sh, size_t size, std::vector<void *> *live,
              std::unordered_set<void *> *seen, uint64_t *next_id) {
    unsigned n = slabkit_sheaf_size(sh);
    for (unsigned i = 0; i < n; ++i) {
        void *p = slabkit_cache_alloc_from_sheaf(c, 0, sh);
        ASSERT_NE(p, nullptr) << "object " << i << " of " << n;
        ASSERT_TRUE(seen->insert(p).second) << p << " handed out twice";
        fill(p, size, (*next_id)++);
        live->push_back(p);
        EXPECT_EQ(slabkit_sheaf_size(sh), n - i - 1);
    }
    EXPECT_EQ(slabkit_cache_alloc_from_sheaf(c, 0, sh), nullptr);
    EXPECT_EQ(slabkit_sheaf_size(sh), 0u);
}

// Checks the patterns (ids first_id.. in order) and frees the objects.
void check_and_free(slabkit_cache *c, std::vector<void *> *live, size_t size, uint64_t first_id) {
    for (size_t i = 0; i < live->size(); ++i) {
        EXPECT_TRUE(holds((*live)[i], size, first_id + i));
        slabkit_cache_free(c, (*live)[i]);
    }
    live->clear();
}

TEST_P(Sheaf, PrefillHandsOutEachObjectOnce) {
    constexpr size_t kSize = 64;
    slabkit_cache *c = create(name("sh-prefill"), kSize);
    ASSERT_NE(c, nullptr);
    std::vector<void *> live;
    std::unordered_set<void *> seen;
    uint64_t id = 0;
    // Objects allocated the ordinary way meanwhile are other objects.
    std::vector<void *> plain;
    for (unsigned n : {1u, 2u, 7u, 30u, 60u, 61u, 100u, 500u}) {
        slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(c, 0, n);
        ASSERT_NE(sh, nullptr) << n;
        EXPECT_TRUE(holds_at_least(sh, n));
        void *p = slabkit_cache_alloc(c, 0);
        ASSERT_NE(p, nullptr);
        ASSERT_TRUE(seen.insert(p).second) << p;
        plain.push_back(p);
        take_all(c, sh, kSize, &live, &seen, &id);
        slabkit_cache_return_sheaf(c, 0, sh);
    }
    check_and_free(c, &live, kSize, 0);
    for (void *p : plain) slabkit_cache_free(c, p);
    EXPECT_EQ(slabkit_cache_validate(c, nullptr, 0), 0u);
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
}

// A sheaf given back with objects left: they return to the cache (a shrink finds nothing out).
TEST_P(Sheaf, ReturningASheafWithObjectsLeftGivesThemBack) {
    constexpr size_t kSize = 40;
    slabkit_cache *c = create(name("sh-left"), kSize);
    ASSERT_NE(c, nullptr);
    std::vector<void *> live;
    for (unsigned n : {3u, 50u, 300u}) {
        slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(c, 0, n);
        ASSERT_NE(sh, nullptr);
        for (unsigned i = 0; i < n / 3; ++i) {
            void *p = slabkit_cache_alloc_from_sheaf(c, 0, sh);
            ASSERT_NE(p, nullptr);
            live.push_back(p);
        }
        slabkit_cache_return_sheaf(c, 0, sh);
    }
    EXPECT_TRUE(out_exactly(c, live.size()));
    for (void *p : live) slabkit_cache_free(c, p);
    EXPECT_EQ(slabkit_cache_validate(c, nullptr, 0), 0u);
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
    cache_stats_t st = stats_of(c);
    EXPECT_EQ(st.active_objects, 0u);
}

// Refills: to a size it already holds (nothing done), within, and past its capacity (replaced
// by a bigger sheaf; the old one's objects go back), and an emptied sheaf refilled.
TEST_P(Sheaf, RefillGrowsTheSheaf) {
    constexpr size_t kSize = 96;
    slabkit_cache *c = create(name("sh-refill"), kSize);
    ASSERT_NE(c, nullptr);
    std::vector<void *> live;
    std::unordered_set<void *> seen;
    uint64_t id = 0;
    slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(c, 0, 4);
    ASSERT_NE(sh, nullptr);
    unsigned size = slabkit_sheaf_size(sh);
    slabkit_sheaf *before = sh;
    EXPECT_EQ(slabkit_cache_refill_sheaf(c, 0, &sh, 2), 0);
    EXPECT_EQ(sh, before);
    EXPECT_EQ(slabkit_sheaf_size(sh), size);
    for (unsigned n : {10u, 200u, 1000u}) {
        EXPECT_EQ(slabkit_cache_refill_sheaf(c, 0, &sh, n), 0) << n;
        ASSERT_NE(sh, nullptr);
        EXPECT_GE(slabkit_sheaf_size(sh), n);
        // Take some, so that the next refill has work to do.
        for (unsigned i = 0; i < n / 2; ++i) {
            void *p = slabkit_cache_alloc_from_sheaf(c, 0, sh);
            ASSERT_NE(p, nullptr);
            ASSERT_TRUE(seen.insert(p).second) << p;
            fill(p, kSize, id++);
            live.push_back(p);
        }
    }
    take_all(c, sh, kSize, &live, &seen, &id);
    EXPECT_EQ(slabkit_cache_refill_sheaf(c, 0, &sh, 3), 0);
    EXPECT_GE(slabkit_sheaf_size(sh), 3u);
    take_all(c, sh, kSize, &live, &seen, &id);
    slabkit_cache_return_sheaf(c, 0, sh);
    // Objects out: the live ones only.
    EXPECT_TRUE(out_exactly(c, live.size()));
    check_and_free(c, &live, kSize, 0);
    EXPECT_EQ(slabkit_cache_validate(c, nullptr, 0), 0u);
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
}

TEST_P(Sheaf, GfpZeroZeroesTheObjects) {
    constexpr size_t kSize = 200;
    slabkit_cache *c = create(name("sh-zero"), kSize);
    ASSERT_NE(c, nullptr);
    // Dirty free objects first.
    std::vector<void *> dirty;
    for (int i = 0; i < 300; ++i) {
        void *p = slabkit_cache_alloc(c, 0);
        ASSERT_NE(p, nullptr);
        std::memset(p, 0xa5, kSize);
        dirty.push_back(p);
    }
    for (void *p : dirty) slabkit_cache_free(c, p);
    slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(c, 0, 300);
    ASSERT_NE(sh, nullptr);
    std::vector<void *> live;
    while (slabkit_sheaf_size(sh) > 0) {
        void *p = slabkit_cache_alloc_from_sheaf(c, SLABKIT_GFP_ZERO, sh);
        ASSERT_NE(p, nullptr);
        EXPECT_TRUE(all_zero(p, kSize));
        std::memset(p, 0x5a, kSize);
        live.push_back(p);
    }
    EXPECT_GE(live.size(), 300u);
    slabkit_cache_return_sheaf(c, 0, sh);
    for (void *p : live) slabkit_cache_free(c, p);
    EXPECT_EQ(slabkit_cache_validate(c, nullptr, 0), 0u);
}

std::atomic<unsigned> g_ctor_calls{0};
void ctor_ab(void *p) {
    std::memset(p, 0xab, 56);
    g_ctor_calls.fetch_add(1);
}

// Objects of a cache with a constructor come out of a sheaf constructed.
TEST_P(Sheaf, ConstructedObjectsFromASheaf) {
    slabkit_cache *c = create(name("sh-ctor"), 56, 0, 0, ctor_ab);
    ASSERT_NE(c, nullptr);
    g_ctor_calls = 0;
    slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(c, 0, 80);
    ASSERT_NE(sh, nullptr);
    EXPECT_GT(g_ctor_calls.load(), 0u);
    std::vector<void *> live;
    while (slabkit_sheaf_size(sh) > 0) {
        auto *p = static_cast<unsigned char *>(slabkit_cache_alloc_from_sheaf(c, 0, sh));
        ASSERT_NE(p, nullptr);
        for (size_t i = 0; i < 56; ++i) ASSERT_EQ(p[i], 0xab) << "byte " << i;
        live.push_back(p);
    }
    slabkit_cache_return_sheaf(c, 0, sh);
    for (void *p : live) slabkit_cache_free(c, p);
    EXPECT_EQ(slabkit_cache_validate(c, nullptr, 0), 0u);
}

// A sheaf handed to a cache it is not of: reported (naming both caches), nothing taken, the
// sheaf left as it was and still good for its own cache.
TEST_P(Sheaf, ASheafOfAnotherCacheIsReportedAndLeftAlone) {
    constexpr size_t kSize = 64;
    slabkit_cache *a = create(name("sh-wa"), kSize);
    slabkit_cache *b = create(name("sh-wb"), kSize);
    ASSERT_TRUE(a && b);
    slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(a, 0, 6);
    ASSERT_NE(sh, nullptr);
    const unsigned size = slabkit_sheaf_size(sh);

    ::testing::internal::CaptureStderr();
    void *p = slabkit_cache_alloc_from_sheaf(b, 0, sh);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(err.find(name("sh-wa")), std::string::npos) << err;
    EXPECT_NE(err.find(name("sh-wb")), std::string::npos) << err;
    EXPECT_EQ(slabkit_sheaf_size(sh), size);

    slabkit_sheaf *before = sh;
    ::testing::internal::CaptureStderr();
    int rc = slabkit_cache_refill_sheaf(b, 0, &sh, size + 100);
    err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, -1);
    EXPECT_EQ(sh, before);
    EXPECT_EQ(slabkit_sheaf_size(sh), size);
    EXPECT_NE(err.find(name("sh-wb")), std::string::npos) << err;

    ::testing::internal::CaptureStderr();
    slabkit_cache_return_sheaf(b, 0, sh);
    err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(name("sh-wb")), std::string::npos) << err;
    EXPECT_EQ(slabkit_sheaf_size(sh), size);

    // No sheaf at all.
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(slabkit_cache_refill_sheaf(a, 0, nullptr, 4), -1);
    slabkit_sheaf *none = nullptr;
    EXPECT_EQ(slabkit_cache_refill_sheaf(a, 0, &none, 4), -1);
    err = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(err.empty());
    EXPECT_EQ(slabkit_cache_alloc_from_sheaf(a, 0, nullptr), nullptr);
    slabkit_cache_return_sheaf(a, 0, nullptr);

    // Still a's, whole.
    std::vector<void *> live;
    std::unordered_set<void *> seen;
    uint64_t id = 0;
    take_all(a, sh, kSize, &live, &seen, &id);
    EXPECT_EQ(live.size(), size);
    slabkit_cache_return_sheaf(a, 0, sh);
    check_and_free(a, &live, kSize, 0);
    EXPECT_EQ(slabkit_cache_validate(a, nullptr, 0), 0u);
    EXPECT_EQ(slabkit_cache_validate(b, nullptr, 0), 0u);
    EXPECT_EQ(slabkit_cache_shrink(a), 0u);
    EXPECT_EQ(slabkit_cache_shrink(b), 0u);
    EXPECT_EQ(stats_of(b).active_objects, 0u);
}

TEST_P(Sheaf, SizeZeroAndSizesPastTheLimitGiveNull) {
    slabkit_cache *c = create(name("sh-zero-size"), 32);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(slabkit_cache_prefill_sheaf(c, 0, 0), nullptr);
    ::testing::internal::CaptureStderr();
    slabkit_sheaf *huge = slabkit_cache_prefill_sheaf(c, 0, 40000);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(huge, nullptr);
    EXPECT_NE(err.find(name("sh-zero-size")), std::string::npos) << err;
    // The largest size there is works.
    slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(c, 0, 32768);
    ASSERT_NE(sh, nullptr);
    EXPECT_GE(slabkit_sheaf_size(sh), 32768u);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(slabkit_cache_refill_sheaf(c, 0, &sh, 40000), -1);
    err = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(err.empty());
    EXPECT_GE(slabkit_sheaf_size(sh), 32768u);
    slabkit_cache_return_sheaf(c, 0, sh);
    EXPECT_EQ(slabkit_sheaf_size(nullptr), 0u);
    EXPECT_EQ(slabkit_cache_validate(c, nullptr, 0), 0u);
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
}

// A sheaf prefilled on one thread, used and given back on another (the kernel's sheaves move
// between CPUs as their users do).
TEST_P(Sheaf, ASheafMovesBetweenThreads) {
    constexpr size_t kSize = 128;
    slabkit_cache *c = create(name("sh-threads"), kSize);
    ASSERT_NE(c, nullptr);
    std::vector<void *> live;
    for (int round = 0; round < 20; ++round) {
        slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(c, 0, 20 + round * 7);
        ASSERT_NE(sh, nullptr);
        std::vector<void *> theirs;
        std::thread([&] {
            for (int i = 0; i < 10; ++i) theirs.push_back(slabkit_cache_alloc_from_sheaf(c, 0, sh));
            slabkit_cache_return_sheaf(c, 0, sh);
            // And some of this thread's objects freed there.
            for (size_t i = 0; i < live.size(); i += 2) slabkit_cache_free(c, live[i]);
        }).join();
        std::vector<void *> kept;
        for (size_t i = 1; i < live.size(); i += 2) kept.push_back(live[i]);
        live = kept;
        for (void *p : theirs) {
            ASSERT_NE(p, nullptr);
            std::memset(p, 0x11, kSize);
            live.push_back(p);
        }
    }
    std::unordered_set<void *> distinct(live.begin(), live.end());
    EXPECT_EQ(distinct.size(), live.size());
    EXPECT_TRUE(out_exactly(c, live.size()));
    for (void *p : live) slabkit_cache_free(c, p);
    EXPECT_EQ(slabkit_cache_validate(c, nullptr, 0), 0u);
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
}

// slabkit_cache_create_args: alignment and constructor taken; sheaf_capacity under the sheaves
// design keeps at least that many objects per sheaf (the "sheaf_capacity" tunable; a prefill up
// to it is no one-off sheaf: SHEAF_PREFILL_OVERSIZE stays 0); the other designs take and ignore
// it.
TEST_P(Sheaf, CreateArgsSheafCapacity) {
    slabkit_cache_args args{0, nullptr, 100};
    slabkit_cache *c = create_with(name("sh-args"), 64, &args);
    ASSERT_NE(c, nullptr);
    cache_stats_t st = stats_of(c);
    EXPECT_EQ(std::string(st.design), GetParam());
    if (sheaves()) {
        bool found = false;
        for (unsigned i = 0; i < st.nr_tunables && i < 4; ++i)
            if (std::strcmp(st.tunable_names[i], "sheaf_capacity") == 0) {
                found = true;
                EXPECT_GE(st.tunables[i], 100u);
            }
        EXPECT_TRUE(found);
    }
    slabkit_sheaf *sh = slabkit_cache_prefill_sheaf(c, 0, 100);
    ASSERT_NE(sh, nullptr);
    EXPECT_TRUE(holds_at_least(sh, 100));
    if (sheaves()) {
        EXPECT_EQ(counter(stats_of(c), "SHEAF_PREFILL_OVERSIZE"), 0);
    }
    slabkit_sheaf *big = slabkit_cache_prefill_sheaf(c, 0, 101);
    ASSERT_NE(big, nullptr);
    EXPECT_TRUE(holds_at_least(big, 101));
    if (sheaves()) {
        EXPECT_EQ(counter(stats_of(c), "SHEAF_PREFILL_OVERSIZE"), 1);
        EXPECT_EQ(slabkit_sheaf_size(big), 101u); // a one-off sheaf: exactly the size
    }
    slabkit_cache_return_sheaf(c, 0, big);
    slabkit_cache_return_sheaf(c, 0, sh);

    // Without sheaf_capacity the design's own: under sheaves, 60 for 64 bytes, so that a prefill
    // of 100 is a one-off sheaf.
    slabkit_cache_args plain{0, nullptr, 0};
    slabkit_cache *d = create_with(name("sh-args0"), 64, &plain);
    ASSERT_NE(d, nullptr);
    slabkit_sheaf *sd = slabkit_cache_prefill_sheaf(d, 0, 100);
    ASSERT_NE(sd, nullptr);
    EXPECT_TRUE(holds_at_least(sd, 100));
    if (sheaves()) {
        EXPECT_EQ(counter(stats_of(d), "SHEAF_PREFILL_OVERSIZE"), 1);
    }
    slabkit_cache_return_sheaf(d, 0, sd);

    // NULL args: all zero.
    slabkit_cache *e = create_with(name("sh-argsnull"), 24, nullptr);
    ASSERT_NE(e, nullptr);
    slabkit_cache_free(e, slabkit_cache_alloc(e, 0));

    // Alignment and constructor.
    g_ctor_calls = 0;
    slabkit_cache_args aligned{128, ctor_ab, 0};
    slabkit_cache *f = create_with(name("sh-argsal"), 56, &aligned);
    ASSERT_NE(f, nullptr);
    std::vector<void *> objs;
    for (int i = 0; i < 50; ++i) {
        auto *p = static_cast<unsigned char *>(slabkit_cache_alloc(f, 0));
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(addr(p) % 128, 0u) << static_cast<void *>(p);
        EXPECT_EQ(p[0], 0xab);
        EXPECT_EQ(p[55], 0xab);
        objs.push_back(p);
    }
    EXPECT_GT(g_ctor_calls.load(), 0u);
    for (void *p : objs) slabkit_cache_free(f, p);

    // A bad design name is refused.
    ::testing::internal::CaptureStderr();
    slabkit_cache *bad =
        slabkit_cache_create_args("no-such-design", name("sh-bad").c_str(), 64, &args, 0);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(bad, nullptr);
    EXPECT_NE(err.find("no-such-design"), std::string::npos) << err;
    for (slabkit_cache *x : {c, d, e, f}) EXPECT_EQ(slabkit_cache_validate(x, nullptr, 0), 0u);
}

SLABKIT_INSTANTIATE_FOR_DESIGNS(Sheaf);

} // namespace
} // namespace slabkit::apitest
