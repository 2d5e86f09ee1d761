// Slab core: argument checks, object layout, order selection and the object-start test.
#include "core/cache.hpp"

#include <gtest/gtest.h>

#include <random>

namespace slabkit {
namespace {

cache layout_of(size_t size, size_t align = 0, unsigned flags = 0, void (*ctor)(void *) = nullptr,
                order_policy policy = order_policy{}) {
    cache c;
    c.object_size = static_cast<uint32_t>(size);
    c.align = static_cast<uint32_t>(align);
    c.flags = flags;
    c.ctor = ctor;
    compute_layout(&c, policy);
    return c;
}

void nop_ctor(void *) {}

TEST(SlabLayout, ArgumentsAreChecked) {
    EXPECT_EQ(cache_args_invalid({"ok", 8, 0, 0, nullptr}), nullptr);
    EXPECT_NE(cache_args_invalid({nullptr, 8, 0, 0, nullptr}), nullptr);
    EXPECT_NE(cache_args_invalid({"", 8, 0, 0, nullptr}), nullptr);
    EXPECT_NE(cache_args_invalid({"has space", 8, 0, 0, nullptr}), nullptr);
    EXPECT_NE(cache_args_invalid({"0123456789012345678901234567890123", 8, 0, 0, nullptr}),
              nullptr);
    EXPECT_NE(cache_args_invalid({"zero", 0, 0, 0, nullptr}), nullptr);
    EXPECT_NE(cache_args_invalid({"huge", kMaxObjectSize + 1, 0, 0, nullptr}), nullptr);
    EXPECT_NE(cache_args_invalid({"align3", 8, 3, 0, nullptr}), nullptr);
    EXPECT_NE(cache_args_invalid({"align8k", 8, 8192, 0, nullptr}), nullptr);
    EXPECT_NE(cache_args_invalid({"flags", 8, 0, 0x1, nullptr}), nullptr);
}

TEST(SlabLayout, SmallObjectsAreWordRoundedWithPointerInside) {
    cache c = layout_of(13);
    EXPECT_EQ(c.size, 16u);
    EXPECT_EQ(c.offset, 0u);
    EXPECT_EQ(c.order, 0u);
    EXPECT_EQ(c.objects, 256u);
    cache tiny = layout_of(1);
    EXPECT_EQ(tiny.size, 8u); // room for the free pointer
}

TEST(SlabLayout, CtorMovesFreePointerAfterObject) {
    cache c = layout_of(24, 0, 0, nop_ctor);
    EXPECT_EQ(c.offset, 24u);
    EXPECT_EQ(c.size, 32u);
}

TEST(SlabLayout, AlignmentAndHwcacheAlign) {
    EXPECT_EQ(layout_of(24, 64).size, 64u);
    EXPECT_EQ(layout_of(100, 0, kHwcacheAlign).align, 64u);
    EXPECT_EQ(layout_of(20, 0, kHwcacheAlign).align, 32u); // a fraction of the line
    EXPECT_EQ(layout_of(100, 0, kHwcacheAlign).size, 128u);
}

TEST(SlabLayout, SlqbOrderPrefersOrderZeroWithinQuarterWaste) {
    order_policy slqb{0, 1, 4, 1};
    EXPECT_EQ(layout_of(700, 0, 0, nullptr, slqb).order, 0u); // 5 objects, 12% waste
    // 3000 bytes waste 27% at orders 0 and 1: the smallest order that fits one.
    cache c = layout_of(3000, 0, 0, nullptr, slqb);
    EXPECT_EQ(c.order, 0u);
    EXPECT_EQ(c.objects, 1u);
    cache big = layout_of(5000, 0, 0, nullptr, slqb);
    EXPECT_EQ(big.order, 1u);
    EXPECT_EQ(big.objects, 1u);
    cache max = layout_of(kMaxObjectSize, 0, 0, nullptr, slqb);
    EXPECT_EQ(max.order, kMaxOrder);
}

TEST(SlabLayout, ColourStaysInsideTheSlack) {
    cache c = layout_of(200);
    EXPECT_EQ(c.colour_range, kPageSize - c.objects * c.size);
    EXPECT_EQ(c.colour_off, kCacheLine);
    EXPECT_EQ(layout_of(256, 256).colour_off, 256u);
}

TEST(SlabLayout, ObjectIndexIsExactForEverySize) {
    std::mt19937_64 rng(7);
    for (size_t size = 8; size <= 9000; size += (size < 512 ? 8 : 56)) {
        cache c = layout_of(size);
        for (int k = 0; k < 200; ++k) {
            uintptr_t off = rng() % (kPageSize << (c.order + 1));
            long idx = c.object_index(off);
            if (off % c.size == 0)
                EXPECT_EQ(idx, static_cast<long>(off / c.size)) << size << " " << off;
            else
                EXPECT_EQ(idx, -1) << size << " " << off;
        }
        EXPECT_EQ(c.object_index(c.size * 3), 3);
        EXPECT_EQ(c.object_index(c.size * 3 + 4), -1);
    }
}

TEST(SlabLayout, DesignNames) {
    design d;
    EXPECT_TRUE(parse_design("slqb", &d));
    EXPECT_EQ(d, design::slqb);
    EXPECT_FALSE(parse_design("slub2", &d));
    EXPECT_FALSE(parse_design(nullptr, &d));
    EXPECT_STREQ(design_name(design::slqb), "slqb");
}

} // namespace
} // namespace slabkit
