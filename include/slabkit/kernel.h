/* kernel.h - the Linux kernel's slab and kmalloc names over slabkit's C API.
 *
 * Code written against the kernel's interface (kmem_cache_create, kmalloc, kfree, GFP_KERNEL,
 * ...) compiles unchanged in C (C99 or later) and C++ by including this header instead of the
 * kernel's. Every function here is a static inline wrapper over slabkit.h, so the library's
 * symbols stay slabkit_*; the behaviour (errors, bad frees, zero and huge sizes) is slabkit.h's.
 *
 * Allocation flags: slabkit never sleeps, reclaims or dips into reserves, so GFP_KERNEL,
 * GFP_ATOMIC, GFP_NOWAIT, GFP_NOFS and GFP_NOIO all allocate the same way. They have distinct
 * values (for code that tests them) that never contain __GFP_ZERO; the wrappers pass on only the
 * bits slabkit.h defines (__GFP_ZERO, which zeroes the memory).
 *
 * Every macro is defined only if the name is still free, so this header can sit beside a
 * project's own compatibility definitions; the typedefs repeat the same type and may be
 * repeated. Define SLABKIT_KERNEL_NO_KMALLOC before including it to leave out the kmalloc family
 * (kmalloc, kzalloc, kcalloc, kmalloc_array, krealloc, kfree, ksize, ...) when another allocator
 * of the program already owns those names.
 */
#ifndef SLABKIT_KERNEL_H
#define SLABKIT_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "slabkit.h"

/* ---- types --------------------------------------------------------------------------------- */

/* struct kmem_cache is slabkit's opaque cache type (slabkit.h). */
typedef unsigned int gfp_t;
typedef unsigned int slab_flags_t;

/* ---- allocation flags ---------------------------------------------------------------------- */

/* The bits the wrappers hand to slabkit; every other gfp bit is accepted and ignored. */
#define SLABKIT_KERNEL_GFP_PASSED SLABKIT_GFP_ZERO

/* Kernel-side meanings, recorded only (no effect in userspace). */
#define SLABKIT_KGFP_MAY_SLEEP 0x0100u  /* the caller may block */
#define SLABKIT_KGFP_MAY_IO 0x0200u     /* the caller may start I/O */
#define SLABKIT_KGFP_MAY_FS 0x0400u     /* the caller may call into a file system */
#define SLABKIT_KGFP_RESERVES 0x0800u   /* the caller may use emergency reserves */
#define SLABKIT_KGFP_BACKGROUND 0x1000u /* background reclaim may be woken */
#define SLABKIT_KGFP_QUIET 0x2000u      /* no warning on failure */

#ifndef __GFP_ZERO
#define __GFP_ZERO SLABKIT_GFP_ZERO
#endif
#ifndef __GFP_NOWARN
#define __GFP_NOWARN SLABKIT_KGFP_QUIET
#endif
#ifndef GFP_KERNEL
#define GFP_KERNEL (SLABKIT_KGFP_MAY_SLEEP | SLABKIT_KGFP_MAY_IO | SLABKIT_KGFP_MAY_FS)
#endif
#ifndef GFP_NOFS
#define GFP_NOFS (SLABKIT_KGFP_MAY_SLEEP | SLABKIT_KGFP_MAY_IO)
#endif
#ifndef GFP_NOIO
#define GFP_NOIO SLABKIT_KGFP_MAY_SLEEP
#endif
#ifndef GFP_ATOMIC
#define GFP_ATOMIC (SLABKIT_KGFP_RESERVES | SLABKIT_KGFP_BACKGROUND)
#endif
#ifndef GFP_NOWAIT
#define GFP_NOWAIT SLABKIT_KGFP_BACKGROUND
#endif

/* ---- cache flags ----------------------------------------------------------------------------- */

#ifndef SLAB_CONSISTENCY_CHECKS
#define SLAB_CONSISTENCY_CHECKS SLABKIT_CONSISTENCY_CHECKS
#endif
#ifndef SLAB_TRACE
#define SLAB_TRACE SLABKIT_TRACE
#endif
#ifndef SLAB_RED_ZONE
#define SLAB_RED_ZONE SLABKIT_RED_ZONE
#endif
#ifndef SLAB_POISON
#define SLAB_POISON SLABKIT_POISON
#endif
#ifndef SLAB_HWCACHE_ALIGN
#define SLAB_HWCACHE_ALIGN SLABKIT_HWCACHE_ALIGN
#endif
#ifndef SLAB_STORE_USER
#define SLAB_STORE_USER SLABKIT_STORE_USER
#endif
#ifndef SLAB_FAILSLAB
#define SLAB_FAILSLAB SLABKIT_FAILSLAB
#endif
#ifndef SLAB_PANIC
#define SLAB_PANIC SLABKIT_PANIC
#endif
/* Memory accounting has no userspace meaning: accepted, no effect. */
#ifndef SLAB_ACCOUNT
#define SLAB_ACCOUNT 0u
#endif
#ifndef SLAB_RECLAIM_ACCOUNT
#define SLAB_RECLAIM_ACCOUNT 0u
#endif

/* ---- constants ------------------------------------------------------------------------------- */

#ifndef NUMA_NO_NODE
#define NUMA_NO_NODE (-1)
#endif
#ifndef ZERO_SIZE_PTR
#define ZERO_SIZE_PTR SLABKIT_ZERO_SIZE_PTR
#endif
/* True for NULL and for the pointer of a zero-size allocation. */
#ifndef ZERO_OR_NULL_PTR
#define ZERO_OR_NULL_PTR(x) (SLABKIT_KERNEL_ADDR(x) <= SLABKIT_KERNEL_ADDR(ZERO_SIZE_PTR))
#endif
#ifndef KMALLOC_MAX_CACHE_SIZE
#define KMALLOC_MAX_CACHE_SIZE SLABKIT_KMALLOC_MAX_CACHE_SIZE
#endif

/* A cache for `struct s`, named after it, aligned as the type. */
#ifndef KMEM_CACHE
#define KMEM_CACHE(s, flags)                                                                       \
    kmem_cache_create(#s, SLABKIT_KERNEL_CAST(unsigned int, sizeof(struct s)),                     \
                      SLABKIT_KERNEL_CAST(unsigned int, SLABKIT_KERNEL_ALIGNOF(struct s)),         \
                      (flags), SLABKIT_KERNEL_NULL)
#endif

#if defined(__cplusplus)
#define SLABKIT_KERNEL_ALIGNOF(t) alignof(t)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define SLABKIT_KERNEL_ALIGNOF(t) _Alignof(t)
#else
#define SLABKIT_KERNEL_ALIGNOF(t) __alignof__(t)
#endif

/* Casts that stay quiet under C++'s -Wold-style-cast and C's -Wcast-qual. */
#ifdef __cplusplus
#define SLABKIT_KERNEL_NULL nullptr
#define SLABKIT_KERNEL_CAST(type, x) static_cast<type>(x)
#define SLABKIT_KERNEL_UNCONST(p) const_cast<void *>(p)
#define SLABKIT_KERNEL_ADDR(p) reinterpret_cast<uintptr_t>(static_cast<const void *>(p))
#else
#define SLABKIT_KERNEL_NULL ((void *)0)
#define SLABKIT_KERNEL_CAST(type, x) ((type)(x))
#define SLABKIT_KERNEL_UNCONST(p) ((void *)(uintptr_t)(p))
#define SLABKIT_KERNEL_ADDR(p) ((uintptr_t)(const void *)(p))
#endif

/* ---- object caches --------------------------------------------------------------------------- */

static inline struct kmem_cache *kmem_cache_create(const char *name, unsigned int size,
                                                   unsigned int align, slab_flags_t flags,
                                                   void (*ctor)(void *)) {
    return slabkit_cache_create(name, size, align, flags, ctor);
}

/* The kernel's struct kmem_cache_args (align, ctor, sheaf_capacity) and the create call that
 * takes it (the kernel's kmem_cache_create(name, size, args, flags) form). */
#ifndef SLABKIT_KERNEL_NO_CACHE_ARGS
struct kmem_cache_args {
    unsigned int align;
    void (*ctor)(void *);
    unsigned int sheaf_capacity;
};
static inline struct kmem_cache *kmem_cache_create_args(const char *name, unsigned int size,
                                                        const struct kmem_cache_args *args,
                                                        slab_flags_t flags) {
    struct slabkit_cache_args a = {0, SLABKIT_KERNEL_NULL, 0};
    if (args) {
        a.align = args->align;
        a.ctor = args->ctor;
        a.sheaf_capacity = args->sheaf_capacity;
    }
    return slabkit_cache_create_args(SLABKIT_KERNEL_NULL, name, size, &a, flags);
}
#endif

/* Prefilled sheaves (struct slab_sheaf, slabkit.h). */
static inline struct slab_sheaf *kmem_cache_prefill_sheaf(struct kmem_cache *s, gfp_t gfp,
                                                          unsigned int size) {
    return slabkit_cache_prefill_sheaf(s, gfp & SLABKIT_KERNEL_GFP_PASSED, size);
}
static inline void *kmem_cache_alloc_from_sheaf(struct kmem_cache *s, gfp_t gfp,
                                                struct slab_sheaf *sheaf) {
    return slabkit_cache_alloc_from_sheaf(s, gfp & SLABKIT_KERNEL_GFP_PASSED, sheaf);
}
static inline int kmem_cache_refill_sheaf(struct kmem_cache *s, gfp_t gfp,
                                          struct slab_sheaf **sheafp, unsigned int size) {
    /* The kernel returns -EINVAL for a NULL sheaf and -ENOMEM when memory is short. */
    if (!sheafp || !*sheafp) return -22;
    return slabkit_cache_refill_sheaf(s, gfp & SLABKIT_KERNEL_GFP_PASSED, sheafp, size) ? -12 : 0;
}
static inline void kmem_cache_return_sheaf(struct kmem_cache *s, gfp_t gfp,
                                           struct slab_sheaf *sheaf) {
    slabkit_cache_return_sheaf(s, gfp & SLABKIT_KERNEL_GFP_PASSED, sheaf);
}
static inline unsigned int kmem_cache_sheaf_size(struct slab_sheaf *sheaf) {
    return slabkit_sheaf_size(sheaf);
}

static inline void *kmem_cache_alloc(struct kmem_cache *cache, gfp_t gfp) {
    return slabkit_cache_alloc(cache, gfp & SLABKIT_KERNEL_GFP_PASSED);
}

static inline void *kmem_cache_zalloc(struct kmem_cache *cache, gfp_t gfp) {
    return slabkit_cache_alloc(cache, (gfp | __GFP_ZERO) & SLABKIT_KERNEL_GFP_PASSED);
}

static inline void *kmem_cache_alloc_node(struct kmem_cache *cache, gfp_t gfp, int node) {
    return slabkit_cache_alloc_node(cache, gfp & SLABKIT_KERNEL_GFP_PASSED, node);
}

static inline void kmem_cache_free(struct kmem_cache *cache, void *obj) {
    slabkit_cache_free(cache, obj);
}

/* Allocates n objects into p: returns n, or 0 with nothing allocated. */
static inline int kmem_cache_alloc_bulk(struct kmem_cache *cache, gfp_t gfp, size_t n, void **p) {
    return SLABKIT_KERNEL_CAST(
        int, slabkit_cache_alloc_bulk(cache, gfp & SLABKIT_KERNEL_GFP_PASSED, n, p));
}

static inline void kmem_cache_free_bulk(struct kmem_cache *cache, size_t n, void **p) {
    slabkit_cache_free_bulk(cache, n, p);
}

/* 0 when the cache gave back every page, 1 when it still holds some. */
static inline int kmem_cache_shrink(struct kmem_cache *cache) {
    return slabkit_cache_shrink(cache) != 0;
}

static inline void kmem_cache_destroy(struct kmem_cache *cache) {
    slabkit_cache_destroy(cache);
}

static inline unsigned int kmem_cache_size(struct kmem_cache *cache) {
    return SLABKIT_KERNEL_CAST(unsigned int, slabkit_cache_object_size(cache));
}

/* ---- kmalloc -----------------------------------------------------------------------------------
 */

#ifndef SLABKIT_KERNEL_NO_KMALLOC

static inline void *kmalloc(size_t size, gfp_t gfp) {
    return slabkit_kmalloc(size, gfp & SLABKIT_KERNEL_GFP_PASSED);
}

static inline void *kmalloc_node(size_t size, gfp_t gfp, int node) {
    return slabkit_kmalloc_node(size, gfp & SLABKIT_KERNEL_GFP_PASSED, node);
}

static inline void *kzalloc(size_t size, gfp_t gfp) {
    return slabkit_kmalloc(size, (gfp | __GFP_ZERO) & SLABKIT_KERNEL_GFP_PASSED);
}

static inline void *kzalloc_node(size_t size, gfp_t gfp, int node) {
    return slabkit_kmalloc_node(size, (gfp | __GFP_ZERO) & SLABKIT_KERNEL_GFP_PASSED, node);
}

/* n * size bytes (zeroed only with __GFP_ZERO); NULL when the product overflows. */
static inline void *kmalloc_array(size_t n, size_t size, gfp_t gfp) {
    if (size != 0 && n > SIZE_MAX / size) return SLABKIT_KERNEL_NULL;
    return slabkit_kmalloc(n * size, gfp & SLABKIT_KERNEL_GFP_PASSED);
}

/* n * size bytes, zeroed; NULL when the product overflows. */
static inline void *kcalloc(size_t n, size_t size, gfp_t gfp) {
    return slabkit_kcalloc(n, size, gfp & SLABKIT_KERNEL_GFP_PASSED);
}

static inline void *krealloc(const void *p, size_t size, gfp_t gfp) {
    return slabkit_krealloc(SLABKIT_KERNEL_UNCONST(p), size, gfp & SLABKIT_KERNEL_GFP_PASSED);
}

/* NULL and ZERO_SIZE_PTR: nothing. */
static inline void kfree(const void *p) {
    slabkit_kfree(SLABKIT_KERNEL_UNCONST(p));
}

static inline size_t ksize(const void *p) {
    return slabkit_ksize(p);
}

#endif /* SLABKIT_KERNEL_NO_KMALLOC */

#endif /* SLABKIT_KERNEL_H */
