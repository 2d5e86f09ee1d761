// memory.cpp - address space: reserve, commit, decommit, protect, release, residency, binding.
#include "platform/platform.hpp"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace slabkit::platform {

size_t page_size() {
    // Constant-initialised, not a guarded local static: the library must not need the C++
    // runtime (__cxa_guard_acquire), see override/new_delete.cpp.
    static std::atomic<size_t> cached{0};
    size_t size = cached.load(std::memory_order_relaxed);
    if (__builtin_expect(size == 0, 0)) {
        size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        cached.store(size, std::memory_order_relaxed);
    }
    return size;
}

void *reserve(size_t size, size_t align, os_status *status) {
    *status = {};
    if (size == 0 || (align & (align - 1)) != 0) {
        *status = {"reserve", EINVAL};
        return nullptr;
    }
    if (align < page_size()) align = page_size();
    // Whole pages: with a partial last page the tail trim below would start mid-page and fail.
    const size_t whole = (size + page_size() - 1) & ~(page_size() - 1);
    if (whole < size) {
        *status = {"reserve", ENOMEM};
        return nullptr;
    }
    size = whole;
    // Over-reserve by the alignment, then cut the unaligned ends off.
    size_t span = size + (align > page_size() ? align : 0);
    if (span < size) {
        *status = {"reserve", ENOMEM};
        return nullptr;
    }
    void *raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        *status = {"mmap", errno};
        return nullptr;
    }
    uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    uintptr_t aligned = (start + align - 1) & ~(uintptr_t{align} - 1);
    if (aligned > start) munmap(raw, aligned - start);
    uintptr_t end = start + span;
    if (end > aligned + size)
        munmap(reinterpret_cast<void *>(aligned + size), end - aligned - size);
    return reinterpret_cast<void *>(aligned);
}

os_status map_at(void *addr, size_t size) {
#ifndef MAP_FIXED_NOREPLACE
    constexpr int MAP_FIXED_NOREPLACE = 0x100000; // Linux 4.17; older kernels take it as a hint
#endif
    void *p = mmap(addr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return {"mmap", errno};
    if (p != addr) { // a kernel that took the flag as a hint placed it elsewhere
        munmap(p, size);
        return {"mmap", EEXIST};
    }
    return {};
}

void *map_aligned_exact(size_t size, size_t align, os_status *status) {
    *status = {};
    if (size == 0 || (align & (align - 1)) != 0 || size % page_size() != 0) {
        *status = {"map", EINVAL};
        return nullptr;
    }
    // Where would the kernel put it? The mmap area grows down from there, so the aligned
    // addresses at and below that point are the likeliest to be free.
    void *probe =
        mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (probe == MAP_FAILED) {
        *status = {"mmap", errno};
        return nullptr;
    }
    munmap(probe, size);
    const uintptr_t at = reinterpret_cast<uintptr_t>(probe) & ~(uintptr_t{align} - 1);
    constexpr unsigned kTries = 64;
    for (unsigned i = 0; i < 2 * kTries; ++i) {
        // at, at - align, ..., then at + align, at + 2 align, ...
        const uintptr_t step = uintptr_t{align} * (i < kTries ? i : i - kTries + 1);
        const uintptr_t cand = i < kTries ? at - step : at + step;
        if (i < kTries && (step > at || cand == 0)) {
            i = kTries - 1; // nothing lower: go up
            continue;
        }
        if (cand + size < cand) break;
        os_status st = map_at(reinterpret_cast<void *>(cand), size);
        if (st.ok()) return reinterpret_cast<void *>(cand);
        if (st.err != EEXIST) { // out of address space, or refused: no use trying further
            *status = st;
            return nullptr;
        }
    }
    *status = {"mmap (no free aligned address)", ENOMEM};
    return nullptr;
}

uint64_t address_space_limit() {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    return rl.rlim_cur;
}

os_status commit(void *addr, size_t size) {
    if (mprotect(addr, size, PROT_READ | PROT_WRITE) != 0) return {"mprotect", errno};
    return {};
}

os_status decommit(void *addr, size_t size) {
    if (madvise(addr, size, MADV_DONTNEED) != 0) return {"madvise", errno};
    return {};
}

os_status protect_none(void *addr, size_t size) {
    if (mprotect(addr, size, PROT_NONE) != 0) return {"mprotect", errno};
    if (madvise(addr, size, MADV_DONTNEED) != 0) return {"madvise", errno};
    return {};
}

os_status protect_read(void *addr, size_t size) {
    if (mprotect(addr, size, PROT_READ) != 0) return {"mprotect", errno};
    return {};
}

os_status no_huge_pages(void *addr, size_t size) {
    if (madvise(addr, size, MADV_NOHUGEPAGE) != 0) return {"madvise", errno};
    return {};
}

os_status huge_pages(void *addr, size_t size) {
    if (madvise(addr, size, MADV_HUGEPAGE) != 0) return {"madvise", errno};
    return {};
}

void *remap(void *addr, size_t old_size, size_t new_size, os_status *status) {
    *status = {};
    void *p = mremap(addr, old_size, new_size, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) {
        *status = {"mremap", errno};
        return nullptr;
    }
    return p;
}

os_status move_pages(void *addr, size_t size, void *target) {
    if (mremap(addr, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, target) == MAP_FAILED)
        return {"mremap", errno};
    return {};
}

os_status map_fresh(void *addr, size_t size) {
    if (mmap(addr, size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
        return {"mmap", errno};
    return {};
}

os_status release(void *addr, size_t size) {
    if (munmap(addr, size) != 0) return {"munmap", errno};
    return {};
}

size_t resident_pages(const void *addr, size_t size, os_status *status) {
    *status = {};
    const size_t page = page_size();
    const uintptr_t start = reinterpret_cast<uintptr_t>(addr) & ~(uintptr_t{page} - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(addr) + size;
    size_t resident = 0;
    unsigned char vec[256];
    for (uintptr_t at = start; at < end;) {
        size_t pages = (end - at + page - 1) / page;
        if (pages > sizeof vec) pages = sizeof vec;
        if (mincore(reinterpret_cast<void *>(at), pages * page, vec) != 0) {
            *status = {"mincore", errno};
            return 0;
        }
        for (size_t i = 0; i < pages; ++i) resident += vec[i] & 1;
        at += pages * page;
    }
    return resident;
}

os_status bind_to_node(void *addr, size_t size, unsigned node) {
    const topology &topo = numa();
    if (topo.fake || topo.real_nodes <= 1) return {};
    if (node >= topo.real_nodes) return {"mbind", EINVAL};
    constexpr int kMpolPreferred = 1;
    unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
    mask[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_mbind, addr, size, kMpolPreferred, mask, kMaxNodes + 1, 0) != 0)
        return {"mbind", errno};
    return {};
}

} // namespace slabkit::platform
