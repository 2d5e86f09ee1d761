// The debug layer through the public API, for every design: each kind of heap bug is caught,
// reported with what the kernel's reports say (the cache, the kind, the object, the bad bytes,
// the allocation and free sites), and - with an error hook - survived, so that one process can
// count them; the same kinds end the process without a hook (death tests). SLABKIT_DEBUG's
// grammar through slabkit_set_debug.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <sched.h>
#include <string>
#include <thread>
#include <vector>

namespace slabkit::apitest {
namespace {

constexpr unsigned kFZPU =
    SLABKIT_CONSISTENCY_CHECKS | SLABKIT_RED_ZONE | SLABKIT_POISON | SLABKIT_STORE_USER;

std::mutex g_reports_lock;
std::vector<std::string> g_reports;

void collect(const char *report) {
    std::lock_guard<std::mutex> g(g_reports_lock);
    g_reports.emplace_back(report);
}

} // namespace
} // namespace slabkit::apitest

// The caller's own frame in a report's sites: this function's name must appear (exported, so
// that the dynamic loader can name it).
extern "C" __attribute__((noinline, visibility("default"))) void *
slabkit_test_allocate_here(slabkit_cache *c) {
    void *p = slabkit_cache_alloc(c, 0);
    asm volatile("" ::: "memory"); // not a tail call: this frame stays on the stack
    return p;
}

namespace slabkit::apitest {
namespace {

void *allocate_here(slabkit_cache *c) {
    return slabkit_test_allocate_here(c);
}

class Debug : public DesignTest {
  protected:
    void SetUp() override {
        DesignTest::SetUp();
        g_reports.clear();
        slabkit_set_error_hook(collect);
        errors_before_ = slabkit_errors();
    }
    void TearDown() override {
        slabkit_set_error_hook(nullptr);
        DesignTest::TearDown();
    }
    // The reports since SetUp.
    std::vector<std::string> reports() {
        std::lock_guard<std::mutex> g(g_reports_lock);
        return g_reports;
    }
    // Exactly one report since SetUp, which holds every one of `parts`.
    ::testing::AssertionResult one_report(std::initializer_list<std::string> parts) {
        std::vector<std::string> r = reports();
        if (r.size() != 1) {
            auto f = ::testing::AssertionFailure() << r.size() << " reports, not 1:";
            for (const std::string &s : r) f << "\n---\n" << s;
            return f;
        }
        for (const std::string &p : parts)
            if (r[0].find(p) == std::string::npos)
                return ::testing::AssertionFailure() << "no '" << p << "' in:\n" << r[0];
        if (slabkit_errors() != errors_before_ + 1)
            return ::testing::AssertionFailure() << "slabkit_errors() did not count it";
        return ::testing::AssertionSuccess();
    }
    slabkit_cache *debug_cache(const std::string &what, size_t size, unsigned flags = kFZPU) {
        slabkit_cache *c = create(name(what), size, 0, flags);
        EXPECT_NE(c, nullptr);
        return c;
    }
    uint64_t errors_before_ = 0;
};

TEST_P(Debug, NewObjectsArePoisonedAndFreedOnesToo) {
    slabkit_cache *c = debug_cache("poison", 40);
    auto *p = static_cast<unsigned char *>(slabkit_cache_alloc(c, 0));
    ASSERT_NE(p, nullptr);
    for (int i = 0; i < 40; ++i) ASSERT_EQ(p[i], 0x5a) << i; // uninitialised reads stand out
    auto *z = static_cast<unsigned char *>(slabkit_cache_alloc(c, SLABKIT_GFP_ZERO));
    EXPECT_TRUE(all_zero(z, 40));
    slabkit_cache_free(c, p);
    // Freed (and quarantined): a read after free sees the free poison.
    for (int i = 0; i < 39; ++i) ASSERT_EQ(p[i], 0x6b) << i;
    EXPECT_EQ(p[39], 0xa5);
    slabkit_cache_free(c, z);
    EXPECT_TRUE(reports().empty());
    char buf[256];
    EXPECT_EQ(slabkit_cache_validate(c, buf, sizeof buf), 0u) << buf;
}

TEST_P(Debug, DoubleFreeIsCaughtAtOnceAndLater) {
    slabkit_cache *c = debug_cache("double", 64);
    void *p = allocate_here(c);
    slabkit_cache_free(c, p);
    slabkit_cache_free(c, p);
    EXPECT_TRUE(one_report({"BUG " + name("double"), "double free", addr_text(p), "allocated by",
                            "allocate_here", "freed by"}));
    // Long after: many objects allocated and freed in between (the first free's object waits in
    // the quarantine, or lies free on its slab: either way its state says free).
    g_reports.clear();
    errors_before_ = slabkit_errors();
    void *q = slabkit_cache_alloc(c, 0);
    std::vector<void *> objs;
    for (int i = 0; i < 500; ++i) objs.push_back(slabkit_cache_alloc(c, 0));
    slabkit_cache_free(c, q);
    for (void *o : objs) slabkit_cache_free(c, o);
    slabkit_cache_free(c, q);
    EXPECT_TRUE(one_report({"double free", addr_text(q)}));
}

TEST_P(Debug, OverflowAndUnderflowOfOneOrEightBytes) {
    slabkit_cache *c = debug_cache("zones", 40);
    struct {
        long at;
        const char *kind;
        const char *where;
    } cases[] = {{40, "overflow", "object offset 40"},
                 {47, "overflow", "object offset 47"},
                 {-1, "underflow", "object offset -1"},
                 {-8, "underflow", "object offset -8"}};
    for (const auto &k : cases) {
        g_reports.clear();
        errors_before_ = slabkit_errors();
        auto *p = static_cast<char *>(slabkit_cache_alloc(c, 0));
        memset(p, 1, 40);
        if (k.at == 47) {
            memset(p + 40, 7, 8); // 8 bytes past
        } else if (k.at == -8) {
            memset(p - 8, 7, 8); // 8 bytes before
        } else {
            p[k.at] = 7;
        }
        slabkit_cache_free(c, p);
        long first = k.at == 47 ? 40 : k.at;
        std::string where = "object offset " + std::to_string(first);
        EXPECT_TRUE(one_report({k.kind, where, "found:    07", "expected: cc"})) << k.at;
    }
}

TEST_P(Debug, OverflowOfALiveObjectIsFoundByValidation) {
    slabkit_cache *c = debug_cache("validate", 24);
    auto *p = static_cast<char *>(slabkit_cache_alloc(c, 0));
    p[24] = 1;
    char buf[256];
    // (SLOB finds its live slots by the tag they carry.)
    EXPECT_EQ(slabkit_cache_validate(c, buf, sizeof buf), 1u);
    EXPECT_TRUE(one_report({"overflow", "found by validate"}));
    EXPECT_NE(std::string(buf).find(name("validate")), std::string::npos) << buf;
    slabkit_cache_free(c, p); // repaired by the report: a clean free
    EXPECT_EQ(reports().size(), 1u);
}

TEST_P(Debug, WriteAfterFreeIsFoundWhenTheObjectLeavesTheQuarantine) {
    slabkit_cache *c = debug_cache("uaf", 48);
    auto *p = static_cast<char *>(slabkit_cache_alloc(c, 0));
    slabkit_cache_free(c, p);
    p[5] = 0x11;
    slabkit_cache_shrink(c); // drains the cache's quarantine
    EXPECT_TRUE(one_report(
        {"write after free", "object offset 5", "found:    11", "expected: 6b", "freed by"}));
}

TEST_P(Debug, WriteAfterFreeIsFoundByValidationWhileFree) {
    slabkit_cache *c = debug_cache("uafv", 48);
    auto *p = static_cast<char *>(slabkit_cache_alloc(c, 0));
    void *keep = slabkit_cache_alloc(c, 0); // the slab stays
    slabkit_cache_free(c, p);
    p[47] = 0;
    char buf[256];
    // (SLOB's free slots are known while they wait in the quarantine.)
    EXPECT_EQ(slabkit_cache_validate(c, buf, sizeof buf), 1u);
    EXPECT_TRUE(one_report({"write after free", "object offset 47", "expected: a5"}));
    slabkit_cache_free(c, keep);
}

TEST_P(Debug, InvalidFreesAreReportedAndLeftAlone) {
    slabkit_cache *c = debug_cache("invalid", 64);
    slabkit_cache *other = debug_cache("other", 64);
    auto *p = static_cast<char *>(slabkit_cache_alloc(c, 0));
    int on_stack = 0;
    void *stack_addr = &on_stack;
    asm volatile("" : "+r"(stack_addr)); // the compiler must not see the inlined free's store
    slabkit_cache_free(c, stack_addr);
    EXPECT_TRUE(one_report({"bad free", name("invalid")}));
    g_reports.clear();
    errors_before_ = slabkit_errors();
    slabkit_cache_free(c, p + 8);
    // SLOB's shared pages cannot say where its objects start: the state word there is wrong.
    EXPECT_TRUE(
        one_report({GetParam() == "slob" ? "not an object" : "bad free", addr_text(p + 8)}));
    if (GetParam() != "slob") { // SLOB's pages are shared by all its caches
        g_reports.clear();
        errors_before_ = slabkit_errors();
        slabkit_cache_free(other, p);
        EXPECT_TRUE(one_report({"bad free", name("other"), name("invalid")}));
    }
    // The object is still good.
    memset(p, 3, 64);
    slabkit_cache_free(c, p);
}

TEST_P(Debug, LeaksAtDestroyNameTheAllocationSite) {
    slabkit_cache *c = debug_cache("leak", 32);
    void *p = allocate_here(c);
    ASSERT_NE(p, nullptr);
    ::testing::internal::CaptureStderr();
    destroy(c);
    std::string err = ::testing::internal::GetCapturedStderr();
    // SLOB finds a small debug cache's objects among its shared pages by the tag they carry.
    EXPECT_NE(err.find("object " + addr_text(p) + " is still allocated"), std::string::npos) << err;
    EXPECT_NE(err.find("allocate_here"), std::string::npos) << err;
}

// Only the live objects are listed: freed ones (also those still in the quarantine, and those
// whose bytes SLOB gave to other blocks) are not.
TEST_P(Debug, LeaksListOnlyTheLiveObjects) {
    slabkit_cache *c = debug_cache("leak-some", 48);
    std::vector<void *> objs;
    for (int i = 0; i < 40; ++i) objs.push_back(slabkit_cache_alloc(c, 0));
    for (int i = 0; i < 40; ++i)
        if (i != 7 && i != 30) slabkit_cache_free(c, objs[i]);
    ::testing::internal::CaptureStderr();
    destroy(c);
    std::string err = ::testing::internal::GetCapturedStderr();
    size_t listed = 0;
    for (size_t at = err.find("is still allocated"); at != std::string::npos;
         at = err.find("is still allocated", at + 1))
        ++listed;
    EXPECT_EQ(listed, 2u) << err;
    EXPECT_NE(err.find("object " + addr_text(objs[7]) + " is still allocated"), std::string::npos)
        << err;
    EXPECT_NE(err.find("object " + addr_text(objs[30]) + " is still allocated"), std::string::npos)
        << err;
}

TEST_P(Debug, ConstructedCachesKeepTheirStateAndAreNotPoisoned) {
    slabkit_cache *c = create(name("ctor"), 32, 0, kFZPU, [](void *p) { memset(p, 0x42, 32); });
    ASSERT_NE(c, nullptr);
    for (int round = 0; round < 3; ++round) {
        auto *p = static_cast<unsigned char *>(slabkit_cache_alloc(c, 0));
        for (int i = 0; i < 32; ++i) ASSERT_EQ(p[i], 0x42) << i;
        slabkit_cache_free(c, p);
    }
    EXPECT_TRUE(reports().empty());
}

TEST_P(Debug, ManyObjectsAndThreadsStayClean) {
    slabkit_cache *c = debug_cache("busy", 100);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            std::vector<void *> mine;
            for (int i = 0; i < 3000 / kScale; ++i) {
                void *p = slabkit_cache_alloc(c, 0);
                fill(p, 100, static_cast<uint64_t>(t * 100000 + i));
                mine.push_back(p);
                if (mine.size() > 50) {
                    slabkit_cache_free(c, mine.front());
                    mine.erase(mine.begin());
                }
            }
            for (void *p : mine) slabkit_cache_free(c, p);
        });
    for (auto &th : threads) th.join();
    EXPECT_TRUE(reports().empty());
    char buf[256];
    EXPECT_EQ(slabkit_cache_validate(c, buf, sizeof buf), 0u) << buf;
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
}

// Without debugging: the hardening check of every free catches freeing the object that is first
// on the list it goes to (the kernel's freelist check), in every design but SLOB (whose own
// check is that a block must not overlap a free one: tests/unit/slob_test.cpp).
TEST_P(Debug, PlainCachesCatchAnImmediateDoubleFree) {
    if (!SLABKIT_FREELIST_CHECK && GetParam() != "slob")
        GTEST_SKIP() << "built with SLABKIT_FREELIST_CHECK=OFF";
    // The array designs (SLAB's arrays, the sheaves) check the top entry only with the array
    // check, which costs their fast free a compare.
    if (!SLABKIT_SLAB_ARRAY_CHECK && (GetParam() == "slab" || GetParam() == "sheaves"))
        GTEST_SKIP() << "built with SLABKIT_SLAB_ARRAY_CHECK=OFF (the default)";
    // On the CPUs' slots both frees must meet the same CPU's list: the check compares with the
    // list the free joins, as the kernel's does.
    cpu_set_t before;
    ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    struct restore {
        cpu_set_t set;
        ~restore() { sched_setaffinity(0, sizeof set, &set); }
    } restore_affinity{before};
    slabkit_cache *c = create(name("plain"), 64);
    ASSERT_NE(c, nullptr);
    void *keep = slabkit_cache_alloc(c, 0);
    void *p = slabkit_cache_alloc(c, 0);
    slabkit_cache_free(c, p);
    slabkit_cache_free(c, p);
    if (GetParam() == "slob") {
        EXPECT_TRUE(one_report({"bad free", "overlaps a free block"}));
    } else {
        EXPECT_TRUE(one_report({"bad free", "double free", addr_text(p)}));
    }
    // Nothing was lost or handed out twice.
    void *a = slabkit_cache_alloc(c, 0);
    void *b = slabkit_cache_alloc(c, 0);
    EXPECT_NE(a, b);
    slabkit_cache_free(c, a);
    slabkit_cache_free(c, b);
    slabkit_cache_free(c, keep);
    char buf[256];
    EXPECT_EQ(slabkit_cache_validate(c, buf, sizeof buf), 0u) << buf;
}

SLABKIT_INSTANTIATE_FOR_DESIGNS(Debug);

// ---- without a hook: report, then abort -------------------------------------------------------

class DebugDeathTest : public DesignTest {};

TEST_P(DebugDeathTest, EveryKindAborts) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    slabkit_cache *c = create(name("death"), 40, 0, kFZPU);
    ASSERT_NE(c, nullptr);
    EXPECT_DEATH(
        {
            void *p = slabkit_cache_alloc(c, 0);
            slabkit_cache_free(c, p);
            slabkit_cache_free(c, p);
        },
        "BUG death-.*: double free(.|\n)*aborting on heap corruption");
    EXPECT_DEATH(
        {
            auto *p = static_cast<char *>(slabkit_cache_alloc(c, 0));
            p[40] = 0;
            slabkit_cache_free(c, p);
        },
        "red zone after the object overwritten \\(overflow\\)");
    EXPECT_DEATH(
        {
            auto *p = static_cast<char *>(slabkit_cache_alloc(c, 0));
            slabkit_cache_free(c, p);
            p[0] = 0;
            slabkit_cache_shrink(c);
        },
        "write after free");
    EXPECT_DEATH(
        {
            auto *p = static_cast<char *>(slabkit_cache_alloc(c, 0));
            slabkit_cache_free(c, p + 1);
        },
        "bad free");
}

SLABKIT_INSTANTIATE_FOR_DESIGNS(DebugDeathTest);

// ---- the specification --------------------------------------------------------------------------

TEST(DebugSpec, BadSpecificationsNameWhatIsWrong) {
    const char *why = nullptr;
    EXPECT_EQ(slabkit_set_debug("FZX", &why), -1);
    ASSERT_NE(why, nullptr);
    EXPECT_NE(std::string(why).find("unknown letter 'X'"), std::string::npos) << why;
    EXPECT_EQ(slabkit_set_debug("F,,name", &why), -1);
    EXPECT_NE(std::string(why).find("empty cache name"), std::string::npos) << why;
    EXPECT_EQ(slabkit_set_debug(",name", &why), -1);
    EXPECT_NE(std::string(why).find("no letters"), std::string::npos) << why;
    EXPECT_EQ(slabkit_set_debug("F,a-name-that-is-far-too-long-for-a-cache", &why), -1);
    EXPECT_NE(std::string(why).find("longer than 31"), std::string::npos) << why;
    EXPECT_EQ(slabkit_set_debug("-", &why), 0);
}

TEST(DebugSpec, NamesAndWildcardsChooseTheCaches) {
    const char *why = nullptr;
    ASSERT_EQ(slabkit_set_debug("Z,spec-z*;P,spec-p", &why), 0) << why;
    slabkit_cache *z = slabkit_cache_create("spec-zone", 40, 0, 0, nullptr);
    slabkit_cache *p = slabkit_cache_create("spec-p", 40, 0, 0, nullptr);
    slabkit_cache *none = slabkit_cache_create("spec-none", 40, 0, 0, nullptr);
    ASSERT_EQ(slabkit_set_debug("-", &why), 0);
    slabkit_set_error_hook(collect);
    g_reports.clear();
    // Z only: an overflow is caught, the object is not poisoned.
    auto *a = static_cast<unsigned char *>(slabkit_cache_alloc(z, 0));
    EXPECT_NE(a[0], 0x5a);
    a[40] = 9;
    slabkit_cache_free(z, a);
    EXPECT_EQ(g_reports.size(), 1u);
    // P only: poisoned, no red zone.
    auto *b = static_cast<unsigned char *>(slabkit_cache_alloc(p, 0));
    EXPECT_EQ(b[0], 0x5a);
    slabkit_cache_free(p, b);
    EXPECT_EQ(b[0], 0x6b);
    // None: a plain cache.
    auto *n = static_cast<unsigned char *>(slabkit_cache_alloc(none, 0));
    slabkit_cache_free(none, n);
    EXPECT_EQ(g_reports.size(), 1u);
    slabkit_set_error_hook(nullptr);
    slabkit_cache_destroy(z);
    slabkit_cache_destroy(p);
    slabkit_cache_destroy(none);
    g_reports.clear();
}

TEST(DebugSpec, EmptyOrOneMeansEverythingButTrace) {
    const char *why = nullptr;
    ASSERT_EQ(slabkit_set_debug("1", &why), 0);
    slabkit_cache *c = slabkit_cache_create("spec-all", 40, 0, 0, nullptr);
    ASSERT_EQ(slabkit_set_debug("", &why), 0);
    slabkit_cache *d = slabkit_cache_create("spec-all2", 40, 0, 0, nullptr);
    ASSERT_EQ(slabkit_set_debug(nullptr, &why), 0);
    for (slabkit_cache *x : {c, d}) {
        auto *o = static_cast<unsigned char *>(slabkit_cache_alloc(x, 0));
        EXPECT_EQ(o[0], 0x5a); // P
        slabkit_set_error_hook(collect);
        g_reports.clear();
        o[-1] = 0; // Z
        slabkit_cache_free(x, o);
        EXPECT_EQ(g_reports.size(), 1u);
        slabkit_set_error_hook(nullptr);
        slabkit_cache_destroy(x);
    }
    g_reports.clear();
}

TEST(DebugSpec, TraceLinesNameTheCacheAndTheObject) {
    slabkit_cache *c = slabkit_cache_create("spec-trace", 40, 0, SLABKIT_TRACE, nullptr);
    ASSERT_NE(c, nullptr);
    ::testing::internal::CaptureStderr();
    void *o = slabkit_cache_alloc(c, 0);
    slabkit_cache_free(c, o);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("TRACE spec-trace alloc " + addr_text(o)), std::string::npos) << err;
    EXPECT_NE(err.find("TRACE spec-trace free " + addr_text(o)), std::string::npos) << err;
    slabkit_cache_destroy(c);
}

// ---- kmalloc under SLABKIT_DEBUG (its own ctest entries: the classes open once per process) --

// Why the kmalloc debug tests cannot run in this process, or nullptr when they can (their own
// ctest entries set SLABKIT_DEBUG: kmalloc's classes open once per process).
const char *kmalloc_debug_unavailable() {
    if (!getenv("SLABKIT_DEBUG"))
        return "run with SLABKIT_DEBUG set (ctest api_debug_kmalloc_<design>)";
    if (strcmp(slabkit_allocator(), "slob") == 0)
        return "SLOB serves kmalloc itself, from size-headed blocks (DebugKmalloc.SlobBlocks*)";
    return nullptr;
}

// SLOB's own kmalloc blocks under debugging: | header | object | red zone |, poisoned, and
// quarantined after their free.
TEST(DebugKmalloc, SlobBlocksAreChecked) {
    if (!getenv("SLABKIT_DEBUG") || strcmp(slabkit_allocator(), "slob") != 0)
        GTEST_SKIP() << "runs with SLABKIT_ALLOCATOR=slob and SLABKIT_DEBUG (ctest "
                        "api_debug_kmalloc_slob)";
    slabkit_set_error_hook(collect);
    g_reports.clear();
    auto *p = static_cast<unsigned char *>(slabkit_kmalloc(100, 0));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p[0], 0x5a);
    EXPECT_EQ(p[99], 0x5a);
    EXPECT_EQ(slabkit_ksize(p), 100u); // the size asked for: the red zone starts right after it
    p[100] = 1;
    slabkit_kfree(p);
    ASSERT_EQ(g_reports.size(), 1u);
    EXPECT_NE(g_reports[0].find("(slob): red zone after the object overwritten (overflow)"),
              std::string::npos)
        << g_reports[0];
    EXPECT_NE(g_reports[0].find("object offset 100"), std::string::npos) << g_reports[0];
    g_reports.clear();
    slabkit_kfree(p); // waits in the quarantine: a second free
    ASSERT_EQ(g_reports.size(), 1u);
    EXPECT_NE(g_reports[0].find("double free"), std::string::npos) << g_reports[0];
    g_reports.clear();
    auto *q = static_cast<unsigned char *>(slabkit_kmalloc(40, SLABKIT_GFP_ZERO));
    EXPECT_TRUE(all_zero(q, 40));
    slabkit_kfree(q);
    q[5] = 7; // a write after free: found when the quarantine lets the block go
    slabkit_trim();
    ASSERT_EQ(g_reports.size(), 1u);
    EXPECT_NE(g_reports[0].find("write after free"), std::string::npos) << g_reports[0];
    EXPECT_NE(g_reports[0].find("object offset 5"), std::string::npos) << g_reports[0];
    g_reports.clear();
    void *r = slabkit_kmalloc(64, 0);
    slabkit_kfree(static_cast<char *>(r) + 16);
    ASSERT_EQ(g_reports.size(), 1u);
    EXPECT_NE(g_reports[0].find("no valid size header"), std::string::npos) << g_reports[0];
    slabkit_kfree(r);
    slabkit_set_error_hook(nullptr);
    EXPECT_EQ(g_reports.size(), 1u);
}

TEST(DebugKmalloc, KmallocAndKfreeAreChecked) {
    if (const char *why = kmalloc_debug_unavailable()) GTEST_SKIP() << why;
    slabkit_set_error_hook(collect);
    g_reports.clear();
    auto *p = static_cast<unsigned char *>(slabkit_kmalloc(100, 0));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p[0], 0x5a);
    EXPECT_EQ(slabkit_ksize(p), 128u); // kmalloc-128: the class size stays usable
    p[128] = 1;
    slabkit_kfree(p);
    ASSERT_EQ(g_reports.size(), 1u);
    EXPECT_NE(g_reports[0].find("kmalloc-128"), std::string::npos) << g_reports[0];
    EXPECT_NE(g_reports[0].find("overflow"), std::string::npos) << g_reports[0];
    g_reports.clear();
    slabkit_kfree(p);
    ASSERT_EQ(g_reports.size(), 1u);
    EXPECT_NE(g_reports[0].find("double free"), std::string::npos) << g_reports[0];
    g_reports.clear();
    void *q = slabkit_kmalloc(64, 0);
    slabkit_kfree(static_cast<char *>(q) + 16);
    ASSERT_EQ(g_reports.size(), 1u);
    EXPECT_NE(g_reports[0].find("not an object start"), std::string::npos) << g_reports[0];
    slabkit_kfree(q);
    slabkit_set_error_hook(nullptr);
    EXPECT_EQ(g_reports.size(), 1u);
}

TEST(DebugKmallocDeathTest, KfreeOfAnOverflowedOrFreedBlockAborts) {
    if (const char *why = kmalloc_debug_unavailable()) GTEST_SKIP() << why;
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            void *p = slabkit_kmalloc(64, 0);
            slabkit_kfree(p);
            slabkit_kfree(p);
        },
        "BUG kmalloc-64 .*: double free");
    EXPECT_DEATH(
        {
            auto *p = static_cast<char *>(slabkit_kmalloc(200, 0));
            p[256] = 0;
            slabkit_kfree(p);
        },
        "BUG kmalloc-256 .*overflow");
    EXPECT_DEATH(
        {
            auto *p = static_cast<char *>(slabkit_kmalloc(32, 0));
            slabkit_kfree(p);
            p[1] = 0;
            slabkit_trim();
        },
        "write after free");
}

// SLABKIT_INIT=alloc,free (its own ctest entry, api_debug_init: read once per process): debug
// caches zero new and freed objects instead of poisoning them, and a write after free is still
// found (the zeros are what the check expects).
TEST(DebugInit, ZeroesInsteadOfPoisonAndStillCatchesWritesAfterFree) {
    const char *init = getenv("SLABKIT_INIT");
    if (!init || strcmp(init, "alloc,free") != 0)
        GTEST_SKIP() << "run with SLABKIT_INIT=alloc,free (ctest api_debug_init)";
    slabkit_cache *c = slabkit_cache_create("init-zero", 40, 0, kFZPU, nullptr);
    ASSERT_NE(c, nullptr);
    auto *p = static_cast<unsigned char *>(slabkit_cache_alloc(c, 0));
    EXPECT_TRUE(all_zero(p, 40)); // not 0x5a
    memset(p, 0x77, 40);
    slabkit_cache_free(c, p);
    EXPECT_TRUE(all_zero(p, 40)); // not 0x6b
    slabkit_set_error_hook(collect);
    g_reports.clear();
    p[7] = 1;
    slabkit_cache_shrink(c);
    ASSERT_EQ(g_reports.size(), 1u);
    EXPECT_NE(g_reports[0].find("write after free"), std::string::npos) << g_reports[0];
    EXPECT_NE(g_reports[0].find("expected: 00"), std::string::npos) << g_reports[0];
    slabkit_set_error_hook(nullptr);
    g_reports.clear();
    slabkit_cache_destroy(c);
}

} // namespace
} // namespace slabkit::apitest
