// page.hpp - pages, orders, chunks and the page descriptor (the kernel's struct page).
//
// The arena is a set of chunks, each kChunkSize bytes reserved at a kChunkSize-aligned address
// and owned by one NUMA node of one page allocator. A chunk starts with its metadata, then holds
// pages for use:
//
//   chunk base                                                   base + kChunkSize
//   | header | dirty bitmap | read-only bitmap | ... descriptors (64 B per page) ... | pages |
//   |<----------- kMetaPages pages (16 MiB for a 1 GiB chunk) ---->|
//
// The descriptor of page i of the chunk is the i-th 64-byte record from the chunk base, so
// virt_to_page and page_to_virt are a mask, a shift and an add, and a descriptor's own address
// tells which chunk it is in. The records of the metadata pages themselves are never used as
// descriptors; the header and the two bitmaps live in their place.
//
// A global map with one byte per possible chunk (47-bit address space / 1 GiB = 128 Ki bytes of
// zero-filled static memory, of which only the touched page is resident) answers "is this
// address in slabkit's arena" with one load - on every free, and for the malloc override's
// pointers it did not hand out.
//
// Under an address-space limit (RLIMIT_AS, or page_allocator_config::grow_bytes) a chunk is
// partial: it maps its whole metadata (16 MiB, so that every descriptor of the chunk can be read,
// as the fast paths and the public header's inline free do after the map's one load) and only
// the first pages for use, [kMetaPages, end_pfn), growing in place when it can. What lies past
// end_pfn in the 1 GiB is not ours: other mappings may sit there. Its map byte says so
// (kChunkPartial), and in_arena then compares the page with end_pfn. The descriptors there stay
// zero (no slab, no block), so a fast path that reads one turns to the full check.
//
// Page states (page::state, an atomic word so that a racy reader - a bad free, a stats walk -
// sees a whole value):
//   PG_head|order   the first page of an allocated block of 2^order pages
//   PG_tail         another page of an allocated (or per-slot-parked) block of order > 0;
//                   page::head points at the head
//   PG_buddy|order  the first page of a free block on a buddy free list (PG_clean: no page of it
//                   is resident, it sits on the clean list of its order)
//   PG_purging|order a free block set aside while it is decommitted outside the zone lock
//   PG_pcp|order    a free block of order <= kPcpMaxOrder on a per-slot list (its tails stay
//                   PG_tail while it is parked there)
//   0               a page inside a free block (or never used)
// The slab layer adds PG_slab and its own bits above kPageFlagsUsed to an allocated head.
#pragma once

#include "base/compiler.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit {

inline constexpr unsigned kPageShift = 12;
inline constexpr size_t kPageSize = size_t{1} << kPageShift;
inline constexpr unsigned kMaxOrder = 10; // largest block: 2^10 pages = 4 MiB
inline constexpr unsigned kNrOrders = kMaxOrder + 1;
inline constexpr int kAnyNode = -1;

inline constexpr unsigned kChunkShift = 30;
inline constexpr size_t kChunkSize = size_t{1} << kChunkShift;
inline constexpr size_t kPagesPerChunk = kChunkSize >> kPageShift;
inline constexpr unsigned kAddressBits = 47;
inline constexpr size_t kMaxChunks = size_t{1} << (kAddressBits - kChunkShift);

enum page_flag : uint32_t {
    PG_order_mask = 0xf,
    PG_head = 1u << 4,
    PG_tail = 1u << 5,
    PG_buddy = 1u << 6,
    PG_clean = 1u << 7,
    PG_pcp = 1u << 8,
    PG_slab = 1u << 9,
    PG_purging = 1u << 10,
};
inline constexpr unsigned kPageFlagsUsed = 11; // bits from here on belong to the slab layer

// The page descriptor: 64 bytes, one cache line.
struct page {
    std::atomic<uint32_t> state{0}; // page_flag bits and the order, see above
    uint32_t aux = 0;               // slab layer: free for its use
    page *next = nullptr;           // list links: buddy free lists, per-slot lists, slab lists
    page *prev = nullptr;
    page *head = nullptr; // a tail page: the head of its block
    // Slab layer: its own use. priv[0] and priv[1] form one 16-byte-aligned pair (offset 32 of
    // a 64-byte-aligned descriptor) that a design may update with one double-word
    // compare-and-swap (SLUB's {freelist, counters}). Buddy (free block): priv[0] is the
    // coarse time in ms at which the block was freed.
    alignas(16) uintptr_t priv[3] = {};
    // Slab layer: the cache that owns this page. Atomic (relaxed: plain moves) so that a walk
    // over the arena's descriptors (leak reports) may read it while other caches' slabs change.
    std::atomic<void *> owner{nullptr};

    uint32_t flags() const { return state.load(std::memory_order_relaxed); }
    unsigned order() const { return flags() & PG_order_mask; }
    void set_state(uint32_t s) { state.store(s, std::memory_order_relaxed); }
};
static_assert(sizeof(page) == 64, "a page descriptor is one cache line");
static_assert(offsetof(page, priv) % 16 == 0, "priv[0..1] can be swapped as one double word");

class page_allocator;

// The chunk header, at the chunk base.
struct chunk {
    static constexpr uint64_t kMagic = 0x736c61626b697431; // "slabkit1"
    uint64_t magic;
    page_allocator *owner;
    unsigned node;
    chunk *next;      // the owner's list of chunks
    size_t fresh_pfn; // first max-order block not yet handed to the free lists (zone lock)
    // First page of the part asked for transparent huge pages (kPagesPerChunk: none); see
    // page_allocator_config::huge_after_pages. Zone lock.
    size_t huge_pfn;
    // Pages [0, end_pfn) are mapped: kPagesPerChunk for a whole chunk, less for a partial one,
    // which grows by raising it (arena lock; read by in_arena without a lock, only ever up).
    std::atomic<size_t> end_pfn;
    bool grow_blocked; // partial: the address space after it is taken (arena lock)
};

// The chunk map's values.
inline constexpr uint8_t kChunkWhole = 1;   // all kChunkSize bytes are the chunk's
inline constexpr uint8_t kChunkPartial = 2; // the chunk ends at its end_pfn

// Metadata pages at the start of each chunk: the descriptor array covers the whole chunk.
inline constexpr size_t kMetaPages = kPagesPerChunk * sizeof(page) / kPageSize;
inline constexpr size_t kUsablePages = kPagesPerChunk - kMetaPages;
// The dirty bitmap (one bit per page: "may be resident") sits right after the header.
inline constexpr size_t kDirtyBitmapOffset = 4096;
inline constexpr size_t kDirtyBitmapWords = kPagesPerChunk / 64;
// The read-only bitmap (one bit per page: "write-protected while free") right after it.
inline constexpr size_t kReadOnlyBitmapOffset = kDirtyBitmapOffset + kDirtyBitmapWords * 8;
static_assert(kReadOnlyBitmapOffset + kDirtyBitmapWords * 8 <= kMetaPages * sizeof(page),
              "header and bitmaps fit in the unused descriptors of the metadata pages");
static_assert(kMetaPages % (size_t{1} << kMaxOrder) == 0, "usable pages start max-order aligned");

namespace detail {
extern SLABKIT_HIDDEN std::atomic<uint8_t> g_chunk_map[kMaxChunks];
}

inline chunk *chunk_of(const void *addr) {
    return reinterpret_cast<chunk *>(reinterpret_cast<uintptr_t>(addr) & ~(kChunkSize - 1));
}

// Index of addr's page within its chunk.
inline size_t chunk_pfn(const void *addr) {
    return (reinterpret_cast<uintptr_t>(addr) & (kChunkSize - 1)) >> kPageShift;
}

// True when addr lies in a chunk of some slabkit page allocator (metadata included).
inline bool in_arena(const void *addr) {
    uintptr_t index = reinterpret_cast<uintptr_t>(addr) >> kChunkShift;
    if (index >= kMaxChunks) return false;
    uint8_t kind = detail::g_chunk_map[index].load(std::memory_order_acquire);
    if (SLABKIT_LIKELY(kind == kChunkWhole)) return true;
    return kind == kChunkPartial &&
           chunk_pfn(addr) < chunk_of(addr)->end_pfn.load(std::memory_order_acquire);
}

// The descriptor of the page holding addr; nullptr when addr is not in the arena or is in a
// chunk's metadata.
inline page *virt_to_page(const void *addr) {
    if (!in_arena(addr)) return nullptr;
    size_t pfn = chunk_pfn(addr);
    if (pfn < kMetaPages) return nullptr;
    return reinterpret_cast<page *>(chunk_of(addr)) + pfn;
}

// The first page of the allocated block holding addr (tail pages point at their head).
inline page *virt_to_head_page(const void *addr) {
    page *pg = virt_to_page(addr);
    if (pg && (pg->flags() & PG_tail)) return pg->head;
    return pg;
}

inline size_t page_pfn(const page *pg) {
    return (reinterpret_cast<uintptr_t>(pg) & (kChunkSize - 1)) / sizeof(page);
}

inline void *page_to_virt(const page *pg) {
    uintptr_t base = reinterpret_cast<uintptr_t>(pg) & ~(kChunkSize - 1);
    return reinterpret_cast<void *>(base + (page_pfn(pg) << kPageShift));
}

inline unsigned page_to_nid(const page *pg) {
    return chunk_of(pg)->node;
}

inline page *pfn_to_page(chunk *c, size_t pfn) {
    return reinterpret_cast<page *>(c) + pfn;
}

} // namespace slabkit
