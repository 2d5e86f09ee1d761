// The page allocator across fork(): while other threads allocate and free (taking zone and arena
// locks and growing the arena), the main thread forks repeatedly. The fork hooks take every lock
// before fork, so each child finds consistent lists; the child allocates, frees, validates and
// reports through its exit status. The parent keeps working and ends quiescent and valid.
// Also: a real OS refusal (RLIMIT_AS) comes back as alloc_failure::os with the errno, and the
// allocator stays usable.
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "support/page_support.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace slabkit {
namespace {

#if defined(SLABKIT_SANITIZED)
constexpr int kForks = 8;
#else
constexpr int kForks = 40;
#endif

page_allocator *make(const page_allocator_config &cfg) {
    return test::make_allocator(cfg);
}

// Exit codes of the child, so a failure says what went wrong.
enum child_status : int { kChildOk = 0, kChildInvalid = 10, kChildAllocFailed, kChildContents };

int child_work(page_allocator *pa) {
    // Whatever the other threads held at fork time is theirs and stays allocated in the child;
    // the lists themselves must be consistent.
    // No malloc in the child: the workers' vectors grow through the test binary's malloc (libc's
    // or a sanitizer's), whose lock a worker may hold at fork.
    if (pa->validate() != 0) return kChildInvalid;
    std::pair<unsigned char *, unsigned> blocks[64];
    for (unsigned i = 0; i < 64; ++i) {
        unsigned order = i % 5;
        auto *p = static_cast<unsigned char *>(pa->alloc(order));
        if (!p) return kChildAllocFailed;
        memset(p, static_cast<int>(i), kPageSize << order);
        blocks[i] = {p, order};
    }
    for (unsigned i = 0; i < 64; ++i)
        if (blocks[i].first[(kPageSize << blocks[i].second) - 1] != static_cast<unsigned char>(i))
            return kChildContents;
    for (auto &[p, order] : blocks) pa->free(p, order);
    pa->drain();
    return pa->validate() == 0 ? kChildOk : kChildInvalid;
}

TEST(PageFork, ChildrenOfABusyProcessAllocate) {
    page_allocator_config cfg;
    cfg.nodes = 2;
    cfg.pcp_batch = 8;
    cfg.pcp_high = 32;
    cfg.retain_pages = 64; // decommits happen under the zone lock while we fork
    page_allocator *pa = make(cfg);
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 2; ++t)
        workers.emplace_back([&, t] {
            std::mt19937 rng(static_cast<unsigned>(t) + 1);
            std::vector<std::pair<void *, unsigned>> live;
            while (!stop.load(std::memory_order_relaxed)) {
                if (live.size() < 200 && rng() % 3) {
                    unsigned order = rng() % 8;
                    void *p = pa->alloc(order, static_cast<int>(rng() % 2));
                    ASSERT_NE(p, nullptr);
                    static_cast<char *>(p)[0] = 1;
                    live.push_back({p, order});
                } else if (!live.empty()) {
                    size_t i = rng() % live.size();
                    pa->free(live[i].first, live[i].second);
                    live[i] = live.back();
                    live.pop_back();
                }
            }
            for (auto &[p, order] : live) pa->free(p, order);
        });
    for (int i = 0; i < kForks; ++i) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0) << strerror(errno);
        if (pid == 0) _exit(child_work(pa));
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status)) << "child " << i << " died, status " << status;
        ASSERT_EQ(WEXITSTATUS(status), kChildOk) << "child " << i;
    }
    stop = true;
    for (auto &w : workers) w.join();
    pa->drain();
    char report[512];
    EXPECT_EQ(pa->validate(report, sizeof report), 0u) << report;
    page_stats st;
    pa->snapshot(&st);
    EXPECT_EQ(st.in_use, 0u);
    page_allocator::destroy(pa);
}

// A live thread's per-slot pages are abandoned in a fork child (they may have been mid-update):
// the child sees them as in use, its lists are valid, and it allocates normally.
TEST(PageFork, ChildAbandonsOtherThreadsListsKeepsItsOwn) {
    page_allocator_config cfg;
    cfg.nodes = 1;
    cfg.pcp_batch = 8;
    cfg.pcp_high = 64;
    page_allocator *pa = make(cfg);
    std::atomic<int> phase{0};
    std::thread other([&] {
        std::vector<void *> pages;
        for (int i = 0; i < 16; ++i) pages.push_back(pa->alloc(0));
        for (void *p : pages) pa->free(p, 0); // 16 pages parked on this thread's list
        phase = 1;
        while (phase.load() != 2) std::this_thread::yield();
    });
    while (phase.load() != 1) std::this_thread::yield();
    void *mine = pa->alloc(0);
    pa->free(mine, 0); // the forking thread's own list: 7 pages parked (a refill of 8, minus 0)
    page_stats before;
    pa->snapshot(&before);
    ASSERT_EQ(before.in_pcp, 16u + 8u);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        page_stats st;
        pa->snapshot(&st);
        if (st.in_pcp != 8) _exit(30);                  // only the forking thread's list is left
        if (st.in_use != before.in_use + 16) _exit(31); // the other's 16 count as in use
        if (pa->validate() != 0) _exit(32);
        if (pa->alloc(0) != mine) _exit(33); // own list still serves, hottest page first
        pa->free(mine, 0);
        pa->drain();
        pa->snapshot(&st);
        if (st.in_pcp != 0 || st.in_use != 16) _exit(34);
        _exit(pa->validate() == 0 ? 0 : 35);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
    phase = 2;
    other.join();
    pa->drain();
    EXPECT_TRUE(test::valid(*pa));
    test::expect_all_free_and_merged(test::stats_of(*pa));
    page_allocator::destroy(pa);
}

// In a child process (the limit must not touch the test runner): with the address space capped,
// growing the arena fails in mmap, and the reason says so with its errno.
TEST(PageOutOfMemory, OsRefusalIsReportedAndTheAllocatorStaysUsable) {
#if defined(SLABKIT_SANITIZED)
    GTEST_SKIP() << "sanitizers reserve terabytes of shadow address space; RLIMIT_AS breaks them";
#endif
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        page_allocator_config cfg;
        cfg.nodes = 1;
        page_allocator *pa = page_allocator::create(cfg);
        if (!pa) _exit(20);
        void *first = pa->alloc(kMaxOrder); // the first chunk, before the cap
        if (!first) _exit(21);
        // Cap the address space at what is mapped now plus 256 MiB: room for the test's own
        // small allocations, none for another 1 GiB chunk (reserved as 2 GiB to align it).
        unsigned long vm_pages = 0;
        if (FILE *f = fopen("/proc/self/statm", "r")) {
            if (fscanf(f, "%lu", &vm_pages) != 1) vm_pages = 0;
            fclose(f);
        }
        if (vm_pages == 0) _exit(22);
        rlimit lim{};
        getrlimit(RLIMIT_AS, &lim);
        lim.rlim_cur = vm_pages * static_cast<unsigned long>(sysconf(_SC_PAGESIZE)) + (256ul << 20);
        if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(22);
        std::vector<void *> blocks;
        alloc_failure why;
        void *p;
        while ((p = pa->alloc(kMaxOrder, kAnyNode, 0, &why)) != nullptr) blocks.push_back(p);
        if (blocks.size() + 1 != kUsablePages >> kMaxOrder) _exit(23); // the chunk was used up
        if (why.code != alloc_failure::os || why.os_error.err != ENOMEM) _exit(24);
        char text[256];
        why.describe(text, sizeof text);
        if (!strstr(text, "mmap") || !strstr(text, "errno 12")) _exit(25);
        // Still usable: free one, get one.
        pa->free(blocks.back(), kMaxOrder);
        blocks.pop_back();
        p = pa->alloc(kMaxOrder);
        if (!p) _exit(26);
        pa->free(p, kMaxOrder);
        for (void *b : blocks) pa->free(b, kMaxOrder);
        pa->free(first, kMaxOrder);
        _exit(pa->validate() == 0 ? 0 : 27);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

} // namespace
} // namespace slabkit
