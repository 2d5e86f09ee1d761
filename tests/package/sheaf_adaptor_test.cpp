// Prefilled sheaves through the public headers: slabkit::cache<T>::prefill and its sheaf (create
// from it, refill, moves, the destructor giving the sheaf back), in every design by name, and
// kernel.h's kmem_cache_refill_sheaf error codes (-EINVAL for no sheaf, -ENOMEM when a sheaf
// cannot be had).
#include <slabkit/kernel.h>
#include <slabkit/slabkit.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

std::vector<std::string> all_designs() {
    std::vector<std::string> out;
    std::istringstream in(slabkit_designs());
    for (std::string d; in >> d;) out.push_back(d);
    return out;
}

struct widget {
    static inline int alive = 0;
    explicit widget(int v, bool fail = false) : value(v) {
        if (fail) throw std::runtime_error("widget refused");
        ++alive;
    }
    ~widget() { --alive; }
    widget(const widget &) = delete;
    widget &operator=(const widget &) = delete;
    int value;
    char payload[52] = {};
};

// Objects handed out and not back: out of their slabs and in no sheaf the cache keeps. Objects
// in a sheaf the caller holds count as out.
uint64_t objects_out(slabkit_cache *c) {
    slabkit_cache_stats st{};
    slabkit_get_cache_stats(c, &st);
    return st.active_objects - st.queued_objects;
}

// objects_out(c) == n, except under SLUB, whose slabinfo counts the free objects of the slots'
// frozen slabs as active, as the kernel's does.
::testing::AssertionResult out_exactly(slabkit_cache *c, const std::string &design, uint64_t n) {
    uint64_t out = objects_out(c);
    if (design == "slub" || out == n) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << out << " objects out, " << n << " expected";
}

TEST(AdaptorSheaf, PrefillCreateRefillAndReturnInEveryDesign) {
    for (const std::string &d : all_designs()) {
        SCOPED_TRACE(d);
        std::string name = "adaptor-sheaf-" + d;
        slabkit::cache<widget> c(slabkit::design_tag{d.c_str()}, name.c_str(), 0, 80);
        EXPECT_EQ(c.design_name(), d);
        widget::alive = 0;
        std::vector<widget *> made;
        std::unordered_set<widget *> seen;
        std::size_t n = 0;
        {
            auto sh = c.prefill(10);
            EXPECT_GE(sh.size(), 10u);
            if (d == "sheaves") { // refilled to the capacity asked for
                EXPECT_EQ(sh.size(), 80u);
            }
            if (d != "sheaves") {
                EXPECT_EQ(sh.size(), 10u);
            }
            EXPECT_TRUE(out_exactly(c.get(), d, sh.size()));
            n = sh.size();
            for (std::size_t i = 0; i < n; ++i) {
                widget *w = sh.create(static_cast<int>(i));
                ASSERT_NE(w, nullptr);
                EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w) % alignof(widget), 0u);
                ASSERT_TRUE(seen.insert(w).second) << w;
                made.push_back(w);
            }
            EXPECT_EQ(sh.size(), 0u);
            EXPECT_EQ(widget::alive, static_cast<int>(n));
            EXPECT_THROW((void)sh.create(-1), std::bad_alloc);
            EXPECT_EQ(widget::alive, static_cast<int>(n));

            EXPECT_TRUE(sh.refill(5));
            EXPECT_GE(sh.size(), 5u);
            EXPECT_TRUE(sh.refill(300)); // past the capacity: a bigger sheaf
            EXPECT_GE(sh.size(), 300u);
            // A constructor that throws: the object goes back, the exception through.
            std::size_t before = sh.size();
            EXPECT_THROW((void)sh.create(0, true), std::runtime_error);
            EXPECT_EQ(sh.size(), before - 1);
            EXPECT_TRUE(out_exactly(c.get(), d, made.size() + sh.size()));

            // Moves: the moved-from sheaf holds nothing; assigning gives the old sheaf back.
            auto other = std::move(sh);
            EXPECT_EQ(sh.size(), 0u); // NOLINT(bugprone-use-after-move): defined as empty
            EXPECT_EQ(other.size(), before - 1);
            auto small = c.prefill(3);
            small = std::move(other);
            EXPECT_EQ(small.size(), before - 1);
            EXPECT_TRUE(out_exactly(c.get(), d, made.size() + small.size()));
            for (int i = 0; i < 7; ++i) made.push_back(small.create(1000 + i));
        } // the sheaf goes back with its objects left
        EXPECT_TRUE(out_exactly(c.get(), d, made.size()));
        ASSERT_EQ(made.size(), n + 7);
        for (std::size_t i = 0; i < made.size(); ++i)
            EXPECT_EQ(made[i]->value, static_cast<int>(i < n ? i : 1000 + (i - n)));
        for (widget *w : made) c.destroy(w);
        EXPECT_EQ(widget::alive, 0);
        EXPECT_TRUE(out_exactly(c.get(), d, 0u));
        EXPECT_THROW((void)c.prefill(0), std::bad_alloc);
        EXPECT_EQ(c.shrink(), 0u);
        EXPECT_EQ(slabkit_cache_validate(c.get(), nullptr, 0), 0u);
    }
}

// The sheaves design's capacity asked for through cache<T>: a prefill up to it is no one-off
// sheaf (SHEAF_PREFILL_OVERSIZE stays 0); one past it is.
TEST(AdaptorSheaf, SheafCapacityAskedForIsKept) {
    slabkit::cache<widget> c(slabkit::sheaves_design, "adaptor-sheaf-cap", 0, 120);
    auto oversize = [&] {
        slabkit_cache_stats st{};
        slabkit_get_cache_stats(c.get(), &st);
        for (unsigned i = 0; i < st.nr_counters; ++i)
            if (std::string(st.counter_names[i]) == "SHEAF_PREFILL_OVERSIZE")
                return static_cast<int64_t>(st.counters[i]);
        return int64_t{-1};
    };
    {
        auto sh = c.prefill(120);
        EXPECT_EQ(sh.size(), 120u);
        EXPECT_EQ(oversize(), 0);
        auto big = c.prefill(121);
        EXPECT_EQ(big.size(), 121u);
        EXPECT_EQ(oversize(), 1);
    }
    EXPECT_EQ(objects_out(c.get()), 0u);
    EXPECT_EQ(c.shrink(), 0u);
}

TEST(KernelCxx, RefillSheafErrorCodes) {
    kmem_cache_args args{0, nullptr, 0};
    kmem_cache *c = kmem_cache_create_args("kcxx-sheaf", 48, &args, 0);
    ASSERT_NE(c, nullptr);
    slab_sheaf *sh = kmem_cache_prefill_sheaf(c, GFP_KERNEL, 8);
    ASSERT_NE(sh, nullptr);
    EXPECT_GE(kmem_cache_sheaf_size(sh), 8u);
    slab_sheaf *none = nullptr;
    EXPECT_EQ(kmem_cache_refill_sheaf(c, GFP_KERNEL, &none, 4), -22);
    EXPECT_EQ(kmem_cache_refill_sheaf(c, GFP_KERNEL, nullptr, 4), -22);
    // More than a sheaf may hold: no sheaf to be had (reported on stderr), the old one kept.
    slab_sheaf *before = sh;
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(kmem_cache_refill_sheaf(c, GFP_KERNEL, &sh, 1u << 20), -12);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(err.empty());
    EXPECT_EQ(sh, before);
    EXPECT_GE(kmem_cache_sheaf_size(sh), 8u);
    EXPECT_EQ(kmem_cache_refill_sheaf(c, GFP_KERNEL, &sh, 20), 0);
    EXPECT_GE(kmem_cache_sheaf_size(sh), 20u);
    kmem_cache_return_sheaf(c, GFP_KERNEL, sh);
    EXPECT_EQ(kmem_cache_shrink(c), 0);
    kmem_cache_destroy(c);
}

} // namespace
