// platform_test.cpp - unit tests of the platform layer (src/platform/): CPU lists and topology,
// SLABKIT_FAKE_NUMA end to end, env_uint, the address-space calls, describe(), clocks, the futex
// mutex, thread-exit hooks and fork hooks.
//
// Suites: Platform*, Topology*, Mutex*, ThreadExit*, Fork*. The tests named *Child* only run in
// a child process started by another test (they skip otherwise).
#include "platform/lock.hpp"
#include "platform/platform.hpp"
#include "platform/rseq.hpp"
#include "support/vm_flags.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <latch>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace slabkit::platform {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

// The variable that tells a re-executed copy of this binary which child test it is.
constexpr const char *kChildVar = "SLABKIT_TEST_CHILD";

struct child_result {
    int status = -1; // waitpid status
    std::string out; // the child's stdout
    std::string err; // the child's stderr
    bool exited_ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

// Runs this test binary again with --gtest_filter=`filter`, in an environment that is ours minus
// GTEST_* (sharding, XML output), SLABKIT_FAKE_NUMA and SLABKIT_TEST_CHILD, plus `extra_env`
// ("NAME=value" strings). Collects stdout and stderr through pipes.
child_result run_self(const std::string &filter, const std::vector<std::string> &extra_env) {
    child_result result;
    std::vector<std::string> env_strings;
    for (char **e = environ; *e != nullptr; ++e) {
        std::string_view var(*e);
        if (var.starts_with("GTEST_") || var.starts_with("SLABKIT_FAKE_NUMA=") ||
            var.starts_with(std::string(kChildVar) + "="))
            continue;
        env_strings.emplace_back(var);
    }
    for (const std::string &var : extra_env) env_strings.push_back(var);
    std::vector<char *> envp;
    for (std::string &var : env_strings) envp.push_back(var.data());
    envp.push_back(nullptr);

    std::string exe = "/proc/self/exe";
    std::string filter_arg = "--gtest_filter=" + filter;
    std::string color_arg = "--gtest_color=no";
    char *argv[] = {exe.data(), filter_arg.data(), color_arg.data(), nullptr};

    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
        ADD_FAILURE() << "pipe2: " << strerror(errno);
        return result;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (rc != 0) {
        ADD_FAILURE() << "posix_spawn: " << strerror(rc);
        close(out_pipe[0]);
        close(err_pipe[0]);
        return result;
    }
    // Read both pipes until both are closed, so that neither can fill up and block the child.
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string *sinks[2] = {&result.out, &result.err};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            ADD_FAILURE() << "poll: " << strerror(errno);
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            char buf[4096];
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
                continue;
            }
            sinks[i]->append(buf, static_cast<size_t>(n));
        }
    }
    for (pollfd &p : fds)
        if (p.fd >= 0) close(p.fd);
    while (waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
    }
    return result;
}

// Sets (or unsets, for nullptr) an environment variable for the scope of one test.
class scoped_env {
  public:
    scoped_env(const char *name, const char *value) : name_(name) {
        if (const char *old = getenv(name)) {
            had_old_ = true;
            old_ = old;
        }
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~scoped_env() {
        if (had_old_)
            setenv(name_, old_.c_str(), 1);
        else
            unsetenv(name_);
    }
    scoped_env(const scoped_env &) = delete;
    scoped_env &operator=(const scoped_env &) = delete;

  private:
    const char *name_;
    bool had_old_ = false;
    std::string old_;
};

std::string describe_str(os_status status) {
    char buf[256];
    return describe(status, buf, sizeof buf);
}

// ---------------------------------------------------------------------------------------------
// cpu_set and parse_cpu_list
// ---------------------------------------------------------------------------------------------

TEST(TopologyCpuSet, AddHasCountHighest) {
    cpu_set set;
    EXPECT_EQ(set.count(), 0u);
    EXPECT_EQ(set.highest_plus_one(), 0u);
    set.add(0);
    set.add(63);
    set.add(64);
    set.add(kMaxCpus - 1);
    EXPECT_EQ(set.count(), 4u);
    EXPECT_EQ(set.highest_plus_one(), kMaxCpus);
    EXPECT_TRUE(set.has(0));
    EXPECT_TRUE(set.has(63));
    EXPECT_TRUE(set.has(64));
    EXPECT_TRUE(set.has(kMaxCpus - 1));
    EXPECT_FALSE(set.has(1));
    EXPECT_FALSE(set.has(65));
    EXPECT_FALSE(set.has(kMaxCpus)); // out of range is never a member
    set.add(64);                     // adding twice counts once
    EXPECT_EQ(set.count(), 4u);
}

TEST(TopologyParseCpuList, RangesSinglesAndMixed) {
    cpu_set set;
    const char *why = nullptr;
    ASSERT_TRUE(parse_cpu_list("0-3,8,10-11\n", &set, &why)) << why;
    EXPECT_EQ(set.count(), 7u);
    for (unsigned c : {0u, 1u, 2u, 3u, 8u, 10u, 11u}) EXPECT_TRUE(set.has(c)) << c;
    for (unsigned c : {4u, 7u, 9u, 12u}) EXPECT_FALSE(set.has(c)) << c;
    EXPECT_EQ(set.highest_plus_one(), 12u);

    ASSERT_TRUE(parse_cpu_list("5", &set, &why)) << why;
    EXPECT_EQ(set.count(), 1u);
    EXPECT_TRUE(set.has(5));

    ASSERT_TRUE(parse_cpu_list("0-1023", &set, &why)) << why;
    EXPECT_EQ(set.count(), kMaxCpus);
    EXPECT_EQ(set.highest_plus_one(), kMaxCpus);

    ASSERT_TRUE(parse_cpu_list("7-7,2", &set, &why)) << why; // one-CPU range, out of order
    EXPECT_EQ(set.count(), 2u);
    EXPECT_TRUE(set.has(2));
    EXPECT_TRUE(set.has(7));

    ASSERT_TRUE(parse_cpu_list("1023\n", &set, &why)) << why;
    EXPECT_EQ(set.count(), 1u);
    EXPECT_TRUE(set.has(1023));
}

TEST(TopologyParseCpuList, EmptyListIsANodeWithoutCpus) {
    cpu_set set;
    set.add(3); // the parse must clear what was there
    const char *why = nullptr;
    ASSERT_TRUE(parse_cpu_list("", &set, &why));
    EXPECT_EQ(set.count(), 0u);
    set.add(3);
    ASSERT_TRUE(parse_cpu_list("\n", &set, &why));
    EXPECT_EQ(set.count(), 0u);
}

TEST(TopologyParseCpuList, MalformedTextFailsWithAReason) {
    const char *bad[] = {
        "abc",                     // letters
        "0-3,x",                   // letters after a valid part
        "3-1",                     // reversed range
        "1024",                    // CPU >= kMaxCpus
        "0-1024",                  // range end >= kMaxCpus
        "99999999999999999999999", // huge number (no overflow)
        "-1",                      // negative
        "1-",                      // missing range end
        "1,",                      // missing CPU after comma
        "1,,2",                    // empty element
        "1;2",                     // wrong separator
        "1 2",                     // two numbers without separator
        "0-3\nx",                  // junk after the newline
    };
    for (const char *text : bad) {
        cpu_set set;
        const char *why = nullptr;
        EXPECT_FALSE(parse_cpu_list(text, &set, &why)) << "'" << text << "'";
        ASSERT_NE(why, nullptr) << "'" << text << "'";
        EXPECT_GT(strlen(why), 0u) << "'" << text << "'";
    }
    // The reasons say which problem it was.
    cpu_set set;
    const char *why = nullptr;
    ASSERT_FALSE(parse_cpu_list("3-1", &set, &why));
    EXPECT_NE(std::string(why).find("range"), std::string::npos) << why;
    ASSERT_FALSE(parse_cpu_list("1024", &set, &why));
    EXPECT_NE(std::string(why).find("maximum"), std::string::npos) << why;
}

// ---------------------------------------------------------------------------------------------
// build_topology
// ---------------------------------------------------------------------------------------------

// Checks the invariants every topology must satisfy.
void expect_consistent(const topology &t) {
    EXPECT_GE(t.cpus, 1u);
    EXPECT_LE(t.cpus, kMaxCpus);
    EXPECT_GE(t.nodes, 1u);
    EXPECT_LE(t.nodes, kMaxNodes);
    EXPECT_GE(t.real_nodes, 1u);
    unsigned sum = 0;
    for (unsigned n = 0; n < t.nodes; ++n) sum += t.node_cpus[n];
    EXPECT_EQ(sum, t.cpus);
    for (unsigned n = t.nodes; n < kMaxNodes; ++n) EXPECT_EQ(t.node_cpus[n], 0u) << n;
    unsigned counted[kMaxNodes] = {};
    for (unsigned c = 0; c < t.cpus; ++c) {
        ASSERT_LT(t.cpu_node[c], t.nodes) << "cpu " << c;
        ++counted[t.cpu_node[c]];
    }
    for (unsigned n = 0; n < t.nodes; ++n) EXPECT_EQ(counted[n], t.node_cpus[n]) << n;
}

cpu_set parsed(const char *text) {
    cpu_set set;
    const char *why = nullptr;
    EXPECT_TRUE(parse_cpu_list(text, &set, &why)) << text;
    return set;
}

TEST(TopologyBuild, RealNodeListsMapCpusToNodes) {
    static topology t; // static: 1.2 KiB, kept off the small sanitizer stacks
    cpu_set lists[2] = {parsed("0-3"), parsed("4-7")};
    build_topology(&t, 8, lists, 2, 0);
    expect_consistent(t);
    EXPECT_FALSE(t.fake);
    EXPECT_EQ(t.cpus, 8u);
    EXPECT_EQ(t.nodes, 2u);
    EXPECT_EQ(t.real_nodes, 2u);
    for (unsigned c = 0; c < 8; ++c) EXPECT_EQ(t.cpu_node[c], c < 4 ? 0u : 1u) << c;
    EXPECT_EQ(t.node_cpus[0], 4u);
    EXPECT_EQ(t.node_cpus[1], 4u);
}

TEST(TopologyBuild, InterleavedAndMemoryOnlyNodes) {
    static topology t;
    cpu_set lists[3] = {parsed("0,2,4,6"), parsed(""), parsed("1,3,5,7\n")};
    build_topology(&t, 8, lists, 3, 0);
    expect_consistent(t);
    EXPECT_EQ(t.nodes, 3u);
    for (unsigned c = 0; c < 8; ++c) EXPECT_EQ(t.cpu_node[c], c % 2 == 0 ? 0u : 2u) << c;
    EXPECT_EQ(t.node_cpus[0], 4u);
    EXPECT_EQ(t.node_cpus[1], 0u); // a node with memory only
    EXPECT_EQ(t.node_cpus[2], 4u);
}

TEST(TopologyBuild, CpuInNoListGoesToNodeZero) {
    static topology t;
    cpu_set lists[2] = {parsed("0"), parsed("1")};
    build_topology(&t, 4, lists, 2, 0); // CPUs 2 and 3 are possible but in no node's list
    expect_consistent(t);
    EXPECT_EQ(t.cpu_node[1], 1u);
    EXPECT_EQ(t.cpu_node[2], 0u);
    EXPECT_EQ(t.cpu_node[3], 0u);
    EXPECT_EQ(t.node_cpus[0], 3u);
    EXPECT_EQ(t.node_cpus[1], 1u);
}

TEST(TopologyBuild, DegenerateInputsAreClamped) {
    static topology t;
    cpu_set one = parsed("0");
    build_topology(&t, 0, &one, 0, 0); // no CPUs, no nodes: one CPU on one node
    expect_consistent(t);
    EXPECT_EQ(t.cpus, 1u);
    EXPECT_EQ(t.nodes, 1u);
    EXPECT_EQ(t.real_nodes, 1u);

    static cpu_set all;
    all = parsed("0-1023");
    build_topology(&t, kMaxCpus + 100, &all, 1, 0);
    expect_consistent(t);
    EXPECT_EQ(t.cpus, kMaxCpus);
    EXPECT_EQ(t.node_cpus[0], kMaxCpus);
}

TEST(TopologyBuild, FakeSplitTwoCpusTwoNodes) {
    static topology t;
    cpu_set lists[1] = {parsed("0-1")};
    build_topology(&t, 2, lists, 1, 2);
    expect_consistent(t);
    EXPECT_TRUE(t.fake);
    EXPECT_EQ(t.nodes, 2u);
    EXPECT_EQ(t.real_nodes, 1u);
    EXPECT_EQ(t.cpu_node[0], 0u);
    EXPECT_EQ(t.cpu_node[1], 1u);
    EXPECT_EQ(t.node_cpus[0], 1u);
    EXPECT_EQ(t.node_cpus[1], 1u);
}

TEST(TopologyBuild, FakeSplitMoreNodesThanCpusLeavesCpuLessNodes) {
    static topology t;
    cpu_set lists[1] = {parsed("0-1")};
    build_topology(&t, 2, lists, 1, 4);
    expect_consistent(t);
    EXPECT_TRUE(t.fake);
    EXPECT_EQ(t.nodes, 4u);
    EXPECT_EQ(t.cpu_node[0], 0u); // 0 * 4 / 2
    EXPECT_EQ(t.cpu_node[1], 2u); // 1 * 4 / 2
    const uint16_t expected[4] = {1, 0, 1, 0};
    for (unsigned n = 0; n < 4; ++n) EXPECT_EQ(t.node_cpus[n], expected[n]) << n;
}

TEST(TopologyBuild, FakeSplitUnevenBlocks) {
    static topology t;
    cpu_set lists[1] = {parsed("0-7")};
    build_topology(&t, 8, lists, 1, 3);
    expect_consistent(t);
    const uint8_t expected_node[8] = {0, 0, 0, 1, 1, 1, 2, 2}; // c * 3 / 8
    for (unsigned c = 0; c < 8; ++c) EXPECT_EQ(t.cpu_node[c], expected_node[c]) << c;
    EXPECT_EQ(t.node_cpus[0], 3u);
    EXPECT_EQ(t.node_cpus[1], 3u);
    EXPECT_EQ(t.node_cpus[2], 2u);
}

TEST(TopologyBuild, FakeSplitKeepsRealNodeCountAndIgnoresLists) {
    static topology t;
    cpu_set lists[2] = {parsed("0-3"), parsed("4-7")};
    build_topology(&t, 8, lists, 2, 4);
    expect_consistent(t);
    EXPECT_TRUE(t.fake);
    EXPECT_EQ(t.real_nodes, 2u);
    EXPECT_EQ(t.nodes, 4u);
    for (unsigned c = 0; c < 8; ++c) EXPECT_EQ(t.cpu_node[c], c / 2) << c;
}

TEST(TopologyBuild, FakeCountCappedAtMaxNodes) {
    static topology t;
    cpu_set lists[1] = {parsed("0-1")};
    build_topology(&t, 2, lists, 1, kMaxNodes + 36);
    expect_consistent(t);
    EXPECT_TRUE(t.fake);
    EXPECT_EQ(t.nodes, kMaxNodes);
    EXPECT_EQ(t.cpu_node[0], 0u);
    EXPECT_EQ(t.cpu_node[1], kMaxNodes / 2);
}

TEST(TopologyBuild, FakeSplitFormulaOverManyShapes) {
    static topology t;
    static cpu_set all;
    all = parsed("0-1023");
    for (unsigned cpus : {1u, 2u, 3u, 7u, 64u, 100u, 1000u, kMaxCpus}) {
        for (unsigned nodes : {1u, 2u, 3u, 5u, 8u, 63u, kMaxNodes}) {
            SCOPED_TRACE(testing::Message() << "cpus=" << cpus << " nodes=" << nodes);
            build_topology(&t, cpus, &all, 1, nodes);
            expect_consistent(t);
            EXPECT_EQ(t.nodes, nodes);
            unsigned min_cpus = ~0u, max_cpus = 0;
            for (unsigned c = 0; c < cpus; ++c) {
                ASSERT_EQ(t.cpu_node[c], uint64_t{c} * nodes / cpus) << c;
                if (c > 0) { // contiguous blocks
                    ASSERT_GE(t.cpu_node[c], t.cpu_node[c - 1]);
                }
            }
            for (unsigned n = 0; n < nodes; ++n) {
                min_cpus = std::min<unsigned>(min_cpus, t.node_cpus[n]);
                max_cpus = std::max<unsigned>(max_cpus, t.node_cpus[n]);
            }
            if (nodes <= cpus) {
                EXPECT_GE(min_cpus, 1u);            // every node gets CPUs ...
                EXPECT_LE(max_cpus - min_cpus, 1u); // ... and the blocks are balanced
            } else {
                EXPECT_EQ(max_cpus, 1u); // one CPU per node at most, the rest memory-only
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// numa(), cpu_count(), current_cpu()
// ---------------------------------------------------------------------------------------------

TEST(TopologyNuma, IsConsistentWithTheMachine) {
    const topology &t = numa();
    EXPECT_EQ(&t, &numa()); // read once
    expect_consistent(t);
    EXPECT_EQ(cpu_count(), t.cpus);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    ASSERT_GT(online, 0);
    EXPECT_GE(t.cpus, static_cast<unsigned>(online)); // possible CPUs include the online ones

    // What SLABKIT_FAKE_NUMA asked for (the tests may be run with it set).
    unsigned fake = 0;
    if (const char *text = getenv("SLABKIT_FAKE_NUMA")) {
        char *end = nullptr;
        unsigned long v = strtoul(text, &end, 10);
        if (*text >= '0' && *text <= '9' && *end == '\0' && v >= 1 && v <= kMaxNodes)
            fake = static_cast<unsigned>(v);
    }
    EXPECT_EQ(t.fake, fake != 0);
    EXPECT_EQ(t.nodes, fake != 0 ? fake : t.real_nodes);
}

TEST(TopologyNuma, CpuCountMatchesSysfsPossible) {
    int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
    if (fd < 0) GTEST_SKIP() << "no /sys/devices/system/cpu/possible";
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    ASSERT_GT(n, 0);
    buf[n] = '\0';
    cpu_set possible;
    const char *why = nullptr;
    ASSERT_TRUE(parse_cpu_list(buf, &possible, &why)) << why;
    EXPECT_EQ(cpu_count(), std::min(possible.highest_plus_one(), kMaxCpus));
}

TEST(TopologyNuma, CurrentCpuIsBelowCpuCount) {
    const unsigned cpus = cpu_count();
    for (int i = 0; i < 1000; ++i) ASSERT_LT(current_cpu(), cpus);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 1000; ++i)
                if (current_cpu() >= cpu_count()) bad.fetch_add(1);
        });
    for (std::thread &t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
}

// Runs only in a child started by the TopologyFakeNuma tests: prints the child's topology so that
// the parent can check it, and checks what it can itself.
TEST(TopologyChild, Report) {
    const char *mode = getenv(kChildVar);
    if (mode == nullptr || strcmp(mode, "topology") != 0)
        GTEST_SKIP() << "runs only in a child process started by TopologyFakeNuma tests";
    // First use from several threads at once: all must see the same, complete topology.
    std::latch start(4);
    std::atomic<const topology *> seen[4] = {};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
        threads.emplace_back([&, i] {
            start.arrive_and_wait();
            seen[i] = &numa();
        });
    for (std::thread &th : threads) th.join();
    const topology &t = numa();
    for (auto &s : seen) EXPECT_EQ(s.load(), &t);
    expect_consistent(t);
    printf("TOPO cpus=%u nodes=%u real=%u fake=%d\n", t.cpus, t.nodes, t.real_nodes,
           t.fake ? 1 : 0);
    for (unsigned n = 0; n < t.nodes; ++n) printf("NODE %u cpus=%u\n", n, t.node_cpus[n]);
    for (unsigned c = 0; c < t.cpus; ++c) printf("CPU %u node=%u\n", c, t.cpu_node[c]);
    fflush(stdout);
}

struct reported_topology {
    bool found = false;
    unsigned cpus = 0, nodes = 0, real = 0;
    int fake = -1;
    std::vector<unsigned> node_cpus, cpu_node;
};

reported_topology parse_report(const std::string &out) {
    reported_topology r;
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        unsigned a = 0, b = 0, c = 0;
        int d = 0;
        if (sscanf(line.c_str(), "TOPO cpus=%u nodes=%u real=%u fake=%d", &a, &b, &c, &d) == 4) {
            r.found = true;
            r.cpus = a;
            r.nodes = b;
            r.real = c;
            r.fake = d;
            r.node_cpus.assign(b, ~0u);
            r.cpu_node.assign(a, ~0u);
        } else if (sscanf(line.c_str(), "NODE %u cpus=%u", &a, &b) == 2 && a < r.node_cpus.size()) {
            r.node_cpus[a] = b;
        } else if (sscanf(line.c_str(), "CPU %u node=%u", &a, &b) == 2 && a < r.cpu_node.size()) {
            r.cpu_node[a] = b;
        }
    }
    return r;
}

// What a child with SLABKIT_FAKE_NUMA=`value` reports, checked to have run and passed.
reported_topology run_topology_child(const std::string &value, std::string *err) {
    child_result child = run_self("TopologyChild.Report", {std::string(kChildVar) + "=topology",
                                                           "SLABKIT_FAKE_NUMA=" + value});
    EXPECT_TRUE(child.exited_ok()) << "status " << child.status << "\nstdout:\n"
                                   << child.out << "\nstderr:\n"
                                   << child.err;
    reported_topology r = parse_report(child.out);
    EXPECT_TRUE(r.found) << "the child did not report:\n" << child.out << child.err;
    *err = child.err;
    return r;
}

TEST(TopologyFakeNuma, SplitsCpusEndToEnd) {
    const unsigned cpus = cpu_count();
    for (unsigned n : {1u, 2u, 4u, kMaxNodes}) {
        SCOPED_TRACE(testing::Message() << "SLABKIT_FAKE_NUMA=" << n);
        std::string err;
        reported_topology r = run_topology_child(std::to_string(n), &err);
        if (!r.found) continue;
        EXPECT_EQ(r.fake, 1);
        EXPECT_EQ(r.cpus, cpus);
        EXPECT_EQ(r.nodes, n);
        EXPECT_EQ(r.real, numa().real_nodes);
        std::vector<unsigned> expected_node_cpus(n, 0);
        for (unsigned c = 0; c < r.cpus; ++c) {
            unsigned node = static_cast<unsigned>(uint64_t{c} * n / r.cpus);
            EXPECT_EQ(r.cpu_node[c], node) << "cpu " << c;
            ++expected_node_cpus[node];
        }
        EXPECT_EQ(r.node_cpus, expected_node_cpus);
        EXPECT_EQ(err.find("SLABKIT_FAKE_NUMA"), std::string::npos) << err;
    }
}

TEST(TopologyFakeNuma, InvalidValueWarnsAndFallsBack) {
    const topology &parent = numa();
    for (const char *value : {"abc", "0", "999", "65", "4x", ""}) {
        SCOPED_TRACE(testing::Message() << "SLABKIT_FAKE_NUMA='" << value << "'");
        std::string err;
        reported_topology r = run_topology_child(value, &err);
        if (!r.found) continue;
        EXPECT_EQ(r.fake, 0);
        EXPECT_EQ(r.nodes, parent.real_nodes);
        EXPECT_EQ(r.real, parent.real_nodes);
        EXPECT_NE(err.find("SLABKIT_FAKE_NUMA"), std::string::npos) << err;
        EXPECT_NE(err.find(std::string("'") + value + "'"), std::string::npos) << err;
        EXPECT_NE(err.find("1..64"), std::string::npos) << err; // the accepted range
    }
}

// ---------------------------------------------------------------------------------------------
// env, env_uint, print_error, fatal
// ---------------------------------------------------------------------------------------------

constexpr const char *kVar = "SLABKIT_TEST_ENV_UINT";

// env_uint(kVar, ...) with the variable set to `value` (nullptr: unset); *err gets stderr.
uint64_t env_uint_with(const char *value, uint64_t fallback, uint64_t min, uint64_t max,
                       std::string *err) {
    scoped_env var(kVar, value);
    testing::internal::CaptureStderr();
    uint64_t result = env_uint(kVar, fallback, min, max);
    *err = testing::internal::GetCapturedStderr();
    return result;
}

TEST(PlatformEnv, EnvReadsTheEnvironment) {
    {
        scoped_env var(kVar, "hello");
        ASSERT_NE(env(kVar), nullptr);
        EXPECT_STREQ(env(kVar), "hello");
    }
    scoped_env var(kVar, nullptr);
    EXPECT_EQ(env(kVar), nullptr);
}

TEST(PlatformEnvUint, UnsetGivesFallbackSilently) {
    std::string err;
    EXPECT_EQ(env_uint_with(nullptr, 17, 0, 100, &err), 17u);
    EXPECT_EQ(err, "");
}

TEST(PlatformEnvUint, ValidValues) {
    std::string err;
    EXPECT_EQ(env_uint_with("42", 7, 0, 100, &err), 42u);
    EXPECT_EQ(err, "");
    EXPECT_EQ(env_uint_with("0", 7, 0, 100, &err), 0u); // lower bound
    EXPECT_EQ(err, "");
    EXPECT_EQ(env_uint_with("100", 7, 0, 100, &err), 100u); // upper bound
    EXPECT_EQ(err, "");
    EXPECT_EQ(env_uint_with("007", 1, 0, 100, &err), 7u); // leading zeros
    EXPECT_EQ(err, "");
    EXPECT_EQ(env_uint_with("18446744073709551615", 1, 0, UINT64_MAX, &err), UINT64_MAX);
    EXPECT_EQ(err, "");
    EXPECT_EQ(env_uint_with("18446744073709551610", 1, 0, UINT64_MAX, &err), UINT64_MAX - 5);
    EXPECT_EQ(err, "");
}

TEST(PlatformEnvUint, OutOfRangeWarnsAndFallsBack) {
    std::string err;
    EXPECT_EQ(env_uint_with("101", 7, 5, 100, &err), 7u);
    EXPECT_NE(err.find(kVar), std::string::npos) << err;
    EXPECT_NE(err.find("'101'"), std::string::npos) << err;
    EXPECT_NE(err.find("5..100"), std::string::npos) << err;
    EXPECT_NE(err.find("using 7"), std::string::npos) << err;

    EXPECT_EQ(env_uint_with("4", 7, 5, 100, &err), 7u); // below min
    EXPECT_NE(err.find(kVar), std::string::npos) << err;
    EXPECT_NE(err.find("'4'"), std::string::npos) << err;
}

TEST(PlatformEnvUint, GarbageWarnsAndFallsBack) {
    for (const char *value : {"abc", "12x", "", "-1", " 5", "+5", "1.5", "0x10",
                              "18446744073709551616", "99999999999999999999999999"}) {
        SCOPED_TRACE(testing::Message() << "value '" << value << "'");
        std::string err;
        EXPECT_EQ(env_uint_with(value, 3, 0, UINT64_MAX, &err), 3u);
        EXPECT_NE(err.find(kVar), std::string::npos) << err;
        EXPECT_NE(err.find(std::string("'") + value + "'"), std::string::npos) << err;
        EXPECT_NE(err.find("using 3"), std::string::npos) << err;
    }
}

TEST(PlatformOutput, PrintErrorAndWriteStderr) {
    testing::internal::CaptureStderr();
    print_error("slabkit test %d %s\n", 42, "done");
    write_stderr("raw bytes", 9);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err, "slabkit test 42 done\nraw bytes");

    // A message longer than the stack buffer is cut, not overflowed.
    std::string long_text(5000, 'x');
    testing::internal::CaptureStderr();
    print_error("%s", long_text.c_str());
    err = testing::internal::GetCapturedStderr();
    EXPECT_GT(err.size(), 0u);
    EXPECT_LT(err.size(), long_text.size());
    EXPECT_EQ(err, long_text.substr(0, err.size()));
}

TEST(PlatformDeathTest, FatalPrintsAndAborts) {
    EXPECT_EXIT(fatal("slabkit test: fatal error %d\n", 42), testing::KilledBySignal(SIGABRT),
                "slabkit test: fatal error 42");
}

// ---------------------------------------------------------------------------------------------
// describe()
// ---------------------------------------------------------------------------------------------

TEST(PlatformDescribe, OkAndErrorForms) {
    char buf[128];
    EXPECT_STREQ(describe(os_status{}, buf, sizeof buf), "ok");
    EXPECT_EQ(describe(os_status{}, buf, sizeof buf), buf); // returns the caller's buffer
    EXPECT_EQ(describe_str({"mmap", ENOMEM}), "mmap: Cannot allocate memory (errno 12)");
    EXPECT_EQ(describe_str({"munmap", EINVAL}), "munmap: Invalid argument (errno 22)");
    EXPECT_EQ(describe_str({"mbind", 9999}), "mbind: unknown error (errno 9999)");
    EXPECT_TRUE(os_status{}.ok());
    EXPECT_FALSE((os_status{"mmap", ENOMEM}.ok()));
}

TEST(PlatformDescribe, TruncatesToTheBuffer) {
    char buf[8];
    memset(buf, '#', sizeof buf);
    describe({"mprotect", EINVAL}, buf, sizeof buf);
    EXPECT_EQ(std::string(buf), "mprotec"); // cut and NUL-terminated
}

// ---------------------------------------------------------------------------------------------
// Address space
// ---------------------------------------------------------------------------------------------

TEST(PlatformMemory, PageSizeIsAPowerOfTwo) {
    const size_t page = page_size();
    EXPECT_GE(page, 4096u);
    EXPECT_EQ(page & (page - 1), 0u);
    EXPECT_EQ(page, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
}

// True when [addr, addr+page) is not mapped at all (mincore fails with ENOMEM).
bool unmapped(const void *addr) {
    os_status status;
    resident_pages(addr, page_size(), &status);
    return !status.ok() && status.err == ENOMEM;
}

TEST(PlatformMemory, ReserveAlignsToOneGiB) {
    constexpr size_t kGiB = size_t{1} << 30;
    const size_t size = 2u << 20;
    os_status status{"stale", 1};
    void *p = reserve(size, kGiB, &status);
    ASSERT_NE(p, nullptr) << describe_str(status);
    EXPECT_TRUE(status.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kGiB, 0u);
    // Reserved: mapped, nothing resident; the over-reservation past the end was trimmed.
    os_status rs;
    EXPECT_EQ(resident_pages(p, size, &rs), 0u);
    EXPECT_TRUE(rs.ok()) << describe_str(rs);
    EXPECT_TRUE(unmapped(static_cast<char *>(p) + size));
    EXPECT_TRUE(release(p, size).ok());
}

TEST(PlatformMemory, ReserveSmallAlignmentsArePageAligned) {
    for (size_t align : {size_t{0}, size_t{1}, size_t{64}, page_size(), 2 * page_size()}) {
        os_status status;
        void *p = reserve(3 * page_size(), align, &status);
        ASSERT_NE(p, nullptr) << align << ": " << describe_str(status);
        const size_t want = align > page_size() ? align : page_size();
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % want, 0u) << align;
        EXPECT_TRUE(release(p, 3 * page_size()).ok());
    }
}

TEST(PlatformMemory, ReserveOfAPartialPageTrimsTheTail) {
    // A size that is not a page multiple still gets whole pages, and the alignment slack after
    // them is given back (not left mapped).
    constexpr size_t kAlign = size_t{1} << 30;
    os_status status;
    void *p = reserve(100, kAlign, &status);
    ASSERT_NE(p, nullptr) << describe_str(status);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kAlign, 0u);
    ASSERT_TRUE(commit(p, page_size()).ok());
    static_cast<volatile char *>(p)[page_size() - 1] = 1;
    EXPECT_TRUE(unmapped(static_cast<char *>(p) + page_size()));
    EXPECT_TRUE(release(p, 100).ok());
}

TEST(PlatformMemory, ReserveBadArgumentsFail) {
    struct {
        size_t size, align;
        const char *call;
        int err;
    } cases[] = {
        {0, 0, "reserve", EINVAL},                             // size 0
        {4096, 3, "reserve", EINVAL},                          // alignment not a power of two
        {4096, (size_t{1} << 20) + 4096, "reserve", EINVAL},   // same
        {SIZE_MAX - 4095, size_t{1} << 30, "reserve", ENOMEM}, // size + alignment overflows
        {size_t{1} << 62, 0, "mmap", ENOMEM},                  // more than the address space
        {SIZE_MAX, 0, nullptr, ENOMEM},                        // either call may refuse it
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(testing::Message() << "size " << c.size << " align " << c.align);
        os_status status;
        EXPECT_EQ(reserve(c.size, c.align, &status), nullptr);
        EXPECT_FALSE(status.ok());
        ASSERT_NE(status.call, nullptr);
        if (c.call) {
            EXPECT_STREQ(status.call, c.call);
        }
        EXPECT_EQ(status.err, c.err);
        std::string text = describe_str(status);
        EXPECT_EQ(text.find(std::string(status.call) + ": "), 0u) << text;
        EXPECT_NE(text.find(strerror(c.err)), std::string::npos) << text;
        EXPECT_NE(text.find("errno " + std::to_string(c.err)), std::string::npos) << text;
    }
}

// A reservation of 64 pages whose middle pages [16, 32) are committed; the committed range is
// surrounded by reserved pages so that it cannot merge with a neighbour (or get a huge page).
class PlatformCommitted : public testing::Test {
  protected:
    void SetUp() override {
        page_ = page_size();
        os_status status;
        base_ = static_cast<char *>(reserve(64 * page_, 0, &status));
        ASSERT_NE(base_, nullptr) << describe_str(status);
        mem_ = base_ + 16 * page_;
        ASSERT_TRUE(commit(mem_, 16 * page_).ok());
    }
    void TearDown() override {
        if (base_) {
            EXPECT_TRUE(release(base_, 64 * page_).ok());
        }
    }
    size_t resident(const void *addr, size_t pages) {
        os_status status;
        size_t n = resident_pages(addr, pages * page_, &status);
        EXPECT_TRUE(status.ok()) << describe_str(status);
        return n;
    }
    char *page(size_t i) { return mem_ + i * page_; }

    size_t page_ = 0;
    char *base_ = nullptr;
    char *mem_ = nullptr;
};

TEST_F(PlatformCommitted, TouchedPagesBecomeResident) {
    EXPECT_EQ(resident(base_, 64), 0u); // committed but untouched: nothing behind it yet
    page(0)[0] = 1;
    page(5)[100] = 2;
    page(15)[page_ - 1] = 3;
    EXPECT_EQ(resident(mem_, 16), 3u);
    EXPECT_EQ(resident(base_, 64), 3u);
    EXPECT_EQ(resident(page(5), 1), 1u);
    EXPECT_EQ(resident(page(6), 9), 0u);
    // A range that does not start on a page boundary counts the pages it touches.
    EXPECT_EQ(resident(page(4) + 10, 1), 1u);
    EXPECT_EQ(page(0)[0], 1);
    EXPECT_EQ(page(5)[100], 2);
    EXPECT_EQ(page(15)[page_ - 1], 3);
}

TEST_F(PlatformCommitted, DecommitDropsPagesAndReadsZero) {
    for (size_t i = 0; i < 16; ++i) memset(page(i), 0xab, page_);
    EXPECT_EQ(resident(mem_, 16), 16u);
    ASSERT_TRUE(decommit(page(4), 4 * page_).ok());
    EXPECT_EQ(resident(mem_, 16), 12u);
    EXPECT_EQ(resident(page(4), 4), 0u);
    for (size_t i = 0; i < 16; ++i) {
        const unsigned char want = i >= 4 && i < 8 ? 0 : 0xab;
        for (size_t b = 0; b < page_; b += 512)
            ASSERT_EQ(static_cast<unsigned char>(page(i)[b]), want) << "page " << i;
    }
    ASSERT_TRUE(decommit(mem_, 16 * page_).ok());
    EXPECT_EQ(resident(mem_, 16), 0u);
    for (size_t i = 0; i < 16; ++i) ASSERT_EQ(page(i)[i], 0) << i;
    // Still usable after decommit.
    page(3)[7] = 9;
    EXPECT_EQ(page(3)[7], 9);
}

TEST_F(PlatformCommitted, ProtectNoneDropsPagesAndRecommitReadsZero) {
    for (size_t i = 0; i < 16; ++i) memset(page(i), 0x5a, page_);
    ASSERT_TRUE(protect_none(page(8), 8 * page_).ok());
    EXPECT_EQ(resident(mem_, 16), 8u);
    EXPECT_EQ(resident(page(8), 8), 0u);
    ASSERT_TRUE(commit(page(8), 8 * page_).ok());
    EXPECT_EQ(page(8)[0], 0);
    EXPECT_EQ(page(15)[page_ - 1], 0);
    EXPECT_EQ(page(7)[page_ - 1], 0x5a);
}

// no_huge_pages marks the range "nh" in /proc/self/smaps (VmFlags), where the kernel has THP.
TEST_F(PlatformCommitted, NoHugePagesMarksTheMapping) {
    os_status status = no_huge_pages(mem_, 16 * page_);
    if (!status.ok()) {
        // Kernels built without THP refuse the advice; the call must say so, not crash.
        EXPECT_STREQ(status.call, "madvise");
        GTEST_SKIP() << "no THP in this kernel: " << describe_str(status);
    }
    const std::string flags = slabkit::test::vm_flags_of(mem_);
    ASSERT_FALSE(flags.empty()) << "mapping not in /proc/self/smaps";
    EXPECT_TRUE(slabkit::test::has_vm_flag(mem_, "nh"))
        << "VmFlags of the range lack nh: " << flags;
}

TEST_F(PlatformCommitted, BindToNode) {
    const topology &t = numa();
    EXPECT_TRUE(bind_to_node(mem_, 16 * page_, 0).ok());
    os_status beyond = bind_to_node(mem_, 16 * page_, t.real_nodes);
    if (t.fake || t.real_nodes <= 1) {
        EXPECT_TRUE(beyond.ok()); // nothing to bind to: a no-op
    } else {
        EXPECT_FALSE(beyond.ok());
        EXPECT_STREQ(beyond.call, "mbind");
    }
    page(0)[0] = 1; // still usable
    EXPECT_EQ(resident(mem_, 1), 1u);
}

TEST(PlatformMemory, BadRangesGiveErrorStatusNotACrash) {
    const size_t page = page_size();
    os_status status;
    char *p = static_cast<char *>(reserve(4 * page, 0, &status));
    ASSERT_NE(p, nullptr) << describe_str(status);

    os_status s = release(p + 1, page); // misaligned
    EXPECT_STREQ(s.call, "munmap");
    EXPECT_EQ(s.err, EINVAL);
    EXPECT_EQ(describe_str(s), "munmap: Invalid argument (errno 22)");
    s = release(p, 0);
    EXPECT_STREQ(s.call, "munmap");
    EXPECT_EQ(s.err, EINVAL);

    s = commit(p + 1, page);
    EXPECT_STREQ(s.call, "mprotect");
    EXPECT_EQ(s.err, EINVAL);
    s = decommit(p + 1, page);
    EXPECT_STREQ(s.call, "madvise");
    EXPECT_EQ(s.err, EINVAL);
    s = protect_none(p + 1, page);
    EXPECT_STREQ(s.call, "mprotect");
    EXPECT_EQ(s.err, EINVAL);

    // Releasing part of a reservation leaves the rest mapped.
    EXPECT_TRUE(release(p + 3 * page, page).ok());
    EXPECT_TRUE(unmapped(p + 3 * page));
    EXPECT_FALSE(unmapped(p + 2 * page));
    EXPECT_TRUE(release(p, 3 * page).ok());

    // resident_pages of an address range no process can map.
    s = {};
    const void *kernel = reinterpret_cast<const void *>(uintptr_t{0xffff800000000000});
    EXPECT_EQ(resident_pages(kernel, page, &s), 0u);
    EXPECT_STREQ(s.call, "mincore");
    EXPECT_EQ(s.err, ENOMEM);
}

TEST(PlatformDeathTest, ReservedAndGuardPagesAreInaccessible) {
    const size_t page = page_size();
    os_status status;
    char *p = static_cast<char *>(reserve(2 * page, 0, &status));
    ASSERT_NE(p, nullptr) << describe_str(status);
    EXPECT_DEATH(static_cast<volatile char *>(p)[0] = 1, "");
    ASSERT_TRUE(commit(p, 2 * page).ok());
    p[page] = 1;
    ASSERT_TRUE(protect_none(p + page, page).ok());
    p[0] = 1; // the first page is still committed
    EXPECT_DEATH(static_cast<volatile char *>(p)[page] = 1, "");
    EXPECT_TRUE(release(p, 2 * page).ok());
}

// ---------------------------------------------------------------------------------------------
// Clocks
// ---------------------------------------------------------------------------------------------

TEST(PlatformClock, NowNsIsMonotonicAndAdvances) {
    uint64_t prev = now_ns();
    EXPECT_GT(prev, 0u);
    for (int i = 0; i < 100000; ++i) {
        uint64_t t = now_ns();
        ASSERT_GE(t, prev);
        prev = t;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_GT(now_ns(), prev);
}

TEST(PlatformClock, NowCoarseMsIsMonotonicAndNotAheadOfNowNs) {
    uint64_t prev = now_coarse_ms();
    for (int i = 0; i < 100000; ++i) {
        uint64_t t = now_coarse_ms();
        ASSERT_GE(t, prev);
        prev = t;
    }
    // The coarse clock is the same clock read at the last tick: never ahead of the fine one.
    for (int i = 0; i < 1000; ++i) {
        uint64_t coarse = now_coarse_ms();
        uint64_t fine = now_ns() / 1000000u;
        ASSERT_LE(coarse, fine);
    }
    // A sleep far longer than any tick moves it.
    uint64_t before = now_coarse_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_GT(now_coarse_ms(), before);
}

// The clocks read the vDSO themselves (clock.cpp): the same clock as libc's clock_gettime, read
// between two of its readings, and from the vDSO whenever the kernel maps one (valgrind does not).
TEST(PlatformClock, ReadsTheSameClockAsLibcThroughTheVdso) {
    for (int i = 0; i < 1000; ++i) {
        timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        const uint64_t ours = now_ns();
        clock_gettime(CLOCK_MONOTONIC, &b);
        const uint64_t lo = static_cast<uint64_t>(a.tv_sec) * 1000000000u + a.tv_nsec;
        const uint64_t hi = static_cast<uint64_t>(b.tv_sec) * 1000000000u + b.tv_nsec;
        ASSERT_LE(lo, ours);
        ASSERT_LE(ours, hi);
    }
    if (getauxval(AT_SYSINFO_EHDR) != 0) {
        EXPECT_TRUE(clock_from_vdso());
    }
}

TEST(PlatformCpus, AllowedCpusAreTheAffinityMask) {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    uint64_t bits[16];
    std::memset(bits, 0xff, sizeof bits);
    ASSERT_TRUE(allowed_cpus(bits, 16));
    for (unsigned cpu = 0; cpu < 16 * 64; ++cpu)
        EXPECT_EQ((bits[cpu / 64] >> (cpu % 64)) & 1, CPU_ISSET(cpu, &set) ? 1u : 0u) << cpu;
}

// ---------------------------------------------------------------------------------------------
// mutex
// ---------------------------------------------------------------------------------------------

constinit mutex g_constant_mutex; // must be constant-initialised (usable before main)

TEST(MutexBasic, TryLockSemantics) {
    mutex m;
    EXPECT_FALSE(m.is_locked());
    EXPECT_TRUE(m.try_lock());
    EXPECT_TRUE(m.is_locked());
    EXPECT_FALSE(m.try_lock()); // not recursive
    bool other_got_it = true;
    std::thread([&] { other_got_it = m.try_lock(); }).join();
    EXPECT_FALSE(other_got_it);
    m.unlock();
    EXPECT_FALSE(m.is_locked());
    std::thread([&] {
        other_got_it = m.try_lock();
        if (other_got_it) m.unlock();
    }).join();
    EXPECT_TRUE(other_got_it);
    EXPECT_FALSE(m.is_locked());
}

TEST(MutexBasic, LockGuardAndConstantInit) {
    EXPECT_FALSE(g_constant_mutex.is_locked());
    {
        lock_guard guard(g_constant_mutex);
        EXPECT_TRUE(g_constant_mutex.is_locked());
        EXPECT_FALSE(g_constant_mutex.try_lock());
    }
    EXPECT_FALSE(g_constant_mutex.is_locked());
}

TEST(MutexBasic, ResetAfterForkFreesAHeldLock) {
    mutex m;
    m.lock();
    ASSERT_TRUE(m.is_locked());
    m.reset_after_fork();
    EXPECT_FALSE(m.is_locked());
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

TEST(MutexContention, ExactTotalUnderContention) {
    constexpr int kThreads = 4;
    constexpr int kIters = 20000;
    mutex m;
    long counter = 0; // plain: only the lock protects it
    int inside = 0;   // plain too: how many threads are in the critical section
    std::atomic<int> overlaps{0};
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            start.arrive_and_wait();
            for (int i = 0; i < kIters; ++i) {
                lock_guard guard(m);
                if (++inside != 1) overlaps.fetch_add(1, std::memory_order_relaxed);
                ++counter;
                --inside;
            }
        });
    for (std::thread &t : threads) t.join();
    EXPECT_EQ(counter, long{kThreads} * kIters);
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_FALSE(m.is_locked());
}

TEST(MutexContention, SleepersAreWokenAndExcluded) {
    constexpr int kThreads = 3;
    mutex m;
    int entered = 0; // protected by m
    std::atomic<int> started{0};
    m.lock();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            started.fetch_add(1);
            m.lock(); // spins, then sleeps in the kernel until the holder lets go
            ++entered;
            m.unlock();
        });
    while (started.load() < kThreads) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // long enough to go to sleep
    EXPECT_EQ(entered, 0); // nobody got in while we hold it (read under our lock)
    EXPECT_TRUE(m.is_locked());
    m.unlock();
    for (std::thread &t : threads) t.join(); // hangs if a wake-up is lost
    m.lock();
    EXPECT_EQ(entered, kThreads);
    m.unlock();
    EXPECT_FALSE(m.is_locked());
}

TEST(MutexFork, ChildResetsALockHeldByAnotherThread) {
    static mutex m; // static: the child sees the same object
    std::latch held(1), done(1);
    std::thread holder([&] {
        m.lock();
        held.count_down();
        done.wait();
        m.unlock();
    });
    held.wait();
    pid_t pid = fork();
    if (pid == 0) {
        // Only this thread exists in the child; the holder is gone with the lock held.
        if (!m.is_locked()) _exit(2);
        if (m.try_lock()) _exit(3);
        m.reset_after_fork();
        if (!m.try_lock()) _exit(4);
        m.unlock();
        m.lock();
        m.unlock();
        _exit(0);
    }
    ASSERT_GT(pid, 0) << strerror(errno);
    done.count_down();
    holder.join();
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_FALSE(m.is_locked());
}

// ---------------------------------------------------------------------------------------------
// Thread-exit hooks
// ---------------------------------------------------------------------------------------------

// The hook table is process-global and the slot registry also arms threads, so the hook only
// records threads that marked themselves with a probe id.
constexpr int kProbes = 8;
thread_local int tl_probe = -1;
std::atomic<int> g_hook_runs[kProbes];
std::atomic<int> g_hook_saw_exiting[kProbes];

void probe_exit_hook() {
    int id = tl_probe;
    if (id < 0 || id >= kProbes) return;
    g_hook_runs[id].fetch_add(1);
    if (thread_exiting()) g_hook_saw_exiting[id].fetch_add(1);
}

void install_probe_exit_hook() {
    static const bool installed = add_thread_exit_hook(probe_exit_hook);
    ASSERT_TRUE(installed);
    for (int i = 0; i < kProbes; ++i) {
        g_hook_runs[i] = 0;
        g_hook_saw_exiting[i] = 0;
    }
}

TEST(ThreadExitHooks, RunForArmedThreadsOnly) {
    install_probe_exit_hook();
    bool exiting_before = true;
    std::thread armed([&] {
        tl_probe = 0;
        arm_thread_exit();
        exiting_before = thread_exiting();
    });
    armed.join();
    std::thread unarmed([] { tl_probe = 1; });
    unarmed.join();
    EXPECT_FALSE(exiting_before);
    EXPECT_EQ(g_hook_runs[0].load(), 1);
    EXPECT_EQ(g_hook_saw_exiting[0].load(), 1); // thread_exiting() was true inside the hook
    EXPECT_EQ(g_hook_runs[1].load(), 0);
    EXPECT_FALSE(thread_exiting()); // not on this (live) thread
}

TEST(ThreadExitHooks, ArmingTwiceRunsOnceAndEachThreadRunsItsOwn) {
    install_probe_exit_hook();
    std::vector<std::thread> threads;
    for (int i = 2; i < 6; ++i)
        threads.emplace_back([i] {
            tl_probe = i;
            arm_thread_exit();
            arm_thread_exit();
            arm_thread_exit();
        });
    for (std::thread &t : threads) t.join();
    for (int i = 2; i < 6; ++i) {
        EXPECT_EQ(g_hook_runs[i].load(), 1) << i;
        EXPECT_EQ(g_hook_saw_exiting[i].load(), 1) << i;
    }
    EXPECT_EQ(g_hook_runs[0].load(), 0);
}

TEST(ThreadExitHooks, PthreadExitAlsoRunsThem) {
    install_probe_exit_hook();
    pthread_t thread;
    auto body = [](void *) -> void * {
        tl_probe = 6;
        arm_thread_exit();
        pthread_exit(nullptr);
    };
    ASSERT_EQ(pthread_create(&thread, nullptr, body, nullptr), 0);
    ASSERT_EQ(pthread_join(thread, nullptr), 0);
    EXPECT_EQ(g_hook_runs[6].load(), 1);
}

// ---------------------------------------------------------------------------------------------
// Fork hooks
// ---------------------------------------------------------------------------------------------

// Hooks record events (kind * 100 + rank; kind 1 prepare, 2 parent, 3 child) while recording is
// on; they stay registered for the life of the process, so they must be harmless otherwise.
std::atomic<bool> g_fork_recording{false};
int g_fork_events[32];
std::atomic<int> g_fork_event_count{0};

void record_fork_event(int event) {
    if (!g_fork_recording.load()) return;
    int at = g_fork_event_count.fetch_add(1);
    if (at < 32) g_fork_events[at] = event;
}

template <int Rank>
void fork_prepare_hook() {
    record_fork_event(100 + Rank);
}
template <int Rank>
void fork_parent_hook() {
    record_fork_event(200 + Rank);
}
template <int Rank>
void fork_child_hook() {
    record_fork_event(300 + Rank);
}

void install_fork_hooks() {
    static const bool installed = [] {
        // Out of rank order on purpose; rank 5 has only a child hook.
        bool ok =
            add_fork_hooks({15, fork_prepare_hook<15>, fork_parent_hook<15>, fork_child_hook<15>});
        ok &= add_fork_hooks({3, fork_prepare_hook<3>, fork_parent_hook<3>, fork_child_hook<3>});
        ok &= add_fork_hooks({7, fork_prepare_hook<7>, fork_parent_hook<7>, fork_child_hook<7>});
        ok &= add_fork_hooks({5, nullptr, nullptr, fork_child_hook<5>});
        return ok;
    }();
    ASSERT_TRUE(installed);
}

std::vector<int> recorded_fork_events() {
    int n = std::min(g_fork_event_count.load(), 32);
    return std::vector<int>(g_fork_events, g_fork_events + n);
}

TEST(ForkHooks, RunInRankOrderInParentAndChild) {
    install_fork_hooks();
    g_fork_event_count = 0;
    g_fork_recording = true;
    pid_t pid = fork();
    if (pid == 0) {
        const int expected[] = {103, 107, 115, 315, 307, 305, 303};
        constexpr int n = sizeof expected / sizeof expected[0];
        if (g_fork_event_count.load() != n) _exit(100 + g_fork_event_count.load());
        for (int i = 0; i < n; ++i)
            if (g_fork_events[i] != expected[i]) _exit(10 + i);
        _exit(0);
    }
    g_fork_recording = false;
    ASSERT_GT(pid, 0) << strerror(errno);
    EXPECT_EQ(recorded_fork_events(), (std::vector<int>{103, 107, 115, 215, 207, 203}));
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "10+i: child event i out of order; 100+n: the child saw n events";
}

TEST(ForkHooks, RunOnEveryForkAndNotOtherwise) {
    install_fork_hooks();
    g_fork_event_count = 0;
    g_fork_recording = true;
    for (int round = 0; round < 2; ++round) {
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        ASSERT_GT(pid, 0);
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
    }
    g_fork_recording = false;
    EXPECT_EQ(recorded_fork_events(),
              (std::vector<int>{103, 107, 115, 215, 207, 203, 103, 107, 115, 215, 207, 203}));
    // Thread creation does not run them.
    g_fork_event_count = 0;
    g_fork_recording = true;
    std::thread([] {}).join();
    g_fork_recording = false;
    EXPECT_EQ(g_fork_event_count.load(), 0);
}

} // namespace
} // namespace slabkit::platform
