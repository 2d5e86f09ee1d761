// segment_test.cpp - reading live segments that the tests lay out themselves (fake_segment.hpp):
// the checks of the header and of the process, the sequence-locked read, the requests.
#include "fake_segment.hpp"
#include "sample_snapshot.hpp"
#include "slabinfo/segment.hpp"

#include <atomic>
#include <chrono>
#include <climits>
#include <functional>
#include <thread>

#include <linux/futex.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace {

using namespace slabinfo_test;
using slabinfo::live_segment;
using slabinfo::segment_options;
using slabinfo::slabinfo_error;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

template <class F>
std::string error_of(F &&f) {
    try {
        f();
    } catch (const slabinfo_error &e) {
        return e.what();
    }
    return "";
}

std::string open_error(pid_t pid, const segment_options &o = {}) {
    return error_of([&] { live_segment::open(pid, o); });
}

segment_options quick() {
    segment_options o;
    o.start_timeout = slabinfo::seconds(0.2);
    o.read_timeout = slabinfo::seconds(0.2);
    o.request_timeout = slabinfo::seconds(0.2);
    return o;
}

double seconds_since(steady::time_point t) {
    return std::chrono::duration<double>(steady::now() - t).count();
}

// A child process that runs `body` (by default: waits) until it is killed, at the latest when
// the test ends or the test process dies.
struct child_process {
    pid_t pid = -1;
    explicit child_process(const std::function<void()> &body = [] {
        for (;;) ::pause();
    }) {
        pid = ::fork();
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            body();
            ::_exit(0);
        }
    }
    void kill_and_reap() {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pid = -1;
    }
    ~child_process() {
        if (pid > 0) kill_and_reap();
    }
};

// ---- /proc/<pid>/stat ---------------------------------------------------------------------------

TEST(ProcessStat, StartTicksOfThisProcess) {
    const auto st = slabinfo::read_process_stat(::getpid());
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->state, 'R'); // reading its own stat
    EXPECT_EQ(st->start_ticks, start_ticks_of(::getpid()));
    // Started after boot and before now.
    double uptime = 0;
    FILE *f = std::fopen("/proc/uptime", "r");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fscanf(f, "%lf", &uptime), 1);
    std::fclose(f);
    EXPECT_LE(static_cast<double>(st->start_ticks),
              (uptime + 1) * static_cast<double>(::sysconf(_SC_CLK_TCK)));
    EXPECT_TRUE(slabinfo::process_runs(::getpid(), st->start_ticks));
    EXPECT_FALSE(slabinfo::process_runs(::getpid(), st->start_ticks + 1));
}

TEST(ProcessStat, NameWithSpacesAndParentheses) {
    char old_name[17] = {};
    ASSERT_EQ(::prctl(PR_GET_NAME, old_name), 0);
    const uint64_t before = start_ticks_of(::getpid());
    ASSERT_EQ(::prctl(PR_SET_NAME, "x) (y 1 2) S 3"), 0);
    const auto st = slabinfo::read_process_stat(::getpid());
    ::prctl(PR_SET_NAME, old_name);
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->state, 'R');
    EXPECT_EQ(st->start_ticks, before);
}

TEST(ProcessStat, NoSuchProcessAndZombies) {
    EXPECT_FALSE(slabinfo::read_process_stat(unused_pid()).has_value());
    EXPECT_FALSE(slabinfo::process_runs(unused_pid()));
    EXPECT_FALSE(slabinfo::process_runs(0));
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    // Not reaped yet: a zombie, which runs no more.
    const auto deadline = steady::now() + 20s;
    while (steady::now() < deadline) {
        auto st = slabinfo::read_process_stat(child);
        if (st && st->state == 'Z') break;
        std::this_thread::sleep_for(1ms);
    }
    EXPECT_EQ(slabinfo::read_process_stat(child)->state, 'Z');
    EXPECT_FALSE(slabinfo::process_runs(child));
    ::waitpid(child, nullptr, 0);
}

// ---- opening and checking -----------------------------------------------------------------------

TEST(Segment, ReadsAGoodSegment) {
    fake_segment seg(::getpid());
    seg.lay_out(std::nullopt, 250);
    const std::string text = sample_with_pid(::getpid());
    seg.publish(text);
    const auto reader = live_segment::open(::getpid());
    EXPECT_EQ(reader.path(), "/dev/shm/slabkit." + std::to_string(::getpid()));
    const auto h = reader.header();
    EXPECT_EQ(h.pid, ::getpid());
    EXPECT_EQ(h.period_ms, 250u);
    EXPECT_EQ(h.state, live::state::live);
    EXPECT_EQ(h.generation, 2u);
    EXPECT_EQ(h.payload_bytes, text.size());
    EXPECT_EQ(h.publish_count, 1u);
    EXPECT_EQ(h.published_ns, 1764800000000000000u);
    EXPECT_EQ(reader.read_payload(), text);
    EXPECT_EQ(reader.read_snapshot(), slabinfo::parse_snapshot(text, "text"));
    EXPECT_EQ(reader.read_snapshot().pid, static_cast<uint64_t>(::getpid()));
    // A newer publication is what the next read sees.
    const std::string other = sample_with_pid(::getpid()) + "  ";
    seg.publish(other);
    EXPECT_EQ(reader.read_payload(), other);
    EXPECT_NO_THROW(reader.check_publishing());
}

TEST(Segment, NoFile) {
    const pid_t nobody = unused_pid();
    EXPECT_EQ(open_error(nobody), "no process " + std::to_string(nobody));
    const std::string me = std::to_string(::getpid());
    EXPECT_EQ(open_error(::getpid()), "process " + me +
                                          " does not publish statistics (no "
                                          "/dev/shm/slabkit." +
                                          me + "; run it with SLABKIT_STATS=live)");
    EXPECT_EQ(open_error(-5), "no process -5");
}

TEST(Segment, StaleWhenTheProcessIsGone) {
    fake_segment seg = fake_segment::at_unused_pid();
    seg.lay_out(12345);
    seg.publish(sample_with_pid(seg.pid()));
    const std::string pid = std::to_string(seg.pid());
    EXPECT_EQ(open_error(seg.pid()), "stale segment " + seg.path() + ": process " + pid +
                                         " no longer runs; remove the file");
}

TEST(Segment, StaleWhenThePidIsReused) {
    fake_segment seg(::getpid());
    seg.lay_out(start_ticks_of(::getpid()) - 1); // made by an earlier process of this pid
    seg.publish(sample_with_pid(::getpid()));
    EXPECT_EQ(open_error(::getpid()), "stale segment " + seg.path() + ": pid " +
                                          std::to_string(::getpid()) +
                                          " now belongs to a later process; remove the file");
}

TEST(Segment, Truncated) {
    {
        fake_segment seg(::getpid(), 100);
        EXPECT_EQ(open_error(::getpid()), "truncated segment " + seg.path() +
                                              ": 100 bytes, less than its 4096-byte header");
    }
    {
        fake_segment seg(::getpid(), live::kHeaderBytes);
        seg.lay_out();
        EXPECT_EQ(open_error(::getpid()),
                  "truncated segment " + seg.path() + ": 4096 bytes of its 33554432");
    }
}

TEST(Segment, WrongMagicVersionOrSizes) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    auto &h = seg.header();
    h.magic[7] = 'X';
    EXPECT_EQ(open_error(::getpid()),
              seg.path() + " is not a slabkit statistics segment (bad magic)");
    h.magic[7] = 'L';
    h.version = 2;
    EXPECT_EQ(open_error(::getpid()),
              seg.path() + " is a version 2 segment; this slabinfo reads version 1");
    h.version = 1;
    h.header_bytes = 17;
    EXPECT_EQ(open_error(::getpid()), seg.path() + " is corrupt: header_bytes 17, not " +
                                          std::to_string(sizeof(live::live_header)));
    h.header_bytes = sizeof(live::live_header);
    h.segment_bytes = live::kPayloadOffset;
    EXPECT_EQ(open_error(::getpid()),
              seg.path() + " is corrupt: segment_bytes " + std::to_string(live::kPayloadOffset));
    h.segment_bytes = live::kSegmentBytes;
    h.pid = ::getppid();
    EXPECT_EQ(open_error(::getpid()),
              seg.path() + " is corrupt: it names pid " + std::to_string(::getppid()));
    h.pid = ::getpid();
    h.state.store(7);
    EXPECT_EQ(open_error(::getpid()), seg.path() + " is corrupt: state 7");
    h.state.store(static_cast<uint32_t>(live::state::live));
    EXPECT_EQ(open_error(::getpid()), "");
}

TEST(Segment, StoppedPublishing) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    const auto reader = live_segment::open(::getpid());
    seg.header().state.store(static_cast<uint32_t>(live::state::stopped));
    const std::string pid = std::to_string(::getpid());
    EXPECT_EQ(open_error(::getpid()), "process " + pid + " stopped publishing");
    EXPECT_EQ(error_of([&] { reader.check_publishing(); }),
              "process " + pid + " stopped publishing");
    // Its last snapshot is still whole.
    EXPECT_EQ(reader.read_snapshot().program, "sample-prog");
}

TEST(Segment, StartingThatNeverEnds) {
    const std::string pid = std::to_string(::getpid());
    {
        fake_segment seg(::getpid());
        seg.lay_out();
        seg.header().state.store(static_cast<uint32_t>(live::state::starting));
        const auto t0 = steady::now();
        EXPECT_EQ(open_error(::getpid(), quick()), "process " + pid +
                                                       " did not finish laying out its segment " +
                                                       seg.path() + " within 0.2 s");
        EXPECT_GE(seconds_since(t0), 0.2);
        EXPECT_LT(seconds_since(t0), 30.0);
    }
    {
        fake_segment seg(::getpid()); // not laid out at all: zeros
        EXPECT_EQ(open_error(::getpid(), quick()), "process " + pid +
                                                       " did not finish laying out its segment " +
                                                       seg.path() + " within 0.2 s");
    }
    {
        fake_segment seg(::getpid(), 0); // as shm_open leaves it
        EXPECT_EQ(open_error(::getpid(), quick()), "process " + pid +
                                                       " did not finish laying out its segment " +
                                                       seg.path() + " within 0.2 s");
    }
    {
        fake_segment seg = fake_segment::at_unused_pid(); // starting, and its process is gone
        EXPECT_EQ(open_error(seg.pid(), quick()), "stale segment " + seg.path() + ": process " +
                                                      std::to_string(seg.pid()) +
                                                      " no longer runs; remove the file");
    }
}

TEST(Segment, StartingThenLive) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    seg.header().state.store(static_cast<uint32_t>(live::state::starting));
    std::thread publisher([&] {
        std::this_thread::sleep_for(50ms);
        seg.header().state.store(static_cast<uint32_t>(live::state::live),
                                 std::memory_order_release);
    });
    segment_options o;
    o.start_timeout = slabinfo::seconds(20);
    std::string error = "not opened";
    try {
        const auto reader = live_segment::open(::getpid(), o);
        error = reader.read_snapshot().program;
    } catch (const slabinfo_error &e) {
        error = e.what();
    }
    publisher.join();
    EXPECT_EQ(error, "sample-prog");
}

// ---- the sequence-locked read -------------------------------------------------------------------

TEST(Seqlock, OddGenerationForeverTimesOut) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(::getpid()));
    seg.header().generation.store(3); // a write that never ends
    const auto reader = live_segment::open(::getpid(), quick());
    const auto t0 = steady::now();
    EXPECT_EQ(error_of([&] { reader.read_payload(); }),
              "process " + std::to_string(::getpid()) +
                  "'s snapshot stayed mid-write for 0.2 s (generation odd)");
    EXPECT_GE(seconds_since(t0), 0.2);
    EXPECT_LT(seconds_since(t0), 30.0);
}

TEST(Seqlock, NothingPublishedYet) {
    fake_segment seg(::getpid());
    seg.lay_out();
    const auto reader = live_segment::open(::getpid(), quick());
    EXPECT_EQ(error_of([&] { reader.read_payload(); }),
              "process " + std::to_string(::getpid()) + " published no snapshot within 0.2 s");
}

TEST(Seqlock, PayloadLargerThanItsRegionIsCorrupt) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish("{}");
    seg.header().payload_bytes.store(live::kPayloadBytes + 1);
    const auto reader = live_segment::open(::getpid(), quick());
    EXPECT_EQ(error_of([&] { reader.read_payload(); }),
              seg.path() + " is corrupt: payload_bytes " + std::to_string(live::kPayloadBytes + 1) +
                  ", more than its " + std::to_string(live::kPayloadBytes) +
                  "-byte payload region");
}

TEST(Seqlock, SnapshotMustBeTheProcesssOwn) {
    fake_segment seg(::getpid());
    seg.lay_out();
    seg.publish(sample_with_pid(1));
    const auto reader = live_segment::open(::getpid(), quick());
    const std::string pid = std::to_string(::getpid());
    EXPECT_EQ(error_of([&] { reader.read_snapshot(); }),
              "process " + pid + "'s snapshot names pid 1");
    seg.publish("garbage");
    EXPECT_EQ(error_of([&] {
                  reader.read_snapshot();
              }).rfind("process " + pid + "'s snapshot: not JSON (", 0),
              0u);
    seg.publish(R"({"format":"slabkit-stats","version":1})");
    EXPECT_EQ(error_of([&] { reader.read_snapshot(); }),
              "process " + pid + "'s snapshot: field pid is missing");
}

TEST(Seqlock, ProcessExitsWhileBeingRead) {
    child_process child;
    ASSERT_GT(child.pid, 0);
    fake_segment seg(child.pid);
    seg.lay_out(start_ticks_of(child.pid));
    seg.publish(sample_with_pid(child.pid));
    segment_options o;
    o.read_timeout = slabinfo::seconds(30);
    const auto reader = live_segment::open(child.pid, o);
    seg.header().generation.store(5); // it dies in the middle of a publication
    child.kill_and_reap();
    const pid_t gone = seg.pid();
    const auto t0 = steady::now();
    EXPECT_EQ(error_of([&] { reader.read_payload(); }),
              "process " + std::to_string(gone) + " exited while being read");
    EXPECT_LT(seconds_since(t0), 20.0); // noticed, not timed out
    EXPECT_EQ(error_of([&] { reader.check_publishing(); }),
              "process " + std::to_string(gone) + " exited");
}

// Another process publishes two texts in turn as fast as it can; every read is one of them whole.
TEST(Seqlock, NeverTorn) {
    fake_segment seg(::getpid());
    seg.lay_out();
    const std::string a = sample_with_pid(::getpid());
    std::string b = a.substr(0, a.size() / 3);
    std::fill(b.begin(), b.end(), 'b');
    seg.publish(a);
    child_process writer([&] {
        for (unsigned i = 0;; i++) {
            seg.publish(i % 2 ? a : b);
            ::usleep(20);
        }
    });
    ASSERT_GT(writer.pid, 0);
    const auto reader = live_segment::open(::getpid());
    unsigned saw_a = 0, saw_b = 0, torn = 0;
    const auto deadline = steady::now() + 20s;
    for (unsigned i = 0; (i < 300 || !saw_a || !saw_b) && steady::now() < deadline; i++) {
        const std::string text = reader.read_payload();
        if (text == a) {
            saw_a++;
        } else if (text == b) {
            saw_b++;
        } else {
            torn++;
        }
        ::usleep(50);
    }
    writer.kill_and_reap();
    EXPECT_EQ(torn, 0u);
    EXPECT_GT(saw_a, 0u);
    EXPECT_GT(saw_b, 0u);
}

// ---- requests -----------------------------------------------------------------------------------

struct request_fixture : ::testing::Test {
    fake_segment seg{::getpid()};
    void SetUp() override {
        seg.lay_out();
        seg.publish(sample_with_pid(::getpid()));
    }
    live_segment writer(double timeout_s) {
        segment_options o;
        o.writable = true;
        o.request_timeout = slabinfo::seconds(timeout_s);
        return live_segment::open(::getpid(), o);
    }
    // Runs f while a helper thread serves one request with `reply`.
    template <class F>
    std::optional<served_request> served_while(reply_text reply, F &&f) {
        std::optional<served_request> served;
        const uint32_t seen = seg.header().request_seq.load();
        std::thread helper([&] {
            served = serve_one(
                seg, seen, [&](const served_request &) { return reply; }, 20s);
        });
        try {
            f();
        } catch (...) {
            helper.join();
            throw;
        }
        helper.join();
        return served;
    }
};

using Request = request_fixture;

TEST_F(Request, ValidateServed) {
    const auto reader = writer(20);
    slabinfo::validate_result result;
    auto served = served_while(
        {0,
         R"({"request":"validate","caches_checked":1,"problems":2,"report":"bad\nworse","copies":2,"first_copy_problems":3})"},
        [&] { result = slabinfo::request_validate(reader, "kmalloc-64"); });
    ASSERT_TRUE(served.has_value());
    EXPECT_EQ(served->kind, static_cast<uint32_t>(live::request::validate));
    EXPECT_EQ(served->arg, "kmalloc-64");
    EXPECT_EQ(served->owner, ::getpid());
    EXPECT_EQ(served->seq, 1u);
    EXPECT_EQ(result, (slabinfo::validate_result{1, 2, "bad\nworse", 2, 3}));
    // The slot is given back.
    EXPECT_EQ(seg.header().request_owner.load(), 0);
    EXPECT_EQ(seg.header().reply_seq.load(), 1u);
}

TEST_F(Request, ShrinkAndReportServed) {
    const auto reader = writer(20);
    slabinfo::shrink_result shrunk;
    auto served = served_while(
        {0,
         R"({"request":"shrink","caches":[{"name":"kmalloc-64","pages_before":12,"pages_after":3},{"name":"dentry","pages_before":10,"pages_after":9}]})"},
        [&] { shrunk = slabinfo::request_shrink(reader, ""); });
    ASSERT_TRUE(served.has_value());
    EXPECT_EQ(served->kind, static_cast<uint32_t>(live::request::shrink));
    EXPECT_EQ(served->arg, "");
    EXPECT_EQ(shrunk, (slabinfo::shrink_result{{{"kmalloc-64", 12, 3}, {"dentry", 10, 9}}}));

    std::string text;
    served = served_while({0, R"({"request":"report","text":"slabinfo - version: 2.1\nline 2\n"})"},
                          [&] { text = slabinfo::request_report(reader); });
    ASSERT_TRUE(served.has_value());
    EXPECT_EQ(served->kind, static_cast<uint32_t>(live::request::report));
    EXPECT_EQ(served->seq, 2u);
    EXPECT_EQ(text, "slabinfo - version: 2.1\nline 2\n");
}

TEST_F(Request, RefusedAndBadReplies) {
    const auto reader = writer(20);
    const std::string pid = std::to_string(::getpid());
    std::string error;
    served_while({1, R"({"request":"shrink","error":"no cache named 'x'"})"},
                 [&] { error = error_of([&] { slabinfo::request_shrink(reader, "x"); }); });
    EXPECT_EQ(error, "process " + pid + " refused the shrink request: no cache named 'x'");
    served_while({3, R"({"request":"shrink"})"},
                 [&] { error = error_of([&] { slabinfo::request_shrink(reader, "x"); }); });
    EXPECT_EQ(error, "process " + pid + " refused the shrink request: status 3");
    // What the publisher answers when its reply would not fit.
    served_while({1, R"({"request":"unknown","error":"the reply was too long"})"},
                 [&] { error = error_of([&] { slabinfo::request_validate(reader, ""); }); });
    EXPECT_EQ(error, "process " + pid + " refused the validate request: the reply was too long");
    served_while({0, R"({"request":"report","text":"x"})"},
                 [&] { error = error_of([&] { slabinfo::request_validate(reader, ""); }); });
    EXPECT_EQ(error,
              "process " + pid + " answered the validate request with a reply to another request");
    served_while({0, "not json"},
                 [&] { error = error_of([&] { slabinfo::request_validate(reader, ""); }); });
    EXPECT_EQ(error, "process " + pid + "'s reply to the validate request is not JSON");
    served_while({0, R"({"request":"validate","caches_checked":1,"problems":0,"report":""})"},
                 [&] { error = error_of([&] { slabinfo::request_validate(reader, ""); }); });
    EXPECT_EQ(error, "process " + pid +
                         "'s reply to the validate request: field copies is missing or not an "
                         "unsigned integer");
    served_while({0, R"({"request":"shrink","caches":[{"name":"a","pages_before":1}]})"},
                 [&] { error = error_of([&] { slabinfo::request_shrink(reader, ""); }); });
    EXPECT_EQ(error, "process " + pid +
                         "'s reply to the shrink request: field caches[0].pages_after is missing "
                         "or not an unsigned integer");
    EXPECT_EQ(seg.header().request_owner.load(), 0);
}

TEST_F(Request, NobodyAnswers) {
    const auto reader = writer(0.2);
    const auto t0 = steady::now();
    EXPECT_EQ(error_of([&] { slabinfo::request_validate(reader, "dentry"); }),
              "process " + std::to_string(::getpid()) +
                  " did not answer the validate request within 0.2 s");
    EXPECT_GE(seconds_since(t0), 0.2);
    EXPECT_LT(seconds_since(t0), 30.0);
    auto &h = seg.header();
    EXPECT_EQ(h.request_seq.load(), 1u); // it was sent
    EXPECT_EQ(h.request_kind.load(), static_cast<uint32_t>(live::request::validate));
    EXPECT_STREQ(h.request_arg, "dentry");
    EXPECT_EQ(h.request_owner.load(), 0); // and the slot given back
}

TEST_F(Request, SlotHeldByALiveReader) {
    child_process other;
    seg.header().request_owner.store(other.pid);
    const auto reader = writer(0.2);
    EXPECT_EQ(error_of([&] { slabinfo::request_validate(reader, ""); }),
              "process " + std::to_string(::getpid()) +
                  " did not answer the validate request within 0.2 s (its request slot stayed "
                  "held by pid " +
                  std::to_string(other.pid) + ")");
    EXPECT_EQ(seg.header().request_seq.load(), 0u); // nothing sent
    EXPECT_EQ(seg.header().request_owner.load(), other.pid);
}

TEST_F(Request, SlotHeldByADeadReaderIsTakenOver) {
    seg.header().request_owner.store(unused_pid());
    const auto reader = writer(20);
    std::string text;
    auto served = served_while({0, R"({"request":"report","text":"ok"})"},
                               [&] { text = slabinfo::request_report(reader); });
    ASSERT_TRUE(served.has_value());
    EXPECT_EQ(served->owner, ::getpid());
    EXPECT_EQ(text, "ok");
    EXPECT_EQ(seg.header().request_owner.load(), 0);
}

// The publisher sleeps on request_seq (FUTEX_WAIT, shared) until a request wakes it.
TEST_F(Request, WakesTheSleepingHelper) {
    const auto reader = writer(20);
    std::atomic<pid_t> helper_tid{0};
    std::optional<served_request> served;
    std::thread helper([&] {
        helper_tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
        served = serve_one(
            seg, 0,
            [](const served_request &) {
                return reply_text{0, R"({"request":"report","text":"woken"})"};
            },
            60s, 60s);
    });
    while (helper_tid.load() == 0) std::this_thread::yield();
    wait_until_sleeping(helper_tid.load(), 5000ms); // in FUTEX_WAIT, most likely
    std::string text;
    try {
        text = slabinfo::request_report(reader);
    } catch (const slabinfo_error &e) {
        ADD_FAILURE() << e.what();
        ::syscall(SYS_futex, static_cast<void *>(&seg.header().request_seq), FUTEX_WAKE, INT_MAX,
                  nullptr, nullptr, 0);
    }
    helper.join();
    EXPECT_EQ(text, "woken");
}

TEST_F(Request, TargetExitsOrStopsBeforeAnswering) {
    {
        child_process child;
        fake_segment other(child.pid);
        other.lay_out(start_ticks_of(child.pid));
        segment_options o;
        o.writable = true;
        o.request_timeout = slabinfo::seconds(30);
        const auto reader = live_segment::open(child.pid, o);
        const pid_t pid = child.pid;
        child.kill_and_reap();
        const auto t0 = steady::now();
        EXPECT_EQ(error_of([&] { slabinfo::request_shrink(reader, ""); }),
                  "process " + std::to_string(pid) + " exited before answering the shrink request");
        EXPECT_LT(seconds_since(t0), 20.0);
    }
    const auto reader = writer(30);
    seg.header().state.store(static_cast<uint32_t>(live::state::stopped));
    EXPECT_EQ(error_of([&] { slabinfo::request_shrink(reader, ""); }),
              "process " + std::to_string(::getpid()) +
                  " stopped publishing before answering the shrink request");
}

TEST_F(Request, NeedsAWritableSegmentAndAShortName) {
    const auto read_only = live_segment::open(::getpid());
    EXPECT_EQ(error_of([&] { slabinfo::request_report(read_only); }),
              seg.path() + " is not open for a request");
    const auto reader = writer(0.2);
    EXPECT_EQ(error_of([&] { slabinfo::request_shrink(reader, std::string(64, 'n')); }),
              "cache name '" + std::string(64, 'n') +
                  "' does not fit a request (63 bytes at most)");
    EXPECT_EQ(seg.header().request_seq.load(), 0u);
    EXPECT_EQ(seg.header().request_owner.load(), 0);
}

// ---- --list -------------------------------------------------------------------------------------

TEST(List, LiveAndStaleSegments) {
    fake_segment mine(::getpid());
    mine.lay_out(std::nullopt, 500);
    mine.publish(sample_with_pid(::getpid()));
    fake_segment stale = fake_segment::at_unused_pid();
    stale.lay_out(1);
    stale.publish(sample_with_pid(stale.pid()));
    const auto entries = slabinfo::list_segments();
    const slabinfo::segment_entry *a = nullptr, *b = nullptr;
    for (const auto &e : entries) {
        if (e.pid == ::getpid()) a = &e;
        if (e.pid == stale.pid()) b = &e;
    }
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->status, "live");
    EXPECT_FALSE(a->stale);
    EXPECT_EQ(a->program, "sample-prog");
    EXPECT_EQ(a->path, mine.path());
    ASSERT_TRUE(a->header.has_value());
    EXPECT_EQ(a->header->period_ms, 500u);
    EXPECT_EQ(b->status, "stale: process gone");
    EXPECT_TRUE(b->stale);
    EXPECT_EQ(b->program, "sample-prog"); // from what it left
    EXPECT_TRUE(std::is_sorted(entries.begin(), entries.end(),
                               [](const auto &x, const auto &y) { return x.pid < y.pid; }));
}

} // namespace
