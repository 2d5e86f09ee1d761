// api_support.hpp - helpers of the public API's tests (tests/api): the designs list, content
// patterns, statistics look-ups and a fixture, parameterized by design, that destroys the caches
// a test made.
//
// The tests use only include/slabkit/slabkit.h: they are the contract every design must meet.
#pragma once

#include "api/pattern.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace slabkit::apitest {

#if defined(SLABKIT_SANITIZED)
inline constexpr int kScale = 4; // divide iteration counts under sanitizers
#else
inline constexpr int kScale = 1;
#endif

// The designs this build has (slabkit_designs(), split at spaces).
inline std::vector<std::string> designs() {
    std::vector<std::string> out;
    std::istringstream in(slabkit_designs());
    for (std::string d; in >> d;) out.push_back(d);
    return out;
}

inline std::string design_param_name(const ::testing::TestParamInfo<std::string> &info) {
    return info.param;
}

// The block holds the pattern of `id` in its first n bytes.
inline ::testing::AssertionResult holds(const void *p, size_t n, uint64_t id) {
    size_t at = first_mismatch(p, n, id);
    if (at == n) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "block " << p << " (id " << id << ", " << n
                                         << " bytes): pattern broken at byte " << at;
}

inline ::testing::AssertionResult all_zero(const void *p, size_t n) {
    const auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; ++i)
        if (b[i] != 0)
            return ::testing::AssertionFailure()
                   << "block " << p << " (" << n << " bytes): byte " << i << " is "
                   << static_cast<unsigned>(b[i]) << ", not 0";
    return ::testing::AssertionSuccess();
}

inline uintptr_t addr(const void *p) {
    return reinterpret_cast<uintptr_t>(p);
}

// The address as slabkit's reports print it (%p).
inline std::string addr_text(const void *p) {
    char buf[32];
    snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

// ---- statistics ----------------------------------------------------------------------------

using page_stats_t = slabkit_page_stats;
using cache_stats_t = slabkit_cache_stats;

inline page_stats_t page_stats() {
    page_stats_t st{};
    slabkit_get_page_stats(&st);
    return st;
}

inline uint64_t pages_in_use() {
    return page_stats().pages_in_use;
}

// Trims, then reads pages_in_use: the baseline and end value of the leak checks.
inline uint64_t trimmed_pages_in_use() {
    slabkit_trim();
    return pages_in_use();
}

// A thread's first use of a cache makes its per-slot structures (kept while the thread lives):
// leak checks take their baseline after this thread has used every kmalloc class.
inline void warm_up_kmalloc() {
    for (size_t size = 8; size <= SLABKIT_KMALLOC_MAX_CACHE_SIZE; size += 8)
        slabkit_kfree(slabkit_kmalloc(size, 0));
}

// The baseline of a leak check: pages in use after a warm-up and a trim.
inline uint64_t baseline_pages_in_use() {
    warm_up_kmalloc();
    return trimmed_pages_in_use();
}

inline cache_stats_t stats_of(const slabkit_cache *c) {
    cache_stats_t st{};
    slabkit_get_cache_stats(c, &st);
    return st;
}

// The value of the counter named `name`, or -1 when the design has no such counter.
inline int64_t counter(const cache_stats_t &st, const char *name) {
    for (unsigned i = 0; i < st.nr_counters && i < 24; ++i)
        if (st.counter_names[i] && std::strcmp(st.counter_names[i], name) == 0)
            return static_cast<int64_t>(st.counters[i]);
    return -1;
}

inline std::string slabinfo_text() {
    size_t n = slabkit_slabinfo(nullptr, 0);
    std::string s(n + 1, '\0');
    size_t m = slabkit_slabinfo(s.data(), s.size());
    s.resize(std::min(n, m));
    return s;
}

// After slabkit_trim(), the page allocator has `base` pages in use again; on failure the message
// has the slabinfo text, to show which caches kept slabs.
inline ::testing::AssertionResult pages_back_to(uint64_t base) {
    uint64_t now = trimmed_pages_in_use();
    if (now == base) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "after slabkit_trim(): " << now << " pages in use, " << base << " at the start\n"
           << slabinfo_text();
}

// ---- the fixture of the per-design tests -----------------------------------------------------

// Caches made by create() are destroyed when the test ends (unless the test destroyed them).
class DesignTest : public ::testing::TestWithParam<std::string> {
  protected:
    // A design sets up its own bootstrap caches when its first cache is made (they stay, and
    // count among the live caches): make and destroy one first, so that the tests' counts and
    // page baselines are taken with them in place.
    void SetUp() override {
        std::string boot = "boot-" + GetParam();
        slabkit_cache_destroy(slabkit_cache_create_in(design(), boot.c_str(), 8, 0, 0, nullptr));
    }
    void TearDown() override {
        for (slabkit_cache *c : made_) slabkit_cache_destroy(c);
        made_.clear();
    }
    const char *design() const { return GetParam().c_str(); }
    // A cache name unique to this design ("<what>-<design>"; `what` up to 20 characters).
    std::string name(const std::string &what) const { return what + "-" + GetParam(); }
    slabkit_cache *create(const std::string &nm, size_t size, size_t align = 0, unsigned flags = 0,
                          void (*ctor)(void *) = nullptr) {
        slabkit_cache *c = slabkit_cache_create_in(design(), nm.c_str(), size, align, flags, ctor);
        if (c) made_.push_back(c);
        return c;
    }
    void destroy(slabkit_cache *c) {
        auto it = std::find(made_.begin(), made_.end(), c);
        if (it != made_.end()) made_.erase(it);
        slabkit_cache_destroy(c);
    }
    // Forgets c without destroying it (a test that destroyed it another way).
    void forget(slabkit_cache *c) {
        auto it = std::find(made_.begin(), made_.end(), c);
        if (it != made_.end()) made_.erase(it);
    }

  private:
    std::vector<slabkit_cache *> made_;
};

#define SLABKIT_INSTANTIATE_FOR_DESIGNS(suite)                                                     \
    INSTANTIATE_TEST_SUITE_P(Designs, suite, ::testing::ValuesIn(::slabkit::apitest::designs()),   \
                             ::slabkit::apitest::design_param_name)

} // namespace slabkit::apitest
