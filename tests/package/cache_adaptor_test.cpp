// slabkit::cache<T>: construction and destruction of T, ownership of the C cache, moves.
#include <slabkit/slabkit.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

struct counted {
    static inline int constructed = 0;
    static inline int destroyed = 0;
    static void reset() { constructed = destroyed = 0; }

    counted(int a, std::string b) : number(a), text(std::move(b)) { ++constructed; }
    ~counted() { ++destroyed; }
    counted(const counted &) = delete;
    counted &operator=(const counted &) = delete;

    int number;
    std::string text;
};

TEST(AdaptorCache, CreateConstructsDestroyDestructs) {
    counted::reset();
    slabkit::cache<counted> c("adaptor-counted");
    ASSERT_TRUE(c);
    EXPECT_STREQ(c.name(), "adaptor-counted");
    EXPECT_EQ(slabkit_cache_object_size(c.get()), sizeof(counted));

    std::vector<counted *> objs;
    for (int i = 0; i < 200; ++i) {
        counted *p = c.create(i, "object number " + std::to_string(i) + " with a long string");
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignof(counted), 0u);
        objs.push_back(p);
    }
    EXPECT_EQ(counted::constructed, 200);
    for (int i = 0; i < 200; ++i) {
        EXPECT_EQ(objs[i]->number, i);
        EXPECT_EQ(objs[i]->text, "object number " + std::to_string(i) + " with a long string");
    }
    for (counted *p : objs) c.destroy(p);
    EXPECT_EQ(counted::destroyed, 200);
    c.destroy(nullptr);
    EXPECT_EQ(counted::destroyed, 200);
    EXPECT_EQ(c.shrink(), 0u);
}

// One program holds caches of every design at once, each by name; objects of one never mix with
// another's.
TEST(AdaptorCache, CachesOfEveryDesignInOneProgram) {
    counted::reset();
    slabkit::cache<counted> a(slabkit::slqb_design, "adaptor-in-slqb");
    slabkit::cache<counted> b(slabkit::slub_design, "adaptor-in-slub");
    slabkit::cache<int> s(slabkit::slab_design, "adaptor-in-slab");
    EXPECT_EQ(a.design_name(), "slqb");
    EXPECT_EQ(b.design_name(), "slub");
    EXPECT_EQ(s.design_name(), "slab");
    s.destroy(s.create(3));
    std::vector<counted *> in_a, in_b;
    for (int i = 0; i < 500; ++i) {
        in_a.push_back(a.create(i, "a"));
        in_b.push_back(b.create(i, "b"));
    }
    for (int i = 0; i < 500; ++i) {
        EXPECT_EQ(in_a[i]->text, "a");
        EXPECT_EQ(in_b[i]->number, i);
    }
    for (counted *p : in_a) a.destroy(p);
    for (counted *p : in_b) b.destroy(p);
    EXPECT_EQ(counted::destroyed, 1000);
    // Every design of the build, by the name slabkit_designs() gives.
    std::string all = slabkit_designs();
    for (size_t at = 0; at < all.size();) {
        size_t end = all.find(' ', at);
        if (end == std::string::npos) end = all.size();
        std::string d = all.substr(at, end - at);
        slabkit::cache<int> c(slabkit::design_tag{d.c_str()}, ("adaptor-any-" + d).c_str());
        EXPECT_EQ(c.design_name(), d);
        c.destroy(c.create(7));
        at = end + 1;
    }
#if SLABKIT_HPP_EXCEPTIONS
    EXPECT_THROW(slabkit::cache<int>(slabkit::design_tag{"no-such"}, "adaptor-bad-design"),
                 std::runtime_error);
#endif
}

TEST(AdaptorCache, UniquePtrDestroysThroughTheCache) {
    counted::reset();
    slabkit::cache<counted> c("adaptor-unique");
    {
        auto p = c.make_unique(5, "five");
        EXPECT_EQ(p->number, 5);
        EXPECT_EQ(counted::constructed, 1);
    }
    EXPECT_EQ(counted::destroyed, 1);
}

TEST(AdaptorCache, DestructorDestroysTheCache) {
    {
        slabkit::cache<int> c("adaptor-scoped");
        int *p = c.create(3);
        EXPECT_EQ(*p, 3);
        c.destroy(p);
    }
    // The name is free again once the cache is gone.
    slabkit::cache<int> again("adaptor-scoped");
    EXPECT_TRUE(again);
}

TEST(AdaptorCache, MoveTransfersOwnership) {
    counted::reset();
    slabkit::cache<counted> a("adaptor-move-a");
    slabkit_cache *handle = a.get();
    counted *p = a.create(1, "one");

    slabkit::cache<counted> b(std::move(a));
    EXPECT_FALSE(a); // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(a.get(), nullptr);
    EXPECT_EQ(b.get(), handle);
    b.destroy(p);

    slabkit::cache<counted> c("adaptor-move-c");
    c = std::move(b); // destroys adaptor-move-c, takes adaptor-move-a
    EXPECT_EQ(c.get(), handle);
    EXPECT_STREQ(c.name(), "adaptor-move-a");
    EXPECT_FALSE(b);
    slabkit::cache<counted> d("adaptor-move-c"); // that name was freed by the assignment
    EXPECT_TRUE(d);

    counted *q = c.create(2, "two");
    c.destroy(q);
    EXPECT_EQ(counted::constructed, 2);
    EXPECT_EQ(counted::destroyed, 2);
    static_assert(!std::is_copy_constructible_v<slabkit::cache<counted>>);
    static_assert(!std::is_copy_assignable_v<slabkit::cache<counted>>);
    static_assert(std::is_nothrow_move_constructible_v<slabkit::cache<counted>>);
    static_assert(std::is_nothrow_move_assignable_v<slabkit::cache<counted>>);
}

struct throws_on_negative {
    explicit throws_on_negative(int v) : value(v) {
        if (v < 0) throw std::invalid_argument("negative");
    }
    int value;
};

TEST(AdaptorCache, ThrowingConstructorFreesTheObject) {
    slabkit::cache<throws_on_negative> c("adaptor-throwing");
    EXPECT_THROW((void)c.create(-1), std::invalid_argument);
    throws_on_negative *p = c.create(4);
    EXPECT_EQ(p->value, 4);
    c.destroy(p);
    // Nothing leaked: the object of the failed create went back to the cache.
    EXPECT_EQ(c.shrink(), 0u);
}

TEST(AdaptorCache, BadNameThrows) {
    EXPECT_THROW(slabkit::cache<int>("has space"), std::runtime_error);
    EXPECT_THROW(slabkit::cache<int>(""), std::runtime_error);
    slabkit::cache<int> first("adaptor-dup");
    EXPECT_THROW(slabkit::cache<int>("adaptor-dup"), std::runtime_error);
}

struct alignas(64) line {
    unsigned char bytes[64];
};
struct alignas(256) wide {
    double values[5];
};

TEST(AdaptorCache, OverAlignedTypes) {
    slabkit::cache<line> lines("adaptor-line");
    slabkit::cache<wide> wides("adaptor-wide");
    std::vector<line *> ls;
    std::vector<wide *> ws;
    for (int i = 0; i < 100; ++i) {
        ls.push_back(lines.create());
        ws.push_back(wides.create());
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ls.back()) % 64, 0u);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ws.back()) % 256, 0u);
    }
    for (line *p : ls) lines.destroy(p);
    for (wide *p : ws) wides.destroy(p);
}

TEST(AdaptorCache, HwcacheAlignFlag) {
    slabkit::cache<std::uint64_t> c("adaptor-hwcache", SLABKIT_HWCACHE_ALIGN);
    std::uint64_t *p = c.create(std::uint64_t{42});
    EXPECT_EQ(*p, 42u);
    c.destroy(p);
}

} // namespace
