// Randomized model test of the page allocator: a seeded sequence of allocations and frees of
// random orders (mostly small, some large), checked against a model of the live blocks.
//
// The model knows every live block (address, order, id, node). Each block carries a pattern
// derived from its id, verified before it is freed, so blocks that overlap or memory that is
// decommitted while in use show up as a corrupted pattern. At intervals the live blocks are
// sorted and checked for overlap, validate() must find nothing, and the counters must match the
// model exactly (in_use is the live pages; pages on per-slot lists are free pages, in in_pcp).
// At the end everything is freed and drained, and every free page must be back in max-order
// blocks.
//
// A failure names the seed and the configuration (the test's name carries both), so a run can be
// repeated with --gtest_filter.
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "support/page_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace slabkit {
namespace {

#if defined(SLABKIT_SANITIZED)
constexpr int kOps = 2500;
#else
constexpr int kOps = 12000;
#endif
constexpr int kCheckEvery = 500;
constexpr uint64_t kMaxLivePages = 24 * 1024; // 96 MiB at most in use at once

enum class flavor { lists, no_lists_tight_retain, two_nodes_small_lists };

const char *flavor_name(flavor f) {
    switch (f) {
    case flavor::lists:
        return "lists";
    case flavor::no_lists_tight_retain:
        return "nolists_tightretain";
    case flavor::two_nodes_small_lists:
        return "twonodes_smalllists";
    }
    return "?";
}

page_allocator_config config_for(flavor f) {
    page_allocator_config cfg;
    cfg.nodes = 1;
    cfg.decay_ms = 0; // nothing depends on time
    switch (f) {
    case flavor::lists:
        break; // the defaults: batch 32, high 192, retain 4096
    case flavor::no_lists_tight_retain:
        cfg.pcp_high = 0;
        cfg.retain_pages = 64; // constant decommits: dirty and clean blocks mix
        break;
    case flavor::two_nodes_small_lists:
        cfg.nodes = 2;
        cfg.pcp_batch = 4;
        cfg.pcp_high = 8;
        cfg.retain_pages = 512;
        break;
    }
    return cfg;
}

struct model_param {
    uint64_t seed;
    flavor kind;
};

// Shown by gtest when a run fails.
void PrintTo(const model_param &param, std::ostream *os) {
    *os << "seed " << param.seed << ", config " << flavor_name(param.kind);
}

struct live_block {
    unsigned char *p;
    unsigned order;
    uint64_t id;
};

uint64_t pattern_word(uint64_t id, size_t index) {
    uint64_t x = (id + 1) * 0x9e3779b97f4a7c15ull ^ (index * 0xbf58476d1ce4e5b9ull);
    return x ^ (x >> 31);
}

// Small blocks are filled completely; in larger ones every page gets its first 64 bytes and its
// last word written, which is enough to catch two blocks sharing a page.
constexpr unsigned kFullFillOrder = 3;

template <typename Fn>
void for_each_pattern_word(const live_block &b, Fn fn) {
    const size_t bytes = kPageSize << b.order;
    auto *words = reinterpret_cast<uint64_t *>(b.p);
    if (b.order <= kFullFillOrder) {
        for (size_t i = 0; i < bytes / 8; ++i) fn(words[i], i);
        return;
    }
    const size_t per_page = kPageSize / 8;
    for (size_t pg = 0; pg < (size_t{1} << b.order); ++pg) {
        for (size_t i = 0; i < 8; ++i) fn(words[pg * per_page + i], pg * per_page + i);
        fn(words[pg * per_page + per_page - 1], pg * per_page + per_page - 1);
    }
}

void fill(const live_block &b) {
    for_each_pattern_word(b, [&](uint64_t &w, size_t i) { w = pattern_word(b.id, i); });
}

// Number of words that do not hold the block's pattern.
size_t corrupted_words(const live_block &b) {
    size_t bad = 0;
    for_each_pattern_word(b, [&](uint64_t &w, size_t i) { bad += w != pattern_word(b.id, i); });
    return bad;
}

bool all_zero(const void *p, size_t bytes) {
    const auto *w = static_cast<const uint64_t *>(p);
    for (size_t i = 0; i < bytes / 8; ++i)
        if (w[i] != 0) return false;
    return true;
}

unsigned random_order(std::mt19937_64 &rng) {
    unsigned r = static_cast<unsigned>(rng() % 100);
    if (r < 55) return 0;
    if (r < 75) return 1 + static_cast<unsigned>(rng() % 2); // 1..2
    if (r < 95) return 3 + static_cast<unsigned>(rng() % 4); // 3..6
    return 7 + static_cast<unsigned>(rng() % 4);             // 7..10
}

class PageModel : public ::testing::TestWithParam<model_param> {
  protected:
    void SetUp() override {
        const char *why = nullptr;
        pa_ = page_allocator::create(config_for(GetParam().kind), &why);
        if (!pa_) throw std::runtime_error(std::string("create failed: ") + (why ? why : "?"));
    }
    void TearDown() override { page_allocator::destroy(pa_); }

    // The checks made at intervals; `when` says where in the run they failed.
    void check_against_model(const std::vector<live_block> &live, uint64_t live_pages,
                             const std::string &when) {
        SCOPED_TRACE(when);
        char report[2048];
        ASSERT_EQ(pa_->validate(report, sizeof report), 0u) << report;

        page_stats st;
        pa_->snapshot(&st);
        ASSERT_EQ(st.in_use, live_pages);
        for (unsigned n = 0; n < st.nodes; ++n) {
            const auto &ns = st.node[n];
            ASSERT_EQ(ns.free_pages + ns.in_use + ns.in_pcp, ns.usable_pages) << "node " << n;
            ASSERT_LE(ns.free_resident, ns.free_pages) << "node " << n;
            ASSERT_LE(ns.free_resident, pa_->settings().retain_pages) << "node " << n;
        }

        std::vector<live_block> sorted = live;
        std::sort(sorted.begin(), sorted.end(),
                  [](const live_block &a, const live_block &b) { return a.p < b.p; });
        for (size_t i = 0; i + 1 < sorted.size(); ++i)
            ASSERT_LE(sorted[i].p + (kPageSize << sorted[i].order), sorted[i + 1].p)
                << "block " << sorted[i].id << " (order " << sorted[i].order << ") overlaps block "
                << sorted[i + 1].id;
        for (const live_block &b : live) {
            ASSERT_EQ(pa_->block_order(b.p), static_cast<int>(b.order)) << "block " << b.id;
            ASSERT_EQ(virt_to_page(b.p)->flags(), PG_head | b.order) << "block " << b.id;
        }
    }

    page_allocator *pa_ = nullptr;
};

TEST_P(PageModel, RandomAllocFreeMatchesTheModel) {
    const model_param param = GetParam();
    SCOPED_TRACE("seed " + std::to_string(param.seed) + ", config " + flavor_name(param.kind));
    std::mt19937_64 rng(param.seed);
    const unsigned nodes = pa_->nodes();

    std::vector<live_block> live;
    uint64_t live_pages = 0, next_id = 0;
    uint64_t allocs = 0, frees = 0, zeroed = 0, purges = 0;

    auto free_one = [&](size_t index, const std::string &when) {
        live_block b = live[index];
        live[index] = live.back();
        live.pop_back();
        live_pages -= size_t{1} << b.order;
        ASSERT_EQ(corrupted_words(b), 0u)
            << when << ": block " << b.id << " (order " << b.order << ") lost its contents";
        if (rng() % 2)
            pa_->free(b.p, b.order);
        else
            pa_->free(b.p);
        ASSERT_EQ(pa_->block_order(b.p), -1) << when;
        ++frees;
    };

    for (int op = 0; op < kOps; ++op) {
        const std::string when = "op " + std::to_string(op);
        const unsigned r = static_cast<unsigned>(rng() % 1000);
        if (r < 3) {
            // Give everything free back: live blocks must not be touched.
            pa_->purge();
            ++purges;
            page_stats st;
            pa_->snapshot(&st);
            ASSERT_EQ(st.free_resident, 0u) << when;
            ASSERT_EQ(st.in_pcp, 0u) << when;
        } else if (r < 8) {
            pa_->drain();
        } else if (live.empty() || (r < 540 && live_pages < kMaxLivePages)) {
            const unsigned order = random_order(rng);
            const bool zero = rng() % 10 == 0;
            int node = kAnyNode;
            unsigned flags = zero ? unsigned{kZero} : 0u;
            if (nodes > 1 && rng() % 2) {
                node = static_cast<int>(rng() % nodes);
                if (rng() % 2) flags |= kThisNode;
            }
            alloc_failure why;
            auto *p = static_cast<unsigned char *>(pa_->alloc(order, node, flags, &why));
            char text[256];
            ASSERT_NE(p, nullptr) << when << ": order " << order << ": "
                                  << why.describe(text, sizeof text);
            ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % (kPageSize << order), 0u) << when;
            ASSERT_EQ(pa_->block_order(p), static_cast<int>(order)) << when;
            if (flags & kThisNode) {
                ASSERT_EQ(page_to_nid(virt_to_page(p)), static_cast<unsigned>(node)) << when;
            }
            if (zero) {
                ASSERT_TRUE(all_zero(p, kPageSize << order)) << when << ": kZero block not zero";
                ++zeroed;
            }
            live_block b{p, order, next_id++};
            fill(b);
            live.push_back(b);
            live_pages += size_t{1} << order;
            ++allocs;
        } else {
            free_one(static_cast<size_t>(rng() % live.size()), when);
            if (HasFatalFailure()) return;
        }
        if (op % kCheckEvery == kCheckEvery - 1) {
            check_against_model(live, live_pages, when);
            if (HasFatalFailure()) return;
        }
    }
    check_against_model(live, live_pages, "end of the run");
    if (HasFatalFailure()) return;
    // Some of everything happened.
    EXPECT_GT(allocs, static_cast<uint64_t>(kOps) / 3);
    EXPECT_GT(frees, static_cast<uint64_t>(kOps) / 4);
    EXPECT_GT(zeroed, 0u);

    while (!live.empty()) {
        free_one(live.size() - 1, "final free");
        if (HasFatalFailure()) return;
    }
    pa_->drain();
    check_against_model(live, 0, "after freeing everything");
    if (HasFatalFailure()) return;
    test::expect_all_free_and_merged(test::stats_of(*pa_));
}

std::vector<model_param> model_params() {
    std::vector<model_param> params;
    for (flavor f : {flavor::lists, flavor::no_lists_tight_retain, flavor::two_nodes_small_lists})
        for (uint64_t seed : {1ull, 2ull, 3ull, 0x5eedull, 20240601ull})
            params.push_back({seed, f});
    return params;
}

std::string model_param_name(const ::testing::TestParamInfo<model_param> &param_info) {
    return std::string(flavor_name(param_info.param.kind)) + "_seed" +
           std::to_string(param_info.param.seed);
}

INSTANTIATE_TEST_SUITE_P(PageModelSeeds, PageModel, ::testing::ValuesIn(model_params()),
                         model_param_name);

} // namespace
} // namespace slabkit
