// page_fixture.hpp - the fixture and helpers of the page allocator's unit tests
// (tests/unit/page_*_test.cpp): configurations, stats checks, byte helpers.
//
// Every test makes its own allocator instances (page_allocator::create) and destroys them at the
// end. Each chunk reserves 1 GiB of address space that is only backed where it is touched.
#pragma once

#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "support/page_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace slabkit::test {

inline constexpr uint64_t kBlocksPerChunk = kUsablePages >> kMaxOrder; // 252 order-10 blocks

inline page_allocator_config one_node() {
    page_allocator_config cfg;
    cfg.nodes = 1;
    cfg.decay_ms = 0; // no time-driven behaviour unless a test asks for it
    return cfg;
}

// free + in_use + in_pcp == usable on every node.
inline ::testing::AssertionResult pages_add_up(const page_stats &st) {
    for (unsigned n = 0; n < st.nodes; ++n) {
        const auto &ns = st.node[n];
        if (ns.free_pages + ns.in_use + ns.in_pcp != ns.usable_pages)
            return ::testing::AssertionFailure()
                   << "node " << n << ": free " << ns.free_pages << " + in_use " << ns.in_use
                   << " + in_pcp " << ns.in_pcp << " != usable " << ns.usable_pages;
    }
    return ::testing::AssertionSuccess();
}

// Nothing allocated, nothing parked on per-slot lists, every free page back in a max-order block.
inline ::testing::AssertionResult all_merged(const page_stats &st) {
    if (st.in_use != 0 || st.in_pcp != 0)
        return ::testing::AssertionFailure() << "in_use " << st.in_use << ", in_pcp " << st.in_pcp;
    for (unsigned n = 0; n < st.nodes; ++n) {
        const auto &ns = st.node[n];
        for (unsigned o = 0; o < kMaxOrder; ++o)
            if (ns.free_blocks[o] != 0)
                return ::testing::AssertionFailure() << "node " << n << ": " << ns.free_blocks[o]
                                                     << " free blocks of order " << o;
        if (ns.free_blocks[kMaxOrder] << kMaxOrder != ns.free_pages ||
            ns.free_pages != ns.usable_pages)
            return ::testing::AssertionFailure()
                   << "node " << n << ": " << ns.free_blocks[kMaxOrder] << " max-order blocks, "
                   << ns.free_pages << " free pages, " << ns.usable_pages << " usable";
    }
    return ::testing::AssertionSuccess();
}

inline size_t resident(const void *addr, size_t pages) {
    platform::os_status status;
    size_t n = platform::resident_pages(addr, pages * kPageSize, &status);
    EXPECT_TRUE(status.ok());
    return n;
}

inline unsigned char *as_bytes(void *p) {
    return static_cast<unsigned char *>(p);
}

inline bool all_bytes_are(const void *p, size_t bytes, unsigned char value) {
    const auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < bytes; ++i)
        if (b[i] != value) return false;
    return true;
}

inline std::string describe(const alloc_failure &why) {
    char buf[256];
    return why.describe(buf, sizeof buf);
}

// Makes allocators and destroys them when the test ends.
class PageAllocatorFixture : public ::testing::Test {
  protected:
    void TearDown() override {
        for (page_allocator *pa : made_) page_allocator::destroy(pa);
    }
    page_allocator &make(const page_allocator_config &cfg) {
        page_allocator *pa = test::make_allocator(cfg);
        made_.push_back(pa);
        return *pa;
    }
    void destroy_now(page_allocator &pa) {
        made_.erase(std::find(made_.begin(), made_.end(), &pa));
        page_allocator::destroy(&pa);
    }

  private:
    std::vector<page_allocator *> made_;
};

inline page_allocator_config small_pcp() {
    page_allocator_config cfg = one_node();
    cfg.pcp_batch = 8;
    cfg.pcp_high = 32;
    return cfg;
}

inline page_allocator_config no_pcp_retain(uint64_t retain_pages) {
    page_allocator_config cfg = one_node();
    cfg.pcp_high = 0;
    cfg.retain_pages = retain_pages;
    cfg.decay_ms = 0;
    return cfg;
}

} // namespace slabkit::test
