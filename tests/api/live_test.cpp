// Live statistics (slabkit_stats_live_start, SLABKIT_STATS=live): the segment a process
// publishes, read here as another process reads it (a mapping of its own of /dev/shm, the
// sequence lock, the request protocol of api/live_format.hpp), while threads allocate; at a
// quiescent point the published numbers are the process's own, exactly.
#include "api/api_support.hpp"
#include "api/live_format.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <linux/futex.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace slabkit::apitest {
namespace {

using json = nlohmann::ordered_json;

std::string segment_path(int pid) {
    return "/dev/shm/slabkit." + std::to_string(pid);
}

bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// A reader's view of a segment: its own mapping, as slabinfo has.
class reader {
  public:
    explicit reader(int pid) {
        int fd = open(segment_path(pid).c_str(), O_RDWR);
        if (fd < 0) return;
        base_ = mmap(nullptr, live::kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (base_ == MAP_FAILED) base_ = nullptr;
    }
    ~reader() {
        if (base_) munmap(base_, live::kSegmentBytes);
    }
    bool ok() const { return base_ != nullptr; }
    live::live_header *header() const { return static_cast<live::live_header *>(base_); }

    // A whole snapshot, by the sequence lock.
    json snapshot(unsigned *retries = nullptr) const {
        for (unsigned attempt = 0;; ++attempt) {
            const uint64_t g1 = header()->generation.load(std::memory_order_acquire);
            if (g1 & 1) {
                std::this_thread::yield();
                continue;
            }
            const uint64_t n = header()->payload_bytes.load(std::memory_order_relaxed);
            std::string text(static_cast<const char *>(base_) + live::kPayloadOffset,
                             n < live::kPayloadBytes ? n : 0);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (header()->generation.load(std::memory_order_relaxed) != g1) continue;
            if (retries) *retries = attempt;
            return json::parse(text);
        }
    }

    // One request, as slabinfo sends it; the reply's JSON and status.
    json request(live::request kind, const std::string &arg, int *status) const {
        live::live_header *h = header();
        int32_t none = 0;
        EXPECT_TRUE(h->request_owner.compare_exchange_strong(none, getpid()));
        h->request_kind.store(static_cast<uint32_t>(kind), std::memory_order_relaxed);
        memset(h->request_arg, 0, sizeof h->request_arg);
        memcpy(h->request_arg, arg.data(), std::min(arg.size(), sizeof h->request_arg - 1));
        const uint32_t seq = h->request_seq.fetch_add(1, std::memory_order_acq_rel) + 1;
        syscall(SYS_futex, &h->request_seq, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (h->reply_seq.load(std::memory_order_acquire) != seq) {
            if (std::chrono::steady_clock::now() > deadline) {
                ADD_FAILURE() << "no reply";
                return json();
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        *status = h->reply_status.load(std::memory_order_relaxed);
        std::string text(static_cast<const char *>(base_) + live::kReplyOffset,
                         h->reply_bytes.load(std::memory_order_relaxed));
        h->request_owner.store(0, std::memory_order_release);
        return json::parse(text);
    }

  private:
    void *base_ = nullptr;
};

// Publishing for the length of a test.
class Live : public ::testing::Test {
  protected:
    void SetUp() override {
        const char *why = nullptr;
        ASSERT_EQ(slabkit_stats_live_start(20, &why), 0) << why;
    }
    void TearDown() override { slabkit_stats_live_stop(); }
};

TEST_F(Live, SegmentHeaderNamesThisProcess) {
    reader r(getpid());
    ASSERT_TRUE(r.ok()) << segment_path(getpid());
    live::live_header *h = r.header();
    EXPECT_EQ(memcmp(h->magic, live::kMagic, sizeof h->magic), 0);
    EXPECT_EQ(h->version, live::kVersion);
    EXPECT_EQ(h->header_bytes, sizeof(live::live_header));
    EXPECT_EQ(h->segment_bytes, live::kSegmentBytes);
    EXPECT_EQ(h->pid, getpid());
    EXPECT_EQ(h->period_ms, 20u);
    EXPECT_GT(h->start_ticks, 0u);
    EXPECT_EQ(h->state.load(), static_cast<uint32_t>(live::state::live));
    const json j = r.snapshot();
    EXPECT_EQ(j.at("format"), "slabkit-stats");
    EXPECT_EQ(j.at("pid"), getpid());
    EXPECT_EQ(j.at("live").at("period_ms"), 20);
    // The helper publishes every period.
    const uint64_t first = h->publish_count.load();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (h->publish_count.load() < first + 3 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_GE(h->publish_count.load(), first + 3);
    // And a caller may publish at once.
    const uint64_t now = slabkit_stats_publish();
    EXPECT_GT(now, first);
    EXPECT_GE(h->publish_count.load(), now);
}

TEST_F(Live, StopRemovesTheSegmentAndStartMakesItAgain) {
    ASSERT_TRUE(exists(segment_path(getpid())));
    slabkit_stats_live_stop();
    EXPECT_FALSE(exists(segment_path(getpid())));
    EXPECT_EQ(slabkit_stats_publish(), 0u);
    slabkit_stats_live_stop(); // twice: nothing
    const char *why = nullptr;
    ASSERT_EQ(slabkit_stats_live_start(0, &why), 0) << why;
    EXPECT_TRUE(exists(segment_path(getpid())));
    reader r(getpid());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.header()->period_ms, 1000u);
    // Starting again changes the period only.
    ASSERT_EQ(slabkit_stats_live_start(30, &why), 0) << why;
    EXPECT_EQ(r.header()->period_ms, 30u);
}

TEST(LiveBadInput, PeriodOutOfRangeIsRefusedWithAReason) {
    const char *why = nullptr;
    EXPECT_EQ(slabkit_stats_live_start(5, &why), -1);
    ASSERT_NE(why, nullptr);
    EXPECT_NE(std::string(why).find("10 to 60000"), std::string::npos) << why;
    EXPECT_EQ(slabkit_stats_live_start(60001, nullptr), -1);
    EXPECT_FALSE(exists(segment_path(getpid())));
}

// Threads allocate and free while the snapshot is read over and over: every read is whole
// (valid JSON of this process); once they stop, the published numbers are slabkit_stats'.
TEST_F(Live, ReadsWhileThreadsAllocateAreWholeAndMatchWhenQuiescent) {
    constexpr int kThreads = 3;
    std::vector<slabkit_cache *> caches;
    for (int t = 0; t < kThreads; ++t) {
        const std::string nm = "live-busy-" + std::to_string(t);
        caches.push_back(
            slabkit_cache_create_in(designs()[static_cast<size_t>(t) % designs().size()].c_str(),
                                    nm.c_str(), 48 + 40 * t, 0, 0, nullptr));
        ASSERT_NE(caches.back(), nullptr);
    }
    reader r(getpid());
    ASSERT_TRUE(r.ok());
    for (int phase = 0; phase < 2; ++phase) {
        std::atomic<bool> stop{false};
        std::vector<std::vector<void *>> kept(kThreads);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                std::vector<void *> live_objs;
                unsigned x = 12345u + static_cast<unsigned>(t);
                while (!stop.load(std::memory_order_relaxed)) {
                    x = x * 1103515245u + 12345u;
                    if (live_objs.size() < 2000 && (x >> 16) % 3 != 0) {
                        live_objs.push_back(slabkit_cache_alloc(caches[static_cast<size_t>(t)], 0));
                    } else if (!live_objs.empty()) {
                        slabkit_cache_free(caches[static_cast<size_t>(t)], live_objs.back());
                        live_objs.pop_back();
                    }
                }
                kept[static_cast<size_t>(t)] = std::move(live_objs);
            });
        unsigned reads = 0;
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
        while (std::chrono::steady_clock::now() < until) {
            json j = r.snapshot();
            ASSERT_EQ(j.at("pid"), getpid());
            ASSERT_GE(j.at("caches").size(), static_cast<size_t>(kThreads));
            ++reads;
        }
        stop = true;
        for (auto &t : threads) t.join();
        EXPECT_GT(reads, 0u);
        // Quiescent: publish, then the snapshot's figures are the structures'.
        slabkit_stats_publish();
        const json j = r.snapshot();
        for (slabkit_cache *c : caches) {
            const cache_stats_t st = stats_of(c);
            const json *jc = nullptr;
            for (const auto &x : j.at("caches"))
                if (x.at("name") == slabkit_cache_name(c)) jc = &x;
            ASSERT_NE(jc, nullptr) << slabkit_cache_name(c);
            EXPECT_EQ(jc->at("slabs"), st.slabs) << st.name;
            EXPECT_EQ(jc->at("objects"), st.objects) << st.name;
            EXPECT_EQ(jc->at("active_objects"), st.active_objects) << st.name;
            EXPECT_EQ(jc->at("queued_objects"), st.queued_objects) << st.name;
            EXPECT_EQ(jc->at("activity").at("allocs"), st.allocs) << st.name;
            EXPECT_EQ(jc->at("activity").at("frees"), st.frees) << st.name;
            unsigned i = 0;
            for (const auto &[k, v] : jc->at("counters").items()) {
                EXPECT_EQ(k, st.counter_names[i]);
                EXPECT_EQ(v, st.counters[i]) << st.name << " " << k;
                ++i;
            }
        }
        for (int t = 0; t < kThreads; ++t)
            for (void *p : kept[static_cast<size_t>(t)])
                slabkit_cache_free(caches[static_cast<size_t>(t)], p);
    }
    for (slabkit_cache *c : caches) slabkit_cache_destroy(c);
}

TEST_F(Live, ShrinkRequestGivesBackAndReportsPages) {
    slabkit_cache *c = slabkit_cache_create("live-shrink", 256, 0, 0, nullptr);
    ASSERT_NE(c, nullptr);
    std::vector<void *> v;
    for (int i = 0; i < 4000; ++i) v.push_back(slabkit_cache_alloc(c, 0));
    for (void *p : v) slabkit_cache_free(c, p);
    reader r(getpid());
    ASSERT_TRUE(r.ok());
    int status = -1;
    json reply = r.request(live::request::shrink, "live-shrink", &status);
    EXPECT_EQ(status, 0) << reply.dump();
    EXPECT_EQ(reply.at("request"), "shrink");
    ASSERT_EQ(reply.at("caches").size(), 1u) << reply.dump();
    const json &row = reply.at("caches")[0];
    EXPECT_EQ(row.at("name"), "live-shrink");
    EXPECT_LE(row.at("pages_after").get<uint64_t>(), row.at("pages_before").get<uint64_t>());
    cache_stats_t st = stats_of(c);
    EXPECT_EQ(row.at("pages_after").get<uint64_t>(), st.slabs << st.order);
    // Every cache.
    reply = r.request(live::request::shrink, "", &status);
    EXPECT_EQ(status, 0);
    EXPECT_EQ(reply.at("caches").size(), slabkit_cache_count());
    // A name that is no cache's.
    reply = r.request(live::request::shrink, "no-such-cache", &status);
    EXPECT_EQ(status, 1);
    EXPECT_NE(reply.at("error").get<std::string>().find("no-such-cache"), std::string::npos);
    slabkit_cache_destroy(c);
}

TEST_F(Live, ReportRequestReturnsTheStatisticsReport) {
    reader r(getpid());
    ASSERT_TRUE(r.ok());
    int status = -1;
    json reply = r.request(live::request::report, "", &status);
    EXPECT_EQ(status, 0);
    const std::string text = reply.at("text");
    EXPECT_NE(text.find("slabinfo - version: 2.1"), std::string::npos) << text;
    EXPECT_NE(text.find("slabkit: design"), std::string::npos) << text;
    reply = r.request(static_cast<live::request>(77), "", &status);
    EXPECT_EQ(status, 1);
    EXPECT_TRUE(reply.contains("error"));
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLABKIT_LIVE_TEST_TSAN 1
#endif
#endif
#if !defined(__SANITIZE_THREAD__) && !defined(SLABKIT_LIVE_TEST_TSAN)
// Validation runs in a copy of the process: it finds nothing on a sound heap, checks every
// cache (or the one named), and the process goes on meanwhile.
TEST_F(Live, ValidateRequestChecksInACopy) {
    slabkit_cache *c = slabkit_cache_create("live-validate", 72, 0, 0, nullptr);
    ASSERT_NE(c, nullptr);
    std::vector<void *> v;
    for (int i = 0; i < 1000; ++i) v.push_back(slabkit_cache_alloc(c, 0));
    for (size_t i = 0; i < v.size(); i += 3) slabkit_cache_free(c, v[i]);
    reader r(getpid());
    ASSERT_TRUE(r.ok());
    int status = -1;
    json reply = r.request(live::request::validate, "", &status);
    ASSERT_EQ(status, 0) << reply.dump();
    EXPECT_EQ(reply.at("problems"), 0) << reply.dump();
    EXPECT_EQ(reply.at("caches_checked"), slabkit_cache_count());
    EXPECT_EQ(reply.at("copies"), 1);
    reply = r.request(live::request::validate, "live-validate", &status);
    ASSERT_EQ(status, 0) << reply.dump();
    EXPECT_EQ(reply.at("caches_checked"), 1);
    EXPECT_EQ(reply.at("problems"), 0);
    reply = r.request(live::request::validate, "no-such-cache", &status);
    EXPECT_EQ(status, 1);
    // The copy changed nothing here.
    EXPECT_EQ(slabkit_cache_validate(c, nullptr, 0), 0u);
    for (size_t i = 0; i < v.size(); ++i)
        if (i % 3) slabkit_cache_free(c, v[i]);
    slabkit_cache_destroy(c);
}
#endif

// A fork child does not publish under its parent's name, nor under its own; the parent goes on.
TEST_F(Live, ForkChildDoesNotPublish) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        bool ok = slabkit_stats_publish() == 0 && !exists(segment_path(getpid()));
        _exit(ok ? 0 : 1);
    }
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    EXPECT_TRUE(exists(segment_path(getpid())));
    EXPECT_GT(slabkit_stats_publish(), 0u);
}

// SLABKIT_STATS=live:MS (ctest's api_live_env): publishing from the start.
TEST(LiveEnvironment, PublishesFromTheStart) {
    const char *v = getenv("SLABKIT_STATS");
    if (!v || std::string(v).find("live") == std::string::npos)
        GTEST_SKIP() << "run with SLABKIT_STATS=live:50 (ctest api_live_env)";
    reader r(getpid());
    ASSERT_TRUE(r.ok()) << segment_path(getpid());
    EXPECT_EQ(r.header()->period_ms, 50u);
    EXPECT_EQ(r.snapshot().at("pid"), getpid());
}

} // namespace
} // namespace slabkit::apitest
