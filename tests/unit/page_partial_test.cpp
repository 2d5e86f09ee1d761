// page_partial_test.cpp - partial chunks (page_allocator_config::grow_bytes): the address space a
// process under RLIMIT_AS can afford. A chunk maps its metadata and grow_bytes of pages, grows in
// place while the address space after it is free, and a new partial chunk is made when it is
// not; what lies past a chunk's end in its 1 GiB is not the arena's.
#include "support/page_fixture.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

namespace slabkit::test {
namespace {

constexpr size_t kBlockPages = size_t{1} << kMaxOrder; // 4 MiB
constexpr size_t kMetaBytes = kMetaPages * kPageSize;  // 16 MiB

page_allocator_config partial(uint64_t grow_mib = 4) {
    page_allocator_config cfg = one_node();
    cfg.grow_bytes = grow_mib << 20;
    cfg.pcp_high = 0; // blocks straight from the buddy lists: counts are exact
    return cfg;
}

using PageAllocatorPartial = PageAllocatorFixture;

TEST_F(PageAllocatorPartial, AChunkStartsWithItsMetadataAndGrowBytes) {
    page_allocator &pa = make(partial());
    void *p = pa.alloc(0);
    ASSERT_NE(p, nullptr);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.chunks, 1u);
    EXPECT_EQ(st.reserved_bytes, kMetaBytes + (4u << 20));
    EXPECT_EQ(st.node[0].usable_pages, kBlockPages);
    chunk *c = chunk_of(p);
    EXPECT_EQ(c->end_pfn.load(), kMetaPages + kBlockPages);
    EXPECT_EQ(detail::g_chunk_map[reinterpret_cast<uintptr_t>(c) >> kChunkShift].load(),
              kChunkPartial);
    // The last page for use is in the arena; the first past the end is not, nor is anything
    // further in the 1 GiB, and it has no descriptor.
    char *base = reinterpret_cast<char *>(c);
    char *end = base + (kMetaPages + kBlockPages) * kPageSize;
    EXPECT_TRUE(in_arena(end - 1));
    EXPECT_NE(virt_to_page(end - kPageSize), nullptr);
    EXPECT_FALSE(in_arena(end));
    EXPECT_EQ(virt_to_page(end), nullptr);
    EXPECT_FALSE(in_arena(base + kChunkSize - 1));
    pa.free(p);
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPartial, GrowsInPlaceDoublingUpToTheWholeChunk) {
    page_allocator &pa = make(partial());
    std::vector<void *> blocks;
    // 4 MiB, then +4, +8, +16, ...: after n growths 4 << n MiB for use, one chunk.
    size_t expect_usable = kBlockPages;
    for (int growth = 0; growth < 5; ++growth) {
        while (blocks.size() < expect_usable / kBlockPages) {
            void *b = pa.alloc(kMaxOrder);
            ASSERT_NE(b, nullptr);
            blocks.push_back(b);
        }
        page_stats st = stats_of(pa);
        if (st.chunks != 1) {
            // Someone else's mapping (another test's thread, a sanitizer's runtime: the rest of
            // the 1 GiB is not reserved) took the space after the chunk, and the growth made a
            // second chunk, as it must (AMappingAfterTheChunkMakesANewChunk tests that case).
            EXPECT_TRUE(pages_add_up(st));
            EXPECT_TRUE(valid(pa));
            for (void *b : blocks) pa.free(b, kMaxOrder);
            GTEST_SKIP() << "the address space after the chunk was taken at growth " << growth;
        }
        EXPECT_EQ(st.node[0].usable_pages, expect_usable) << "growth " << growth;
        EXPECT_EQ(st.reserved_bytes, kMetaBytes + expect_usable * kPageSize);
        EXPECT_TRUE(pages_add_up(st));
        expect_usable *= 2;
    }
    // Every block is in the arena, and each block's bytes are its own.
    for (size_t i = 0; i < blocks.size(); ++i) {
        EXPECT_TRUE(in_arena(blocks[i]));
        memset(blocks[i], static_cast<int>(i), kBlockPages * kPageSize);
    }
    for (size_t i = 0; i < blocks.size(); ++i)
        EXPECT_TRUE(all_bytes_are(blocks[i], kBlockPages * kPageSize, static_cast<uint8_t>(i)));
    EXPECT_TRUE(valid(pa));
    for (void *b : blocks) pa.free(b, kMaxOrder);
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPartial, AWholeChunkAtLastCountsAsWhole) {
    page_allocator &pa = make(partial(512)); // 512 MiB, then the last 496 MiB
    std::vector<void *> blocks;
    for (size_t i = 0; i < kBlocksPerChunk; ++i) {
        void *b = pa.alloc(kMaxOrder);
        ASSERT_NE(b, nullptr) << i;
        blocks.push_back(b);
    }
    page_stats st = stats_of(pa);
    if (st.chunks == 1) { // the 1 GiB was free after it (it may not be: then two chunks)
        chunk *c = chunk_of(blocks[0]);
        EXPECT_EQ(c->end_pfn.load(), kPagesPerChunk);
        EXPECT_EQ(detail::g_chunk_map[reinterpret_cast<uintptr_t>(c) >> kChunkShift].load(),
                  kChunkWhole);
        EXPECT_EQ(st.reserved_bytes, kChunkSize);
    }
    EXPECT_TRUE(valid(pa));
    for (void *b : blocks) pa.free(b, kMaxOrder);
    EXPECT_TRUE(valid(pa));
}

// Someone else's mapping right after the chunk: the chunk cannot grow, a second one is made,
// and the other mapping is never taken for the arena's, nor touched by the growth or by
// destroy.
TEST_F(PageAllocatorPartial, AMappingAfterTheChunkMakesANewChunk) {
    page_allocator_config cfg = partial();
    cfg.continue_on_error = true; // the bad free below is reported and ignored
    page_allocator &pa = make(cfg);
    void *first = pa.alloc(kMaxOrder);
    ASSERT_NE(first, nullptr);
    chunk *c = chunk_of(first);
    char *after = reinterpret_cast<char *>(c) + c->end_pfn.load() * kPageSize;
    ASSERT_TRUE(platform::map_at(after, kPageSize).ok()) << "the address space after is taken";
    memset(after, 0x77, kPageSize);
    EXPECT_FALSE(in_arena(after));
    EXPECT_EQ(virt_to_page(after), nullptr);

    void *second = pa.alloc(kMaxOrder); // no room in the first chunk, which cannot grow
    ASSERT_NE(second, nullptr);
    EXPECT_NE(chunk_of(second), c);
    EXPECT_TRUE(c->grow_blocked);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.chunks, 2u);
    EXPECT_EQ(st.reserved_bytes, 2 * (kMetaBytes + (4u << 20)));
    EXPECT_TRUE(all_bytes_are(after, kPageSize, 0x77));
    // The other mapping's address is no block of the arena, and a free of it is reported as
    // not in the arena and changes nothing.
    EXPECT_EQ(pa.block_order(after), -1);
    testing::internal::CaptureStderr();
    pa.free(after);
    const std::string report = testing::internal::GetCapturedStderr();
    EXPECT_NE(report.find("not in slabkit's page arena"), std::string::npos) << report;
    EXPECT_EQ(stats_of(pa).errors, 1u);
    EXPECT_TRUE(all_bytes_are(after, kPageSize, 0x77));

    pa.free(first, kMaxOrder);
    pa.free(second, kMaxOrder);
    EXPECT_TRUE(valid(pa));
    destroy_now(pa);
    EXPECT_TRUE(all_bytes_are(after, kPageSize, 0x77)) << "destroy unmapped past the chunk";
    munmap(after, kPageSize);
}

// The arena limit counts what partial chunks map, and a refusal is counted.
TEST_F(PageAllocatorPartial, TheLimitCountsMappedBytesAndRefusalsAreCounted) {
    page_allocator_config cfg = partial();
    cfg.max_bytes = kMetaBytes + (12u << 20); // 16 MiB of metadata and 12 MiB of pages
    page_allocator &pa = make(cfg);
    std::vector<void *> blocks;
    alloc_failure why;
    for (;;) {
        void *b = pa.alloc(kMaxOrder, kAnyNode, 0, &why);
        if (!b) break;
        blocks.push_back(b);
        ASSERT_LE(blocks.size(), 3u);
    }
    // 4 MiB, then +4 (the 8 asked for is over the limit, its half fits), then +4 again.
    EXPECT_EQ(blocks.size(), 3u);
    EXPECT_EQ(why.code, alloc_failure::limit);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.reserved_bytes, cfg.max_bytes);
    EXPECT_EQ(st.refusals, 1u);
    EXPECT_EQ(pa.alloc(0), nullptr);
    EXPECT_EQ(stats_of(pa).refusals, 2u);
    pa.free(blocks.back(), kMaxOrder);
    blocks.pop_back();
    void *again = pa.alloc(0);
    EXPECT_NE(again, nullptr);
    pa.free(again);
    for (void *b : blocks) pa.free(b, kMaxOrder);
    EXPECT_TRUE(valid(pa));
}

TEST(PageAllocatorPartialConfig, GrowBytesIsCheckedAndNamed) {
    page_allocator_config cfg = one_node();
    cfg.grow_bytes = 3u << 20;
    ASSERT_NE(cfg.invalid(), nullptr);
    EXPECT_NE(std::string(cfg.invalid()).find("grow_bytes"), std::string::npos);
    cfg.grow_bytes = 4u << 20;
    EXPECT_EQ(cfg.invalid(), nullptr);
    cfg.max_bytes = kMetaBytes; // below one partial chunk
    ASSERT_NE(cfg.invalid(), nullptr);
    EXPECT_NE(std::string(cfg.invalid()).find("partial chunk"), std::string::npos);
    cfg.max_bytes = kMetaBytes + (4u << 20);
    EXPECT_EQ(cfg.invalid(), nullptr);
    EXPECT_EQ(cfg.smallest_chunk(), kMetaBytes + (4u << 20));
}

// The process's configuration follows RLIMIT_AS: partial chunks under a limit, whole ones
// without (checked in a child, whose limit does not reach the test process).
TEST(PageAllocatorPartialConfig, FromEnvTakesPartialChunksUnderAnAddressSpaceLimit) {
    EXPECT_EQ(platform::address_space_limit() ? 4u << 20 : 0u,
              page_allocator_config::from_env().grow_bytes);
    EXPECT_EXIT(
        {
            struct rlimit lim {};
            getrlimit(RLIMIT_AS, &lim);
            lim.rlim_cur = uint64_t{64} << 30;
            if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
            _exit(page_allocator_config::from_env().grow_bytes == (4u << 20) ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

} // namespace
} // namespace slabkit::test
