// Multi-threaded stress tests of the page allocator: more threads than cores allocating and
// freeing with content checks, blocks freed by other threads than the ones that allocated them,
// concurrent growth and the arena limit, and hundreds of short-lived threads leaving pages on
// their per-slot lists. Every test ends quiescent: threads joined (their slots idle), drain(),
// then validate() == 0, nothing in use, and every free page merged back into max-order blocks.
//
// Iteration counts are fixed (no timing); they are smaller under sanitizers.
#include "page/page_allocator.hpp"
#include "slot/slot.hpp"
#include "support/page_support.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace slabkit {
namespace {

#if defined(SLABKIT_SANITIZED)
constexpr int kScale = 5; // divide iteration counts under sanitizers
#else
constexpr int kScale = 1;
#endif

constexpr int kThreads = 4;

page_allocator *make(const page_allocator_config &cfg) {
    return test::make_allocator(cfg);
}

struct destroyer {
    page_allocator *pa;
    ~destroyer() { page_allocator::destroy(pa); }
};

using test::valid;

// drain() from the (only remaining) test thread, then everything must be free and merged.
void expect_quiescent_and_merged(page_allocator &pa) {
    pa.drain();
    EXPECT_TRUE(valid(pa));
    test::expect_all_free_and_merged(test::stats_of(pa));
}

// A block with its owner's tag written into every page (first and last word).
struct tagged {
    unsigned char *p;
    unsigned order;
    uint64_t tag;
};

uint64_t tag_word(uint64_t tag, size_t page, bool last) {
    return (tag * 0x9e3779b97f4a7c15ull) ^ (page << 1) ^ (last ? 1 : 0);
}

void stamp(const tagged &b) {
    for (size_t pg = 0; pg < (size_t{1} << b.order); ++pg) {
        auto *words = reinterpret_cast<uint64_t *>(b.p + pg * kPageSize);
        words[0] = tag_word(b.tag, pg, false);
        words[kPageSize / 8 - 1] = tag_word(b.tag, pg, true);
    }
}

bool intact(const tagged &b) {
    for (size_t pg = 0; pg < (size_t{1} << b.order); ++pg) {
        auto *words = reinterpret_cast<const uint64_t *>(b.p + pg * kPageSize);
        if (words[0] != tag_word(b.tag, pg, false) ||
            words[kPageSize / 8 - 1] != tag_word(b.tag, pg, true))
            return false;
    }
    return true;
}

// Blocks handed from one thread to another.
class exchange {
  public:
    void put(const tagged &b) {
        std::lock_guard<std::mutex> guard(lock_);
        blocks_.push_back(b);
    }
    bool take(tagged *out, std::mt19937_64 &rng) {
        std::lock_guard<std::mutex> guard(lock_);
        if (blocks_.empty()) return false;
        size_t i = static_cast<size_t>(rng() % blocks_.size());
        *out = blocks_[i];
        blocks_[i] = blocks_.back();
        blocks_.pop_back();
        return true;
    }
    std::vector<tagged> take_all() {
        std::lock_guard<std::mutex> guard(lock_);
        std::vector<tagged> all;
        all.swap(blocks_);
        return all;
    }

  private:
    std::mutex lock_;
    std::vector<tagged> blocks_;
};

unsigned small_order(std::mt19937_64 &rng) {
    unsigned r = static_cast<unsigned>(rng() % 16);
    return r < 8 ? 0 : r < 12 ? 1 : r < 14 ? 2 : r < 15 ? 3 : 4;
}

// Counts what went wrong inside worker threads (gtest assertions belong to the main thread).
struct failures {
    std::atomic<uint64_t> alloc_failed{0}, corrupted{0}, wrong_order{0};
    void expect_none() const {
        EXPECT_EQ(alloc_failed.load(), 0u);
        EXPECT_EQ(corrupted.load(), 0u);
        EXPECT_EQ(wrong_order.load(), 0u);
    }
};

void check_and_free(page_allocator &pa, const tagged &b, failures &bad, bool with_order) {
    if (!intact(b)) bad.corrupted.fetch_add(1);
    if (pa.block_order(b.p) != static_cast<int>(b.order)) bad.wrong_order.fetch_add(1);
    if (with_order)
        pa.free(b.p, b.order);
    else
        pa.free(b.p);
}

// ---------------------------------------------------------------------------------------------

struct stress_case {
    const char *name;
    page_allocator_config cfg;
};

void PrintTo(const stress_case &c, std::ostream *os) {
    *os << c.name;
}

std::vector<stress_case> stress_cases() {
    std::vector<stress_case> cases;
    page_allocator_config cfg;
    cfg.nodes = 1;
    cfg.decay_ms = 0;
    cases.push_back({"default_lists", cfg});
    cfg.pcp_batch = 4;
    cfg.pcp_high = 8;
    cfg.retain_pages = 128; // decommits all the time
    cases.push_back({"small_lists_tight_retain", cfg});
    cfg = page_allocator_config{};
    cfg.nodes = 2;
    cfg.pcp_high = 0;
    cfg.decay_ms = 5; // decay on the slow paths while others allocate
    cases.push_back({"two_nodes_no_lists_decay", cfg});
    return cases;
}

class PageStress : public ::testing::TestWithParam<stress_case> {};

// Each thread allocates and frees random small orders, checking contents; a share of its blocks
// goes through a shared exchange to be checked and freed by whichever thread takes it. Meanwhile
// an observer thread takes snapshots, buddyinfo text and validate() reports.
TEST_P(PageStress, MixedOrdersAcrossThreads) {
    page_allocator *pa = make(GetParam().cfg);
    destroyer guard{pa};
    const int ops = 100000 / kScale;
    const unsigned nodes = pa->nodes();
    exchange shared;
    failures bad;
    std::atomic<int> running{kThreads};
    std::atomic<uint64_t> validate_problems{0}, observations{0};

    auto worker = [&](int index) {
        std::mt19937_64 rng(1000 + static_cast<uint64_t>(index));
        std::vector<tagged> mine;
        uint64_t next_tag = static_cast<uint64_t>(index) << 40;
        for (int op = 0; op < ops; ++op) {
            unsigned r = static_cast<unsigned>(rng() % 100);
            if (r < 50 || mine.empty()) {
                unsigned order = small_order(rng);
                int node = nodes > 1 && rng() % 2 ? static_cast<int>(rng() % nodes) : kAnyNode;
                auto *p = static_cast<unsigned char *>(pa->alloc(order, node));
                if (!p) {
                    bad.alloc_failed.fetch_add(1);
                    continue;
                }
                tagged b{p, order, next_tag++};
                stamp(b);
                mine.push_back(b);
            } else if (r < 85) {
                size_t i = static_cast<size_t>(rng() % mine.size());
                tagged b = mine[i];
                mine[i] = mine.back();
                mine.pop_back();
                check_and_free(*pa, b, bad, rng() % 2);
            } else if (r < 93) {
                size_t i = static_cast<size_t>(rng() % mine.size());
                shared.put(mine[i]);
                mine[i] = mine.back();
                mine.pop_back();
            } else {
                tagged b;
                if (shared.take(&b, rng)) check_and_free(*pa, b, bad, true);
            }
            if (mine.size() > 256) { // keep the footprint bounded
                check_and_free(*pa, mine.back(), bad, true);
                mine.pop_back();
            }
        }
        for (const tagged &b : mine) check_and_free(*pa, b, bad, true);
        running.fetch_sub(1);
    };

    std::thread observer([&] {
        // validate() reads every descriptor of the free blocks under the zone lock: do it now and
        // then, not all the time, or the workers mostly wait for it.
        char text[4096];
        for (uint64_t round = 0; running.load() > 0; ++round) {
            page_stats st;
            pa->snapshot(&st);
            pa->format_buddyinfo(text, sizeof text);
            if (round % 8 == 0) {
                validate_problems.fetch_add(pa->validate());
                observations.fetch_add(1);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    });
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) threads.emplace_back(worker, i);
    for (std::thread &t : threads) t.join();
    observer.join();

    for (const tagged &b : shared.take_all()) check_and_free(*pa, b, bad, false);
    bad.expect_none();
    EXPECT_EQ(validate_problems.load(), 0u) << "validate() found problems while threads ran";
    EXPECT_GT(observations.load(), 0u);
    expect_quiescent_and_merged(*pa);
}

// Producers allocate, consumers check and free: every block is freed by another thread than
// the one that allocated it, so order-0 pages move between per-slot lists.
TEST_P(PageStress, ProducersAndConsumers) {
    page_allocator *pa = make(GetParam().cfg);
    destroyer guard{pa};
    const int per_producer = 100000 / kScale;
    exchange shared;
    failures bad;
    std::atomic<int> producing{kThreads / 2};
    std::atomic<uint64_t> consumed{0};

    auto producer = [&](int index) {
        std::mt19937_64 rng(2000 + static_cast<uint64_t>(index));
        for (int i = 0; i < per_producer; ++i) {
            unsigned order = small_order(rng);
            auto *p = static_cast<unsigned char *>(pa->alloc(order));
            if (!p) {
                bad.alloc_failed.fetch_add(1);
                continue;
            }
            tagged b{p, order, (static_cast<uint64_t>(index) << 40) | static_cast<uint64_t>(i)};
            stamp(b);
            shared.put(b);
        }
        producing.fetch_sub(1);
    };
    auto consumer = [&](int index) {
        std::mt19937_64 rng(3000 + static_cast<uint64_t>(index));
        tagged b;
        for (;;) {
            if (shared.take(&b, rng)) {
                check_and_free(*pa, b, bad, rng() % 2);
                consumed.fetch_add(1);
            } else if (producing.load() == 0) {
                if (!shared.take(&b, rng)) break;
                check_and_free(*pa, b, bad, true);
                consumed.fetch_add(1);
            } else {
                std::this_thread::yield();
            }
        }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads / 2; ++i) threads.emplace_back(producer, i);
    for (int i = 0; i < kThreads / 2; ++i) threads.emplace_back(consumer, i);
    for (std::thread &t : threads) t.join();

    EXPECT_TRUE(shared.take_all().empty());
    bad.expect_none();
    EXPECT_EQ(consumed.load(), static_cast<uint64_t>(per_producer) * (kThreads / 2));
    page_stats st;
    pa->snapshot(&st);
    EXPECT_EQ(st.in_use, 0u);
    expect_quiescent_and_merged(*pa);
}

INSTANTIATE_TEST_SUITE_P(PageStressConfigs, PageStress, ::testing::ValuesIn(stress_cases()),
                         [](const ::testing::TestParamInfo<stress_case> &case_info) {
                             return std::string(case_info.param.name);
                         });

// ---------------------------------------------------------------------------------------------

// Many threads find the arena empty at once: each chunk is grown once, and exactly the blocks
// that fit are handed out under a limit.
TEST(PageStressGrowth, ConcurrentGrowthAndTheLimit) {
    constexpr uint64_t kBlocksPerChunk = kUsablePages >> kMaxOrder;
    {
        page_allocator_config cfg;
        cfg.nodes = 1;
        cfg.pcp_high = 0;
        page_allocator *pa = make(cfg);
        destroyer guard{pa};
        // 4 x 100 max-order blocks need two chunks; nobody touches the memory.
        std::vector<std::vector<void *>> got(kThreads);
        std::vector<std::thread> threads;
        for (int i = 0; i < kThreads; ++i)
            threads.emplace_back([&, i] {
                for (int k = 0; k < 100; ++k)
                    if (void *p = pa->alloc(kMaxOrder)) got[static_cast<size_t>(i)].push_back(p);
            });
        for (std::thread &t : threads) t.join();
        size_t total = 0;
        for (const auto &v : got) total += v.size();
        EXPECT_EQ(total, 400u);
        page_stats st;
        pa->snapshot(&st);
        EXPECT_EQ(st.chunks, 2u) << "a chunk was grown that nobody needed";
        EXPECT_TRUE(valid(*pa));
        for (const auto &v : got)
            for (void *p : v) pa->free(p, kMaxOrder);
        expect_quiescent_and_merged(*pa);
    }
    {
        page_allocator_config cfg;
        cfg.nodes = 2;
        cfg.max_bytes = kChunkSize; // one chunk for both nodes together
        page_allocator *pa = make(cfg);
        destroyer guard{pa};
        std::vector<std::vector<void *>> got(kThreads);
        std::atomic<uint64_t> wrong_reason{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < kThreads; ++i)
            threads.emplace_back([&, i] {
                for (;;) {
                    alloc_failure why;
                    void *p = pa->alloc(kMaxOrder, i % 2, 0, &why);
                    if (!p) {
                        if (why.code != alloc_failure::limit) wrong_reason.fetch_add(1);
                        break;
                    }
                    got[static_cast<size_t>(i)].push_back(p);
                }
            });
        for (std::thread &t : threads) t.join();
        size_t total = 0;
        for (const auto &v : got) total += v.size();
        EXPECT_EQ(total, kBlocksPerChunk);
        EXPECT_EQ(wrong_reason.load(), 0u);
        page_stats st;
        pa->snapshot(&st);
        EXPECT_EQ(st.chunks, 1u);
        EXPECT_EQ(st.reserved_bytes, kChunkSize);
        EXPECT_TRUE(valid(*pa));
        for (const auto &v : got)
            for (void *p : v) pa->free(p);
        expect_quiescent_and_merged(*pa);
    }
}

// Hundreds of short threads, a few at a time: each takes a slot, allocates order-0 (and some
// order-1) pages, frees most of them - so they sit on its per-slot list when it exits - and hands
// the rest to the test, which frees them at the end. The next thread inherits the idle slot and
// its list; drain() at the end returns whatever is left.
TEST(PageStressChurn, ShortThreadsLeavePagesOnTheirLists) {
    page_allocator_config cfg;
    cfg.nodes = 1;
    cfg.decay_ms = 0;
    cfg.pcp_batch = 16;
    cfg.pcp_high = 64;
    page_allocator *pa = make(cfg);
    destroyer guard{pa};
    const int waves = 100 / kScale;
    constexpr int kPerWave = 4;
    exchange kept;
    failures bad;
    std::atomic<uint64_t> left_on_list{0}, no_slot{0};

    for (int wave = 0; wave < waves; ++wave) {
        std::vector<std::thread> threads;
        for (int i = 0; i < kPerWave; ++i)
            threads.emplace_back([&, wave, i] {
                std::mt19937_64 rng(static_cast<uint64_t>(wave * kPerWave + i));
                if (slots::current() == kNoSlot) no_slot.fetch_add(1);
                std::vector<tagged> pages;
                const int count = 8 + static_cast<int>(rng() % 40);
                for (int k = 0; k < count; ++k) {
                    unsigned order = rng() % 8 == 0 ? 1 : 0;
                    auto *p = static_cast<unsigned char *>(pa->alloc(order));
                    if (!p) {
                        bad.alloc_failed.fetch_add(1);
                        continue;
                    }
                    tagged b{p, order,
                             static_cast<uint64_t>(wave) << 32 | static_cast<uint64_t>(k)};
                    stamp(b);
                    pages.push_back(b);
                }
                for (size_t k = 0; k < pages.size(); ++k) {
                    if (k % 5 == 0)
                        kept.put(pages[k]);
                    else
                        check_and_free(*pa, pages[k], bad, true);
                }
                page_stats st;
                pa->snapshot(&st);
                if (st.in_pcp > 0) left_on_list.fetch_add(1);
            });
        for (std::thread &t : threads) t.join();
        if (wave % 25 == 24) {
            EXPECT_TRUE(valid(*pa)) << "after wave " << wave;
        }
    }
    EXPECT_EQ(no_slot.load(), 0u);
    EXPECT_GT(left_on_list.load(), 0u);
    page_stats st;
    pa->snapshot(&st);
    EXPECT_GT(st.in_pcp, 0u) << "exited threads left pages on their lists";
    EXPECT_GT(st.pcp_frees, 0u);
    for (const tagged &b : kept.take_all()) check_and_free(*pa, b, bad, true);
    bad.expect_none();
    expect_quiescent_and_merged(*pa);
}

} // namespace
} // namespace slabkit
