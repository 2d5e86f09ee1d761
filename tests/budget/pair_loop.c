/* pair_loop.c - n alloc+free pairs of one size through one interface, for counting the
 * instructions of a pair under callgrind (budget.py). Each pair writes one byte to its block, so
 * that the allocation cannot be elided, and nothing else.
 *
 *   pair_loop <interface> <pairs> <size>
 *     malloc       malloc + free (the process's: run it with the malloc replacement preloaded)
 *     calloc       calloc(1, size) + free
 *     kmalloc      slabkit_kmalloc + slabkit_kfree (linked libslabkit.so)
 *     cache        slabkit_cache_alloc + slabkit_cache_free as slabkit.h gives them (the inline
 *                  fast paths of include/slabkit/inline.h for an SLQB cache)
 *     cache_call   the same through the library's exported functions (never inlined)
 *     which        prints where the pairs would go (pair_loop_libc: the file that defines
 *                  malloc; pair_loop_slabkit: slabkit's design), so that budget.py can check that
 *                  it counts what it means to
 *
 * Built twice: pair_loop_libc without slabkit (malloc, calloc) and pair_loop_slabkit linked with
 * libslabkit.so (every interface but the two above, which would be glibc's there). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PAIR_LOOP_SLABKIT
#include "slabkit/slabkit.h"
#endif

/* Keeps p live and the store to it, without a call. */
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s <interface> <pairs> <size>\n", argv[0]);
        return 2;
    }
    const char *what = argv[1];
    const long pairs = atol(argv[2]);
    const size_t size = (size_t)atol(argv[3]);
    if (pairs < 0 || size == 0) {
        fprintf(stderr, "pair_loop: bad pairs '%s' or size '%s'\n", argv[2], argv[3]);
        return 2;
    }
#ifndef PAIR_LOOP_SLABKIT
    if (strcmp(what, "which") == 0) {
        Dl_info info;
        void *(*volatile m)(size_t) = malloc;
        if (dladdr((void *)m, &info) == 0 || !info.dli_fname) return 1;
        printf("%s\n", info.dli_fname);
        return 0;
    }
    if (strcmp(what, "malloc") == 0) {
        for (long i = 0; i < pairs; i++) {
            char *p = malloc(size);
            p[0] = 1;
            KEEP(p);
            free(p);
        }
        return 0;
    }
    if (strcmp(what, "calloc") == 0) {
        for (long i = 0; i < pairs; i++) {
            char *p = calloc(1, size);
            p[0] = 1;
            KEEP(p);
            free(p);
        }
        return 0;
    }
#else
    if (strcmp(what, "which") == 0) {
        printf("%s\n", slabkit_allocator());
        return 0;
    }
    if (strcmp(what, "kmalloc") == 0) {
        for (long i = 0; i < pairs; i++) {
            char *p = slabkit_kmalloc(size, 0);
            p[0] = 1;
            KEEP(p);
            slabkit_kfree(p);
        }
        return 0;
    }
    if (strcmp(what, "cache") == 0 || strcmp(what, "cache_call") == 0) {
        slabkit_cache *c = slabkit_cache_create("pair-loop", size, 0, 0, NULL);
        if (!c) {
            fprintf(stderr, "pair_loop: cannot create a cache of %zu bytes\n", size);
            return 1;
        }
        /* Through volatile pointers the calls are the library's own functions. */
        void *(*volatile alloc_call)(slabkit_cache *, unsigned) = slabkit_cache_alloc;
        void (*volatile free_call)(slabkit_cache *, void *) = slabkit_cache_free;
        if (strcmp(what, "cache") == 0) {
            for (long i = 0; i < pairs; i++) {
                char *p = slabkit_cache_alloc(c, 0);
                p[0] = 1;
                KEEP(p);
                slabkit_cache_free(c, p);
            }
        } else {
            void *(*a)(slabkit_cache *, unsigned) = alloc_call;
            void (*f)(slabkit_cache *, void *) = free_call;
            for (long i = 0; i < pairs; i++) {
                char *p = a(c, 0);
                p[0] = 1;
                KEEP(p);
                f(c, p);
            }
        }
        slabkit_cache_destroy(c);
        return 0;
    }
#endif
    fprintf(stderr, "pair_loop: unknown interface '%s' for this build\n", what);
    return 2;
}
