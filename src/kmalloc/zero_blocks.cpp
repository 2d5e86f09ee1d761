// zero_blocks.cpp - see zero_blocks.hpp.
#include "kmalloc/zero_blocks.hpp"

#include "core/report.hpp"
#include "platform/platform.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>

namespace slabkit::zero_blocks {

namespace {

constexpr size_t kRegionBytes = size_t{16} << 20;
constexpr size_t kCell = 16; // malloc's alignment: every block is 16-aligned
constexpr size_t kCells = kRegionBytes / kCell;
constexpr size_t kWords = kCells / 64;

std::atomic<uintptr_t> g_base{0};    // 0 until reserved; 1 when it could not be
std::atomic<uint64_t> g_out[kWords]; // bit set: the cell is handed out
std::atomic<uint64_t> g_cursor{0};   // next cell to try, round the region

uintptr_t region() {
    uintptr_t base = g_base.load(std::memory_order_acquire);
    if (base != 0) return base == 1 ? 0 : base;
    platform::os_status st;
    void *r = platform::reserve(kRegionBytes, platform::page_size(), &st);
    uintptr_t want = r ? reinterpret_cast<uintptr_t>(r) : 1;
    uintptr_t expected = 0;
    if (!g_base.compare_exchange_strong(expected, want, std::memory_order_acq_rel)) {
        if (r) platform::release(r, kRegionBytes); // another thread reserved it first
        return expected == 1 ? 0 : expected;
    }
    return want == 1 ? 0 : want;
}

} // namespace

void *alloc() {
    const uintptr_t base = region();
    if (!base) return nullptr;
    // Try cells in turn; give up after a full word's worth of taken ones in a row.
    for (unsigned tries = 0; tries < 4096; ++tries) {
        const uint64_t cell = g_cursor.fetch_add(1, std::memory_order_relaxed) % kCells;
        const uint64_t bit = uint64_t{1} << (cell % 64);
        if (!(g_out[cell / 64].fetch_or(bit, std::memory_order_acq_rel) & bit))
            return reinterpret_cast<void *>(base + cell * kCell);
    }
    return nullptr;
}

bool owns(const void *p) {
    const uintptr_t base = g_base.load(std::memory_order_acquire);
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return base > 1 && a >= base && a - base < kRegionBytes;
}

void free(void *p, const char *caller) {
    const uintptr_t off = reinterpret_cast<uintptr_t>(p) - g_base.load(std::memory_order_acquire);
    if (off % kCell != 0) {
        char what[160];
        snprintf(what, sizeof what,
                 "the address is %zu bytes into a zero-size block (malloc(0) while debugging): "
                 "not a block start",
                 static_cast<size_t>(off % kCell));
        return report_bad_free(caller, nullptr, p, what);
    }
    const uint64_t cell = off / kCell;
    const uint64_t bit = uint64_t{1} << (cell % 64);
    if (!(g_out[cell / 64].fetch_and(~bit, std::memory_order_acq_rel) & bit))
        report_bad_free(caller, nullptr, p,
                        "a zero-size block (malloc(0) while debugging) freed already, or never "
                        "handed out (double free)");
}

} // namespace slabkit::zero_blocks
