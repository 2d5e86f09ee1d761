// A randomized test against a model (api_model.hpp), for every design: seeded sequences of cache
// create/alloc/free/bulk/shrink/destroy and kmalloc/krealloc/kfree with content checks; at the
// end everything is freed and destroyed, and after slabkit_trim() the page allocator has as many
// pages in use as at the start.
#include "api/api_model.hpp"
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

namespace slabkit::apitest {
namespace {

class Model : public DesignTest {};

constexpr size_t kAligns[] = {0, 0, 0, 8, 16, 32, 64, 128, 256, 512, 4096};

size_t random_kmalloc_size(std::mt19937_64 &rng) {
    unsigned r = static_cast<unsigned>(rng() % 1000);
    if (r < 20) return 0;
    if (r < 600) return 1 + rng() % 256;
    if (r < 850) return 257 + rng() % (8192 - 256);
    if (r < 985) return 8193 + rng() % (256 << 10);
    return (256 << 10) + rng() % (6 << 20); // a few page blocks up to 4 MiB and OS blocks
}

void run_model(const std::string &design, uint64_t seed, int steps) {
    std::mt19937_64 rng(seed);
    int failures = 0;
    api_model m(design, design.substr(0, 6) + "-" + std::to_string(seed),
                [&](const std::string &msg) {
                    if (++failures <= 20) ADD_FAILURE() << "seed " << seed << ": " << msg;
                });
    for (int step = 0; step < steps && failures < 50; ++step) {
        unsigned op = static_cast<unsigned>(rng() % 100);
        size_t which = static_cast<size_t>(rng());
        if (op < 4 || m.live_caches() == 0) {
            int ctor = rng() % 3 == 0 ? static_cast<int>(rng() % kNrModelCtors) : -1;
            size_t size = 1 + rng() % (rng() % 4 == 0 ? 9000 : 300);
            size_t align = kAligns[rng() % (sizeof kAligns / sizeof kAligns[0])];
            unsigned flags = rng() % 5 == 0 ? SLABKIT_HWCACHE_ALIGN : 0;
            m.create_cache(size, align, flags, ctor);
        } else if (op < 6) {
            m.destroy_cache(which);
        } else if (op < 8) {
            m.shrink_cache(which);
        } else if (op < 36) {
            m.cache_alloc(which, rng() % 4 == 0, static_cast<unsigned>(rng() % 8 < 6 ? 0 : rng()));
        } else if (op < 40) {
            m.bulk_alloc(which, 1 + rng() % 64, rng() % 3 == 0);
        } else if (op < 43) {
            m.bulk_free(which, 1 + rng() % 64);
        } else if (op < 63) {
            m.kmalloc(random_kmalloc_size(rng), static_cast<unsigned>(rng()));
        } else if (op < 72) {
            m.krealloc(which, random_kmalloc_size(rng));
        } else if (op < 99) {
            m.free_block(which);
        } else {
            m.check_all();
        }
    }
    m.check_all();
    m.clear();
}

TEST_P(Model, RandomOperationsAgainstTheModel) {
    // The baseline opens every kmalloc class (static caches that stay), so count after it.
    uint64_t base = baseline_pages_in_use();
    size_t caches_before = slabkit_cache_count();
    const int steps = 4000 / kScale;
    for (uint64_t seed : {1, 2, 3, 4, 5, 1234567}) {
        run_model(GetParam(), seed, steps);
        EXPECT_EQ(slabkit_cache_count(), caches_before) << "seed " << seed;
        EXPECT_TRUE(pages_back_to(base)) << "seed " << seed;
    }
}

// Long runs of one kind of operation: all allocations first, then all frees (queues and slabs
// fill up and drain completely), with a trim in between.
TEST_P(Model, FillAndDrainPhases) {
    uint64_t base = baseline_pages_in_use();
    std::mt19937_64 rng(99);
    int failures = 0;
    {
        api_model m(GetParam(), "fd", [&](const std::string &msg) {
            if (++failures <= 20) ADD_FAILURE() << msg;
        });
        for (int i = 0; i < 6; ++i)
            m.create_cache(1 + rng() % 2000, kAligns[rng() % 11], 0, i % 3 == 0 ? i : -1);
        for (int phase = 0; phase < 3 && failures < 50; ++phase) {
            for (int i = 0; i < 3000 / kScale; ++i) {
                if (i % 3 == 0)
                    m.kmalloc(random_kmalloc_size(rng) % 20000, 0);
                else
                    m.cache_alloc(rng(), false, 0);
            }
            m.check_all();
            slabkit_trim();
            m.check_all();
            while (m.live_blocks() > 0) m.free_block(rng());
            for (int c = 0; c < 6; ++c) m.shrink_cache(static_cast<size_t>(c));
        }
        m.clear();
    }
    EXPECT_TRUE(pages_back_to(base));
}

SLABKIT_INSTANTIATE_FOR_DESIGNS(Model);

} // namespace
} // namespace slabkit::apitest
