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
// are still cleared), for the last 0.3 ns of the array designs' malloc pair (docs/debug.md).
bool enabled();

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

} // namespace slabkit::free_key
