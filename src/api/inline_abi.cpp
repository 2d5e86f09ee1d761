// inline_abi.cpp - the library's side of the inline fast paths of include/slabkit/inline.h
// (interface version 1): the chunk map's address and the queue flush they call, and the check,
// at compile time, that every offset the header reads is where this build keeps it. A layout
// change that breaks one fails here; the fix is a new interface version (a new gate value, so
// that programs built against the old header call the library instead), not a silent misread.
#include "core/cache.hpp"
#include "page/page.hpp"
#include "slab/slab.hpp"
#include "slabkit/slabkit.h"
#include "slot/slot.hpp"
#include "slqb/slqb.hpp"
#include "slub/slub.hpp"

#include <cstddef>

using namespace slabkit;

// Offsets into the designs' structures, which are not standard-layout (derived, with atomics):
// GCC computes them all the same, as the rseq sections' displacements do.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(cache, offset) == SLABKIT_INLINE_V1_CACHE_FP_OFFSET);
static_assert(offsetof(cache, objects) == SLABKIT_INLINE_V1_CACHE_OBJECTS);
static_assert(offsetof(cache, size_shift) == SLABKIT_INLINE_V1_CACHE_SHIFT);
static_assert(offsetof(cache, size_odd_inverse) == SLABKIT_INLINE_V1_CACHE_INVERSE);
// The gate word: init (low byte) and inline_abi (high byte), open when init is 0.
static_assert(offsetof(cache, init) == SLABKIT_INLINE_V1_CACHE_GATE);
static_assert(sizeof(relaxed_byte) == 1);
static_assert(offsetof(cache, inline_abi) == SLABKIT_INLINE_V1_CACHE_GATE + 1);
static_assert(SLABKIT_INLINE_V1_GATE_OPEN == (unsigned{kInlineAbi} << 8));
static_assert(offsetof(slqb::slqb_cache, hiwater) == SLABKIT_INLINE_V1_CACHE_HIWATER);
static_assert(offsetof(slqb::slqb_cache, cpu_slab) == SLABKIT_INLINE_V1_CACHE_QUEUES);
static_assert(sizeof(std::atomic<slqb::slqb_cpu *>) == sizeof(void *));
// A slot's queue (an own slot's: head and count apart; the CPUs' packed ones never get here).
static_assert(slqb::kQueueDisp + offsetof(slqb::slot_queue, word) == SLABKIT_INLINE_V1_QUEUE_HEAD);
static_assert(slqb::kQueueDisp + offsetof(slqb::slot_queue, nr) == SLABKIT_INLINE_V1_QUEUE_COUNT);
static_assert(slqb::kAllocStatDisp == SLABKIT_INLINE_V1_QUEUE_ALLOCS);
static_assert(sizeof(counter) == sizeof(uint64_t));
// SLUB: an own slot's freelist and current slab, and the fast paths' counters.
static_assert(SLABKIT_INLINE_V1_GATE_SLUB == (unsigned{kInlineAbiSlub} << 8));
static_assert(offsetof(slub::slub_cache, cpu_slab) == SLABKIT_INLINE_V1_SLUB_CPUS);
static_assert(sizeof(std::atomic<slub::slub_cpu *>) == sizeof(void *));
static_assert(slub::kFreelistDisp == SLABKIT_INLINE_V1_SLUB_FREELIST);
static_assert(slub::kSlabDisp == SLABKIT_INLINE_V1_SLUB_SLAB);
static_assert(sizeof(std::atomic<page *>) == sizeof(void *));
static_assert(slub::kAllocFastpathDisp == SLABKIT_INLINE_V1_SLUB_ALLOCS);
static_assert(slub::kFreeFastpathDisp == SLABKIT_INLINE_V1_SLUB_FREES);
// SLAB: an own slot's array.
static_assert(SLABKIT_INLINE_V1_GATE_SLAB == (unsigned{kInlineAbiSlab} << 8));
static_assert(offsetof(slab::slab_kmem_cache, cpu_cache) == SLABKIT_INLINE_V1_SLAB_CPUS);
static_assert(sizeof(std::atomic<slab::slab_cpu *>) == sizeof(void *));
static_assert(offsetof(slab::slab_cpu, ac) + offsetof(slab::array_cache, avail) ==
              SLABKIT_INLINE_V1_SLAB_AVAIL);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(slab::kLimitDisp == SLABKIT_INLINE_V1_SLAB_LIMIT);
static_assert(slab::kTouchedDisp == SLABKIT_INLINE_V1_SLAB_TOUCHED);
static_assert(slab::kAllocHitDisp == SLABKIT_INLINE_V1_SLAB_ALLOCS);
static_assert(slab::kFreeHitDisp == SLABKIT_INLINE_V1_SLAB_FREES);
static_assert(slab::kEntriesDisp == SLABKIT_INLINE_V1_SLAB_ENTRIES);
// The arena and the page descriptor.
static_assert(kChunkShift == SLABKIT_INLINE_V1_CHUNK_SHIFT);
static_assert(kMaxChunks == SLABKIT_INLINE_V1_CHUNKS);
static_assert(kMetaPages * kPageSize == SLABKIT_INLINE_V1_META_BYTES);
static_assert(kPageShift == SLABKIT_INLINE_V1_PAGE_SHIFT);
static_assert(sizeof(page) == (size_t{1} << SLABKIT_INLINE_V1_DESC_SHIFT));
static_assert(offsetof(page, state) == SLABKIT_INLINE_V1_PAGE_FLAGS);
static_assert(offsetof(page, priv) + 2 * sizeof(uintptr_t) == SLABKIT_INLINE_V1_PAGE_COLOUR);
static_assert(offsetof(page, owner) == SLABKIT_INLINE_V1_PAGE_OWNER);
static_assert(PG_slab == SLABKIT_INLINE_V1_PG_SLAB);
static_assert(PG_tail == SLABKIT_INLINE_V1_PG_TAIL);
#pragma GCC diagnostic pop

extern "C" {

// The map the inline free reads (a byte per possible chunk; nonzero: slabkit's): a constant
// pointer rather than the array itself, so that a program's copy relocation of it copies the
// address, never the map.
const unsigned char *const slabkit_inline_v1_chunk_map =
    reinterpret_cast<const unsigned char *>(detail::g_chunk_map);

void slabkit_inline_v1_flush(slabkit_cache *c) {
    // Only a cache open to the interface's SLQB paths gets here: its slot's queue is past
    // hiwater after the inline push (SLUB's and SLAB's inline pushes call the library's free
    // instead when they cannot push).
    slqb::flush_cpu_queue(reinterpret_cast<slqb::slqb_cache *>(c));
}

} // extern "C"
