/* inline.h - the fast paths of slabkit_cache_alloc and slabkit_cache_free, inlined into their
 * callers (included by slabkit.h; docs/api.md, "Inline fast paths").
 *
 * A call into the shared library costs the caller a call, a return and the library's entry
 * checks; for an object cache's alloc+free pair that was 1.1x to 1.3x a fast malloc's pair, where
 * the same paths inlined into the caller cost 0.8x. So the header carries the commonest case of
 * each call itself, for a thread with a slot of its own: SLQB's pop from and push to the slot's
 * queue, SLUB's pop from and push to the slot's freelist (the push only for an object of the
 * slot's current slab), SLAB's pop from and push to the slot's array. Everything else (SLOB, the
 * CPUs' slots, debug and zeroing caches, an empty queue or array, a queue past its limit or a
 * full array, another slab's object under SLUB, anything the free's checks do not accept) calls
 * the library, which does all of it as before.
 *
 * The interface between the two is versioned: version 1 below. A cache opens its inline paths by
 * holding its design's gate value (SLABKIT_INLINE_V1_GATE_OPEN, _GATE_SLUB, _GATE_SLAB) in its
 * gate word; a library whose layout differs never writes those values, so a program built
 * against this header falls back to the library's calls instead of misreading it, and a header
 * that knows fewer of the values calls the library for the others. The library checks every
 * offset here against its own structures at compile time (src/api/inline_abi.cpp).
 *
 * The free keeps the library's checks: the address is in slabkit's arena, its page is a slab of
 * this very cache (not a later page of a bigger slab), it is an object start, and it is not the
 * queue's first object (an immediate double free). Any doubt goes to the library, which reports.
 *
 * Define SLABKIT_NO_INLINE before including slabkit.h to call the library for everything. The
 * inline paths need GCC or clang on x86-64 Linux; elsewhere the header declares the calls only. */
#ifndef SLABKIT_INLINE_H
#define SLABKIT_INLINE_H

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)

/* ---- interface version 1 -------------------------------------------------------------------
 * Offsets in bytes. A cache: */
#define SLABKIT_INLINE_V1_CACHE_FP_OFFSET                                                          \
    0x04u                                     /* uint32: the free pointer's offset in an object    \
                                               */
#define SLABKIT_INLINE_V1_CACHE_OBJECTS 0x08u /* uint32: objects per slab */
#define SLABKIT_INLINE_V1_CACHE_SHIFT 0x0fu   /* uint8: size = odd << shift */
#define SLABKIT_INLINE_V1_CACHE_INVERSE 0x10u /* uint64: odd's inverse mod 2^64 */
#define SLABKIT_INLINE_V1_CACHE_GATE 0x28u    /* uint16: the gate word */
#define SLABKIT_INLINE_V1_CACHE_HIWATER 0xb4u /* uint32: the queues' limit */
#define SLABKIT_INLINE_V1_CACHE_QUEUES 0xc0u  /* pointer to the per-slot queue pointers */
/* The gate word of a cache open to version 1, one value per design: */
#define SLABKIT_INLINE_V1_GATE_OPEN 0x0100u /* SLQB */
#define SLABKIT_INLINE_V1_GATE_SLUB 0x0200u
#define SLABKIT_INLINE_V1_GATE_SLAB 0x0300u
/* (A cache is open only with one node, no debugging, no init on alloc or free; SLQB's and
 * SLUB's only with plain free pointers, SLAB's only without the array check; never SLOB's.) */
/* SLQB, a slot's queue: */
#define SLABKIT_INLINE_V1_QUEUE_HEAD 0x00u   /* pointer: the first free object */
#define SLABKIT_INLINE_V1_QUEUE_COUNT 0x08u  /* uint32: objects queued */
#define SLABKIT_INLINE_V1_QUEUE_ALLOCS 0x18u /* uint64: allocations counted */
/* SLUB: the cache's per-slot structures, and a slot's: */
#define SLABKIT_INLINE_V1_SLUB_CPUS 0xb8u     /* pointer to the per-slot structure pointers */
#define SLABKIT_INLINE_V1_SLUB_FREELIST 0x00u /* pointer: the first free object */
#define SLABKIT_INLINE_V1_SLUB_SLAB 0x08u     /* pointer: the current slab's page descriptor */
#define SLABKIT_INLINE_V1_SLUB_ALLOCS 0x10u   /* uint64: ALLOC_FASTPATH */
#define SLABKIT_INLINE_V1_SLUB_FREES 0x18u    /* uint64: FREE_FASTPATH */
/* SLAB: the cache's per-slot arrays, and a slot's: */
#define SLABKIT_INLINE_V1_SLAB_CPUS 0xb8u    /* pointer to the per-slot structure pointers */
#define SLABKIT_INLINE_V1_SLAB_AVAIL 0x00u   /* uint32: objects in the array */
#define SLABKIT_INLINE_V1_SLAB_LIMIT 0x04u   /* uint32: its capacity */
#define SLABKIT_INLINE_V1_SLAB_TOUCHED 0x0cu /* uint32: set by every allocation */
#define SLABKIT_INLINE_V1_SLAB_ALLOCS 0x10u  /* uint64: ALLOCHIT */
#define SLABKIT_INLINE_V1_SLAB_FREES 0x20u   /* uint64: FREEHIT */
#define SLABKIT_INLINE_V1_SLAB_ENTRIES 0xc0u /* the array's pointers, the hot end last */
/* The arena: 1 GiB chunks, each starting with 16 MiB of page descriptors (64 bytes a page). */
#define SLABKIT_INLINE_V1_CHUNK_SHIFT 30u
#define SLABKIT_INLINE_V1_CHUNKS (1u << 17)
#define SLABKIT_INLINE_V1_META_BYTES 0x1000000u
#define SLABKIT_INLINE_V1_PAGE_SHIFT 12u
#define SLABKIT_INLINE_V1_DESC_SHIFT 6u
/* A page descriptor: */
#define SLABKIT_INLINE_V1_PAGE_FLAGS 0x00u  /* uint32 */
#define SLABKIT_INLINE_V1_PAGE_COLOUR 0x30u /* uintptr: the first object's offset in the page */
/* The owner, a pointer: the slab's cache, set only on a slab's first page (NULL on every other
 * page). */
#define SLABKIT_INLINE_V1_PAGE_OWNER 0x38u
#define SLABKIT_INLINE_V1_PG_SLAB 0x200u
#define SLABKIT_INLINE_V1_PG_TAIL 0x20u

/* The calling thread's slot (or a value whose queue entry is always NULL), one byte per chunk
 * of the address space (nonzero: slabkit's), and the library's side of the calls. */
SLABKIT_API extern __thread unsigned slabkit_inline_v1_slot
    __attribute__((tls_model("initial-exec")));
SLABKIT_API extern const unsigned char *const slabkit_inline_v1_chunk_map;
/* Called without the PLT's extra jump where the compiler can (GCC's noplt: through the GOT), as
 * the designs without inline paths (SLUB, SLAB, SLOB) make these calls on every allocation. */
#if defined(__clang__)
#define SLABKIT_INLINE_V1_NOPLT
#else
#define SLABKIT_INLINE_V1_NOPLT __attribute__((noplt))
#endif
SLABKIT_API void *slabkit_inline_v1_alloc(slabkit_cache *cache,
                                          unsigned gfp) SLABKIT_MALLOC_LIKE SLABKIT_INLINE_V1_NOPLT;
SLABKIT_API void slabkit_inline_v1_free(slabkit_cache *cache, void *obj) SLABKIT_INLINE_V1_NOPLT;
/* Gives back a batch of the calling slot's queue of `cache` once it is past its limit. */
SLABKIT_API void slabkit_inline_v1_flush(slabkit_cache *cache);

#define SLABKIT_INLINE_V1_AT(base, off) ((const unsigned char *)(base) + (off))
#define SLABKIT_INLINE_V1_LOAD(type, base, off)                                                    \
    __atomic_load_n((type const *)SLABKIT_INLINE_V1_AT(base, off), __ATOMIC_RELAXED)
#define SLABKIT_INLINE_V1_STORE(type, base, off, value)                                            \
    __atomic_store_n((type *)(void *)((unsigned char *)(base) + (off)), (value), __ATOMIC_RELAXED)
/* `word += n` of a word only the calling slot writes (its queue's count and statistics), which
 * the library's statistics read from other threads: one add to memory, which no reader sees
 * torn; under ThreadSanitizer, which cannot see into asm, a relaxed load and store. */
#if defined(__SANITIZE_THREAD__)
#define SLABKIT_INLINE_V1_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLABKIT_INLINE_V1_TSAN 1
#endif
#endif
#ifdef SLABKIT_INLINE_V1_TSAN
#define SLABKIT_INLINE_V1_ADD32(base, off, n)                                                      \
    SLABKIT_INLINE_V1_STORE(uint32_t, base, off, SLABKIT_INLINE_V1_LOAD(uint32_t, base, off) + (n))
#define SLABKIT_INLINE_V1_ADD64(base, off, n)                                                      \
    SLABKIT_INLINE_V1_STORE(uint64_t, base, off, SLABKIT_INLINE_V1_LOAD(uint64_t, base, off) + (n))
#else
#define SLABKIT_INLINE_V1_ADD32(base, off, n)                                                      \
    __asm__("addl %1, %0"                                                                          \
            : "+m"(*(uint32_t *)(void *)((unsigned char *)(base) + (off)))                         \
            : "er"((uint32_t)(n)))
#define SLABKIT_INLINE_V1_ADD64(base, off, n)                                                      \
    __asm__("addq %1, %0"                                                                          \
            : "+m"(*(uint64_t *)(void *)((unsigned char *)(base) + (off)))                         \
            : "er"((uint64_t)(n)))
#endif

#if !defined(SLABKIT_NO_INLINE) && !defined(SLABKIT_BUILDING_LIBRARY)
#define SLABKIT_HAVE_INLINE 1

/* The casts below read the library's structures by offset; a caller's strict warnings are not
 * about its own code there. */
#pragma GCC diagnostic push
#ifdef __clang__
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#endif
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#ifdef __cplusplus
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wuseless-cast"
#pragma GCC diagnostic ignored "-Wzero-as-null-pointer-constant"
#else
#pragma GCC diagnostic ignored "-Wdeclaration-after-statement"
#endif

/* The calling thread's per-slot structure of a cache, from the pointer array at `off` in the
 * cache (NULL: none yet, or the thread uses the CPUs' slots). */
#define SLABKIT_INLINE_V1_SLOT_OF(cache, off)                                                      \
    __atomic_load_n(                                                                               \
        &(*(void *const *const *)SLABKIT_INLINE_V1_AT(cache, off))[slabkit_inline_v1_slot],        \
        __ATOMIC_RELAXED)
/* The free pointer of obj in cache. */
#define SLABKIT_INLINE_V1_NEXT(cache, obj)                                                         \
    ((void **)(void *)((unsigned char *)(obj) + *(const uint32_t *)SLABKIT_INLINE_V1_AT(           \
                                                    cache, SLABKIT_INLINE_V1_CACHE_FP_OFFSET)))

/* Only for inlining (gnu_inline): a call the compiler does not inline, or the function's
 * address, is the library's own slabkit_cache_alloc / slabkit_cache_free. */
extern __inline __attribute__((gnu_inline, always_inline, malloc, warn_unused_result)) void *
slabkit_cache_alloc(slabkit_cache *cache, unsigned gfp) {
    const uint16_t gate = SLABKIT_INLINE_V1_LOAD(uint16_t, cache, SLABKIT_INLINE_V1_CACHE_GATE);
    if (__builtin_expect(!(gfp & SLABKIT_GFP_ZERO), 1)) {
        if (__builtin_expect(gate == SLABKIT_INLINE_V1_GATE_OPEN, 1)) {
            /* SLQB: pop the slot's queue. */
            void *q = SLABKIT_INLINE_V1_SLOT_OF(cache, SLABKIT_INLINE_V1_CACHE_QUEUES);
            if (__builtin_expect(q != 0, 1)) {
                void *obj = SLABKIT_INLINE_V1_LOAD(void *, q, SLABKIT_INLINE_V1_QUEUE_HEAD);
                if (__builtin_expect(obj != 0, 1)) {
                    SLABKIT_INLINE_V1_STORE(void *, q, SLABKIT_INLINE_V1_QUEUE_HEAD,
                                            *SLABKIT_INLINE_V1_NEXT(cache, obj));
                    SLABKIT_INLINE_V1_ADD32(q, SLABKIT_INLINE_V1_QUEUE_COUNT, ~0u); /* minus one */
                    SLABKIT_INLINE_V1_ADD64(q, SLABKIT_INLINE_V1_QUEUE_ALLOCS, 1);
                    return obj;
                }
            }
        } else if (gate == SLABKIT_INLINE_V1_GATE_SLUB) {
            /* SLUB: pop the slot's freelist. */
            void *c = SLABKIT_INLINE_V1_SLOT_OF(cache, SLABKIT_INLINE_V1_SLUB_CPUS);
            if (__builtin_expect(c != 0, 1)) {
                void *obj = SLABKIT_INLINE_V1_LOAD(void *, c, SLABKIT_INLINE_V1_SLUB_FREELIST);
                if (__builtin_expect(obj != 0, 1)) {
                    SLABKIT_INLINE_V1_STORE(void *, c, SLABKIT_INLINE_V1_SLUB_FREELIST,
                                            *SLABKIT_INLINE_V1_NEXT(cache, obj));
                    SLABKIT_INLINE_V1_ADD64(c, SLABKIT_INLINE_V1_SLUB_ALLOCS, 1);
                    return obj;
                }
            }
        } else if (gate == SLABKIT_INLINE_V1_GATE_SLAB) {
            /* SLAB: the array's last entry. */
            void *c = SLABKIT_INLINE_V1_SLOT_OF(cache, SLABKIT_INLINE_V1_SLAB_CPUS);
            if (__builtin_expect(c != 0, 1)) {
                uint32_t n = SLABKIT_INLINE_V1_LOAD(uint32_t, c, SLABKIT_INLINE_V1_SLAB_AVAIL);
                if (__builtin_expect(n != 0, 1)) {
                    --n;
                    SLABKIT_INLINE_V1_STORE(uint32_t, c, SLABKIT_INLINE_V1_SLAB_AVAIL, n);
                    SLABKIT_INLINE_V1_STORE(uint32_t, c, SLABKIT_INLINE_V1_SLAB_TOUCHED, 1u);
                    SLABKIT_INLINE_V1_ADD64(c, SLABKIT_INLINE_V1_SLAB_ALLOCS, 1);
                    return ((void *const *)(const void *)SLABKIT_INLINE_V1_AT(
                        c, SLABKIT_INLINE_V1_SLAB_ENTRIES))[n];
                }
            }
        }
    }
    return slabkit_inline_v1_alloc(cache, gfp);
}

/* The descriptor of obj's slab page when obj is an object start of a slab of cache; NULL for
 * anything else (not slabkit's, another cache's, inside an object), which the library then
 * looks at and reports. Always inlined: the library has no such function. */
extern __inline __attribute__((gnu_inline, always_inline)) const unsigned char *
slabkit_inline_v1_slab_of(const slabkit_cache *cache, const void *obj) {
    const uintptr_t a = (uintptr_t)obj;
    const uintptr_t chunk = a >> SLABKIT_INLINE_V1_CHUNK_SHIFT;
    const uintptr_t in_chunk = a & ((1ul << SLABKIT_INLINE_V1_CHUNK_SHIFT) - 1);
    /* In slabkit's arena, past the chunk's descriptors. */
    if (__builtin_expect(
            chunk < SLABKIT_INLINE_V1_CHUNKS &&
                __atomic_load_n(&slabkit_inline_v1_chunk_map[chunk], __ATOMIC_ACQUIRE) != 0 &&
                in_chunk >= SLABKIT_INLINE_V1_META_BYTES,
            1)) {
        /* The descriptor: the chunk's base plus (page index << DESC_SHIFT), which is the
         * address shifted right by PAGE_SHIFT - DESC_SHIFT, masked to the page index's bits. */
        const unsigned char *pg =
            (const unsigned char *)(a - in_chunk) +
            ((a >> (SLABKIT_INLINE_V1_PAGE_SHIFT - SLABKIT_INLINE_V1_DESC_SHIFT)) &
             (((1ul << SLABKIT_INLINE_V1_CHUNK_SHIFT) - 1) >>
              (SLABKIT_INLINE_V1_PAGE_SHIFT - SLABKIT_INLINE_V1_DESC_SHIFT)) &
             ~((1ul << SLABKIT_INLINE_V1_DESC_SHIFT) - 1));
        /* The first page of a slab of this cache (only such a page names it as its owner), and
         * an object start there (the rotated product is off / size for a multiple of size, and
         * above `objects` otherwise). */
        if (__builtin_expect(SLABKIT_INLINE_V1_LOAD(void *, pg, SLABKIT_INLINE_V1_PAGE_OWNER) ==
                                 (const void *)cache,
                             1)) {
            uint64_t q =
                (uint64_t)((a & ((1ul << SLABKIT_INLINE_V1_PAGE_SHIFT) - 1)) -
                           *(const uintptr_t *)SLABKIT_INLINE_V1_AT(
                               pg, SLABKIT_INLINE_V1_PAGE_COLOUR)) *
                *(const uint64_t *)SLABKIT_INLINE_V1_AT(cache, SLABKIT_INLINE_V1_CACHE_INVERSE);
            const unsigned shift = *SLABKIT_INLINE_V1_AT(cache, SLABKIT_INLINE_V1_CACHE_SHIFT);
            q = (q >> shift) | (q << ((64 - shift) & 63));
            if (__builtin_expect(q < *(const uint32_t *)SLABKIT_INLINE_V1_AT(
                                         cache, SLABKIT_INLINE_V1_CACHE_OBJECTS),
                                 1))
                return pg;
        }
    }
    return 0;
}

extern __inline __attribute__((gnu_inline, always_inline)) void
slabkit_cache_free(slabkit_cache *cache, void *obj) {
    /* SLQB's test comes first and alone, so that its free costs what it did before the other
     * designs had inline paths; a cache not open to version 1 (SLOB's, a debug cache...) goes
     * straight to the library after three tests. */
    const uint16_t gate = SLABKIT_INLINE_V1_LOAD(uint16_t, cache, SLABKIT_INLINE_V1_CACHE_GATE);
    if (__builtin_expect(gate == SLABKIT_INLINE_V1_GATE_OPEN, 1)) {
        /* SLQB: push on the slot's queue, whoever's slab the object is of. */
        if (__builtin_expect(slabkit_inline_v1_slab_of(cache, obj) != 0, 1)) {
            void *qp = SLABKIT_INLINE_V1_SLOT_OF(cache, SLABKIT_INLINE_V1_CACHE_QUEUES);
            if (__builtin_expect(qp != 0, 1)) {
                void *head = SLABKIT_INLINE_V1_LOAD(void *, qp, SLABKIT_INLINE_V1_QUEUE_HEAD);
                if (__builtin_expect(head != obj, 1)) { /* else: a double free, reported */
                    *SLABKIT_INLINE_V1_NEXT(cache, obj) = head;
                    SLABKIT_INLINE_V1_STORE(void *, qp, SLABKIT_INLINE_V1_QUEUE_HEAD, obj);
                    uint32_t n =
                        SLABKIT_INLINE_V1_LOAD(uint32_t, qp, SLABKIT_INLINE_V1_QUEUE_COUNT) + 1;
                    SLABKIT_INLINE_V1_STORE(uint32_t, qp, SLABKIT_INLINE_V1_QUEUE_COUNT, n);
                    if (__builtin_expect(n > *(const uint32_t *)SLABKIT_INLINE_V1_AT(
                                                 cache, SLABKIT_INLINE_V1_CACHE_HIWATER),
                                         0))
                        slabkit_inline_v1_flush(cache);
                    return;
                }
            }
        }
    } else if (gate == SLABKIT_INLINE_V1_GATE_SLUB || gate == SLABKIT_INLINE_V1_GATE_SLAB) {
        const unsigned char *pg = slabkit_inline_v1_slab_of(cache, obj);
        if (__builtin_expect(pg != 0, 1)) {
            if (gate == SLABKIT_INLINE_V1_GATE_SLUB) {
                /* SLUB: push on the slot's freelist if the object is of its current slab; any
                 * other slab's goes back to its slab in the library. */
                void *c = SLABKIT_INLINE_V1_SLOT_OF(cache, SLABKIT_INLINE_V1_SLUB_CPUS);
                if (__builtin_expect(c != 0 &&
                                         SLABKIT_INLINE_V1_LOAD(const void *, c,
                                                                SLABKIT_INLINE_V1_SLUB_SLAB) == pg,
                                     1)) {
                    void *head = SLABKIT_INLINE_V1_LOAD(void *, c, SLABKIT_INLINE_V1_SLUB_FREELIST);
                    if (__builtin_expect(head != obj, 1)) { /* else: a double free, reported */
                        *SLABKIT_INLINE_V1_NEXT(cache, obj) = head;
                        SLABKIT_INLINE_V1_STORE(void *, c, SLABKIT_INLINE_V1_SLUB_FREELIST, obj);
                        SLABKIT_INLINE_V1_ADD64(c, SLABKIT_INLINE_V1_SLUB_FREES, 1);
                        return;
                    }
                }
            } else {
                /* SLAB: the array's new last entry, while it has room. */
                void *c = SLABKIT_INLINE_V1_SLOT_OF(cache, SLABKIT_INLINE_V1_SLAB_CPUS);
                if (__builtin_expect(c != 0, 1)) {
                    const uint32_t n =
                        SLABKIT_INLINE_V1_LOAD(uint32_t, c, SLABKIT_INLINE_V1_SLAB_AVAIL);
                    if (__builtin_expect(n < *(const uint32_t *)SLABKIT_INLINE_V1_AT(
                                                 c, SLABKIT_INLINE_V1_SLAB_LIMIT),
                                         1)) {
                        ((void **)(void *)((unsigned char *)c +
                                           SLABKIT_INLINE_V1_SLAB_ENTRIES))[n] = obj;
                        SLABKIT_INLINE_V1_STORE(uint32_t, c, SLABKIT_INLINE_V1_SLAB_AVAIL, n + 1);
                        SLABKIT_INLINE_V1_ADD64(c, SLABKIT_INLINE_V1_SLAB_FREES, 1);
                        return;
                    }
                }
            }
        }
    }
    slabkit_inline_v1_free(cache, obj);
}

#pragma GCC diagnostic pop
#endif /* !SLABKIT_NO_INLINE && !SLABKIT_BUILDING_LIBRARY */
#endif /* GCC or clang, x86-64 Linux */
#endif /* SLABKIT_INLINE_H */
