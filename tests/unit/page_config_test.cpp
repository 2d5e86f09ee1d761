// Unit tests of the buddy page allocator (src/page): configuration: validation and the environment.
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
// Configuration
// ---------------------------------------------------------------------------------------------

using PageAllocatorConfig = PageAllocatorFixture;

TEST_F(PageAllocatorConfig, InvalidConfigsAreRejected) {
    struct bad_case {
        const char *name;
        page_allocator_config cfg;
        const char *mentions;
    };
    std::vector<bad_case> cases;
    auto add = [&](const char *name, auto change, const char *mentions) {
        page_allocator_config cfg = one_node();
        change(cfg);
        cases.push_back({name, cfg, mentions});
    };
    add(
        "high below batch",
        [](page_allocator_config &c) {
            c.pcp_batch = 16;
            c.pcp_high = 8;
        },
        "pcp_high");
    add(
        "limit below a chunk", [](page_allocator_config &c) { c.max_bytes = kChunkSize / 2; },
        "max_bytes");
    add(
        "limit of one byte", [](page_allocator_config &c) { c.max_bytes = 1; }, "max_bytes");
    add(
        "too many nodes", [](page_allocator_config &c) { c.nodes = 65; }, "nodes");
    add(
        "batch zero", [](page_allocator_config &c) { c.pcp_batch = 0; }, "pcp_batch");
    add(
        "batch too big", [](page_allocator_config &c) { c.pcp_batch = 5000; }, "pcp_batch");
    add(
        "high too big", [](page_allocator_config &c) { c.pcp_high = (1u << 20) + 1; }, "pcp_high");
    add(
        "decay over an hour", [](page_allocator_config &c) { c.decay_ms = 3600u * 1000u + 1; },
        "decay_ms");
    for (const bad_case &c : cases) {
        SCOPED_TRACE(c.name);
        const char *reason = c.cfg.invalid();
        ASSERT_NE(reason, nullptr);
        EXPECT_NE(strstr(reason, c.mentions), nullptr) << reason;
        const char *why = nullptr;
        EXPECT_EQ(page_allocator::create(c.cfg, &why), nullptr);
        ASSERT_NE(why, nullptr);
        EXPECT_STREQ(why, reason);
        EXPECT_EQ(page_allocator::create(c.cfg), nullptr); // no reason asked for
    }
}

TEST_F(PageAllocatorConfig, EdgeConfigsAreAccepted) {
    std::vector<page_allocator_config> good;
    good.push_back(page_allocator_config{});
    page_allocator_config c = one_node();
    c.pcp_high = 0;
    c.pcp_batch = 4096; // no per-slot lists: the batch does not matter
    good.push_back(c);
    c = one_node();
    c.max_bytes = kChunkSize;
    good.push_back(c);
    c = one_node();
    c.pcp_batch = 1;
    c.pcp_high = 1;
    good.push_back(c);
    c = one_node();
    c.nodes = platform::kMaxNodes;
    c.retain_pages = 0;
    c.decay_ms = 3600u * 1000u;
    good.push_back(c);
    for (const page_allocator_config &cfg : good) {
        EXPECT_EQ(cfg.invalid(), nullptr) << cfg.invalid();
        page_allocator &pa = make(cfg);
        EXPECT_EQ(pa.settings().pcp_high, cfg.pcp_high);
        EXPECT_EQ(pa.nodes(), cfg.nodes ? cfg.nodes : platform::numa().nodes);
        const int last_node = static_cast<int>(pa.nodes()) - 1;
        void *a = pa.alloc(0);
        void *b = pa.alloc(1, last_node, kThisNode);
        ASSERT_NE(a, nullptr);
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(page_to_nid(virt_to_page(b)), static_cast<unsigned>(last_node));
        pa.free(a);
        pa.free(b);
        pa.drain();
        EXPECT_TRUE(all_merged(stats_of(pa)));
        EXPECT_TRUE(valid(pa));
    }
}

TEST_F(PageAllocatorConfig, FromEnvironmentClampsAndWarns) {
    const char *names[] = {"SLABKIT_ARENA_MAX_MB",       "SLABKIT_PCP_BATCH",
                           "SLABKIT_PCP_HIGH",           "SLABKIT_RETAIN_KB",
                           "SLABKIT_DECAY_MS",           "SLABKIT_CONTINUE_ON_ERROR",
                           "SLABKIT_HUGE_PAGES_AFTER_MB"};
    // Whatever the environment of the test run says is put back at the end.
    std::vector<std::pair<const char *, std::string>> saved;
    for (const char *name : names)
        if (const char *value = getenv(name)) saved.emplace_back(name, value);
    setenv("SLABKIT_ARENA_MAX_MB", "100", 1);
    setenv("SLABKIT_PCP_BATCH", "16", 1);
    setenv("SLABKIT_PCP_HIGH", "4", 1);
    setenv("SLABKIT_RETAIN_KB", "400", 1);
    setenv("SLABKIT_DECAY_MS", "50", 1);
    setenv("SLABKIT_CONTINUE_ON_ERROR", "1", 1);
    setenv("SLABKIT_HUGE_PAGES_AFTER_MB", "4", 1);
    testing::internal::CaptureStderr();
    page_allocator_config cfg = page_allocator_config::from_env();
    std::string err = testing::internal::GetCapturedStderr();
    for (const char *name : names) unsetenv(name);
    page_allocator_config defaults = page_allocator_config::from_env();
    for (const auto &[name, value] : saved) setenv(name, value.c_str(), 1);

    EXPECT_EQ(cfg.max_bytes, kChunkSize);
    EXPECT_EQ(cfg.pcp_batch, 16u);
    EXPECT_EQ(cfg.pcp_high, 16u);
    EXPECT_EQ(cfg.retain_pages, 100u);
    EXPECT_EQ(cfg.decay_ms, 50u);
    EXPECT_TRUE(cfg.continue_on_error);
    EXPECT_EQ(cfg.huge_after_pages, 1024u); // 4 MiB of 4 KiB pages
    EXPECT_EQ(cfg.invalid(), nullptr);
    EXPECT_NE(err.find("SLABKIT_ARENA_MAX_MB"), std::string::npos) << err;
    EXPECT_NE(err.find("SLABKIT_PCP_HIGH"), std::string::npos) << err;

    page_allocator_config plain;
    EXPECT_EQ(defaults.max_bytes, plain.max_bytes);
    EXPECT_EQ(defaults.pcp_batch, plain.pcp_batch);
    EXPECT_EQ(defaults.pcp_high, plain.pcp_high);
    EXPECT_EQ(defaults.retain_pages, plain.retain_pages);
    EXPECT_EQ(defaults.decay_ms, plain.decay_ms);
    EXPECT_FALSE(defaults.continue_on_error);
    // The process's allocator asks for huge pages past 32 MiB out; a plain config never does.
    EXPECT_EQ(defaults.huge_after_pages, uint64_t{32} << (20 - kPageShift));
    EXPECT_EQ(plain.huge_after_pages, 0u);
}

} // namespace
} // namespace slabkit
