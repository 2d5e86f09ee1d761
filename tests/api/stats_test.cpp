// Statistics through the public C API, for every design: per-cache figures and counters, the
// list of live caches, the /proc/slabinfo text and the page allocator's totals.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace slabkit::apitest {
namespace {

class Stats : public DesignTest {};

TEST_P(Stats, CacheFigures) {
    constexpr size_t kSize = 100;
    constexpr uint64_t kN = 1000;
    slabkit_cache *c = create(name("st"), kSize, 16);
    ASSERT_NE(c, nullptr);
    cache_stats_t st = stats_of(c);
    EXPECT_EQ(std::string(st.name), name("st"));
    EXPECT_EQ(std::string(st.design), GetParam());
    EXPECT_EQ(st.object_size, kSize);
    EXPECT_GE(st.slot_size, kSize);
    EXPECT_GE(st.align, 16u);
    EXPECT_GT(st.objects_per_slab, 0u);
    EXPECT_LE(st.order, 10u);
    EXPECT_LE(static_cast<uint64_t>(st.objects_per_slab) * st.slot_size, 4096ull << st.order);
    EXPECT_GE(st.nr_counters, 1u);
    EXPECT_LE(st.nr_counters, 24u);
    for (unsigned i = 0; i < st.nr_counters && i < 24; ++i) {
        ASSERT_NE(st.counter_names[i], nullptr) << i;
        EXPECT_GT(std::strlen(st.counter_names[i]), 0u) << i;
    }
    if (GetParam() == "slqb") {
        EXPECT_GE(counter(st, "ALLOC"), 0);
        EXPECT_GE(counter(st, "FREE"), 0);
        EXPECT_GT(st.hiwater, 0u);
        EXPECT_GT(st.freebatch, 0u);
    }
    uint64_t counters_before = 0;
    for (unsigned i = 0; i < st.nr_counters && i < 24; ++i) counters_before += st.counters[i];
    int64_t alloc_before = counter(st, "ALLOC");

    std::vector<void *> objs;
    for (uint64_t i = 0; i < kN; ++i) {
        void *p = slabkit_cache_alloc(c, 0);
        ASSERT_NE(p, nullptr);
        objs.push_back(p);
    }
    st = stats_of(c);
    EXPECT_GE(st.active_objects, kN);
    EXPECT_LE(st.active_objects, st.objects);
    EXPECT_EQ(st.objects, st.slabs * st.objects_per_slab);
    EXPECT_GE(st.slabs, (kN + st.objects_per_slab - 1) / st.objects_per_slab);
    EXPECT_LE(st.queued_objects, st.active_objects);
    uint64_t counters_after = 0;
    for (unsigned i = 0; i < st.nr_counters && i < 24; ++i) counters_after += st.counters[i];
    EXPECT_GE(counters_after, counters_before + kN);
    if (alloc_before >= 0) {
        EXPECT_GE(counter(st, "ALLOC"), alloc_before + static_cast<int64_t>(kN));
    }

    // A slabkit_stats() listing has the same figures for this cache.
    std::vector<cache_stats_t> all(slabkit_cache_count() + 8);
    size_t n = slabkit_stats(all.data(), all.size());
    EXPECT_EQ(n, slabkit_cache_count());
    bool found = false;
    for (size_t i = 0; i < n && i < all.size(); ++i)
        if (name("st") == all[i].name) {
            found = true;
            EXPECT_EQ(all[i].object_size, kSize);
            EXPECT_GE(all[i].active_objects, kN);
            EXPECT_EQ(std::string(all[i].design), GetParam());
        }
    EXPECT_TRUE(found);

    for (void *p : objs) slabkit_cache_free(c, p);
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
    st = stats_of(c);
    EXPECT_EQ(st.active_objects, 0u);
    EXPECT_EQ(st.queued_objects, 0u);
    EXPECT_EQ(st.slabs, 0u);
    EXPECT_EQ(st.objects, 0u);
    if (alloc_before >= 0) {
        EXPECT_GE(counter(st, "FREE"), static_cast<int64_t>(kN));
    }
}

TEST_P(Stats, ListingIsInCreationOrderAndReportsTheTotal) {
    slabkit_cache *a = create(name("ord-a"), 32);
    slabkit_cache *b = create(name("ord-b"), 32);
    slabkit_cache *c = create(name("ord-c"), 32);
    ASSERT_TRUE(a && b && c);
    size_t total = slabkit_cache_count();
    std::vector<cache_stats_t> all(total + 4);
    ASSERT_EQ(slabkit_stats(all.data(), all.size()), total);
    std::vector<std::string> order;
    for (size_t i = 0; i < total; ++i) {
        std::string nm = all[i].name;
        if (nm == name("ord-a") || nm == name("ord-b") || nm == name("ord-c")) order.push_back(nm);
    }
    EXPECT_EQ(order, (std::vector<std::string>{name("ord-a"), name("ord-b"), name("ord-c")}));
    // A short array: as many as fit, and the total.
    cache_stats_t one[1];
    EXPECT_EQ(slabkit_stats(one, 1), total);
    EXPECT_EQ(slabkit_stats(one, 0), total);
    destroy(b);
    EXPECT_EQ(slabkit_stats(all.data(), all.size()), total - 1);
    for (size_t i = 0; i < total - 1; ++i) EXPECT_NE(name("ord-b"), all[i].name);
}

// The numbers of a slabinfo line: active_objs num_objs objsize objperslab pagesperslab.
struct slabinfo_line {
    bool found = false;
    uint64_t active = 0, total = 0, objsize = 0, per_slab = 0, pages = 0;
};

slabinfo_line find_line(const std::string &text, const std::string &cache) {
    std::istringstream in(text);
    slabinfo_line out;
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string nm;
        fields >> nm;
        if (nm != cache) continue;
        out.found = true;
        fields >> out.active >> out.total >> out.objsize >> out.per_slab >> out.pages;
    }
    return out;
}

TEST_P(Stats, SlabinfoText) {
    constexpr uint64_t kN = 300;
    slabkit_cache *c = create(name("si"), 200);
    ASSERT_NE(c, nullptr);
    std::vector<void *> objs;
    for (uint64_t i = 0; i < kN; ++i) {
        void *p = slabkit_cache_alloc(c, 0);
        ASSERT_NE(p, nullptr);
        objs.push_back(p);
    }
    std::string text = slabinfo_text();
    ASSERT_EQ(text.rfind("slabinfo - version: 2.1\n", 0), 0u) << text.substr(0, 200);
    slabinfo_line line = find_line(text, name("si"));
    ASSERT_TRUE(line.found) << text;
    EXPECT_GE(line.active, kN);
    EXPECT_GE(line.total, line.active);
    EXPECT_GE(line.objsize, 200u);
    EXPECT_GT(line.per_slab, 0u);
    EXPECT_GT(line.pages, 0u);
    // Every line ends with a newline; the text has no NUL inside.
    EXPECT_EQ(text.back(), '\n');
    EXPECT_EQ(text.find('\0'), std::string::npos);

    // snprintf-like truncation: the full length is returned, the text is cut and terminated.
    size_t full = slabkit_slabinfo(nullptr, 0);
    EXPECT_EQ(full, text.size());
    char small[17];
    std::memset(small, 'x', sizeof small);
    EXPECT_EQ(slabkit_slabinfo(small, 16), full);
    EXPECT_EQ(std::string(small), text.substr(0, 15));
    EXPECT_EQ(small[16], 'x');
    char one = 'x';
    EXPECT_EQ(slabkit_slabinfo(&one, 1), full);
    EXPECT_EQ(one, '\0');

    for (void *p : objs) slabkit_cache_free(c, p);
    destroy(c);
    EXPECT_FALSE(find_line(slabinfo_text(), name("si")).found);
}

// Slabs take pages from the page allocator and give them back when emptied and shrunk.
TEST_P(Stats, PageStatsFollowSlabs) {
    constexpr size_t kSize = 2048;
    constexpr size_t kN = 1000;
    uint64_t base = baseline_pages_in_use();
    slabkit_cache *c = create(name("pg"), kSize);
    ASSERT_NE(c, nullptr);
    std::vector<void *> objs;
    for (size_t i = 0; i < kN; ++i) {
        void *p = slabkit_cache_alloc(c, 0);
        ASSERT_NE(p, nullptr);
        objs.push_back(p);
    }
    cache_stats_t st = stats_of(c);
    uint64_t slab_pages = st.slabs << st.order;
    EXPECT_GE(slab_pages, kN * kSize / 4096);
    EXPECT_GE(pages_in_use(), base + slab_pages);
    page_stats_t ps = page_stats();
    EXPECT_GT(ps.reserved_bytes, 0u);
    EXPECT_GE(ps.reserved_bytes / 4096, ps.pages_in_use);
    for (void *p : objs) slabkit_cache_free(c, p);
    EXPECT_EQ(slabkit_cache_shrink(c), 0u);
    destroy(c);
    EXPECT_TRUE(pages_back_to(base));
}

// The statistics report (what SLABKIT_STATS=exit and malloc_stats print) has the slabinfo line
// of a cache and its design's counters that moved.
TEST_P(Stats, ReportHasTheSlabinfoLineAndTheDesignsCounters) {
    slabkit_cache *c = create(name("rep"), 48);
    ASSERT_NE(c, nullptr);
    std::vector<void *> objs;
    for (int i = 0; i < 300; ++i) objs.push_back(slabkit_cache_alloc(c, 0));
    for (void *p : objs) slabkit_cache_free(c, p);
    char path[] = "/tmp/slabkit_report_XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    slabkit_print_stats(fd);
    std::string text(1 << 20, '\0');
    ssize_t n = pread(fd, text.data(), text.size(), 0);
    close(fd);
    unlink(path);
    ASSERT_GT(n, 0);
    text.resize(static_cast<size_t>(n));
    EXPECT_TRUE(find_line(text, name("rep")).found) << text;
    std::string counters_line = name("rep") + " [" + GetParam() + "]:";
    size_t at = text.find(counters_line);
    ASSERT_NE(at, std::string::npos) << text;
    std::string line = text.substr(at, text.find('\n', at) - at);
    cache_stats_t st = stats_of(c);
    unsigned moved = 0;
    for (unsigned i = 0; i < st.nr_counters; ++i) {
        if (!st.counters[i]) continue;
        ++moved;
        EXPECT_NE(line.find(std::string(" ") + st.counter_names[i] + "="), std::string::npos)
            << st.counter_names[i] << " is not on the line: " << line;
    }
    EXPECT_GT(moved, 0u);
}

SLABKIT_INSTANTIATE_FOR_DESIGNS(Stats);

// ---- kmalloc and the page allocator (the process's design) -----------------------------------

TEST(KmallocStats, LargeBlocksComeFromPagesAndTheOS) {
    uint64_t base = baseline_pages_in_use();
    page_stats_t before = page_stats();
    void *mib = slabkit_kmalloc(1 << 20, 0);
    ASSERT_NE(mib, nullptr);
    EXPECT_GE(pages_in_use(), base + 256);
    void *four = slabkit_kmalloc(4 << 20, 0); // the largest page block
    ASSERT_NE(four, nullptr);
    EXPECT_GE(pages_in_use(), base + 256 + 1024);
    EXPECT_EQ(page_stats().large_os_bytes, before.large_os_bytes);
    void *os = slabkit_kmalloc((4 << 20) + 1, 0); // above 4 MiB: from the OS
    ASSERT_NE(os, nullptr);
    EXPECT_GE(page_stats().large_os_bytes, before.large_os_bytes + (4 << 20) + 1);
    void *os16 = slabkit_kmalloc(16 << 20, 0);
    ASSERT_NE(os16, nullptr);
    EXPECT_GE(page_stats().large_os_bytes, before.large_os_bytes + (20 << 20) + 1);
    slabkit_kfree(os16);
    slabkit_kfree(os);
    EXPECT_EQ(page_stats().large_os_bytes, before.large_os_bytes);
    slabkit_kfree(four);
    slabkit_kfree(mib);
    EXPECT_TRUE(pages_back_to(base));
}

TEST(KmallocStats, KmallocCachesAppearInSlabinfo) {
    void *p = slabkit_kmalloc(64, 0);
    ASSERT_NE(p, nullptr);
    if (std::string(slabkit_allocator()) == "slob") {
        // SLOB serves kmalloc from its pages, with no kmalloc caches: the arena's line shows
        // its pages.
        slabinfo_line line = find_line(slabinfo_text(), "slob-pages");
        EXPECT_TRUE(line.found) << slabinfo_text();
        slabkit_kfree(p);
        return;
    }
    slabinfo_line line = find_line(slabinfo_text(), "kmalloc-64");
    EXPECT_TRUE(line.found) << slabinfo_text();
    EXPECT_GE(line.active, 1u);
    slabkit_kfree(p);
}

std::string print_stats_text() {
    char path[] = "/tmp/slabkit_report_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return "";
    slabkit_print_stats(fd);
    std::string text(1 << 20, '\0');
    ssize_t n = pread(fd, text.data(), text.size(), 0);
    close(fd);
    unlink(path);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return text;
}

// The slot mode is visible, consistent with SLABKIT_SLOTS, and fixed once allocation started.
TEST(SlotStats, ModeIsReportedAndFixedAfterTheFirstAllocation) {
    void *p = slabkit_kmalloc(64, 0); // the mode is chosen by now
    ASSERT_NE(p, nullptr);
    slabkit_slot_stats st;
    slabkit_get_slot_stats(&st);
    std::string mode = st.mode, rseq = st.rseq;
    EXPECT_TRUE(mode == "thread" || mode == "cpu" || mode == "auto") << mode;
    EXPECT_TRUE(rseq == "glibc" || rseq == "own" || rseq == "none") << rseq;
    EXPECT_NE(std::string(st.why), "");
    const char *env = getenv("SLABKIT_SLOTS");
    if (env && (std::string(env) == "thread" || std::string(env) == "auto")) {
        EXPECT_TRUE(mode == env || (std::string(env) == "auto" && mode == "thread")) << mode;
    }
    const char *tunables = getenv("GLIBC_TUNABLES");
    if (mode != "thread" && tunables && strstr(tunables, "glibc.pthread.rseq=0")) {
        EXPECT_EQ(rseq, "own"); // glibc registered none: slabkit registers its own
    }
    if (mode == "thread") {
        EXPECT_EQ(st.cpu_slots, 0u);
        EXPECT_EQ(st.thread_slots, 1024u);
    } else {
        EXPECT_NE(rseq, "none");
        EXPECT_GE(st.cpu_slots, 1u);
    }
    if (mode == "cpu") {
        EXPECT_EQ(st.thread_slots, 0u);
    }
    EXPECT_LE(st.threads_owning, st.thread_slots);

    // Too late to change it, and a wrong name is refused with a reason; the same mode again is
    // fine.
    const char *why = nullptr;
    if (rseq == "none") {
        // No rseq here: the CPUs' slots cannot be had, and the reason says so.
        EXPECT_EQ(slabkit_set_slot_mode("cpu", &why), -1);
        ASSERT_NE(why, nullptr);
        EXPECT_NE(std::string(why).find("rseq"), std::string::npos) << why;
    } else {
        const char *other = mode == "thread" ? "cpu" : "thread";
        EXPECT_EQ(slabkit_set_slot_mode(other, &why), -1);
        ASSERT_NE(why, nullptr);
        EXPECT_NE(std::string(why).find("chosen already"), std::string::npos) << why;
    }
    EXPECT_EQ(slabkit_set_slot_mode("per-core", &why), -1);
    ASSERT_NE(why, nullptr);
    EXPECT_NE(std::string(why).find("not a slot mode"), std::string::npos) << why;
    EXPECT_EQ(slabkit_set_slot_mode(nullptr, nullptr), -1);
    EXPECT_EQ(slabkit_set_slot_mode(mode.c_str(), &why), 0);
    slabkit_get_slot_stats(&st);
    EXPECT_EQ(std::string(st.mode), mode);

    // The report says it too.
    std::string report = print_stats_text();
    EXPECT_NE(report.find("slabkit: slots: mode " + mode), std::string::npos) << report;
    slabkit_kfree(p);
}

} // namespace
} // namespace slabkit::apitest
