// cli_test.cpp - the slabinfo binary itself: its views of a saved snapshot and of a live segment
// (laid out by the test, whose own pid it names), its requests (served by a thread of the test)
// and its error paths: one line on stderr, status 1 (2 for bad options).
#include "fake_segment.hpp"
#include "sample_snapshot.hpp"
#include "slabinfo/snapshot.hpp"
#include "tool_runner.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace {

using namespace slabinfo_test;
using namespace std::chrono_literals;
using json = nlohmann::ordered_json;

std::string pid_text() {
    return std::to_string(::getpid());
}

size_t count_of(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
    return n;
}

struct Cli : ::testing::Test {
    std::string dir;
    void SetUp() override {
        const char *tmp = std::getenv("TMPDIR");
        std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/slabinfo-test.XXXXXX";
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        dir = pattern;
    }
    void TearDown() override {
        for (const char *name : {"snap.json", "bad.json", "v2.json", "other.json", "saved.json",
                                 "again.json", "nofield.json"})
            ::unlink((dir + "/" + name).c_str());
        ::rmdir(dir.c_str());
    }
    std::string file(const char *name, const std::string &text) {
        const std::string path = dir + "/" + name;
        std::ofstream(path) << text;
        return path;
    }
    static std::string slurp(const std::string &path) {
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    // Expects status and one line on stderr that starts with "slabinfo: " and holds `what`.
    static void expect_error(const tool_result &r, int status, const std::string &what) {
        EXPECT_EQ(r.status, status) << r.err;
        EXPECT_TRUE(is_one_line(r.err)) << r.err;
        EXPECT_EQ(r.err.rfind("slabinfo: ", 0), 0u) << r.err;
        EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
    }
};

// ---- a saved snapshot ---------------------------------------------------------------------------

TEST_F(Cli, ListsTheCachesOfAFile) {
    const auto snap = file("snap.json", std::string(kSampleJson));
    const auto r = run_tool({snap});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(r.out.rfind("Name ", 0), 0u);
    EXPECT_EQ(count_of(r.out, "\n"), 5u); // header and the four caches that are not empty
    EXPECT_NE(r.out.find("kmalloc-4096"), std::string::npos);
    EXPECT_EQ(r.out.find("empty-cache"), std::string::npos);
    EXPECT_EQ(run_tool({snap, "-l"}).out, r.out);
    EXPECT_EQ(count_of(run_tool({snap, "-e"}).out, "\n"), 6u);
    const auto one = run_tool({snap, "-DA", "DENTRY"});
    EXPECT_EQ(one.status, 0) << one.err;
    EXPECT_EQ(count_of(one.out, "\n"), 2u);
    EXPECT_NE(one.out.find("95/97"), std::string::npos);
    EXPECT_NE(run_tool({snap, "-r", "dentry"}).out.find("Slabcache: dentry  Design: slab"),
              std::string::npos);
    EXPECT_NE(run_tool({snap, "-T"}).out.find("Caches     :        5"), std::string::npos);
    EXPECT_NE(run_tool({snap, "--buddy"}).out.find("Node 1, slabkit "), std::string::npos);
}

TEST_F(Cli, JsonOfTheSelectedCaches) {
    const auto snap = file("snap.json", std::string(kSampleJson));
    const auto r = run_tool({snap, "--json", "kmalloc-64$"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto s = slabinfo::parse_snapshot(r.out, "output");
    ASSERT_EQ(s.caches.size(), 1u);
    EXPECT_EQ(s.caches[0].name, "kmalloc-64");
    EXPECT_EQ(s.heap.slab_pages, 392u);
}

TEST_F(Cli, JsonKeepsTheSnapshotsOrder) {
    const auto snap = file("snap.json", std::string(kSampleJson));
    const auto r = run_tool({snap, "--json", "-e", "-S"}); // -S sorts the tables only
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(r.out), json::parse(kSampleJson));
}

TEST_F(Cli, SavesAndReadsBack) {
    const auto snap = file("snap.json", std::string(kSampleJson));
    const std::string saved = dir + "/saved.json";
    const auto r = run_tool({snap, "-o", saved});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, ""); // only -o: quiet
    json j = json::parse(slurp(saved));
    EXPECT_EQ(j.at("saved_from"), snap);
    j.erase("saved_from");
    EXPECT_EQ(j, json::parse(kSampleJson)); // the whole snapshot, -e or not
    // Read back, with a view.
    const std::string again = dir + "/again.json";
    const auto r2 = run_tool({saved, "-o", again, "-T"});
    EXPECT_EQ(r2.status, 0) << r2.err;
    EXPECT_NE(r2.out.find("Slabcache totals"), std::string::npos);
    EXPECT_EQ(json::parse(slurp(again)).at("saved_from"), saved);
    // A regex asks for the list.
    EXPECT_EQ(count_of(run_tool({snap, "-o", again, "kmalloc"}).out, "\n"), 3u);
    expect_error(run_tool({snap, "-o", dir + "/no/such/dir/x.json"}), 1,
                 "cannot write " + dir + "/no/such/dir/x.json: No such file or directory");
}

// ---- a live process (the test's own pid, its segment laid out by the test) ------------------

TEST_F(Cli, ReadsALiveSegment) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    const auto r = run_tool({"-p", pid_text()});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(count_of(r.out, "\n"), 5u);
    EXPECT_NE(r.out.find("kmalloc-64   slqb        120"), std::string::npos) << r.out;
    // -o from a live process.
    const std::string saved = dir + "/saved.json";
    EXPECT_EQ(run_tool({"-p", pid_text(), "-o", saved}).status, 0);
    EXPECT_EQ(json::parse(slurp(saved)).at("saved_from"), "pid " + pid_text());
    EXPECT_EQ(json::parse(slurp(saved)).at("live").at("publish_count"), 12);
}

TEST_F(Cli, Watch) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    const auto r = run_tool({"-p", pid_text(), "--watch", "0.05", "--count", "3", "-T"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(count_of(r.out, "\033[H\033[2J"), 3u);
    EXPECT_EQ(count_of(r.out, "slabinfo: process " + pid_text() + " (sample-prog)"), 3u);
    EXPECT_EQ(count_of(r.out, "Slabcache totals"), 3u);
}

TEST_F(Cli, RequestsServedByTheTest) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    // -v with a regex naming two of the caches: one request each.
    std::vector<served_request> served;
    std::thread helper([&] {
        uint32_t seen = 0;
        for (int i = 0; i < 2; i++) {
            auto req = serve_one(
                seg, seen,
                [](const served_request &q) {
                    return reply_text{0, json{{"request", "validate"},
                                              {"caches_checked", 1},
                                              {"problems", q.arg == "kmalloc-64" ? 1 : 0},
                                              {"report", q.arg == "kmalloc-64" ? "bad object" : ""},
                                              {"copies", q.arg == "kmalloc-64" ? 2 : 1}}
                                             .dump()};
                },
                30s);
            if (!req) break;
            seen = req->seq;
            served.push_back(*req);
        }
    });
    const auto r = run_tool({"-p", pid_text(), "-v", "kmalloc", "--timeout", "20"});
    helper.join();
    EXPECT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(served.size(), 2u);
    EXPECT_EQ(served[0].arg, "kmalloc-64"); // creation order
    EXPECT_EQ(served[1].arg, "kmalloc-4096");
    EXPECT_NE(served[0].owner, ::getpid()); // the tool's own pid
    EXPECT_EQ(r.out, "kmalloc-64: 1 cache checked, 1 problem (found again in a second copy of "
                     "the process)\n  bad object\n"
                     "kmalloc-4096: 1 cache checked, 0 problems\n");

    // -s of every cache: one request with "".
    std::optional<served_request> one;
    std::thread shrinker([&] {
        one = serve_one(
            seg, 2,
            [](const served_request &) {
                return reply_text{
                    0,
                    R"({"request":"shrink","caches":[{"name":"dentry","pages_before":20,"pages_after":4}]})"};
            },
            30s);
    });
    const auto s = run_tool({"-p", pid_text(), "-s", "--timeout", "20"});
    shrinker.join();
    EXPECT_EQ(s.status, 0) << s.err;
    ASSERT_TRUE(one.has_value());
    EXPECT_EQ(one->arg, "");
    EXPECT_NE(s.out.find("dentry"), std::string::npos);
    EXPECT_NE(s.out.find("16"), std::string::npos);

    // A refusal.
    std::thread refuser([&] {
        serve_one(
            seg, 3,
            [](const served_request &) {
                return reply_text{1, R"({"request":"report","error":"the helper is busy"})"};
            },
            30s);
    });
    const auto f = run_tool({"-p", pid_text(), "--report", "--timeout", "20"});
    refuser.join();
    expect_error(f, 1, "process " + pid_text() + " refused the report request: the helper is busy");
}

TEST_F(Cli, RequestNobodyAnswers) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    expect_error(run_tool({"-p", pid_text(), "-s", "--timeout", "0.2"}), 1,
                 "process " + pid_text() + " did not answer the shrink request within 0.2 s");
    EXPECT_EQ(seg.header().request_owner.load(), 0);
}

TEST_F(Cli, ListsThePublishingProcesses) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    fake_segment stale = fake_segment::at_unused_pid();
    stale.lay_out(1);
    const auto r = run_tool({"--list"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find(pid_text() + "  sample-prog      live"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::to_string(stale.pid()) + "  ?                stale: process gone"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("may be removed: rm"), std::string::npos);
    EXPECT_NE(r.out.find(stale.path()), std::string::npos);
}

// ---- errors -------------------------------------------------------------------------------------

TEST_F(Cli, NoSuchPid) {
    const pid_t nobody = unused_pid();
    expect_error(run_tool({"-p", std::to_string(nobody)}), 1,
                 "no process " + std::to_string(nobody));
}

TEST_F(Cli, PidThatDoesNotPublish) {
    expect_error(run_tool({"-p", pid_text()}), 1,
                 "process " + pid_text() + " does not publish statistics");
}

TEST_F(Cli, StaleSegment) {
    fake_segment seg = fake_segment::at_unused_pid();
    seg.lay_out(1);
    expect_error(run_tool({"-p", std::to_string(seg.pid())}), 1,
                 "stale segment " + seg.path() + ": process " + std::to_string(seg.pid()) +
                     " no longer runs; remove the file");
}

TEST_F(Cli, FileThatDoesNotExist) {
    expect_error(run_tool({dir + "/none.json"}), 1,
                 "cannot read " + dir + "/none.json: No such file or directory");
    expect_error(run_tool({dir}), 1, "cannot read " + dir + ": Is a directory");
}

TEST_F(Cli, FileNotJson) {
    const auto bad = file("bad.json", "slabinfo - version: 2.1\n");
    expect_error(run_tool({bad}), 1, bad + ": not JSON (parse error at line 1");
}

TEST_F(Cli, FileOfAnotherVersionOrFormat) {
    json j = json::parse(kSampleJson);
    j["version"] = 2;
    const auto v2 = file("v2.json", j.dump());
    expect_error(run_tool({v2}), 1, v2 + ": a version 2 snapshot; this slabinfo reads version 1");
    const auto other = file("other.json", R"({"format":"something-else"})");
    expect_error(run_tool({other}), 1, other + ": not a slabkit snapshot");
    j = json::parse(kSampleJson);
    j["caches"][1].erase("order");
    const auto nofield = file("nofield.json", j.dump());
    expect_error(run_tool({nofield}), 1, nofield + ": field caches[1].order is missing");
}

TEST_F(Cli, RegexNamingNoCache) {
    const auto snap = file("snap.json", std::string(kSampleJson));
    expect_error(run_tool({snap, "nosuchcache"}), 1, "no cache matches 'nosuchcache'");
    expect_error(run_tool({snap, "empty"}), 1, "'empty' names only empty caches");
    expect_error(run_tool({snap, "-r", "kmalloc"}), 1, "'kmalloc' names 2 caches");
    expect_error(run_tool({snap, "(unclosed"}), 1, "bad regex '(unclosed'");
}

TEST_F(Cli, BadOptions) {
    const auto snap = file("snap.json", std::string(kSampleJson));
    expect_error(run_tool({snap, "--frobnicate"}), 2, "--frobnicate");
    expect_error(run_tool({"-p", "abc"}), 2, "-p");
    expect_error(run_tool({"-p", "0"}), 2, "-p");
    expect_error(run_tool({}), 2, "give -p PID (a live process) or a snapshot FILE");
    expect_error(run_tool({snap, "-T", "-b"}), 2, "-T and -b cannot be combined");
    expect_error(run_tool({snap, "a", "b"}), 2, "too many arguments");
    expect_error(run_tool({"-p", "1", "a", "b"}), 2, "too many arguments: with -p, only a regex");
    expect_error(run_tool({snap, "-v"}), 2, "-v asks a live process: use -p PID");
    expect_error(run_tool({snap, "--watch", "1"}), 2, "--watch redraws a live process");
    expect_error(run_tool({"-p", "1", "--count", "2"}), 2, "--count");
    expect_error(run_tool({"--list", "-p", "1"}), 2, "--list takes no -p");
    expect_error(run_tool({"-p", "1", "--timeout", "-1"}), 2, "--timeout");
    expect_error(run_tool({snap, "--failslab", "50"}), 2, "--failslab asks a live process");
    expect_error(run_tool({snap, "--traces"}), 2, "--traces asks a live process");
    expect_error(run_tool({"-p", "1", "--failslab", "50", "kmalloc"}), 2,
                 "--failslab names its caches after a ';' in its settings: it takes no regex");
    expect_error(run_tool({"-p", "1", "--failslab", ""}), 2, "--failslab needs settings");
    expect_error(run_tool({"-p", "1", "--failslab", "50", "-T"}), 2, "cannot be combined");
    const auto help = run_tool({"--help"});
    EXPECT_EQ(help.status, 0);
    EXPECT_NE(help.out.find("slabinfo -p PID [options] [regex]"), std::string::npos);
}

} // namespace
