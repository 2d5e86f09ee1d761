// Unit tests of the buddy page allocator (src/page): validate() finds corruption.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slot/slot.hpp"
#include "support/page_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace slabkit {
namespace {

using namespace test;

// ---------------------------------------------------------------------------------------------
// validate() finds corruption
// ---------------------------------------------------------------------------------------------

using PageAllocatorValidate = PageAllocatorFixture;

// Corrupts something, checks that validate() reports it (mentioning `expect`), then repairs it
// and checks that validate() is happy again.
template <typename Corrupt, typename Repair>
void expect_detected(const page_allocator &pa, const char *expect, Corrupt corrupt, Repair repair) {
    SCOPED_TRACE(expect);
    ASSERT_TRUE(valid(pa));
    corrupt();
    char report[1024];
    unsigned problems = pa.validate(report, sizeof report);
    EXPECT_GT(problems, 0u);
    EXPECT_GT(strlen(report), 0u);
    EXPECT_NE(strstr(report, expect), nullptr) << report;
    EXPECT_EQ(pa.validate(), problems); // no report buffer: same count
    char tiny[12];
    EXPECT_EQ(pa.validate(tiny, sizeof tiny), problems);
    EXPECT_LT(strlen(tiny), sizeof tiny);
    repair();
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorValidate, DetectsCorruptedFreeBlocks) {
    page_allocator &pa = make(no_pcp_retain(4096));
    // One page taken from a fresh allocator: its buddies of orders 0..9 follow it, all clean.
    unsigned char *p = as_bytes(pa.alloc(0));
    ASSERT_NE(p, nullptr);
    page *head = virt_to_page(p);
    chunk *c = chunk_of(p);
    const size_t pfn = page_pfn(head);
    ASSERT_EQ(head[1].flags(), PG_buddy | PG_clean | 0u);
    ASSERT_EQ(head[2].flags(), PG_buddy | PG_clean | 1u);
    ASSERT_EQ(head[4].flags(), PG_buddy | PG_clean | 2u);
    ASSERT_EQ(head[8].flags(), PG_buddy | PG_clean | 3u);

    const uint32_t saved = head[1].flags();
    expect_detected(
        pa, "wrong state", [&] { head[1].set_state(PG_buddy | PG_clean | 1u); },
        [&] { head[1].set_state(saved); });
    expect_detected(
        pa, "wrong state", [&] { head[1].set_state(PG_buddy | 0u); },
        [&] { head[1].set_state(saved); });

    page *const saved_prev = head[2].prev;
    expect_detected(
        pa, "broken back link", [&] { head[2].prev = &head[1]; },
        [&] { head[2].prev = saved_prev; });

    expect_detected(
        pa, "inside a free block", [&] { head[5].set_state(PG_tail); },
        [&] { head[5].set_state(0); });

    // A clean block with bits set in the dirty bitmap: the block and the zone count disagree.
    expect_detected(
        pa, "clean block with resident pages", [&] { dirty_fill(c, pfn + 8, 3, true); },
        [&] { dirty_fill(c, pfn + 8, 3, false); });

    pa.free(p, 0);
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorValidate, DetectsCorruptedPerSlotList) {
    page_allocator &pa = make(small_pcp());
    void *p = pa.alloc(0);
    ASSERT_NE(p, nullptr);
    pa.free(p, 0);
    page *pg = virt_to_page(p);
    ASSERT_EQ(pg->flags(), uint32_t{PG_pcp});
    expect_detected(
        pa, "per-slot block with a wrong state", [&] { pg->set_state(PG_head); },
        [&] { pg->set_state(PG_pcp); });
    // A link that skips pages: the walk no longer matches the count.
    page *const saved_next = pg->next;
    ASSERT_NE(saved_next, nullptr);
    expect_detected(
        pa, "per-slot list count is wrong", [&] { pg->next = nullptr; },
        [&] { pg->next = saved_next; });
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

} // namespace
} // namespace slabkit
