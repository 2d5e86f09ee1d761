// api_fuzz.cpp - libFuzzer target over sequences of public C API operations.
//
// The input bytes are decoded into operations on the model of tests/api/api_model.hpp: create
// caches of various sizes, alignments, flags and constructors (in a design chosen by the first
// byte), alloc/alloc_node/free, bulk alloc/free, kmalloc/kzalloc/kcalloc/kmalloc_node of sizes
// around the class boundaries, page blocks and OS blocks, krealloc, kfree, shrink, destroy, trim.
// Every block carries a pattern checked before it is freed or resized; every promise of the API
// the model checks (alignment, usable sizes, zeroing, in-place krealloc, shrink) aborts the run
// when broken. After each input everything is freed and destroyed, and after slabkit_trim() the
// page allocator must have as many pages in use as after the warm-up.
//
// Build: clang with -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt); run by
// ctest (api_fuzz) for a bounded time over the seed corpus in tests/fuzz/corpus.
#include "api/api_model.hpp"

#include <slabkit/slabkit.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using slabkit::apitest::api_model;
using slabkit::apitest::kNrModelCtors;

// Reads the input a little at a time; past the end, every read is 0.
class reader {
  public:
    reader(const uint8_t *data, size_t size) : p_(data), end_(data + size) {}
    bool empty() const { return p_ >= end_; }
    uint8_t u8() { return p_ < end_ ? *p_++ : 0; }
    uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }

  private:
    const uint8_t *p_;
    const uint8_t *end_;
};

constexpr size_t kAligns[] = {0, 8, 16, 32, 64, 128, 256, 1024, 4096, 1, 2, 4};
constexpr size_t kBoundaries[] = {8,    16,   32,   64,   96,    128,   192,   256,    512,
                                  1024, 2048, 4096, 8192, 16384, 32768, 65536, 1 << 20};

size_t kmalloc_size(reader &r) {
    uint8_t sel = r.u8();
    switch (sel % 10) {
    case 0:
    case 1:
    case 2:
        return r.u8(); // 0..255
    case 3:
    case 4:
        return r.u16() % 8193;
    case 5: { // just around a boundary
        size_t b = kBoundaries[r.u8() % (sizeof kBoundaries / sizeof kBoundaries[0])];
        return b - 2 + r.u8() % 5;
    }
    case 6:
    case 7:
        return 8193 + size_t{r.u16()} * 4; // pages up to 264 KiB
    case 8:
        return 8193 + size_t{r.u16()} * 64; // up to 4 MiB
    default:
        return (size_t{4} << 20) - 8192 + size_t{r.u16()} * 64; // across 4 MiB, OS blocks
    }
}

[[noreturn]] void fail(const std::string &msg) {
    fprintf(stderr, "api_fuzz: %s\n", msg.c_str());
    abort();
}

std::vector<std::string> g_designs;
uint64_t g_base_pages = 0;

uint64_t trimmed_pages_in_use() {
    slabkit_trim();
    struct slabkit_page_stats st {};
    slabkit_get_page_stats(&st);
    return st.pages_in_use;
}

void run(const uint8_t *data, size_t size) {
    reader r(data, size);
    const std::string &design = g_designs[r.u8() % g_designs.size()];
    api_model m(design, "fz", fail);
    while (!r.empty()) {
        uint8_t op = r.u8();
        switch (op % 16) {
        case 0: {
            size_t sz = 1 + r.u16() % (op & 0x80 ? 9000 : 512);
            size_t align = kAligns[r.u8() % (sizeof kAligns / sizeof kAligns[0])];
            uint8_t f = r.u8();
            unsigned flags = (f & 1 ? SLABKIT_HWCACHE_ALIGN : 0) | (f & 2 ? SLABKIT_POISON : 0);
            int ctor = (f >> 2) < kNrModelCtors ? static_cast<int>(f >> 2) : -1;
            m.create_cache(sz, align, flags, ctor);
            break;
        }
        case 1:
        case 2:
        case 3: {
            uint8_t which = r.u8();
            uint8_t how = r.u8();
            m.cache_alloc(which, how & 1, (how >> 1) % 8 < 4 ? 0 : (how >> 1) % 4);
            break;
        }
        case 4: {
            uint8_t which = r.u8();
            uint8_t n = r.u8();
            m.bulk_alloc(which, 1 + n % 64, n & 0x80);
            break;
        }
        case 5: {
            uint8_t which = r.u8();
            m.bulk_free(which, 1 + r.u8() % 64);
            break;
        }
        case 6:
        case 7:
        case 8: {
            size_t sz = kmalloc_size(r);
            m.kmalloc(sz, r.u8());
            break;
        }
        case 9: {
            uint16_t which = r.u16();
            m.krealloc(which, kmalloc_size(r));
            break;
        }
        case 10:
        case 11:
        case 12:
            m.free_block(r.u16());
            break;
        case 13:
            m.shrink_cache(r.u8());
            break;
        case 14:
            if (op & 0x80)
                slabkit_trim();
            else
                m.destroy_cache(r.u8());
            break;
        default:
            m.check_all();
            break;
        }
    }
    m.check_all();
    m.clear();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    std::string all = slabkit_designs();
    for (size_t pos = 0; pos < all.size();) {
        size_t end = all.find(' ', pos);
        if (end == std::string::npos) end = all.size();
        if (end > pos) g_designs.push_back(all.substr(pos, end - pos));
        pos = end + 1;
    }
    if (g_designs.empty()) fail("slabkit_designs() is empty");
    // Warm-up: every kmalloc class and a cache of each design meet this thread's slot once.
    static const uint8_t warm[] = {0x00, 0x80, 0x10, 0x00, 0x00, 0x01, 0x00, 0x00, 0x06,
                                   0x03, 0xff, 0x00, 0x0a, 0x00, 0x00, 0x0e, 0x00};
    for (size_t d = 0; d < g_designs.size(); ++d) {
        std::vector<uint8_t> in(warm, warm + sizeof warm);
        in[0] = static_cast<uint8_t>(d);
        run(in.data(), in.size());
    }
    for (size_t s = 1; s <= 2 * SLABKIT_KMALLOC_MAX_CACHE_SIZE; s += 8)
        slabkit_kfree(slabkit_kmalloc(s, 0));
    g_base_pages = trimmed_pages_in_use();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run(data, size);
    uint64_t pages = trimmed_pages_in_use();
    if (pages != g_base_pages) {
        fail("after freeing everything and slabkit_trim(), " + std::to_string(pages) +
             " pages are in use, " + std::to_string(g_base_pages) + " before");
    }
    return 0;
}
