/* slabkit.h - slabkit's C API: object caches (kmem_cache), kmalloc, statistics.
 *
 * Every function is thread-safe. The allocator behind the API is the process's design, chosen
 * once at start by the environment variable SLABKIT_ALLOCATOR ("slqb", the default, "slub",
 * "slab", "slob" or "sheaves"); an unknown name is reported on stderr and the process exits with
 * status 1 at its first call.
 *
 * Errors: allocation failure returns NULL. Misuse that would corrupt the heap (freeing an
 * address that is not an object start, an object into the wrong cache, destroying a cache with
 * live objects) is reported on stderr with the cache name and the address. A bad free is then
 * fatal unless SLABKIT_CONTINUE_ON_ERROR=1, in which case it is counted and ignored: nothing is
 * freed, nothing is corrupted.
 */
#ifndef SLABKIT_SLABKIT_H
#define SLABKIT_SLABKIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SLABKIT_API __attribute__((visibility("default")))
#define SLABKIT_MALLOC_LIKE __attribute__((malloc, warn_unused_result))
#else
#define SLABKIT_API
#define SLABKIT_MALLOC_LIKE
#endif

/* An opaque object cache. */
typedef struct kmem_cache slabkit_cache;

/* Cache flags (the kernel's SLAB_* values). Any of the debug flags (CONSISTENCY_CHECKS,
 * RED_ZONE, POISON, STORE_USER, TRACE) makes a debug cache: every allocation and free of it is
 * checked (double and invalid frees, red zones, poison), freed objects wait in a quarantine,
 * and errors are reported on stderr, then abort (docs/debug.md). SLABKIT_DEBUG sets them by
 * cache name. */
#define SLABKIT_CONSISTENCY_CHECKS 0x00000100u /* check every free (double, invalid) */
#define SLABKIT_RED_ZONE 0x00000400u           /* red zones around each object */
#define SLABKIT_POISON 0x00000800u             /* poison free and new objects */
#define SLABKIT_HWCACHE_ALIGN 0x00002000u      /* align objects to a cache line (fraction) */
#define SLABKIT_STORE_USER 0x00010000u         /* remember who allocated and freed */
#define SLABKIT_PANIC 0x00040000u              /* abort the process if creation fails */
#define SLABKIT_TRACE 0x00200000u              /* print every allocation and free */
#define SLABKIT_FAILSLAB 0x02000000u           /* SLABKIT_FAILSLAB may fail its allocations */

/* Allocation flags (a subset of the kernel's gfp_t). */
#define SLABKIT_GFP_ZERO 0x1u /* zero the memory */

/* kmalloc(0) and friends return this pointer: never dereferenceable, accepted by kfree. */
#ifdef __cplusplus
#define SLABKIT_ZERO_SIZE_PTR (reinterpret_cast<void *>(16))
#else
#define SLABKIT_ZERO_SIZE_PTR ((void *)16)
#endif
/* Largest size kmalloc serves from caches; above it, pages (and above 4 MiB, the OS). */
#define SLABKIT_KMALLOC_MAX_CACHE_SIZE 8192u
/* Any node (allocation is served from the caller's node). */
#define SLABKIT_ANY_NODE (-1)

/* ---- object caches ---------------------------------------------------------------------- */

/* Creates a cache of objects of `size` bytes aligned to `align` (0 or a power of two; objects
 * are at least 8-aligned), with an optional constructor run once per object when its slab is
 * built (so a freed object must be returned in its constructed state; SLOB, which has no slabs,
 * runs it on every allocation, as the kernel's SLOB did). The name must be unique
 * among live caches, 1..31 printable characters without spaces. Returns NULL, with a line on
 * stderr naming the problem, if any argument is bad or memory is short (with SLABKIT_PANIC:
 * aborts instead). */
SLABKIT_API slabkit_cache *slabkit_cache_create(const char *name, size_t size, size_t align,
                                                unsigned flags, void (*ctor)(void *));
/* The same in a named design ("slqb", "slub", "slab", "slob", "sheaves"); NULL, with a line on
 * stderr naming the designs, if the design is unknown. Every call on a cache goes to its own
 * design, so one process can hold caches of every design and compare them. */
SLABKIT_API slabkit_cache *slabkit_cache_create_in(const char *design, const char *name,
                                                   size_t size, size_t align, unsigned flags,
                                                   void (*ctor)(void *));
/* The kernel's struct kmem_cache_args, the parts slabkit takes: alignment (0 or a power of two),
 * constructor, and the objects per sheaf the sheaves design should keep at least (the kernel's
 * sheaf_capacity: size it for the largest prefill the cache's users ask for; 0 leaves the
 * design's own; other designs ignore it). */
struct slabkit_cache_args {
    size_t align;
    void (*ctor)(void *);
    unsigned sheaf_capacity;
};
/* slabkit_cache_create_in with the arguments in a struct (args NULL: all zero); design NULL is
 * the process's design. */
SLABKIT_API slabkit_cache *slabkit_cache_create_args(const char *design, const char *name,
                                                     size_t size,
                                                     const struct slabkit_cache_args *args,
                                                     unsigned flags);
/* One object (zeroed with SLABKIT_GFP_ZERO), or NULL when memory is short. `cache` must be a
 * cache returned by slabkit_cache_create and not destroyed (as in the kernel, it is not checked
 * on this path). */
SLABKIT_API void *slabkit_cache_alloc(slabkit_cache *cache, unsigned gfp) SLABKIT_MALLOC_LIKE;
/* From node `node` (SLABKIT_ANY_NODE: the caller's). NULL for a node that does not exist. */
SLABKIT_API void *slabkit_cache_alloc_node(slabkit_cache *cache, unsigned gfp,
                                           int node) SLABKIT_MALLOC_LIKE;
/* Frees an object of this cache (NULL: nothing, as kfree(NULL)). */
SLABKIT_API void slabkit_cache_free(slabkit_cache *cache, void *obj);
/* Allocates n objects into p; returns n, or 0 (with nothing allocated) on failure. */
SLABKIT_API size_t slabkit_cache_alloc_bulk(slabkit_cache *cache, unsigned gfp, size_t n, void **p);
SLABKIT_API void slabkit_cache_free_bulk(slabkit_cache *cache, size_t n, void **p);
/* ---- prefilled sheaves (the kernel's kmem_cache_prefill_sheaf and its family) ----------------
 * For code that must not fail to allocate later (the kernel's maple tree, under a lock): take a
 * sheaf of at least `size` objects now, then allocate from it one object at a time with no
 * chance of failure. Under the sheaves design the sheaf is the slot's spare or one from its
 * node's barn, refilled; a size beyond the cache's sheaf capacity (and every prefill under the
 * other designs) gets a one-off sheaf of exactly `size`. A sheaf is used by one thread at a time
 * and goes back to the cache it came from. */
typedef struct slab_sheaf slabkit_sheaf;
/* A sheaf holding at least `size` objects, or NULL (size 0, or memory short: nothing kept). */
SLABKIT_API slabkit_sheaf *slabkit_cache_prefill_sheaf(slabkit_cache *cache, unsigned gfp,
                                                       unsigned size);
/* The next object of the sheaf (zeroed with SLABKIT_GFP_ZERO); NULL once it is empty (no
 * fallback to the cache, as the kernel's). */
SLABKIT_API void *slabkit_cache_alloc_from_sheaf(slabkit_cache *cache, unsigned gfp,
                                                 slabkit_sheaf *sheaf) SLABKIT_MALLOC_LIKE;
/* Tops *sheaf up to at least `size` objects (a sheaf that must grow beyond its capacity is
 * replaced by a new one, and the old given back). 0, or -1 when memory is short (*sheaf left
 * as it was) or the sheaf is not the cache's (reported on stderr). */
SLABKIT_API int slabkit_cache_refill_sheaf(slabkit_cache *cache, unsigned gfp,
                                           slabkit_sheaf **sheaf, unsigned size);
/* Gives the sheaf and the objects left in it back to the cache (NULL: nothing). */
SLABKIT_API void slabkit_cache_return_sheaf(slabkit_cache *cache, unsigned gfp,
                                            slabkit_sheaf *sheaf);
/* The objects left in the sheaf. */
SLABKIT_API unsigned slabkit_sheaf_size(const slabkit_sheaf *sheaf);
/* Returns the cache's free objects parked on this thread and on idle threads' slots to their
 * pages and releases empty pages; other threads give theirs back at their next slow path.
 * Returns the number of pages the cache still holds. */
SLABKIT_API size_t slabkit_cache_shrink(slabkit_cache *cache);
/* Destroys a cache (NULL: nothing). No thread may use it concurrently. If objects are still
 * allocated, each is reported (address) and the cache's memory is kept, so that later accesses
 * to them are not use-after-free; the cache is then unusable but its name is freed. */
SLABKIT_API void slabkit_cache_destroy(slabkit_cache *cache);
SLABKIT_API const char *slabkit_cache_name(const slabkit_cache *cache);
/* Sets one of the cache's tunables, as the kernel's sysfs files did: "order" (the slab order;
 * only while the cache holds no slab, e.g. right after creation or after a shrink that freed
 * everything), for SLQB "hiwater" and "freebatch" (1 <= freebatch <= hiwater + 1), for SLUB
 * "min_partial" and "cpu_partial" (objects; 0: no per-thread partial slabs). Returns 0, or -1
 * with a line on stderr naming the cache, the tunable and what was wrong. */
SLABKIT_API int slabkit_cache_tune(slabkit_cache *cache, const char *tunable, unsigned long value);
/* The object size as created. */
SLABKIT_API size_t slabkit_cache_object_size(const slabkit_cache *cache);

/* ---- kmalloc ------------------------------------------------------------------------------ */

/* Size classes 8 16 32 64 96 128 192 256 512 1k 2k 4k 8k; larger from pages. Power-of-two
 * sizes are naturally aligned; every block is 8-aligned (the kernel's minimum), and under every
 * design but SLOB 16-aligned from 16 bytes up (SLOB keeps the kernel's 8: a 100-byte block
 * takes 108 bytes with its header).
 * Size 0 gives SLABKIT_ZERO_SIZE_PTR; a size that cannot be served gives NULL. */
SLABKIT_API void *slabkit_kmalloc(size_t size, unsigned gfp) SLABKIT_MALLOC_LIKE;
SLABKIT_API void *slabkit_kmalloc_node(size_t size, unsigned gfp, int node) SLABKIT_MALLOC_LIKE;
SLABKIT_API void *slabkit_kzalloc(size_t size, unsigned gfp) SLABKIT_MALLOC_LIKE;
/* n * size bytes, zeroed; NULL when n * size overflows. */
SLABKIT_API void *slabkit_kcalloc(size_t n, size_t size, unsigned gfp) SLABKIT_MALLOC_LIKE;
/* Resizes p, in place when the new size fits its block (shrinking included); otherwise moves
 * it. realloc(NULL, n) is kmalloc(n); a zero size frees p and returns SLABKIT_ZERO_SIZE_PTR.
 * On failure returns NULL and leaves p untouched. */
SLABKIT_API void *slabkit_krealloc(void *p, size_t size, unsigned gfp);
/* NULL and SLABKIT_ZERO_SIZE_PTR: nothing. */
SLABKIT_API void slabkit_kfree(void *p);
/* The usable size of a kmalloc block (0 for NULL and SLABKIT_ZERO_SIZE_PTR). */
SLABKIT_API size_t slabkit_ksize(const void *p);

/* ---- the malloc family --------------------------------------------------------------------- */

/* The C library's allocation functions with the C and glibc semantics, on kmalloc of the
 * process's design: what libslabkit-malloc.so exports under the standard names (malloc, free,
 * ...), here with a prefix so that a program can call slabkit beside another malloc.
 *   - Failure (no memory, a size above PTRDIFF_MAX, n * size overflowing) returns NULL with
 *     errno ENOMEM; posix_memalign returns the error number instead and leaves *out alone.
 *   - malloc(0) (and calloc, memalign, aligned_alloc of 0) returns a unique pointer to free.
 *   - Every block is 8-aligned, and 16-aligned from 16 bytes up; the aligned calls take any
 *     power-of-two alignment. posix_memalign: EINVAL unless the alignment is a power of two and
 *     a multiple of sizeof(void *); aligned_alloc: EINVAL (errno) unless a power of two;
 *     memalign rounds other alignments up to a power of two, as glibc does.
 *   - realloc(NULL, n) is malloc(n); realloc(p, 0) frees p and returns NULL (glibc). A block
 *     shrunk to less than half its size moves to a smaller one; growing blocks above 4 MiB are
 *     remapped, not copied.
 *   - free(NULL) does nothing; free keeps errno. A pointer slabkit did not hand out is reported
 *     on stderr (naming the call and what the address is) and is fatal unless
 *     SLABKIT_CONTINUE_ON_ERROR=1: then nothing is freed (realloc returns NULL, errno EINVAL;
 *     malloc_usable_size returns 0). */
SLABKIT_API void *slabkit_malloc(size_t size) SLABKIT_MALLOC_LIKE;
SLABKIT_API void *slabkit_calloc(size_t n, size_t size) SLABKIT_MALLOC_LIKE;
SLABKIT_API void *slabkit_realloc(void *p, size_t size);
SLABKIT_API void *slabkit_reallocarray(void *p, size_t n, size_t size);
SLABKIT_API void slabkit_free(void *p);
SLABKIT_API void slabkit_free_sized(void *p, size_t size);
SLABKIT_API void slabkit_free_aligned_sized(void *p, size_t align, size_t size);
SLABKIT_API void *slabkit_memalign(size_t align, size_t size) SLABKIT_MALLOC_LIKE;
SLABKIT_API int slabkit_posix_memalign(void **out, size_t align, size_t size);
SLABKIT_API void *slabkit_aligned_alloc(size_t align, size_t size) SLABKIT_MALLOC_LIKE;
SLABKIT_API void *slabkit_valloc(size_t size) SLABKIT_MALLOC_LIKE;
/* Page-aligned, size rounded up to whole pages (0: one page). */
SLABKIT_API void *slabkit_pvalloc(size_t size) SLABKIT_MALLOC_LIKE;
/* Bytes usable at p (at least what was asked); 0 for NULL. */
SLABKIT_API size_t slabkit_malloc_usable_size(const void *p);
/* slabkit_trim(); returns 1 if memory was given back to the OS, else 0. `pad` is ignored. */
SLABKIT_API int slabkit_malloc_trim(size_t pad);

/* ---- statistics --------------------------------------------------------------------------- */

/* One cache's figures, summed over slots and nodes (a racy but whole-valued snapshot). */
struct slabkit_cache_stats {
    char name[32];
    char design[8];
    size_t object_size; /* as created */
    size_t slot_size;   /* bytes per object in a slab, metadata included */
    size_t align;
    unsigned order; /* pages per slab = 1 << order */
    unsigned objects_per_slab;
    uint64_t slabs;              /* slabs held now */
    uint64_t objects;            /* slabs * objects_per_slab */
    uint64_t active_objects;     /* not on a slab freelist: allocated or queued */
    uint64_t queued_objects;     /* free, parked on per-slot queues, outboxes and inboxes */
    unsigned hiwater, freebatch; /* SLQB tunables (0 for other designs) */
    /* Event counters; names as the design's own statistics (for SLQB: ALLOC, ALLOC_SLAB_FILL,
     * ALLOC_SLAB_NEW, FREE, FREE_REMOTE, FLUSH_FREE_LIST, ...; for SLUB: ALLOC_FASTPATH,
     * ALLOC_SLOWPATH, FREE_FASTPATH, FREE_SLOWPATH, FREE_FROZEN, ...; for SLAB: ALLOCHIT,
     * ALLOCMISS, FREEHIT, FREEMISS, ALLOCS, FREES, GROWN, REAPED, ...). */
    unsigned nr_counters;
    const char *counter_names[24];
    uint64_t counters[24];
    /* The design's tunables, by the names slabkit_cache_tune takes ("order", and for SLQB
     * "hiwater", "freebatch"; for SLUB "min_partial", "cpu_partial"; for SLAB "limit",
     * "batchcount", "shared"), with their values now. */
    unsigned nr_tunables;
    const char *tunable_names[4];
    uint64_t tunables[4];
    /* The "tunables <limit> <batchcount> <sharedfactor>" columns of the slabinfo line. */
    uint64_t slabinfo_tunables[3];
    /* The "slabdata <active_slabs> <num_slabs> <sharedavail>" columns: slabs with an object out
     * (SLAB keeps free slabs; the other designs count every slab) and objects in the shared
     * arrays (SLAB's only). */
    uint64_t active_slabs;
    uint64_t shared_avail;
    /* The same events in one shape for every design (slabinfo -A, -D): every allocation and
     * free of the cache, and those that took the design's slow path (SLQB: ALLOC,
     * ALLOC_SLAB_FILL + ALLOC_SLAB_NEW, FREE, FREE_REMOTE + FLUSH_FREE_LIST; SLUB: fast + slow
     * paths, slow paths; SLAB: hits + misses, misses; SLOB: every one is slow). */
    uint64_t allocs, alloc_slow, frees, free_slow;
    /* The cache's debug flags as SLABKIT_DEBUG's letters (F Z P U T), "" without debugging. */
    char flags[8];
};

/* Number of live caches. */
SLABKIT_API size_t slabkit_cache_count(void);
/* Fills out[0..max) with the live caches' figures (in creation order); returns how many there
 * are (which may exceed max). */
SLABKIT_API size_t slabkit_stats(struct slabkit_cache_stats *out, size_t max);
/* One cache's figures. */
SLABKIT_API void slabkit_get_cache_stats(const slabkit_cache *cache,
                                         struct slabkit_cache_stats *out);
/* /proc/slabinfo (version 2.1) text of every live cache into buf; returns the full length
 * (like snprintf: the text is truncated if it is longer than size - 1). */
SLABKIT_API size_t slabkit_slabinfo(char *buf, size_t size);

/* Page allocator totals. */
struct slabkit_page_stats {
    uint64_t pages_in_use;   /* handed out (slabs and large blocks) */
    uint64_t pages_parked;   /* on per-slot page lists */
    uint64_t pages_free;     /* in the buddy lists */
    uint64_t pages_resident; /* upper bound of what slabkit keeps resident */
    uint64_t pages_returned; /* given back to the OS since start */
    uint64_t reserved_bytes; /* address space reserved */
    uint64_t large_os_bytes; /* blocks above 4 MiB, mapped from the OS directly */
    uint64_t errors;         /* bad frees reported */
};
SLABKIT_API void slabkit_get_page_stats(struct slabkit_page_stats *out);

/* The page allocator per NUMA node, as /proc/buddyinfo and a little more. */
struct slabkit_node_stats {
    unsigned node;
    uint64_t free_blocks[11]; /* free blocks of order 0..10 in the buddy lists */
    uint64_t free_pages;      /* in the buddy lists */
    uint64_t free_resident;   /* of those, pages that may still be resident */
    uint64_t in_use;          /* handed out */
    uint64_t in_pcp;          /* on per-slot page lists */
    uint64_t usable_pages;    /* in the node's chunks, page descriptors excluded */
    uint64_t chunks;          /* 1 GiB chunks of address space */
    uint64_t returned;        /* pages given back to the OS since start */
    uint64_t decommits;       /* calls that gave them back */
};
/* Fills out[0..max) with the nodes' figures; returns the number of nodes (which may exceed max). */
SLABKIT_API size_t slabkit_get_node_stats(struct slabkit_node_stats *out, size_t max);

/* The whole heap: every cache's objects and slabs, the page allocator's other blocks and free
 * pages, the blocks mapped from the OS. What mallinfo2, malloc_info and malloc_stats report. */
struct slabkit_heap_stats {
    uint64_t caches;
    uint64_t slab_pages;          /* pages held by slabs */
    uint64_t objects_in_use;      /* handed out and not freed */
    uint64_t object_bytes;        /* their bytes (slot sizes) */
    uint64_t free_objects;        /* free in slabs, per-slot queues and shared lists */
    uint64_t free_object_bytes;   /* their bytes */
    uint64_t block_pages;         /* page allocator blocks handed out other than slabs */
    uint64_t free_pages;          /* free in the page allocator (buddy and per-slot lists) */
    uint64_t free_resident_pages; /* of those, the ones that may still be resident */
    uint64_t returned_pages;      /* given back to the OS since start */
    uint64_t reserved_bytes;      /* address space the page allocator reserved */
    uint64_t large_blocks;        /* blocks mapped from the OS directly, in use */
    uint64_t large_bytes;
    uint64_t kept_blocks; /* freed large blocks kept for reuse */
    uint64_t kept_bytes;
    uint64_t errors; /* bad frees reported */
};
SLABKIT_API void slabkit_get_heap_stats(struct slabkit_heap_stats *out);

/* glibc's malloc_info XML (version 1) of the heap into buf, from the figures of
 * slabkit_get_heap_stats: one heap whose <sizes> list every cache with free objects (slot size,
 * bytes and count of its free objects). Returns the full length, like snprintf. What
 * libslabkit-malloc.so's malloc_info writes to its FILE. */
SLABKIT_API size_t slabkit_malloc_info(char *buf, size_t size);

/* Every statistic above as one JSON text (docs/slabinfo.md has the schema: every cache with
 * its design's counters and tunables, the heap, the page allocator per node, the slots) into
 * buf; returns the full length, like snprintf (truncated if longer than size - 1; size 0 only
 * measures). Never allocates. */
SLABKIT_API size_t slabkit_stats_json(char *buf, size_t size);

/* Live statistics (docs/slabinfo.md): the process publishes its statistics in a shared-memory
 * segment, /dev/shm/slabkit.<pid>, where `slabinfo -p <pid>` reads them while it runs. A helper
 * thread publishes every period_ms (10..60000; 0: 1000) and serves the tool's requests
 * (validate, shrink, report). SLABKIT_STATS=live (or live:MS) starts it at the first call.
 * Returns 0 (also when already publishing: the period is then changed), or -1 with a sentence
 * in *why (which may be NULL). The fast paths do no more work while it runs. */
SLABKIT_API int slabkit_stats_live_start(unsigned period_ms, const char **why);
/* Stops publishing and removes the segment (nothing if not publishing). */
SLABKIT_API void slabkit_stats_live_stop(void);
/* Publishes a snapshot now, from the calling thread: returns the segment's publication count
 * after it, or 0 when not publishing. */
SLABKIT_API uint64_t slabkit_stats_publish(void);

/* Who gets the per-slot structures (per-CPU queues, arrays, freelists and page lists): threads,
 * CPUs, or both. Modes: "thread" (every thread owns a slot; beyond 1024 threads, threads share
 * 64 more, taken for each slow path), "cpu" (every thread uses the slot of the CPU it runs on,
 * through restartable sequences) and "auto" (the default where rseq works: the first threads,
 * twice as many as CPUs, own slots and the others use the CPUs'). */
struct slabkit_slot_stats {
    char mode[8];            /* "thread", "cpu" or "auto" */
    char why[160];           /* how it was chosen, or why the CPUs have no slots here */
    char rseq[8];            /* whose rseq registration slabkit uses: "glibc", "own", "none" */
    unsigned cpu_slots;      /* slots of CPUs (0 in thread mode) */
    unsigned thread_slots;   /* slots threads may own */
    unsigned threads_owning; /* threads owning a slot now */
    uint64_t restarts;       /* rseq critical sections the kernel aborted */
    uint64_t busy;           /* slow paths that found their slot held (and went without) */
    uint64_t shared_holds;   /* slow paths of threads beyond the owned slots (thread mode) */
    uint64_t cpu_drains;     /* slots of CPUs drained because no thread may run on them */
};
SLABKIT_API void slabkit_get_slot_stats(struct slabkit_slot_stats *out);
/* Chooses the slot mode ("thread", "cpu" or "auto") before the first allocation (otherwise
 * SLABKIT_SLOTS does, at the first allocation). Returns 0, or -1 with a sentence in *why (which
 * may be NULL) when the mode is not one of those, was chosen already, or is "cpu" where rseq or
 * membarrier's rseq fence is missing ("auto" then means "thread": 0 is returned). */
SLABKIT_API int slabkit_set_slot_mode(const char *mode, const char **why);

/* Writes the statistics report to file descriptor fd: the /proc/slabinfo table of every cache,
 * one line per cache with its design's counters that are not zero, then the heap totals (objects
 * in use and free, slab pages, the page allocator's other blocks, free and returned pages, OS
 * blocks, bad frees). What malloc_stats() and SLABKIT_STATS=exit print (to stderr). Never
 * allocates. */
SLABKIT_API void slabkit_print_stats(int fd);

/* Debugging (docs/debug.md). slabkit_set_debug: the debug flags for caches made from now on
 * (and kmalloc's size classes opened from now on), in SLABKIT_DEBUG's grammar (slub_debug's:
 * letters F Z P U T or -, then optionally ",name,name..." with '*' wildcards; groups separated
 * by ';'; "" or "1" is FZPU everywhere; NULL or "-" none). Returns 0, or -1 with a sentence
 * naming what was wrong in *why (which may be NULL). */
SLABKIT_API int slabkit_set_debug(const char *spec, const char **why);
/* The leak scan, kmemleak's idea (docs/debug.md, "Leak scan"): in a copy of the process, the
 * allocated objects of debug caches (SLABKIT_DEBUG, or the debug cache flags) that no word of
 * the process's writable memory, nor of a referenced object, points into; objects younger than
 * min_age_ms left out. Conservative: a word that looks like a pointer keeps an object. Writes
 * a report (one line, then one per cache and allocation site) into buf; returns the number of
 * leaked objects, or -1 with a sentence in buf. SLABKIT_LEAKS=scan runs it at exit. */
SLABKIT_API long slabkit_scan_leaks(uint64_t min_age_ms, char *buf, size_t size);
/* Fault injection, the kernel's failslab (docs/failslab.md): allocations from caches made with
 * SLABKIT_FAILSLAB, or whose names match `caches` (comma-separated, '*' wildcards; "": every
 * cache, kmalloc's and malloc's classes and blocks above them - "large" - included; NULL: the
 * filter as it is, SLABKIT_FAILSLAB_CACHES at start) fail
 * on purpose: NULL from the cache and kmalloc calls, NULL and ENOMEM from malloc, bad_alloc from
 * new. spec is SLABKIT_FAILSLAB's grammar, probability[:interval[:times[:space]]]: a percentage
 * (up to six decimals) of the allocations that pass the other tests; only every interval-th of
 * those; at most `times` failures (-1: no limit, the default); none before `space` bytes were
 * allocated. "off" or "0" stops failures (the caches stay armed: their fast paths closed).
 * Returns 0, or -1 with a sentence naming what was wrong in *why (which may be NULL). */
SLABKIT_API int slabkit_set_failslab(const char *spec, const char *caches, const char **why);
/* Allocations failed on purpose: from cache c, or, for NULL, in all. */
SLABKIT_API uint64_t slabkit_failslab_failures(const slabkit_cache *c);
/* Checks cache c (the design's lists and counters; for a debug cache every object's red zones,
 * state and poison). The cache must not be in use meanwhile. Returns the problems found (each
 * reported on stderr), the first described in buf (which may be NULL). slabkit_validate checks
 * every cache. SLABKIT_VALIDATE=exit runs it at exit. */
SLABKIT_API unsigned slabkit_cache_validate(slabkit_cache *c, char *buf, size_t size);
SLABKIT_API unsigned slabkit_validate(char *buf, size_t size);
/* Heap errors reported so far: bad frees and corruption found by the debug layer. */
SLABKIT_API uint64_t slabkit_errors(void);
/* Requests for memory refused so far: the page allocator's arena could not grow, or the OS
 * would not map a large block (out of memory, or out of address space under RLIMIT_AS). Each
 * allocation that returned NULL for lack of memory counts at least one; a slab that fell back to
 * a smaller order counts the refusal of the larger. */
SLABKIT_API uint64_t slabkit_refusals(void);
/* For in-process tests: every report is passed to hook (from its first line, which names what
 * was found) instead of aborting, and slabkit goes on as with SLABKIT_CONTINUE_ON_ERROR=1 (the
 * bad free ignored, the corrupted bytes repaired). NULL: abort again. */
SLABKIT_API void slabkit_set_error_hook(void (*hook)(const char *report));

/* The process's design ("slqb", "slub", "slab", "slob" or "sheaves"). */
SLABKIT_API const char *slabkit_allocator(void);
/* Designs this build has, separated by spaces. */
SLABKIT_API const char *slabkit_designs(void);
/* Gives back what slabkit can: flushes this thread's and idle threads' queues in every cache,
 * then the page allocator's idle lists, then decommits free pages. */
SLABKIT_API void slabkit_trim(void);

/* The fast paths of slabkit_cache_alloc and slabkit_cache_free, inlined (SLABKIT_NO_INLINE: not).
 */
#include "inline.h"

#ifdef __cplusplus
}
#endif

#endif /* SLABKIT_SLABKIT_H */
