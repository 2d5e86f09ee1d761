// free_key_test.cpp - the default double-free check of kmalloc's and malloc's blocks
// (core/free_key.hpp, docs/debug.md), in the process's design (SLABKIT_ALLOCATOR: ctest runs
// these once per design, api_kmalloc_<design>): a freed block carries a key, and a free that
// finds it is reported and ignored, whichever block its list holds first; and no allocation
// hands out a block that still carries one, so correct programs are never reported. SLOB finds
// its double frees from its page's free blocks instead.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace slabkit::apitest {
namespace {

std::mutex g_reports_lock;
std::vector<std::string> g_reports;
void collect(const char *report) {
    std::lock_guard<std::mutex> g(g_reports_lock);
    g_reports.emplace_back(report);
}

bool slob() {
    return std::string(slabkit_allocator()) == "slob";
}

std::string addr_of(const void *p) {
    char buf[32];
    snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

class KmallocFreeKey : public ::testing::Test {
  protected:
    void SetUp() override {
        {
            std::lock_guard<std::mutex> g(g_reports_lock);
            g_reports.clear();
        }
        slabkit_set_error_hook(collect); // report and go on
        errors_before_ = slabkit_errors();
    }
    void TearDown() override { slabkit_set_error_hook(nullptr); }
    std::vector<std::string> reports() {
        std::lock_guard<std::mutex> g(g_reports_lock);
        return g_reports;
    }
    // Exactly one report since SetUp (or the last clear), naming p, from `caller`, as a double
    // free.
    ::testing::AssertionResult one_double_free(const void *p, const std::string &caller) {
        std::vector<std::string> r = reports();
        if (r.size() != 1) {
            auto f = ::testing::AssertionFailure() << r.size() << " reports, not 1:";
            for (const std::string &s : r) f << "\n---\n" << s;
            return f;
        }
        // SLOB says it from its page: the block overlaps a free one ("a double free?"). In any
        // design the slab or page may have gone back once all its blocks were free ("already
        // freed").
        for (const std::string &part : {caller + "(", addr_of(p)})
            if (r[0].find(part) == std::string::npos)
                return ::testing::AssertionFailure() << "no '" << part << "' in:\n" << r[0];
        const bool named =
            r[0].find("already freed") != std::string::npos ||
            r[0].find(slob() ? "a double free" : "double free: the block is free already") !=
                std::string::npos;
        if (!named) return ::testing::AssertionFailure() << "not a double free's report:\n" << r[0];
        if (slabkit_errors() != errors_before_ + 1)
            return ::testing::AssertionFailure() << "slabkit_errors() did not count it";
        return ::testing::AssertionSuccess();
    }
    void forget_reports() {
        std::lock_guard<std::mutex> g(g_reports_lock);
        g_reports.clear();
        errors_before_ = slabkit_errors();
    }
    uint64_t errors_before_ = 0;
};

// free(a); free(b); free(a): a is not the first free block of its list when it is freed again
// (b is), which the list check alone never sees.
TEST_F(KmallocFreeKey, AnInterleavedDoubleFreeIsReported) {
    for (size_t size : {8, 16, 24, 48, 100, 1000, 4000, 8000}) {
        SCOPED_TRACE("size " + std::to_string(size));
        void *a = slabkit_malloc(size);
        void *b = slabkit_malloc(size);
        ASSERT_NE(a, nullptr);
        ASSERT_NE(b, nullptr);
        memset(a, 0x11, size);
        memset(b, 0x22, size);
        slabkit_free(a);
        slabkit_free(b);
        slabkit_free(a);
        EXPECT_TRUE(one_double_free(a, "free"));
        forget_reports();
        // kmalloc's classes (the kernel's table) too, through kfree; kmalloc-8's blocks have
        // no word to spare beside their free pointer (the list check alone catches their
        // immediate double frees).
        if (size == 8 && !slob()) continue;
        void *c = slabkit_kmalloc(size, 0);
        void *d = slabkit_kmalloc(size, 0);
        slabkit_kfree(c);
        slabkit_kfree(d);
        slabkit_kfree(c);
        EXPECT_TRUE(one_double_free(c, "kfree"));
        forget_reports();
    }
    char buf[256];
    EXPECT_EQ(slabkit_validate(buf, sizeof buf), 0u) << buf;
}

// The second free long after the first: many blocks of the class allocated and freed between.
TEST_F(KmallocFreeKey, ADelayedDoubleFreeIsReported) {
    void *p = slabkit_malloc(40);
    ASSERT_NE(p, nullptr);
    slabkit_free(p);
    std::vector<void *> others;
    for (int i = 0; i < 2000; ++i) others.push_back(slabkit_malloc(40));
    // p may have been handed out again (then that owner's block is freed below, once: no
    // double free of a free block); keep the ones that are not p for the test.
    bool reused = false;
    for (void *o : others) reused |= o == p;
    for (void *o : others)
        if (o != p) slabkit_free(o);
    if (reused) slabkit_free(p); // its new owner's free
    slabkit_free(p);
    EXPECT_TRUE(one_double_free(p, "free"));
}

// Nothing is lost or handed out twice after a reported double free: the second free was ignored.
TEST_F(KmallocFreeKey, AReportedDoubleFreeLeavesTheBlockFreeOnce) {
    void *a = slabkit_malloc(64);
    void *b = slabkit_malloc(64);
    slabkit_free(a);
    slabkit_free(b);
    slabkit_free(a);
    ASSERT_TRUE(one_double_free(a, "free"));
    std::vector<void *> got;
    for (int i = 0; i < 64; ++i) got.push_back(slabkit_malloc(64));
    for (size_t i = 0; i < got.size(); ++i)
        for (size_t j = i + 1; j < got.size(); ++j) ASSERT_NE(got[i], got[j]);
    for (void *g : got) slabkit_free(g);
    char buf[256];
    EXPECT_EQ(slabkit_validate(buf, sizeof buf), 0u) << buf;
}

// operator delete and realloc name themselves; a block freed by one call and again by another is
// caught the same way.
TEST_F(KmallocFreeKey, TheReportNamesTheCallThatFreedTwice) {
    void *a = slabkit_malloc(32);
    void *b = slabkit_malloc(32);
    slabkit_free(a);
    slabkit_free(b);
    EXPECT_EQ(slabkit_realloc(a, 0), nullptr); // realloc(p, 0) frees p: a second time here
    EXPECT_TRUE(one_double_free(a, "realloc"));
}

// A correct program, every way of allocating and freeing at random, blocks written in part (a
// block's second word, where a key goes, is left as the allocation gave it half of the time):
// no report, and every block keeps what was written.
TEST_F(KmallocFreeKey, ACorrectProgramIsNeverReported) {
    std::mt19937_64 rng(33);
    struct block {
        unsigned char *p;
        size_t size;
        unsigned char tag;
        bool kernel; // kfree, else free
    };
    std::vector<block> live;
    auto check = [](const block &b) {
        for (size_t i = 0; i < (b.size < 8 ? b.size : 8); ++i)
            if (b.p[i] != b.tag) return false;
        return true;
    };
    for (int step = 0; step < 60000; ++step) {
        if (live.size() > 400 || (live.size() > 0 && rng() % 2 == 0)) {
            size_t k = rng() % live.size();
            block b = live[k];
            live[k] = live.back();
            live.pop_back();
            ASSERT_TRUE(check(b)) << "step " << step;
            switch (rng() % 4) {
            case 0: // realloc to another size: the contents move
            {
                size_t n = 1 + rng() % 600;
                auto *q = static_cast<unsigned char *>(b.kernel ? slabkit_krealloc(b.p, n, 0)
                                                                : slabkit_realloc(b.p, n));
                ASSERT_NE(q, nullptr);
                block nb{q, n, b.tag, b.kernel};
                for (size_t i = 0; i < (n < 8 ? n : 8); ++i) q[i] = b.tag;
                live.push_back(nb);
                break;
            }
            default:
                if (b.kernel)
                    slabkit_kfree(b.p);
                else
                    slabkit_free(b.p);
            }
            continue;
        }
        size_t size = 1 + rng() % (rng() % 8 == 0 ? 9000 : 300);
        unsigned char *p = nullptr;
        bool kernel = false;
        switch (rng() % 9) {
        case 0:
            p = static_cast<unsigned char *>(slabkit_malloc(size));
            break;
        case 1:
            p = static_cast<unsigned char *>(slabkit_calloc(1, size));
            break;
        case 2:
            p = static_cast<unsigned char *>(slabkit_realloc(nullptr, size));
            break;
        case 3:
            p = static_cast<unsigned char *>(slabkit_memalign(size_t{1} << (rng() % 8), size));
            break;
        case 4:
            p = static_cast<unsigned char *>(slabkit_aligned_alloc(64, size));
            break;
        case 5:
            kernel = true;
            p = static_cast<unsigned char *>(slabkit_kmalloc(size, 0));
            break;
        case 6:
            kernel = true;
            p = static_cast<unsigned char *>(slabkit_kzalloc(size, 0));
            break;
        case 7:
            kernel = true;
            p = static_cast<unsigned char *>(slabkit_kmalloc_node(size, 0, -1));
            break;
        default:
            kernel = true;
            p = static_cast<unsigned char *>(slabkit_krealloc(nullptr, size, 0));
            break;
        }
        ASSERT_NE(p, nullptr);
        const unsigned char tag = static_cast<unsigned char>(rng());
        // The first byte, or the whole block: its second word keeps what the allocation gave.
        memset(p, tag, rng() % 2 ? (size < 8 ? size : 8) : size);
        if (size >= 8) memset(p, tag, 8);
        live.push_back({p, size, tag, kernel});
    }
    for (const block &b : live) {
        EXPECT_TRUE(check(b));
        b.kernel ? slabkit_kfree(b.p) : slabkit_free(b.p);
    }
    std::vector<std::string> r = reports();
    EXPECT_TRUE(r.empty()) << r.size() << " reports, the first:\n" << (r.empty() ? "" : r[0]);
    EXPECT_EQ(slabkit_errors(), errors_before_);
}

// The same across threads: blocks made by one thread and freed by another (the remote paths:
// SLQB's outboxes, SLUB's slab frees, the sheaves' other slots), in every slot mode ctest runs.
TEST_F(KmallocFreeKey, BlocksFreedByAnotherThreadAreNeverReported) {
    constexpr int kRounds = 200;
    constexpr int kBatch = 256;
    std::vector<void *> handoff[2];
    std::mutex lock;
    auto worker = [&](int me) {
        std::mt19937_64 rng(static_cast<uint64_t>(me) + 1);
        for (int round = 0; round < kRounds; ++round) {
            std::vector<void *> mine;
            for (int i = 0; i < kBatch; ++i) {
                size_t size = 16 + rng() % 200;
                auto *p = static_cast<unsigned char *>(slabkit_malloc(size));
                if (p) p[0] = static_cast<unsigned char>(me);
                mine.push_back(p);
            }
            std::vector<void *> theirs;
            {
                std::lock_guard<std::mutex> g(lock);
                theirs.swap(handoff[1 - me]);
                handoff[me].insert(handoff[me].end(), mine.begin(), mine.end());
            }
            for (void *p : theirs) slabkit_free(p);
        }
    };
    std::thread t0(worker, 0), t1(worker, 1);
    t0.join();
    t1.join();
    for (auto &h : handoff)
        for (void *p : h) slabkit_free(p);
    std::vector<std::string> r = reports();
    EXPECT_TRUE(r.empty()) << r.size() << " reports, the first:\n" << (r.empty() ? "" : r[0]);
}

} // namespace
} // namespace slabkit::apitest

namespace slabkit::apitest {
namespace {

// SLABKIT_FREE_KEY=0 (ctest api_free_key_off) leaves freed blocks' second word alone; by default
// the free writes the key there (SLOB keeps no keys).
TEST(KmallocFreeKeyOption, TheKeyIsWrittenUnlessTurnedOff) {
    if (slob()) GTEST_SKIP() << "SLOB keeps no free keys";
    const char *e = getenv("SLABKIT_FREE_KEY");
    const bool off = e && std::string(e) == "0";
    void *keep = slabkit_malloc(48); // holds the slab, so the freed block's bytes stay readable
    auto *a = static_cast<unsigned char *>(slabkit_malloc(48));
    ASSERT_NE(a, nullptr);
    memset(a, 0x5c, 48);
    slabkit_free(a);
    uint64_t second;
    asm volatile("" ::: "memory");
    memcpy(&second, a + 8, sizeof second);
    if (off)
        EXPECT_EQ(second, 0x5c5c5c5c5c5c5c5cull);
    else
        EXPECT_NE(second, 0x5c5c5c5c5c5c5c5cull);
    // A fresh block never shows a key, whatever the setting.
    auto *b = static_cast<unsigned char *>(slabkit_malloc(48));
    uint64_t fresh;
    memcpy(&fresh, b + 8, sizeof fresh);
    EXPECT_EQ(fresh, 0u);
    slabkit_free(b);
    slabkit_free(keep);
}

} // namespace
} // namespace slabkit::apitest
