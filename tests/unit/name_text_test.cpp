// name_text: names built without the printf family (base/name_text.hpp), and the cache names
// made with it, against what snprintf makes of the same pieces.
#include "base/name_text.hpp"
#include "core/cache.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace slabkit {
namespace {

TEST(NameText, TextAndNumbersAsSnprintfWritesThem) {
    const uint64_t numbers[] = {0, 7, 10, 1024, 4294967296ull, UINT64_MAX};
    for (uint64_t n : numbers) {
        char a[32], b[32];
        name_text(a, sizeof a).add("malloc-").add(n);
        std::snprintf(b, sizeof b, "malloc-%llu", static_cast<unsigned long long>(n));
        EXPECT_STREQ(a, b);
    }
}

TEST(NameText, CutsAtTheBufferAndAlwaysEndsTheString) {
    // Every buffer size from 1 up.
    for (size_t size = 1; size <= 16; ++size) {
        char a[16];
        name_text(a, size).add("slub-").add("malloc-").add(uint64_t{12345});
        // What snprintf keeps of the whole: size - 1 characters at most, then the NUL.
        const std::string whole = "slub-malloc-12345";
        EXPECT_EQ(std::string(a), whole.substr(0, size - 1)) << "size " << size;
    }
    char c[4] = {'x', 'x', 'x', 'x'};
    name_text t(c, sizeof c);
    EXPECT_STREQ(c, "") << "an empty name until something is added";
    EXPECT_EQ(t.len, 0u);
}

TEST(NameText, InternalCacheNamesCarryTheDesignOfAnotherProcessDesign) {
    char buf[64];
    internal_cache_name(process_design(), "malloc-64", buf, sizeof buf);
    EXPECT_STREQ(buf, "malloc-64");
    for (unsigned i = 0; i < kNrDesigns; ++i) {
        const design d = static_cast<design>(i);
        if (d == process_design()) continue;
        internal_cache_name(d, "kmalloc-32", buf, sizeof buf);
        EXPECT_EQ(std::string(buf), std::string(design_name(d)) + "-kmalloc-32");
    }
}

} // namespace
} // namespace slabkit
