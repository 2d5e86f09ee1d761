// free_key.hpp - the default double-free check of kmalloc's classes (docs/debug.md, "What is
// caught, and how"): every double free of a block, not only of the one its list would hand out
// next (report.hpp's kFreelistCheck), at the cost of a few instructions a pair.
//
// A block of a keyed cache (free_key != kNoFreeKey: kmalloc's and malloc's classes of 16 bytes
// and more, whatever their design but SLOB, which finds a double free from its page's free
// blocks) gets, when freed, its key in the word beside its free pointer: the cache's secret
// (cache::freelist_secret: hardening::cache_key, random per process and cache) xor-ed with the
// block's address. A free that finds that value there is a double free, reported naming the
// call, and the block is left alone. Every
// allocation of a keyed cache's block clears the key's and the free pointer's words (fresh below),
// so a block handed out again never shows a key, nor a heap address in its free pointer's word.
//
// A correct program meets a false report only if it stores exactly that value in that word of a
// block before freeing it: the secret is random per process (getrandom) and the value differs for
// every address, so a program learns it only by reading freed memory. glibc's tcache stores one
// key for every block, which a program that copies a freed block's bytes could carry into a live
// one; glibc then walks its bins to confirm. Here no stale key can sit in a live block: the
// allocation cleared it, and a key copied from another block names that block's address.
#pragma once

#include "base/compiler.hpp"
#include "core/cache.hpp"

#include <cstdint>

namespace slabkit::free_key {

// SLABKIT_FREE_KEY (read once; default 1): 0 leaves kmalloc's classes unkeyed (their fresh blocks
// are still cleared), for the last 0.3 ns of the array designs' malloc pair (docs/debug.md); 2
// keys them and checks the keys when blocks are handed out too (kCheckOnAlloc below).
unsigned mode();
inline bool enabled() {
    return mode() != 0;
}

// A bit of cache::init, set by kmalloc on its keyed classes under SLABKIT_FREE_KEY=2: every free
// block of the class carries its key, a new slab's too (init_slab, SLAB's grow_begin), and a
// block handed out without it (nor zeros, where a design zeroed it) was written while it was
// free - an overflow of the block before it, reaching its first words, or a write after free -
// and is reported before it is used (fresh below; glibc notices such writes over its chunks'
// headers at its next malloc or free). A nonzero init byte closes the class's gated fast paths
// (core/cache.hpp's gate word), so malloc takes its slow path, where the check runs, and costs
// the default nothing: checked on every pop, the SLQB malloc pair took 14 instructions more and
// 1.10x its time (branch wip/alloc-key-check).
inline constexpr uint8_t kCheckOnAlloc = 4;

// Where a cache's blocks keep their key (cache::free_key: the offset plus one): the first word
// that is not the free pointer's, when the object has two words; kNoFreeKey otherwise, and for a
// constructor's cache (its free objects keep their constructed state) and a debugged one (its own
// state word says what is free).
uint8_t place_for(const cache *c);

// Reports the double free of obj (a block of c whose key was found), naming the caller.
SLABKIT_COLD SLABKIT_NOINLINE void report_double_free(const cache *c, const void *obj,
                                                      const char *caller);

// At a free of obj, an object start of c: false (the double free reported) when obj carries its
// key already; otherwise its key is stored and true returned.
SLABKIT_ALWAYS_INLINE bool mark(const cache *c, void *obj, const char *caller) {
    const unsigned at = c->free_key; // the offset plus one
    if (at == kNoFreeKey) return true;
    auto *word = reinterpret_cast<uint64_t *>(static_cast<char *>(obj) + at - 1);
    // The cache's secret sits in the line the free has read already (no global's load).
    const uint64_t key = c->freelist_secret ^ reinterpret_cast<uintptr_t>(obj);
    if (SLABKIT_UNLIKELY(*word == key)) {
        report_double_free(c, obj, caller);
        return false;
    }
    *word = key;
    return true;
}

// Reports a free block of c handed out without its key (found instead): written while it was
// free. Then clears its first two words and returns it (SLABKIT_CONTINUE_ON_ERROR).
SLABKIT_COLD SLABKIT_NOINLINE void *overwritten(const cache *c, void *obj, uint64_t found);

// Writes obj's key, as its free does: for a new slab's objects of a checked class, and for a
// free object a design kept something of its own in (SLAB's index array) when it goes out.
SLABKIT_ALWAYS_INLINE void set(const cache *c, void *obj) {
    const unsigned at = c->free_key;
    if (at == kNoFreeKey) return;
    *reinterpret_cast<uint64_t *>(static_cast<char *>(obj) + at - 1) =
        c->freelist_secret ^ reinterpret_cast<uintptr_t>(obj);
}
// Whether a new slab of c keys its objects (kCheckOnAlloc).
SLABKIT_ALWAYS_INLINE bool keys_new_slabs(const cache *c) {
    return (c->init.load() & kCheckOnAlloc) != 0;
}

// A block of a keyed cache leaving for its caller: its first two words (the key's and the free
// pointer's) cleared. For callers that know the cache is keyed (malloc's table: every class is).
SLABKIT_ALWAYS_INLINE void *fresh(void *obj) {
    // Two 8-byte stores, not one 16-byte store the compiler would merge them into: the free's
    // 8-byte load of the key's word then forwards from a store of its own size (the 16-byte
    // store cost SLAB's and the sheaves' pairs, which touch no other word of the block, 0.3 ns).
    auto *words = static_cast<uint64_t *>(obj);
    __atomic_store_n(&words[0], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&words[1], 0, __ATOMIC_RELAXED);
    return obj;
}
// The same for a block of c, which may not be keyed (kmalloc-8, a debugged class), or nullptr.
SLABKIT_ALWAYS_INLINE void *fresh(const cache *c, void *obj) {
    if (obj != nullptr && c->free_key != kNoFreeKey) fresh(obj);
    return obj;
}
// The same under kCheckOnAlloc: the block must carry its key, or zeros (a design zeroed it: init
// on alloc), or is reported (overwritten). Out of line, reached by a tail call where it can be:
// inlined, its report's call made kmalloc's callers save registers on every path.
SLABKIT_NOINLINE void *fresh_checked(const cache *c, void *obj);
// fresh or fresh_checked, by c's init byte as the caller read it.
SLABKIT_ALWAYS_INLINE void *fresh(const cache *c, void *obj, unsigned init) {
    if (SLABKIT_UNLIKELY(init & kCheckOnAlloc)) return fresh_checked(c, obj);
    return fresh(c, obj);
}

} // namespace slabkit::free_key
