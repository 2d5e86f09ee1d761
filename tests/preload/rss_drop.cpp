// Resident memory after free, for the preload tests (built without slabkit; the preloaded malloc
// serves it). Allocates about 1 GiB in a mix of small (16 .. 4096 B) and large (64 KiB .. 16 MiB)
// blocks, touches every byte, frees everything in a shuffled order, and then waits (in 50 ms
// steps, at most 5 s) until the resident set is back within 64 MiB of where it started.
//
// Phase 1 (the assertion): the drop must happen without any call into the allocator after the
// frees. Phase 2 (reported only): malloc_trim(0), and the resident set after it.
//
// Exit status 0 when phase 1 dropped within the time, 1 otherwise. An argument sets the bound in
// MiB instead of 64 (the sheaves' run: their barns keep up to 10 full sheaves a class, whose
// objects hold slabs resident until a trim or a shrink, as the kernel's barns do).
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

constexpr size_t MiB = size_t(1) << 20;
constexpr size_t kSmallTotal = 384 * MiB;
constexpr size_t kLargeTotal = 640 * MiB;
size_t kBound = 64 * MiB;
constexpr int kWaitMs = 5000;
constexpr int kStepMs = 50;

uint64_t next(uint64_t &state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

size_t rss_bytes() {
    FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (!f || std::fscanf(f, "%lu %lu", &size, &resident) != 2) {
        std::perror("/proc/self/statm");
        std::exit(2);
    }
    std::fclose(f);
    return resident * size_t(sysconf(_SC_PAGESIZE));
}

double mib(size_t bytes) {
    return double(bytes) / double(MiB);
}

struct block {
    void *p;
    size_t size;
};

} // namespace

int main(int argc, char **argv) {
    if (argc > 1) kBound = std::strtoull(argv[1], nullptr, 10) * MiB;
    // Warm up: one block of each kind, so that the allocator's own structures exist at the start.
    for (size_t s = 16; s <= 16 * MiB; s *= 2) {
        void *p = std::malloc(s);
        if (p) std::memset(p, 1, s < 4096 ? s : 4096);
        std::free(p);
    }
    // The list of blocks lives outside malloc, and is unmapped before the measurements.
    const size_t max_blocks = kSmallTotal / 16 + kLargeTotal / (64 * 1024) + 16;
    size_t list_bytes = max_blocks * sizeof(block);
    auto *blocks = static_cast<block *>(
        mmap(nullptr, list_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (blocks == MAP_FAILED) {
        std::perror("mmap");
        return 2;
    }
    size_t start = rss_bytes();

    uint64_t rng = 12345;
    size_t n = 0, small_bytes = 0, large_bytes = 0, small_n = 0, large_n = 0;
    while (small_bytes < kSmallTotal || large_bytes < kLargeTotal) {
        // Interleave: mostly small blocks, a large one now and then.
        bool large =
            large_bytes < kLargeTotal && (small_bytes >= kSmallTotal || next(rng) % 64 == 0);
        size_t size;
        if (large) {
            // 64 KiB .. 16 MiB, spread over the sizes on a log scale.
            unsigned shift = 16 + unsigned(next(rng) % 8); // 64 KiB .. 8 MiB
            size = (size_t(1) << shift) + next(rng) % (size_t(1) << shift);
        } else {
            size = 16 + next(rng) % (4096 - 16 + 1);
        }
        void *p = std::malloc(size);
        if (!p) {
            std::fprintf(stderr, "malloc(%zu) failed\n", size);
            return 2;
        }
        std::memset(p, int(n & 0xff) | 1, size);
        blocks[n++] = {p, size};
        (large ? large_bytes : small_bytes) += size;
        (large ? large_n : small_n)++;
    }
    size_t peak = rss_bytes();

    // Free in a shuffled order.
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = next(rng) % (i + 1);
        block t = blocks[i];
        blocks[i] = blocks[j];
        blocks[j] = t;
    }
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; i++) std::free(blocks[i].p);
    auto t1 = std::chrono::steady_clock::now();
    munmap(blocks, list_bytes);
    size_t after_free = rss_bytes();

    size_t now = after_free;
    int waited = 0;
    while (now > start + kBound && waited < kWaitMs) {
        std::this_thread::sleep_for(std::chrono::milliseconds(kStepMs));
        waited += kStepMs;
        now = rss_bytes();
    }
    bool dropped = now <= start + kBound;

    std::printf("blocks: %zu small (%.1f MiB), %zu large (%.1f MiB)\n", small_n, mib(small_bytes),
                large_n, mib(large_bytes));
    std::printf("rss at start:           %8.1f MiB\n", mib(start));
    std::printf("rss with all allocated: %8.1f MiB\n", mib(peak));
    std::printf("rss right after frees:  %8.1f MiB (frees took %.3f s)\n", mib(after_free),
                std::chrono::duration<double>(t1 - t0).count());
    std::printf("phase 1: rss %.1f MiB after %d ms idle; bound start + %.0f MiB = %.1f MiB: %s\n",
                mib(now), waited, mib(kBound), mib(start + kBound),
                dropped ? "dropped" : "NOT DROPPED");

    // Phase 2, reported only: what malloc_trim(0) gives back on top.
    int trimmed = malloc_trim(0);
    size_t after_trim = rss_bytes();
    std::printf("phase 2: malloc_trim(0) returned %d; rss %.1f MiB (%s the bound)\n", trimmed,
                mib(after_trim), after_trim <= start + kBound ? "within" : "over");
    if (peak < start + kSmallTotal / 2 + kLargeTotal / 2)
        std::printf("note: the peak is lower than expected; were the blocks touched?\n");
    std::fflush(stdout);
    return dropped ? 0 : 1;
}
