// slabkit::memory_resource and kmalloc_resource() with std::pmr containers.
#include <slabkit/slabkit.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory_resource>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

TEST(AdaptorPmr, ProcessWideInstance) {
    std::pmr::memory_resource *r = slabkit::kmalloc_resource();
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r, slabkit::kmalloc_resource());
    slabkit::memory_resource other;
    EXPECT_TRUE(r->is_equal(other));
    EXPECT_TRUE(other.is_equal(*r));
    EXPECT_FALSE(r->is_equal(*std::pmr::new_delete_resource()));
    EXPECT_FALSE(std::pmr::new_delete_resource()->is_equal(*r));
    // Equal resources can free each other's memory.
    void *p = r->allocate(100, 16);
    other.deallocate(p, 100, 16);
}

TEST(AdaptorPmr, Vector) {
    std::pmr::vector<std::pmr::string> v(slabkit::kmalloc_resource());
    for (int i = 0; i < 20000; ++i)
        v.emplace_back("string number " + std::to_string(i) + " padded past the small buffer");
    for (int i = 0; i < 20000; i += 997)
        ASSERT_EQ(std::string_view(v[i]),
                  "string number " + std::to_string(i) + " padded past the small buffer");
    EXPECT_EQ(v.get_allocator().resource(), slabkit::kmalloc_resource());
    EXPECT_EQ(v[5].get_allocator().resource(), slabkit::kmalloc_resource());
}

TEST(AdaptorPmr, UnorderedMap) {
    std::pmr::unordered_map<int, std::pmr::string> m(slabkit::kmalloc_resource());
    for (int i = 0; i < 20000; ++i) m.emplace(i, std::pmr::string(i % 100, 'x'));
    for (int i = 0; i < 20000; i += 3) m.erase(i);
    EXPECT_EQ(m.size(), 13333u);
    EXPECT_EQ(m.at(100).size(), 0u);
    EXPECT_EQ(m.at(101).size(), 1u);
}

TEST(AdaptorPmr, EveryAlignmentUpTo4096) {
    std::pmr::memory_resource *r = slabkit::kmalloc_resource();
    for (std::size_t align = 1; align <= 4096; align *= 2) {
        for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, align / 2 + 1, align, align + 1,
                                  std::size_t{100}, std::size_t{3000}, std::size_t{8192},
                                  std::size_t{9000}, std::size_t{70000}, std::size_t{5} << 20}) {
            void *p = r->allocate(bytes, align);
            ASSERT_NE(p, nullptr);
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u)
                << "bytes=" << bytes << " align=" << align;
            std::memset(p, 0x7e, bytes);
            r->deallocate(p, bytes, align);
        }
    }
}

TEST(AdaptorPmr, AlignmentsAbovePages) {
    std::pmr::memory_resource *r = slabkit::kmalloc_resource();
    for (std::size_t align : {std::size_t{8192}, std::size_t{65536}, std::size_t{1} << 21}) {
        for (std::size_t bytes : {std::size_t{1}, std::size_t{5000}, std::size_t{3} << 20}) {
            void *p = r->allocate(bytes, align);
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u);
            std::memset(p, 1, bytes);
            r->deallocate(p, bytes, align);
        }
    }
}

TEST(AdaptorPmr, ImpossibleSizesThrow) {
    std::pmr::memory_resource *r = slabkit::kmalloc_resource();
    // The sizes pass through a volatile: they are impossible on purpose, and g++ 12 at -Os
    // inlines the resource down to slabkit_kmalloc (declared alloc_size) and rejects a constant
    // above PTRDIFF_MAX at compile time (-Walloc-size-larger-than).
    volatile std::size_t max = std::numeric_limits<std::size_t>::max();
    EXPECT_THROW((void)r->allocate(max, 8), std::bad_alloc);
    EXPECT_THROW((void)r->allocate(max - 10, 64), std::bad_alloc);
    EXPECT_THROW((void)r->allocate(max / 2, 16), std::bad_alloc);
}

TEST(AdaptorPmr, MonotonicBufferUpstream) {
    std::pmr::monotonic_buffer_resource arena(1024, slabkit::kmalloc_resource());
    std::pmr::vector<int> v(&arena);
    for (int i = 0; i < 10000; ++i) v.push_back(i);
    EXPECT_EQ(v.back(), 9999);
}

} // namespace
