// slabkit::allocator<T> with standard containers, over-aligned types and bad sizes.
#include <slabkit/slabkit.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

bool aligned(const void *p, std::size_t a) {
    return reinterpret_cast<std::uintptr_t>(p) % a == 0;
}

TEST(AdaptorAllocator, Vector) {
    std::vector<int, slabkit::allocator<int>> v;
    for (int i = 0; i < 100000; ++i) v.push_back(i);
    for (int i = 0; i < 100000; ++i) ASSERT_EQ(v[i], i);
    v.resize(10);
    v.shrink_to_fit();
    EXPECT_EQ(v.size(), 10u);
    std::vector<int, slabkit::allocator<int>> copy = v;
    EXPECT_EQ(copy, v);
}

TEST(AdaptorAllocator, MapAndList) {
    using string = std::basic_string<char, std::char_traits<char>, slabkit::allocator<char>>;
    std::map<int, string, std::less<int>, slabkit::allocator<std::pair<const int, string>>> m;
    for (int i = 0; i < 5000; ++i) m.emplace(i, string(40, static_cast<char>('a' + i % 26)));
    for (int i = 0; i < 5000; i += 2) m.erase(i);
    EXPECT_EQ(m.size(), 2500u);
    EXPECT_EQ(m.at(7), string(40, static_cast<char>('a' + 7)));

    std::list<double, slabkit::allocator<double>> l;
    for (int i = 0; i < 5000; ++i) l.push_front(i * 0.5);
    l.sort();
    EXPECT_EQ(l.front(), 0.0);
    EXPECT_EQ(l.back(), 4999 * 0.5);
}

TEST(AdaptorAllocator, RebindAndEquality) {
    slabkit::allocator<int> a;
    slabkit::allocator<double> b(a);
    EXPECT_TRUE(a == b);
    EXPECT_FALSE(a != b);
    using traits = std::allocator_traits<slabkit::allocator<int>>;
    static_assert(std::is_same_v<traits::rebind_alloc<long>, slabkit::allocator<long>>);
    static_assert(traits::is_always_equal::value);
    traits::rebind_alloc<long> r(a);
    long *p = r.allocate(3);
    p[2] = 9;
    r.deallocate(p, 3);
}

struct alignas(64) cacheline {
    int value;
};
struct alignas(4096) page_sized {
    char bytes[100];
};
struct alignas(16384) huge_align {
    int value;
};

template <class T>
void check_alignment_over_sizes() {
    slabkit::allocator<T> a;
    for (std::size_t n : {1, 2, 3, 5, 16, 33, 100, 129, 1000}) {
        T *p = a.allocate(n);
        EXPECT_TRUE(aligned(p, alignof(T))) << "n=" << n << " align=" << alignof(T);
        std::memset(static_cast<void *>(p), 0x5a, n * sizeof(T));
        a.deallocate(p, n);
    }
}

TEST(AdaptorAllocator, OverAlignedTypes) {
    check_alignment_over_sizes<cacheline>();
    check_alignment_over_sizes<page_sized>();
    check_alignment_over_sizes<huge_align>();

    std::vector<cacheline, slabkit::allocator<cacheline>> v;
    for (int i = 0; i < 1000; ++i) {
        v.push_back(cacheline{i});
        ASSERT_TRUE(aligned(v.data(), 64));
    }
    std::list<cacheline, slabkit::allocator<cacheline>> l(100);
    for (const cacheline &c : l) EXPECT_TRUE(aligned(&c, 64));
}

TEST(AdaptorAllocator, OverflowThrows) {
    slabkit::allocator<std::uint64_t> a;
    EXPECT_THROW((void)a.allocate(std::numeric_limits<std::size_t>::max() / 4),
                 std::bad_array_new_length);
    EXPECT_THROW((void)a.allocate(std::numeric_limits<std::size_t>::max() / 8), std::bad_alloc);
    slabkit::allocator<huge_align> h;
    EXPECT_THROW((void)h.allocate(std::numeric_limits<std::size_t>::max() / sizeof(huge_align)),
                 std::bad_alloc);
    std::vector<int, slabkit::allocator<int>> v;
    EXPECT_THROW(v.reserve(v.max_size()), std::bad_alloc);
}

TEST(AdaptorAllocator, ZeroCountIsDistinctAndFreeable) {
    slabkit::allocator<int> a;
    int *p = a.allocate(0);
    int *q = a.allocate(0);
    EXPECT_NE(p, nullptr);
    EXPECT_NE(p, q);
    a.deallocate(p, 0);
    a.deallocate(q, 0);
}

} // namespace
