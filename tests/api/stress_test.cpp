// Multi-threaded stress tests of the public API, for every design: producers allocate and hand
// objects to consumers that check and free them (remote frees), and thousands of short-lived
// threads that allocate, hand objects to each other and exit. Afterwards everything is freed,
// the counts balance, and after slabkit_trim() the page allocator has as many pages in use as
// before (measured after a warm-up round, so that per-slot structures made on a slot's first use
// of a cache are not counted as leaks).
//
// Iteration counts are fixed (no timing); they are smaller under sanitizers.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace slabkit::apitest {
namespace {

struct item {
    void *p;
    size_t size;
    uint64_t id;
    int kind = 0; // what the producer allocated it from
};

// Batches of items from producers to consumers.
class handoff {
  public:
    void push(std::vector<item> &&batch) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            q_.push_back(std::move(batch));
        }
        cv_.notify_one();
    }
    // False when the producers are done and nothing is left.
    bool pop(std::vector<item> *out) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !q_.empty() || done_; });
        if (q_.empty()) return false;
        *out = std::move(q_.front());
        q_.pop_front();
        return true;
    }
    void finish() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            done_ = true;
        }
        cv_.notify_all();
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::vector<item>> q_;
    bool done_ = false;
};

struct pc_result {
    uint64_t allocated = 0;
    uint64_t freed = 0;
    uint64_t bad = 0;
};

// producers x per_producer blocks from alloc(rng, &item) (which sets p, size and kind), checked and
// freed by consumers with release(item).
template <typename Alloc, typename Free>
pc_result producer_consumer(int producers, int consumers, int per_producer, Alloc alloc,
                            Free release) {
    handoff h;
    std::atomic<uint64_t> allocated{0}, freed{0}, bad{0};
    std::vector<std::thread> prod, cons;
    for (int c = 0; c < consumers; ++c)
        cons.emplace_back([&] {
            std::vector<item> batch;
            while (h.pop(&batch)) {
                for (const item &it : batch) {
                    if (first_mismatch(it.p, it.size, it.id) != it.size) bad.fetch_add(1);
                    release(it);
                    freed.fetch_add(1, std::memory_order_relaxed);
                }
            }
        });
    for (int t = 0; t < producers; ++t)
        prod.emplace_back([&, t] {
            std::mt19937_64 rng(static_cast<uint64_t>(t) + 17);
            std::vector<item> batch;
            for (int i = 0; i < per_producer; ++i) {
                item it{nullptr, 0, 0};
                alloc(rng, &it);
                if (!it.p) {
                    bad.fetch_add(1);
                    continue;
                }
                it.id = (static_cast<uint64_t>(t) << 32) | static_cast<uint64_t>(i);
                fill(it.p, it.size, it.id);
                allocated.fetch_add(1, std::memory_order_relaxed);
                batch.push_back(it);
                if (batch.size() == 32 || (rng() % 64) == 0) {
                    h.push(std::move(batch));
                    batch.clear();
                }
            }
            if (!batch.empty()) h.push(std::move(batch));
        });
    for (std::thread &t : prod) t.join();
    h.finish();
    for (std::thread &t : cons) t.join();
    return pc_result{allocated.load(), freed.load(), bad.load()};
}

class Stress : public DesignTest {};

TEST_P(Stress, ProducerConsumerRemoteFrees) {
    for (size_t size : {32, 256, 3000}) {
        auto run = [&](int per_producer, bool measure) {
            slabkit_cache *c = create(name("pc" + std::to_string(size)), size);
            ASSERT_NE(c, nullptr);
            pc_result r = producer_consumer(
                2, 2, per_producer,
                [&](std::mt19937_64 &, item *it) {
                    it->size = size;
                    it->p = slabkit_cache_alloc(c, 0);
                },
                [&](const item &it) { slabkit_cache_free(c, it.p); });
            EXPECT_EQ(r.bad, 0u) << "size " << size;
            EXPECT_EQ(r.allocated, static_cast<uint64_t>(2 * per_producer));
            EXPECT_EQ(r.freed, r.allocated);
            if (measure) {
                slabkit_trim();
                cache_stats_t st = stats_of(c);
                EXPECT_EQ(st.active_objects, 0u) << "size " << size;
                EXPECT_EQ(st.queued_objects, 0u) << "size " << size;
                EXPECT_EQ(slabkit_cache_shrink(c), 0u) << "size " << size;
            }
            // Nothing is live: destroying reports nothing.
            ::testing::internal::CaptureStderr();
            destroy(c);
            EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "size " << size;
        };
        run(200, false); // warm-up
        uint64_t base = baseline_pages_in_use();
        run(20000 / kScale, true);
        EXPECT_TRUE(pages_back_to(base)) << "size " << size;
    }
}

TEST(KmallocStress, ProducerConsumerRemoteFrees) {
    auto alloc = [](std::mt19937_64 &rng, item *it) {
        unsigned r = static_cast<unsigned>(rng() % 100);
        it->size = r < 70 ? 1 + rng() % 512 : r < 97 ? 513 + rng() % 8000 : 8193 + rng() % 60000;
        it->p = slabkit_kmalloc(it->size, 0);
    };
    auto release = [](const item &it) { slabkit_kfree(it.p); };
    producer_consumer(2, 2, 500, alloc, release); // warm-up
    uint64_t base = baseline_pages_in_use();
    pc_result r = producer_consumer(2, 2, 20000 / kScale, alloc, release);
    EXPECT_EQ(r.bad, 0u);
    EXPECT_EQ(r.allocated, static_cast<uint64_t>(2 * (20000 / kScale)));
    EXPECT_EQ(r.freed, r.allocated);
    EXPECT_TRUE(pages_back_to(base));
}

// More producers and consumers than cores, cache objects and kmalloc blocks mixed.
TEST_P(Stress, ManyProducersManyConsumers) {
    slabkit_cache *a = create(name("pcm-a"), 96);
    slabkit_cache *b = create(name("pcm-b"), 40, 0, 0, nullptr);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    const int per_producer = 8000 / kScale;
    pc_result r = producer_consumer(
        4, 3, per_producer,
        [&](std::mt19937_64 &rng, item *it) {
            it->kind = static_cast<int>(rng() % 3);
            if (it->kind == 0) {
                it->size = 96;
                it->p = slabkit_cache_alloc(a, 0);
            } else if (it->kind == 1) {
                it->size = 40;
                it->p = slabkit_cache_alloc(b, 0);
            } else {
                it->size = 1 + rng() % 1000;
                it->p = slabkit_kmalloc(it->size, 0);
            }
        },
        [&](const item &it) {
            if (it.kind == 0)
                slabkit_cache_free(a, it.p);
            else if (it.kind == 1)
                slabkit_cache_free(b, it.p);
            else
                slabkit_kfree(it.p);
        });
    EXPECT_EQ(r.bad, 0u);
    EXPECT_EQ(r.allocated, static_cast<uint64_t>(4 * per_producer));
    EXPECT_EQ(r.freed, r.allocated);
    slabkit_trim();
    EXPECT_EQ(stats_of(a).active_objects, 0u);
    EXPECT_EQ(stats_of(b).active_objects, 0u);
    EXPECT_EQ(slabkit_cache_shrink(a), 0u);
    EXPECT_EQ(slabkit_cache_shrink(b), 0u);
}

// ---- thread churn ----------------------------------------------------------------------------

// Objects handed from thread to thread through a shared pool.
struct pool {
    std::mutex mu;
    std::vector<item> items;    // cache objects
    std::vector<item> kmblocks; // kmalloc blocks
    std::atomic<uint64_t> bad{0};
    std::atomic<uint64_t> next_id{1};
};

void churn_thread(slabkit_cache *c, size_t csize, pool *pl, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<item> mine, mine_km;
    for (int i = 0; i < 16; ++i) {
        void *p = slabkit_cache_alloc(c, 0);
        if (!p) {
            pl->bad.fetch_add(1);
            continue;
        }
        uint64_t id = pl->next_id.fetch_add(1);
        fill(p, csize, id);
        mine.push_back(item{p, csize, id});
    }
    for (int i = 0; i < 8; ++i) {
        size_t size = rng() % 8 == 0 ? 8193 + rng() % 30000 : 1 + rng() % 3000;
        void *p = slabkit_kmalloc(size, 0);
        if (!p) {
            pl->bad.fetch_add(1);
            continue;
        }
        uint64_t id = pl->next_id.fetch_add(1);
        fill(p, size, id);
        mine_km.push_back(item{p, size, id});
    }
    // Take others' objects, check and free them; leave some of ours.
    std::vector<item> taken, taken_km;
    {
        std::lock_guard<std::mutex> lock(pl->mu);
        for (int i = 0; i < 12 && !pl->items.empty(); ++i) {
            taken.push_back(pl->items.back());
            pl->items.pop_back();
        }
        for (int i = 0; i < 6 && !pl->kmblocks.empty(); ++i) {
            taken_km.push_back(pl->kmblocks.back());
            pl->kmblocks.pop_back();
        }
    }
    for (const item &it : taken) {
        if (first_mismatch(it.p, it.size, it.id) != it.size) pl->bad.fetch_add(1);
        slabkit_cache_free(c, it.p);
    }
    for (const item &it : taken_km) {
        if (first_mismatch(it.p, it.size, it.id) != it.size) pl->bad.fetch_add(1);
        slabkit_kfree(it.p);
    }
    // Free a few of ours here, hand the rest on.
    for (int i = 0; i < 4 && !mine.empty(); ++i) {
        slabkit_cache_free(c, mine.back().p);
        mine.pop_back();
    }
    if (!mine_km.empty()) {
        slabkit_kfree(mine_km.back().p);
        mine_km.pop_back();
    }
    std::lock_guard<std::mutex> lock(pl->mu);
    pl->items.insert(pl->items.end(), mine.begin(), mine.end());
    pl->kmblocks.insert(pl->kmblocks.end(), mine_km.begin(), mine_km.end());
}

void churn_waves(slabkit_cache *c, size_t csize, pool *pl, int threads, int wave) {
    for (int done = 0; done < threads;) {
        std::vector<std::thread> ts;
        for (int i = 0; i < wave && done < threads; ++i, ++done)
            ts.emplace_back(churn_thread, c, csize, pl, static_cast<uint64_t>(done) * 7919 + 1);
        for (std::thread &t : ts) t.join();
    }
}

void drain_pool(slabkit_cache *c, pool *pl) {
    for (const item &it : pl->items) {
        if (first_mismatch(it.p, it.size, it.id) != it.size) pl->bad.fetch_add(1);
        slabkit_cache_free(c, it.p);
    }
    for (const item &it : pl->kmblocks) {
        if (first_mismatch(it.p, it.size, it.id) != it.size) pl->bad.fetch_add(1);
        slabkit_kfree(it.p);
    }
    pl->items.clear();
    pl->kmblocks.clear();
}

TEST_P(Stress, ThreadChurn) {
    constexpr size_t kSize = 120;
    constexpr int kWave = 8;
    // Warm-up: the slots the waves use meet the caches once.
    {
        slabkit_cache *c = create(name("churnw"), kSize);
        ASSERT_NE(c, nullptr);
        pool pl;
        churn_waves(c, kSize, &pl, 2 * kWave, kWave);
        drain_pool(c, &pl);
        EXPECT_EQ(pl.bad.load(), 0u);
        destroy(c);
    }
    uint64_t base = baseline_pages_in_use();
    slabkit_cache *c = create(name("churn"), kSize);
    ASSERT_NE(c, nullptr);
    pool pl;
    churn_waves(c, kSize, &pl, 4000 / kScale, kWave);
    EXPECT_EQ(pl.bad.load(), 0u);
    drain_pool(c, &pl);
    EXPECT_EQ(pl.bad.load(), 0u);
    slabkit_trim();
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
    cache_stats_t st = stats_of(c);
    EXPECT_EQ(st.active_objects, 0u);
    EXPECT_EQ(st.slabs, 0u);
    ::testing::internal::CaptureStderr();
    destroy(c);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    EXPECT_TRUE(pages_back_to(base));
}

// Threads exit while holding objects; the main thread frees them after every thread is gone.
TEST_P(Stress, ObjectsOutliveTheirThreads) {
    constexpr size_t kSize = 64;
    slabkit_cache *c = create(name("outlive"), kSize);
    ASSERT_NE(c, nullptr);
    std::vector<std::vector<item>> held(16);
    for (int round = 0; round < 4; ++round) {
        std::vector<std::thread> ts;
        for (size_t t = 0; t < held.size(); ++t)
            ts.emplace_back([&, t] {
                for (int i = 0; i < 200; ++i) {
                    void *p = slabkit_cache_alloc(c, 0);
                    if (!p) continue;
                    uint64_t id =
                        t * 100000 + static_cast<uint64_t>(round) * 1000 + static_cast<uint64_t>(i);
                    fill(p, kSize, id);
                    held[t].push_back(item{p, kSize, id});
                }
                // Free half of what an earlier round's thread left.
                size_t half = held[t].size() / 2;
                for (size_t i = 0; i < half; ++i) {
                    EXPECT_TRUE(holds(held[t][i].p, kSize, held[t][i].id));
                    slabkit_cache_free(c, held[t][i].p);
                }
                held[t].erase(held[t].begin(), held[t].begin() + static_cast<long>(half));
            });
        for (std::thread &t : ts) t.join();
    }
    for (auto &v : held)
        for (const item &it : v) {
            EXPECT_TRUE(holds(it.p, kSize, it.id));
            slabkit_cache_free(c, it.p);
        }
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
    EXPECT_EQ(stats_of(c).active_objects, 0u);
    destroy(c);
}

// A live thread freed objects (they wait on its slot's queue) and is blocked, not using the
// cache, when the cache is destroyed: the freed objects are not leaks, and the thread carries on
// safely afterwards.
TEST_P(Stress, DestroyWhileAnotherLiveThreadHoldsFreedObjects) {
    slabkit_cache *c = create(name("busyq"), 80);
    ASSERT_NE(c, nullptr);
    std::mutex mu;
    std::condition_variable cv;
    int stage = 0;
    std::thread t([&] {
        std::vector<void *> objs;
        for (int i = 0; i < 50; ++i) objs.push_back(slabkit_cache_alloc(c, 0));
        for (void *p : objs) slabkit_cache_free(c, p);
        {
            std::unique_lock<std::mutex> lock(mu);
            stage = 1;
            cv.notify_all();
            cv.wait(lock, [&] { return stage == 2; });
        }
        // After the destroy: other caches and kmalloc still work from this thread.
        for (int i = 0; i < 2000; ++i) {
            void *p = slabkit_kmalloc(80, 0);
            if (p) std::memset(p, 1, 80);
            slabkit_kfree(p);
        }
        slabkit_trim();
    });
    {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stage == 1; });
    }
    ::testing::internal::CaptureStderr();
    destroy(c);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.find("still allocated"), std::string::npos) << err;
    {
        std::lock_guard<std::mutex> lock(mu);
        stage = 2;
    }
    cv.notify_all();
    t.join();
    slabkit_trim();
    // The name is free again.
    EXPECT_NE(create(name("busyq"), 80), nullptr);
}

// Threads race to create caches of the same names: exactly one creation of each name succeeds.
TEST_P(Stress, ConcurrentCreateOfOneName) {
    constexpr int kThreads = 6;
    constexpr int kRounds = 60;
    std::vector<std::vector<slabkit_cache *>> won(kThreads);
    std::vector<std::thread> ts;
    ::testing::internal::CaptureStderr();
    for (int t = 0; t < kThreads; ++t)
        ts.emplace_back([&, t] {
            for (int r = 0; r < kRounds; ++r) {
                std::string nm = name("race" + std::to_string(r));
                if (slabkit_cache *c =
                        slabkit_cache_create_in(design(), nm.c_str(), 64, 0, 0, nullptr))
                    won[static_cast<size_t>(t)].push_back(c);
            }
        });
    for (std::thread &t : ts) t.join();
    ::testing::internal::GetCapturedStderr();
    std::set<std::string> names;
    size_t total = 0;
    for (auto &v : won)
        for (slabkit_cache *c : v) {
            ++total;
            names.insert(slabkit_cache_name(c));
            void *p = slabkit_cache_alloc(c, 0);
            EXPECT_NE(p, nullptr);
            slabkit_cache_free(c, p);
            slabkit_cache_destroy(c);
        }
    EXPECT_EQ(total, static_cast<size_t>(kRounds));
    EXPECT_EQ(names.size(), static_cast<size_t>(kRounds));
}

// Statistics and slabinfo read while other threads create, use and destroy caches.
TEST_P(Stress, StatisticsWhileCachesComeAndGo) {
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> bad{0};
    std::thread reader([&] {
        std::vector<cache_stats_t> all(64);
        while (!stop.load()) {
            std::string text = slabinfo_text();
            if (text.rfind("slabinfo - version: 2.1\n", 0) != 0) bad.fetch_add(1);
            size_t n = slabkit_stats(all.data(), all.size());
            for (size_t i = 0; i < n && i < all.size(); ++i) {
                if (std::memchr(all[i].name, 0, sizeof all[i].name) == nullptr) bad.fetch_add(1);
                if (all[i].active_objects > all[i].objects + 100000) bad.fetch_add(1);
            }
            page_stats_t ps = page_stats();
            if (ps.pages_in_use > ps.reserved_bytes / 4096) bad.fetch_add(1);
        }
    });
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; ++t)
        ts.emplace_back([&, t] {
            for (int r = 0; r < 200 / kScale; ++r) {
                std::string nm = name("cg" + std::to_string(t) + "-" + std::to_string(r));
                slabkit_cache *c = slabkit_cache_create_in(
                    design(), nm.c_str(), static_cast<size_t>(16 + 8 * r), 0, 0, nullptr);
                if (!c) {
                    bad.fetch_add(1);
                    continue;
                }
                std::vector<void *> objs;
                for (int i = 0; i < 100; ++i) objs.push_back(slabkit_cache_alloc(c, 0));
                for (void *p : objs) slabkit_cache_free(c, p);
                slabkit_cache_destroy(c);
            }
        });
    for (std::thread &t : ts) t.join();
    stop.store(true);
    reader.join();
    EXPECT_EQ(bad.load(), 0u);
}

SLABKIT_INSTANTIATE_FOR_DESIGNS(Stress);

} // namespace
} // namespace slabkit::apitest
