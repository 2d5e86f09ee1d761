// kernel.h: the C scenarios (kernel_c_test.c, built as C11), and the same header from C++.
#include "kernel_c_test.h"

#include <slabkit/kernel.h>
#include <slabkit/slabkit.hpp> // both headers in one C++ translation unit

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace {

// Each C scenario returns nullptr, or the failed check.
#define EXPECT_C_PASSES(scenario)                                                                  \
    do {                                                                                           \
        const char *failed = scenario();                                                           \
        EXPECT_EQ(failed, nullptr) << "kernel_c_test.c:" << failed;                                \
    } while (0)

TEST(KernelC, CacheBasics) {
    EXPECT_C_PASSES(kernel_c_cache_basics);
}
TEST(KernelC, CacheCtor) {
    EXPECT_C_PASSES(kernel_c_cache_ctor);
}
TEST(KernelC, CacheBulkAndShrink) {
    EXPECT_C_PASSES(kernel_c_cache_bulk_and_shrink);
}
TEST(KernelC, KmemCacheMacro) {
    EXPECT_C_PASSES(kernel_c_kmem_cache_macro);
}
TEST(KernelC, KmallocSizes) {
    EXPECT_C_PASSES(kernel_c_kmalloc_sizes);
}
TEST(KernelC, KmallocZeroAndNull) {
    EXPECT_C_PASSES(kernel_c_kmalloc_zero_and_null);
}
TEST(KernelC, KzallocKcalloc) {
    EXPECT_C_PASSES(kernel_c_kzalloc_kcalloc);
}
TEST(KernelC, Krealloc) {
    EXPECT_C_PASSES(kernel_c_krealloc);
}
TEST(KernelC, Flags) {
    EXPECT_C_PASSES(kernel_c_flags);
}
TEST(KernelC, Sheaves) {
    EXPECT_C_PASSES(kernel_c_sheaves);
}

struct list_node {
    list_node *next;
    int value;
};

// Kernel-style code compiled as C++: the same names, types and macros.
TEST(KernelCxx, CachesAndKmalloc) {
    kmem_cache *nodes = KMEM_CACHE(list_node, SLAB_HWCACHE_ALIGN | SLAB_PANIC);
    ASSERT_NE(nodes, nullptr);
    EXPECT_EQ(kmem_cache_size(nodes), sizeof(list_node));

    list_node *head = nullptr;
    for (int i = 0; i < 1000; ++i) {
        auto *n = static_cast<list_node *>(kmem_cache_alloc(nodes, GFP_KERNEL));
        ASSERT_NE(n, nullptr);
        n->value = i;
        n->next = head;
        head = n;
    }
    int expect = 999;
    while (head != nullptr) {
        list_node *next = head->next;
        EXPECT_EQ(head->value, expect--);
        kmem_cache_free(nodes, head);
        head = next;
    }
    void *batch[16];
    ASSERT_EQ(kmem_cache_alloc_bulk(nodes, GFP_ATOMIC | __GFP_ZERO, 16, batch), 16);
    for (void *o : batch) EXPECT_EQ(static_cast<list_node *>(o)->value, 0);
    kmem_cache_free_bulk(nodes, 16, batch);
    EXPECT_EQ(kmem_cache_shrink(nodes), 0);
    kmem_cache_destroy(nodes);

    const void *p = kmalloc(100, GFP_KERNEL);
    ASSERT_FALSE(ZERO_OR_NULL_PTR(p));
    EXPECT_GE(ksize(p), 100u);
    p = krealloc(p, 1000, GFP_NOWAIT);
    ASSERT_NE(p, nullptr);
    kfree(p);
    EXPECT_EQ(kcalloc(SIZE_MAX, 2, GFP_KERNEL), nullptr);
    EXPECT_EQ(kmalloc(0, GFP_KERNEL), ZERO_SIZE_PTR);
    auto *z = static_cast<unsigned char *>(kzalloc(64, GFP_KERNEL));
    ASSERT_NE(z, nullptr);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(z[i], 0);
    kfree(z);
    void *node0 = kmalloc_node(64, GFP_KERNEL, NUMA_NO_NODE);
    ASSERT_NE(node0, nullptr);
    kfree(node0);
    void *o = nullptr;
    kmem_cache *c = kmem_cache_create("kcxx-node", 32, 0, 0, nullptr);
    ASSERT_NE(c, nullptr);
    o = kmem_cache_alloc_node(c, GFP_KERNEL, NUMA_NO_NODE);
    ASSERT_NE(o, nullptr);
    kmem_cache_free(c, o);
    kmem_cache_destroy(c);
}

static_assert((GFP_KERNEL & __GFP_ZERO) == 0 && (GFP_ATOMIC & __GFP_ZERO) == 0);
static_assert(__GFP_ZERO == SLABKIT_GFP_ZERO && NUMA_NO_NODE == -1);

} // namespace
