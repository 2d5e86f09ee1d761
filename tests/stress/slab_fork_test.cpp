// Fork while other threads allocate and free through caches and kmalloc of the process's design
// (ctest runs these once per design, SLABKIT_ALLOCATOR): the child must find every lock free and
// every structure whole, and be able to allocate, free and trim.
#include "slabkit/slabkit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

// The object size of the tests' caches: child_work fills whole objects of this size.
constexpr size_t kObjectSize = 72;

// The child's own bookkeeping takes no memory from malloc: the test binary's malloc is libc's or
// a sanitizer's, and a sanitizer's allocator may be left locked by a parent thread at fork (GCC
// 12's ASan hung the child that way), which would blame slabkit for a hang that is not its own.
constexpr int kChildObjects = 20000;
void *child_objs[kChildObjects];

int child_work(slabkit_cache *c) {
    alarm(20); // a lock left held by a thread the child does not have: die, don't hang
    // Errors the parent reported before the fork (a test earlier in the same process that checks
    // a bad free's report) come with the counter: only the child's own count.
    slabkit_page_stats before;
    slabkit_get_page_stats(&before);
    void **objs = child_objs;
    for (int i = 0; i < kChildObjects; ++i) {
        void *p = (i & 1) ? slabkit_cache_alloc(c, 0) : slabkit_kmalloc(1 + i % 3000, 0);
        if (!p) return 2;
        memset(p, 0x77, (i & 1) ? kObjectSize : 1);
        objs[i] = p;
    }
    for (int i = 0; i < kChildObjects; ++i) {
        if (i & 1)
            slabkit_cache_free(c, objs[i]);
        else
            slabkit_kfree(objs[i]);
    }
    // The other threads' objects live on in the child (copies of their memory), so the cache is
    // not empty; but everything the child freed must have gone back without harm.
    slabkit_trim();
    slabkit_page_stats ps;
    slabkit_get_page_stats(&ps);
    return ps.errors == before.errors ? 0 : 3;
}

// Forks `rounds` times, `pause_us` apart, while the workers run; each child runs child_work.
// Then stops and joins the workers, checks every child, and that the cache empties.
void fork_rounds_then_stop(slabkit_cache *c, int rounds, useconds_t pause_us,
                           std::atomic<bool> &stop, std::vector<std::thread> &workers) {
    int failed_round = -1, failed_status = 0;
    for (int round = 0; round < rounds && failed_round < 0; ++round) {
        usleep(pause_us);
        pid_t pid = fork();
        if (pid == 0) _exit(child_work(c));
        int status = -1;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            failed_round = round;
            failed_status = status;
        }
    }
    stop = true;
    for (auto &w : workers) w.join();
    EXPECT_EQ(failed_round, -1) << "the child of round " << failed_round << " ended with status "
                                << failed_status;
    slabkit_trim();
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
    slabkit_cache_destroy(c);
}

TEST(SlabFork, ChildOfBusyThreadsCanAllocate) {
    slabkit_cache *c = slabkit_cache_create("fork-objs", kObjectSize, 0, 0, nullptr);
    ASSERT_NE(c, nullptr);
    // SLQB: short queues, so that the workers flush batches all the time and a fork often finds
    // one half-way (the other designs refuse these tunables; their defaults serve).
    if (slabkit_cache_tune(c, "freebatch", 4) == 0) slabkit_cache_tune(c, "hiwater", 16);
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 3; ++t) {
        workers.emplace_back([&, t] {
            struct held_obj {
                void *p;
                bool from_cache;
            };
            std::vector<held_obj> held;
            auto release = [&] {
                for (const held_obj &h : held) {
                    if (h.from_cache)
                        slabkit_cache_free(c, h.p);
                    else
                        slabkit_kfree(h.p);
                }
                held.clear();
            };
            for (unsigned n = 0; !stop.load(std::memory_order_relaxed); ++n) {
                bool from_cache = n & 1;
                void *p = from_cache ? slabkit_cache_alloc(c, 0) : slabkit_kmalloc(8 + n % 900, 0);
                held.push_back({p, from_cache});
                if (held.size() > 300u + t * 100u) release();
            }
            release();
        });
    }
    // One more thread spends its time under the registry, page and inbox locks: shrinks,
    // statistics and slabinfo walks.
    workers.emplace_back([&] {
        static char text[1 << 16];
        while (!stop.load(std::memory_order_relaxed)) {
            slabkit_cache_shrink(c);
            slabkit_slabinfo(text, sizeof text);
        }
    });
    fork_rounds_then_stop(c, 20, 2000, stop, workers);
}

// Threads come and go (each takes a slot, allocates, frees and exits, leaving an idle slot with
// queued objects and parked pages), while another trims (visiting the idle slots under the slot
// registry lock), and the main thread forks: taking a slot, visiting idle slots and fork's
// prepare must not wait on one another in a cycle.
TEST(SlabFork, ChildOfThreadChurnAndTrimsCanAllocate) {
    slabkit_cache *c = slabkit_cache_create("fork-churn", kObjectSize, 0, 0, nullptr);
    ASSERT_NE(c, nullptr);
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 2; ++t) {
        workers.emplace_back([&, t] {
            for (unsigned n = 0; !stop.load(std::memory_order_relaxed); ++n) {
                std::thread short_lived([&, n] {
                    void *held[64];
                    for (unsigned i = 0; i < 64; ++i)
                        held[i] = (i & 1) ? slabkit_cache_alloc(c, 0)
                                          : slabkit_kmalloc(16 + (n * 131 + i * 977) % 12000, 0);
                    for (unsigned i = 0; i < 64; ++i) {
                        if (i & 1)
                            slabkit_cache_free(c, held[i]);
                        else
                            slabkit_kfree(held[i]);
                    }
                });
                short_lived.join();
                if (t == 1) slabkit_trim();
            }
        });
    }
    fork_rounds_then_stop(c, 20, 3000, stop, workers);
}

} // namespace
