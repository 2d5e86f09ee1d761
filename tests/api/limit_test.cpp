// limit_test.cpp - the kernel API under an address-space limit (ctest api_limit_<design> runs it
// under ulimit -v 512 MiB, each design as the process's; skipped without a limit, which ctest
// counts as a failure there): kmem_cache_alloc and kmalloc return NULL when memory runs out, the
// refusals are counted, nothing allocated before is lost, and after the frees both work again.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace slabkit::apitest {
namespace {

bool limited() {
    struct rlimit lim {};
    return getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY;
}

// Allocates with `alloc` until it returns NULL (at most `most` times), marking each object's
// ends; frees them all with `release` after checking the marks. Returns how many there were.
template <class Alloc, class Release>
size_t run_out(size_t size, size_t most, Alloc alloc, Release release) {
    std::vector<unsigned char *> objs;
    objs.reserve(most);
    while (objs.size() < most) {
        auto *p = static_cast<unsigned char *>(alloc());
        if (!p) break;
        p[0] = static_cast<unsigned char>(objs.size());
        p[size - 1] = static_cast<unsigned char>(objs.size() >> 8);
        objs.push_back(p);
    }
    for (size_t i = 0; i < objs.size(); ++i) {
        EXPECT_EQ(objs[i][0], static_cast<unsigned char>(i)) << i;
        EXPECT_EQ(objs[i][size - 1], static_cast<unsigned char>(i >> 8)) << i;
        release(objs[i]);
    }
    return objs.size();
}

TEST(AddressSpaceLimit, CacheAllocAndKmallocReturnNullAndRecover) {
    if (!limited()) GTEST_SKIP() << "needs a limit on the address space (ulimit -v)";
    // The vector's own memory is reserved first: it must not be what runs out.
    constexpr size_t kMost = size_t{3} << 20;
    slabkit_cache *c = slabkit_cache_create("limit-256", 256, 0, 0, nullptr);
    ASSERT_NE(c, nullptr);
    const uint64_t before = slabkit_refusals();
    const size_t n = run_out(
        256, kMost, [&] { return slabkit_cache_alloc(c, 0); },
        [&](void *p) { slabkit_cache_free(c, p); });
    EXPECT_GT(n, 1000u);
    EXPECT_LT(n, kMost) << "the cache never ran out";
    EXPECT_GT(slabkit_refusals(), before);
    void *again = slabkit_cache_alloc(c, 0);
    EXPECT_NE(again, nullptr) << "the cache does not recover after its objects are freed";
    slabkit_cache_free(c, again);
    slabkit_cache_shrink(c);
    slabkit_cache_destroy(c);

    const uint64_t before_kmalloc = slabkit_refusals();
    EXPECT_EQ(slabkit_kmalloc(size_t{1} << 30, 0), nullptr);
    EXPECT_GT(slabkit_refusals(), before_kmalloc);
    const size_t m = run_out(
        1000, kMost, [] { return slabkit_kmalloc(1000, 0); }, [](void *p) { slabkit_kfree(p); });
    EXPECT_GT(m, 1000u);
    EXPECT_LT(m, kMost) << "kmalloc never ran out";
    void *k = slabkit_kmalloc(1000, 0);
    EXPECT_NE(k, nullptr);
    slabkit_kfree(k);
    EXPECT_EQ(slabkit_errors(), 0u);
}

} // namespace
} // namespace slabkit::apitest
