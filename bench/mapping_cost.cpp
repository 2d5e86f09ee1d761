// mapping_cost - what a change of a mapping costs the rest of a process on this machine.
//
// Maps and touches a 32 MiB range Y, then times one touch per page of Y after each of: nothing,
// an mremap that moves another 32 MiB range, an munmap and mmap of another populated 32 MiB
// range, and an madvise(MADV_DONTNEED) of it; and, for scale, the touch that faults. On bare metal
// or hardware-assisted virtualization the touches stay near their resident cost whatever happened
// elsewhere; on a VM with shadow page tables every such call drops the process's mappings and each
// page touched afterwards pays to be mapped again (docs/kmalloc.md, "Why not per-block mappings").
// The large blocks' region (src/kmalloc/large.hpp) avoids the calls because of it.
//
// Usage: build/release/bench/mapping_cost [rounds]   (ns per page touched, after each call)
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kSize = size_t{32} << 20;
constexpr size_t kPage = 4096;

char *map(int prot) {
    void *p = mmap(nullptr, kSize, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        std::perror("mmap");
        std::exit(1);
    }
    return static_cast<char *>(p);
}

void touch(char *p) {
    for (size_t off = 0; off < kSize; off += kPage) p[off] = static_cast<char>(p[off] + 1);
}

// ns per page of one pass over y.
double timed_touch(char *y) {
    const auto t0 = std::chrono::steady_clock::now();
    touch(y);
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / (kSize / kPage);
}

} // namespace

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 10;
    if (rounds < 1) {
        std::fprintf(stderr, "mapping_cost: rounds must be at least 1, not '%s'\n", argv[1]);
        return 2;
    }
    char *y = map(PROT_READ | PROT_WRITE);
    touch(y);
    char *a = map(PROT_READ | PROT_WRITE);
    char *b = map(PROT_NONE);
    touch(a);
    // Each line: `before` (the call), then one timed touch of every page of Y, `after` (the
    // other range touched again, so that the next round's call has pages to drop), per round.
    auto report = [&](const char *what, auto before, auto after) {
        double sum = 0;
        for (int r = 0; r < rounds; ++r) {
            before();
            sum += timed_touch(y);
            after();
        }
        std::printf("%-40s %8.1f ns/page\n", what, sum / rounds);
    };
    auto nothing = [] {};
    report("after nothing:", nothing, nothing);
    report(
        "after a 32 MiB mremap elsewhere:",
        [&] {
            void *moved = mremap(a, kSize, kSize, MREMAP_MAYMOVE | MREMAP_FIXED, b);
            if (moved == MAP_FAILED) {
                std::perror("mremap");
                std::exit(1);
            }
            b = a;
            a = static_cast<char *>(moved);
        },
        nothing);
    report(
        "after a 32 MiB munmap + mmap:",
        [&] {
            munmap(a, kSize);
            a = map(PROT_READ | PROT_WRITE);
        },
        [&] { touch(a); });
    report(
        "after a 32 MiB madvise(DONTNEED):", [&] { madvise(a, kSize, MADV_DONTNEED); },
        [&] { touch(a); });
    // For scale: a touch that faults (Y's own pages given back first).
    report(
        "a page fault (Y's own pages given back):", [&] { madvise(y, kSize, MADV_DONTNEED); },
        nothing);
    return 0;
}
