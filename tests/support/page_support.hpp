// page_support.hpp - helpers shared by the page allocator's tests.
#pragma once

#include "page/page_allocator.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace slabkit::test {

// A new allocator instance; throws (failing the test) when the configuration is refused.
inline page_allocator *make_allocator(const page_allocator_config &cfg) {
    const char *why = nullptr;
    page_allocator *pa = page_allocator::create(cfg, &why);
    if (!pa) throw std::runtime_error(std::string("create failed: ") + (why ? why : "?"));
    return pa;
}

inline page_stats stats_of(const page_allocator &pa) {
    page_stats st;
    pa.snapshot(&st);
    return st;
}

// validate() == 0, with its report as the failure message.
inline ::testing::AssertionResult valid(const page_allocator &pa) {
    char report[2048];
    unsigned problems = pa.validate(report, sizeof report);
    if (problems == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << problems << " problem(s):\n" << report;
}

// Nothing in use or parked, no errors, and every free page merged back into max-order blocks.
inline void expect_all_free_and_merged(const page_stats &st) {
    EXPECT_EQ(st.in_use, 0u);
    EXPECT_EQ(st.in_pcp, 0u);
    EXPECT_EQ(st.errors, 0u);
    for (unsigned n = 0; n < st.nodes; ++n) {
        const auto &ns = st.node[n];
        for (unsigned o = 0; o < kMaxOrder; ++o)
            EXPECT_EQ(ns.free_blocks[o], 0u) << "node " << n << " order " << o;
        EXPECT_EQ(ns.free_blocks[kMaxOrder] << kMaxOrder, ns.free_pages) << "node " << n;
        EXPECT_EQ(ns.free_pages, ns.usable_pages) << "node " << n;
    }
}

} // namespace slabkit::test
