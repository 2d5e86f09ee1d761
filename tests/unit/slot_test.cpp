// slot_test.cpp - unit tests of the slot registry (src/slot/): a slot per live thread, lowest
// free first, given back at thread exit and reused, release hooks, for_each_idle, fork, churn
// and exhaustion.
//
// The registry is process-global and other tests (and the main thread) may own slots, so every
// test measures what is free first and checks relative to that. Suites: Slot*. SlotChild.* only
// runs in a child process started by another test (it skips otherwise).
#include "slot/slot.hpp"

#include "platform/platform.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <latch>
#include <memory>
#include <pthread.h>
#include <set>
#include <spawn.h>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace slabkit {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

// The `n` lowest slots nobody owns now.
std::vector<unsigned> lowest_free(unsigned n) {
    std::vector<unsigned> free;
    for (unsigned s = 0; s < kMaxSlots && free.size() < n; ++s)
        if (!slots::owned(s)) free.push_back(s);
    return free;
}

unsigned count_owned() {
    unsigned n = 0;
    for (unsigned s = 0; s < kMaxSlots; ++s) n += slots::owned(s);
    return n;
}

// A thread that takes a slot on construction and keeps it (stays alive) until leave().
class slot_holder {
  public:
    slot_holder()
        : thread_([this] {
              slot_ = slots::current();
              ready_.count_down();
              release_.wait();
          }) {
        ready_.wait();
    }
    ~slot_holder() { leave(); }
    slot_holder(const slot_holder &) = delete;
    slot_holder &operator=(const slot_holder &) = delete;

    unsigned slot() const { return slot_; }
    // Lets the thread exit and waits until it has (its exit hooks have run by then).
    void leave() {
        if (!thread_.joinable()) return;
        release_.count_down();
        thread_.join();
    }

  private:
    std::latch ready_{1};
    std::latch release_{1};
    unsigned slot_ = kNoSlot;
    std::thread thread_; // last: starts once the members above exist
};

// Runs fn on a new thread, waits for that thread to exit, returns what fn returned.
unsigned on_new_thread(const std::function<unsigned()> &fn) {
    unsigned result = kNoSlot;
    std::thread([&] { result = fn(); }).join();
    return result;
}

unsigned slot_of_new_thread() {
    return on_new_thread([] { return slots::current(); });
}

// Waits for a fork child and returns its exit code (-1 when it did not exit normally).
int wait_exit_code(pid_t pid) {
    int status = 0;
    pid_t got;
    while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (got != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

// ---------------------------------------------------------------------------------------------
// current()
// ---------------------------------------------------------------------------------------------

TEST(SlotCurrent, StableWithinAThreadAndInRange) {
    unsigned first = kNoSlot;
    int changes = 0;
    bool owned = false;
    unsigned node = ~0u;
    std::thread([&] {
        first = slots::current();
        for (int i = 0; i < 10000; ++i) changes += slots::current() != first;
        owned = slots::owned(first);
        node = slots::node_of(first);
    }).join();
    ASSERT_LT(first, kMaxSlots);
    EXPECT_EQ(changes, 0);
    EXPECT_TRUE(owned);
    EXPECT_LT(node, platform::numa().nodes);
    EXPECT_LT(first, slots::high_water());
    EXPECT_EQ(slots::node_of(kMaxSlots), 0u);
    EXPECT_EQ(slots::node_of(kNoSlot), 0u);
    EXPECT_FALSE(slots::owned(kMaxSlots));
    EXPECT_FALSE(slots::owned(kNoSlot));
}

TEST(SlotCurrent, IndexIsTheSlotOrKMaxSlots) {
    unsigned before = kNoSlot, after = kNoSlot, slot = kNoSlot;
    std::thread([&] {
        before = slots::index(); // a new thread has no slot yet
        slot = slots::current();
        after = slots::index();
    }).join();
    EXPECT_EQ(before, kMaxSlots);
    ASSERT_LT(slot, kMaxSlots);
    EXPECT_EQ(after, slot);
    unsigned mine = slots::current(); // first: index() only reflects a slot already taken
    EXPECT_EQ(slots::index(), mine);
}

TEST(SlotCurrent, LiveThreadsGetDistinctLowestFreeSlots) {
    const unsigned base = slots::in_use();
    const std::vector<unsigned> expected = lowest_free(4);
    ASSERT_EQ(expected.size(), 4u);
    {
        // One after the other: each takes the lowest free slot at that moment.
        std::vector<std::unique_ptr<slot_holder>> holders;
        for (unsigned i = 0; i < 4; ++i) {
            holders.push_back(std::make_unique<slot_holder>());
            EXPECT_EQ(holders[i]->slot(), expected[i]) << i;
            EXPECT_TRUE(slots::owned(expected[i]));
            EXPECT_EQ(slots::in_use(), base + i + 1);
        }
        EXPECT_GT(slots::high_water(), expected[3]);
    }
    EXPECT_EQ(slots::in_use(), base);
    for (unsigned s : expected) EXPECT_FALSE(slots::owned(s)) << s;

    // All at once: distinct slots, and together the lowest free ones.
    constexpr unsigned kThreads = 8;
    const std::vector<unsigned> expected8 = lowest_free(kThreads);
    std::latch start(kThreads), taken(kThreads + 1), release(1);
    unsigned got[kThreads];
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < kThreads; ++i)
        threads.emplace_back([&, i] {
            start.arrive_and_wait();
            got[i] = slots::current();
            taken.count_down();
            release.wait();
        });
    taken.arrive_and_wait();
    std::set<unsigned> distinct(got, got + kThreads);
    EXPECT_EQ(distinct.size(), kThreads);
    EXPECT_EQ(distinct, std::set<unsigned>(expected8.begin(), expected8.end()));
    EXPECT_EQ(slots::in_use(), base + kThreads);
    for (unsigned s : got) EXPECT_TRUE(slots::owned(s)) << s;
    release.count_down();
    for (std::thread &t : threads) t.join();
    EXPECT_EQ(slots::in_use(), base);
}

// ---------------------------------------------------------------------------------------------
// Exit and reuse
// ---------------------------------------------------------------------------------------------

TEST(SlotReuse, ExitedThreadsSlotBecomesIdleAndIsReused) {
    const unsigned base = slots::in_use();
    const unsigned expected = lowest_free(1).at(0);
    const unsigned a = slot_of_new_thread();
    EXPECT_EQ(a, expected);
    EXPECT_FALSE(slots::owned(a)); // the thread has exited: idle again
    EXPECT_EQ(slots::in_use(), base);
    const unsigned b = slot_of_new_thread();
    EXPECT_EQ(b, a); // the next new thread inherits it
    EXPECT_FALSE(slots::owned(b));
    EXPECT_EQ(slots::in_use(), base);
}

TEST(SlotReuse, LowestFreeSlotFirst) {
    const unsigned base = slots::in_use();
    const std::vector<unsigned> e = lowest_free(3);
    slot_holder h0, h1, h2;
    ASSERT_EQ(h0.slot(), e[0]);
    ASSERT_EQ(h1.slot(), e[1]);
    ASSERT_EQ(h2.slot(), e[2]);

    h1.leave(); // a hole in the middle
    EXPECT_FALSE(slots::owned(e[1]));
    EXPECT_EQ(slots::in_use(), base + 2);
    EXPECT_EQ(slot_of_new_thread(), e[1]);

    h0.leave(); // now the lowest of the three is free too
    EXPECT_EQ(slot_of_new_thread(), e[0]);
    {
        slot_holder a, b; // take both holes back, lowest first
        EXPECT_EQ(a.slot(), e[0]);
        EXPECT_EQ(b.slot(), e[1]);
        EXPECT_EQ(slots::in_use(), base + 3);
    }
    h2.leave();
    EXPECT_EQ(slots::in_use(), base);
}

// ---------------------------------------------------------------------------------------------
// Registry counters and for_each_idle
// ---------------------------------------------------------------------------------------------

TEST(SlotRegistry, InUseAndHighWaterAreConsistent) {
    const unsigned base = slots::in_use();
    EXPECT_EQ(base, count_owned());
    slot_holder h0, h1, h2;
    EXPECT_EQ(slots::in_use(), base + 3);
    EXPECT_EQ(slots::in_use(), count_owned());
    const unsigned hw = slots::high_water();
    EXPECT_LE(hw, kMaxSlots);
    for (unsigned s : {h0.slot(), h1.slot(), h2.slot()}) EXPECT_LT(s, hw);
    for (unsigned s = hw; s < kMaxSlots; ++s) ASSERT_FALSE(slots::owned(s)) << s;
    h1.leave();
    EXPECT_EQ(slots::in_use(), base + 2);
    EXPECT_EQ(slots::in_use(), count_owned());
    EXPECT_EQ(slots::high_water(), hw); // high water never goes down
}

struct idle_visit {
    std::vector<unsigned> visited;
    int owned_when_visited = 0;
};

void record_idle(unsigned slot, void *arg) {
    auto *v = static_cast<idle_visit *>(arg);
    v->visited.push_back(slot);
    v->owned_when_visited += slots::owned(slot);
}

TEST(SlotRegistry, ForEachIdleVisitsIdleSlotsOnly) {
    slot_holder h0, h1, h2;
    h1.leave(); // h1's slot is idle and below the high water mark
    idle_visit v;
    slots::for_each_idle(record_idle, &v);
    std::vector<unsigned> expected;
    for (unsigned s = 0; s < slots::high_water(); ++s)
        if (!slots::owned(s)) expected.push_back(s);
    EXPECT_EQ(v.visited, expected); // every idle slot below high water, once, in order
    EXPECT_EQ(v.owned_when_visited, 0);
    EXPECT_NE(std::find(v.visited.begin(), v.visited.end(), h1.slot()), v.visited.end());
    EXPECT_EQ(std::find(v.visited.begin(), v.visited.end(), h0.slot()), v.visited.end());
    EXPECT_EQ(std::find(v.visited.begin(), v.visited.end(), h2.slot()), v.visited.end());
}

struct arrival_probe {
    unsigned visited = kNoSlot;
    std::thread arriving;
    std::atomic<bool> got_slot{false};
    bool got_slot_inside = false;
    std::atomic<unsigned> slot{kNoSlot};
};

void start_arrival_while_visiting(unsigned slot, void *arg) {
    auto *p = static_cast<arrival_probe *>(arg);
    if (p->arriving.joinable()) return; // first idle slot only
    p->visited = slot;
    p->arriving = std::thread([p] {
        p->slot = slots::current(); // no lock: it must not wait for the visit to end
        p->got_slot.store(true);
    });
    for (int i = 0; i < 5000 && !p->got_slot.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    p->got_slot_inside = p->got_slot.load();
}

TEST(SlotRegistry, ArrivingThreadsTakeAnotherSlotThanTheVisitedOneWithoutWaiting) {
    slot_holder h0, h1;
    const unsigned idle = h0.slot();
    h0.leave(); // an idle slot below the high water mark, so fn is called
    arrival_probe probe;
    slots::for_each_idle(start_arrival_while_visiting, &probe);
    ASSERT_TRUE(probe.arriving.joinable());
    probe.arriving.join();
    EXPECT_EQ(probe.visited, idle);
    EXPECT_TRUE(probe.got_slot_inside); // taking a slot never waits for a visitor
    EXPECT_NE(probe.slot.load(), kNoSlot);
    EXPECT_NE(probe.slot.load(), idle); // the visited slot was not handed out
}

struct try_probe {
    bool nested_result = true;
    int nested_calls = 0;
};

void count_call(unsigned, void *arg) {
    ++*static_cast<int *>(arg);
}

void try_while_visiting(unsigned, void *arg) {
    auto *p = static_cast<try_probe *>(arg);
    p->nested_result = slots::try_for_each_idle_since(UINT64_MAX, count_call, &p->nested_calls);
}

TEST(SlotRegistry, TryForEachIdleGivesWayToAVisitor) {
    slot_holder h0, h1;
    h0.leave();
    try_probe p;
    slots::for_each_idle(try_while_visiting, &p);
    EXPECT_FALSE(p.nested_result); // another visit holds the registry: do nothing
    EXPECT_EQ(p.nested_calls, 0);
    int calls = 0;
    EXPECT_TRUE(slots::try_for_each_idle_since(UINT64_MAX, count_call, &calls));
    EXPECT_GE(calls, 1); // h0's slot at least
}

// ---------------------------------------------------------------------------------------------
// Release hooks
// ---------------------------------------------------------------------------------------------

// Process-global and permanent: the hook only records threads that set a probe id.
constexpr int kProbes = 4;
thread_local int tl_probe = -1;
struct release_record {
    std::atomic<int> calls{0};
    std::atomic<unsigned> slot{kNoSlot};
    std::atomic<bool> owned_during{false};
    std::atomic<unsigned> current_during{0};
    std::atomic<bool> exiting_during{false};
};
release_record g_release[kProbes];

void probe_release_hook(unsigned slot) {
    int id = tl_probe;
    if (id < 0 || id >= kProbes) return;
    release_record &r = g_release[id];
    r.calls.fetch_add(1);
    r.slot = slot;
    r.owned_during = slots::owned(slot);
    r.current_during = slots::current();
    r.exiting_during = platform::thread_exiting();
}

void install_release_hook() {
    static const bool installed = slots::add_release_hook(probe_release_hook);
    ASSERT_TRUE(installed);
    for (release_record &r : g_release) {
        r.calls = 0;
        r.slot = kNoSlot;
        r.owned_during = false;
        r.current_during = 0;
        r.exiting_during = false;
    }
}

TEST(SlotHooks, ReleaseHookGetsTheDepartingThreadsSlot) {
    install_release_hook();
    const unsigned base = slots::in_use();
    unsigned taken = kNoSlot;
    std::thread([&] {
        tl_probe = 0;
        taken = slots::current();
    }).join();
    ASSERT_LT(taken, kMaxSlots);
    EXPECT_EQ(g_release[0].calls.load(), 1);
    EXPECT_EQ(g_release[0].slot.load(), taken);
    EXPECT_TRUE(g_release[0].owned_during.load());          // called before the slot goes idle
    EXPECT_EQ(g_release[0].current_during.load(), kNoSlot); // no slot while exiting
    EXPECT_TRUE(g_release[0].exiting_during.load());
    EXPECT_FALSE(slots::owned(taken));
    EXPECT_EQ(slots::in_use(), base);
}

TEST(SlotHooks, ReleaseHookSkipsThreadsWithoutASlot) {
    install_release_hook();
    std::thread([] { tl_probe = 1; }).join(); // never asked for a slot
    EXPECT_EQ(g_release[1].calls.load(), 0);

    // Several threads at once: each hook call sees its own thread's slot.
    unsigned taken[2] = {kNoSlot, kNoSlot};
    std::latch both(2);
    std::thread t2([&] {
        tl_probe = 2;
        taken[0] = slots::current();
        both.arrive_and_wait();
    });
    std::thread t3([&] {
        tl_probe = 3;
        taken[1] = slots::current();
        both.arrive_and_wait();
    });
    t2.join();
    t3.join();
    EXPECT_NE(taken[0], taken[1]);
    EXPECT_EQ(g_release[2].calls.load(), 1);
    EXPECT_EQ(g_release[3].calls.load(), 1);
    EXPECT_EQ(g_release[2].slot.load(), taken[0]);
    EXPECT_EQ(g_release[3].slot.load(), taken[1]);
}

// ---------------------------------------------------------------------------------------------
// Churn
// ---------------------------------------------------------------------------------------------

TEST(SlotChurn, ManyShortThreadsKeepSlotsBounded) {
    constexpr unsigned kTotal = 2000;
    constexpr unsigned kAtOnce = 4;
    const unsigned base = slots::in_use();
    const unsigned hw_before = slots::high_water();
    // kAtOnce threads take the kAtOnce lowest free slots, all below base + kAtOnce.
    const unsigned bound = base + kAtOnce;
    unsigned highest = 0;
    unsigned no_slot = 0;
    for (unsigned started = 0; started < kTotal; started += kAtOnce) {
        unsigned got[kAtOnce];
        std::thread threads[kAtOnce];
        for (unsigned i = 0; i < kAtOnce; ++i)
            threads[i] = std::thread([&got, i] { got[i] = slots::current(); });
        for (std::thread &t : threads) t.join();
        for (unsigned s : got) {
            if (s >= kMaxSlots)
                ++no_slot;
            else
                highest = std::max(highest, s);
        }
    }
    EXPECT_EQ(no_slot, 0u);
    EXPECT_LT(highest, bound);
    EXPECT_EQ(slots::in_use(), base);
    EXPECT_LE(slots::high_water(), std::max(hw_before, bound));
}

// ---------------------------------------------------------------------------------------------
// Fork
// ---------------------------------------------------------------------------------------------

TEST(SlotFork, ChildKeepsOnlyTheForkingThreadsSlot) {
    const unsigned base = slots::in_use();
    slot_holder h1, h2;
    unsigned forker_slot = kNoSlot;
    int child_code = -2;
    std::thread forker([&] {
        forker_slot = slots::current();
        pid_t pid = fork();
        if (pid == 0) {
            // The child: only this thread lives on.
            if (slots::current() != forker_slot) _exit(10);
            if (!slots::owned(forker_slot)) _exit(11);
            if (slots::owned(h1.slot()) || slots::owned(h2.slot())) _exit(12);
            if (slots::in_use() != 1) _exit(13);
            for (unsigned s = 0; s < kMaxSlots; ++s)
                if (s != forker_slot && slots::owned(s)) _exit(14);
            _exit(0);
        }
        child_code = pid > 0 ? wait_exit_code(pid) : -3;
    });
    forker.join();
    EXPECT_EQ(child_code, 0) << "10: slot changed, 11: forker's slot not owned, 12: other "
                                "threads' slots owned, 13: in_use, 14: stray owned slot";
    // The parent is untouched.
    EXPECT_TRUE(slots::owned(h1.slot()));
    EXPECT_TRUE(slots::owned(h2.slot()));
    EXPECT_FALSE(slots::owned(forker_slot)); // the forker has exited since
    EXPECT_EQ(slots::in_use(), base + 2);
}

TEST(SlotFork, ChildOfAThreadWithoutASlotStartsEmpty) {
    slot_holder h1;
    int child_code = -2;
    std::thread forker([&] {
        pid_t pid = fork(); // this thread never asked for a slot
        if (pid == 0) {
            if (slots::in_use() != 0) _exit(10);
            if (slots::owned(h1.slot())) _exit(11);
            unsigned mine = slots::current(); // every slot is free: takes slot 0
            if (mine != 0) _exit(12);
            if (!slots::owned(0) || slots::in_use() != 1) _exit(13);
            _exit(0);
        }
        child_code = pid > 0 ? wait_exit_code(pid) : -3;
    });
    forker.join();
    EXPECT_EQ(child_code, 0) << "10: in_use, 11: stray owned slot, 12: not slot 0, 13: counts";
    EXPECT_TRUE(slots::owned(h1.slot()));
}

// ---------------------------------------------------------------------------------------------
// Exhaustion (in a child process, so that this process's high water mark stays low)
// ---------------------------------------------------------------------------------------------

constexpr const char *kChildVar = "SLABKIT_TEST_CHILD";

struct exhaust_shared {
    std::latch release{1};
    std::atomic<unsigned> ready{0};
};
struct exhaust_thread {
    exhaust_shared *shared;
    unsigned slot;
};

void *hold_a_slot(void *arg) {
    auto *t = static_cast<exhaust_thread *>(arg);
    t->slot = slots::current();
    t->shared->ready.fetch_add(1);
    t->shared->release.wait();
    return nullptr;
}

TEST(SlotChild, Exhaustion) {
    const char *mode = getenv(kChildVar);
    if (mode == nullptr || strcmp(mode, "slot_exhaustion") != 0)
        GTEST_SKIP() << "runs only in a child process started by SlotExhaustion tests";
    const unsigned base = slots::in_use();
    const unsigned free_slots = kThreadSlots - base;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    exhaust_shared shared;
    std::vector<exhaust_thread> ctx(free_slots, exhaust_thread{&shared, kNoSlot});
    std::vector<pthread_t> threads(free_slots);
    for (unsigned i = 0; i < free_slots; ++i)
        ASSERT_EQ(pthread_create(&threads[i], &attr, hold_a_slot, &ctx[i]), 0) << i;
    pthread_attr_destroy(&attr);
    while (shared.ready.load() < free_slots)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));

    EXPECT_EQ(slots::in_use(), kThreadSlots);
    EXPECT_EQ(slots::high_water(), kThreadSlots);
    std::set<unsigned> distinct;
    for (const exhaust_thread &t : ctx) {
        EXPECT_LT(t.slot, kThreadSlots);
        distinct.insert(t.slot);
    }
    EXPECT_EQ(distinct.size(), free_slots);

    // One thread too many: no slot of its own, and asking again does not find one either; but
    // a hold gets it one of the shared slots, given back when the hold ends, and nested holds
    // get the same one.
    unsigned extra[2] = {0, 0};
    unsigned held[3] = {kNoSlot, kNoSlot, kNoSlot};
    bool owned_while_held = false, owned_after = true;
    const uint64_t shared_before = slots::stats().shared_holds;
    std::thread([&] {
        extra[0] = slots::current();
        extra[1] = slots::current();
        {
            slots::hold outer;
            held[0] = outer.slot();
            held[1] = slots::index();
            {
                slots::hold inner;
                held[2] = inner.slot();
            }
            owned_while_held = slots::owned(outer.slot());
        }
        owned_after = held[0] < kMaxSlots && slots::owned(held[0]);
        EXPECT_EQ(slots::index(), kMaxSlots);
    }).join();
    EXPECT_EQ(extra[0], kNoSlot);
    EXPECT_EQ(extra[1], kNoSlot);
    EXPECT_GE(held[0], kThreadSlots);
    EXPECT_LT(held[0], kMaxSlots);
    EXPECT_EQ(held[1], held[0]);
    EXPECT_EQ(held[2], held[0]);
    EXPECT_TRUE(owned_while_held);
    EXPECT_FALSE(owned_after);
    EXPECT_EQ(slots::stats().shared_holds, shared_before + 1);
    EXPECT_EQ(slots::in_use(), kThreadSlots);
    idle_visit v;
    slots::for_each_idle(record_idle, &v);
    for (unsigned slot : v.visited) EXPECT_GE(slot, kThreadSlots); // only shared slots are idle

    shared.release.count_down();
    for (pthread_t t : threads) pthread_join(t, nullptr);
    EXPECT_EQ(slots::in_use(), base);
    EXPECT_EQ(slot_of_new_thread(), lowest_free(1).at(0));
    printf("SLOTEXHAUST done free=%u\n", free_slots);
    fflush(stdout);
}

TEST(SlotExhaustion, ThreadBeyondMaxSlotsGetsNoSlot) {
    std::vector<std::string> env;
    for (char **e = environ; *e != nullptr; ++e) {
        std::string_view var(*e);
        if (var.starts_with("GTEST_") || var.starts_with(std::string(kChildVar) + "=")) continue;
        env.emplace_back(var);
    }
    env.push_back(std::string(kChildVar) + "=slot_exhaustion");
    std::vector<char *> envp;
    for (std::string &var : env) envp.push_back(var.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe", filter = "--gtest_filter=SlotChild.Exhaustion";
    char *argv[] = {exe.data(), filter.data(), nullptr};

    int out[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    std::string output;
    if (rc == 0) {
        char buf[4096];
        ssize_t n;
        while ((n = read(out[0], buf, sizeof buf)) != 0) {
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) break;
            output.append(buf, static_cast<size_t>(n));
        }
    }
    close(out[0]);
    ASSERT_EQ(rc, 0) << strerror(rc);
    EXPECT_EQ(wait_exit_code(pid), 0) << output;
    EXPECT_NE(output.find("SLOTEXHAUST done"), std::string::npos) << output;
}

} // namespace
} // namespace slabkit
