/* heap_bugs.c - one heap bug per run, chosen by argv[1], for the preload debug tests
 * (tests/preload/CMakeLists.txt): run under LD_PRELOAD=libslabkit-malloc.so with SLABKIT_DEBUG
 * set, each must end in slabkit's report of its kind and an abort (or, for the reads, print what
 * the program saw). A plain C program that knows nothing of slabkit. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Keeps the compiler from seeing through the bugs (a store before free is otherwise dead). */
static void *volatile sink;
static void *launder(void *p) {
    sink = p;
    return sink;
}
static void poke(char *p, long at, int value, size_t n) {
    volatile char *v = p;
    for (size_t i = 0; i < n; ++i) v[at + (long)i] = (char)value;
}

static void churn(int n) {
    for (int i = 0; i < n; ++i) {
        char *p = launder(malloc(48));
        poke(p, 0, 1, 48);
        free(p);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: heap_bugs KIND\n");
        return 2;
    }
    const char *k = argv[1];
    char *p = launder(malloc(40));
    memset(p, 'x', 40);
    if (!strcmp(k, "none")) {
        free(p);
    } else if (!strcmp(k, "leak")) {
        /* p stays allocated: SLABKIT_LEAKS=exit lists it */
    } else if (!strcmp(k, "double_free")) {
        free(p);
        free(p);
    } else if (!strcmp(k, "double_free_delayed")) {
        free(p);
        churn(2000);
        free(p);
    } else if (!strncmp(k, "double_free_interleaved", 23)) {
        /* free(a); free(b); free(a): a is not its list's first free block the second time.
         * double_free_interleaved_<size>, 8 bytes by default. */
        size_t size = k[23] == '_' ? (size_t)atol(k + 24) : 8;
        char *a = launder(malloc(size));
        char *b = launder(malloc(size));
        poke(a, 0, 1, size);
        poke(b, 0, 2, size);
        free(a);
        free(b);
        free(a);
    } else if (!strcmp(k, "double_free_page")) {
        char *b = launder(malloc(64 * 1024));
        free(b);
        free(b);
    } else if (!strcmp(k, "double_free_large")) {
        char *b = launder(malloc(16 << 20));
        free(b);
        free(b);
    } else if (!strcmp(k, "free_stack")) {
        char local[64];
        free(launder(local));
    } else if (!strcmp(k, "free_interior")) {
        free(launder(p + 8));
    } else if (!strcmp(k, "free_far")) {
        void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        free(launder((char *)m + 64));
    } else if (!strcmp(k, "free_unaligned")) {
        free(launder(p + 1));
    } else if (!strcmp(k, "overflow1")) {
        poke(p, (long)malloc_usable_size(p), 0, 1);
        free(p);
    } else if (!strncmp(k, "bounds_", 7)) {
        /* bounds_<over|under>_<bytes>_<size>[_memcpy]: a block of <size> bytes (the size asked
         * for, not the class's) written <bytes> bytes past its end or before its start, by a
         * plain store of each byte or by one memcpy, then freed: the heap-error suites' matrix,
         * for comparing the default with the C library's (tests/preload/compare_heap_bugs.sh). */
        char dir[8] = {0};
        unsigned long bytes = 0, size = 0;
        if (sscanf(k + 7, "%5[a-z]_%lu_%lu", dir, &bytes, &size) != 3 || bytes == 0 ||
            (strcmp(dir, "over") && strcmp(dir, "under"))) {
            fprintf(stderr, "heap_bugs: bad kind '%s'\n", k);
            return 2;
        }
        int by_memcpy = strstr(k, "_memcpy") != NULL;
        char *q = launder(malloc(size));
        char *r = launder(malloc(size)); /* a neighbour, so the block is not the heap's last */
        long at = strcmp(dir, "over") ? -(long)bytes : (long)size;
        if (by_memcpy) {
            char *src = malloc(bytes);
            memset(src, 'A', bytes);
            memcpy(launder(q + at), src, bytes);
        } else {
            poke(q, at, 'A', bytes);
        }
        free(q);
        free(r);
    } else if (!strcmp(k, "overflow_slack")) {
        /* 8 bytes asked for, in a 16-byte class: one byte past what was asked. */
        char *q = launder(malloc(8));
        poke(q, 8, 0, 1);
        free(q);
    } else if (!strcmp(k, "overflow_1m")) {
        /* A megabyte written from the end of a small block over its neighbours (and their
         * metadata: the report must not trust what it finds there). */
        char *q = launder(malloc(8));
        memset(launder(q + 8), 0x41, 1 << 20);
        free(q);
    } else if (!strcmp(k, "overflow8")) {
        poke(p, (long)malloc_usable_size(p), 0, 8);
        free(p);
    } else if (!strcmp(k, "underflow1")) {
        poke(p, -1, 0, 1);
        free(p);
    } else if (!strcmp(k, "overflow32") || !strcmp(k, "underflow32")) {
        /* The 32nd byte past the end / before the start: the red zones are that wide. */
        poke(p, !strcmp(k, "overflow32") ? (long)malloc_usable_size(p) + 31 : -32, 0, 1);
        free(p);
    } else if (!strcmp(k, "overflow32_memcpy")) {
        /* 32 bytes copied past the end. */
        char src[32];
        memset(src, 'y', sizeof src);
        memcpy(launder(p + malloc_usable_size(p)), src, sizeof src);
        free(p);
    } else if (!strcmp(k, "underflow8")) {
        poke(p, -8, 0, 8);
        free(p);
    } else if (!strcmp(k, "write_after_free")) {
        free(p);
        poke(p, 3, 0, 1);
        malloc_trim(0); /* the quarantine gives its objects back, checked */
    } else if (!strcmp(k, "write_after_free_exit")) {
        free(p);
        poke(p, 3, 0, 1);
        return 0; /* the object still waits in the quarantine: checked at exit */
    } else if (!strcmp(k, "write_after_free_reused")) {
        free(p);
        poke(p, 3, 0, 1);
        churn(100000); /* the quarantine turns over: the object is checked as it leaves */
    } else if (!strcmp(k, "read_after_free")) {
        free(p);
        printf("read after free: %02x%02x%02x%02x\n", (unsigned char)p[0], (unsigned char)p[1],
               (unsigned char)p[2], (unsigned char)p[3]);
        return 0;
    } else if (!strcmp(k, "read_uninitialised")) {
        unsigned char *q = launder(malloc(24));
        printf("uninitialised: %02x%02x%02x%02x\n", q[0], q[1], q[2], q[3]);
        free(q);
    } else if (!strcmp(k, "overflow_large_end")) {
        /* A block above the caches whose size is not a multiple of the page: one byte past it. */
        char *b = launder(malloc(300000));
        poke(b, 300000, 1, 1);
        free(b);
    } else if (!strcmp(k, "overflow_into_free")) {
        /* 16 bytes past a block into its free neighbour (found among 64 blocks of a class: the
           next in address order), then the neighbour handed out again. */
        char *v[64];
        size_t size = 48, i, j;
        char *x = 0, *y = 0;
        for (i = 0; i < 64; ++i) v[i] = launder(malloc(size));
        for (i = 0; i < 64 && !y; ++i)
            for (j = 0; j < 64; ++j)
                if (v[j] == v[i] + size) {
                    x = v[i];
                    y = v[j];
                    break;
                }
        if (!y) return 4;
        free(y);
        poke(x, (long)size, 'A', 16);
        launder(malloc(size)); /* y again: its first 16 bytes are not what its free left */
    } else if (!strcmp(k, "write_after_free_key")) {
        /* A write after free over the block's second word, then the block handed out again. */
        char *b = launder(malloc(48));
        free(b);
        poke(b, 8, 'B', 8);
        launder(malloc(48));
    } else if (!strcmp(k, "overflow_4k")) {
        /* One byte past a 4 KiB block: a class with red zones, or for SLOB (whose debugged
           blocks stay below a page) a guarded block. */
        char *b = launder(malloc(4096));
        poke(b, 4096, 1, 1);
        free(b);
    } else if (!strcmp(k, "underflow_large")) {
        /* One byte before a block above the caches whose size is not a multiple of the page:
           the rest of its first page lies before it. */
        char *b = launder(malloc(300000));
        poke(b, -1, 1, 1);
        free(b);
    } else if (!strcmp(k, "underflow_large_pages")) {
        /* One byte before a block of whole pages: its mapping's guard page before it. */
        char *b = launder(malloc(256 * 1024));
        poke(b, -1, 1, 1);
        free(b);
    } else if (!strcmp(k, "overflow_large")) {
        char *b = launder(malloc(64 * 1024));
        poke(b, 64 * 1024 + 100, 1, 1); /* past the block, into the guard page */
        free(b);
    } else if (!strcmp(k, "use_after_free_large")) {
        char *b = launder(malloc(64 * 1024));
        free(b);
        poke(b, 10, 1, 1); /* the freed block is made inaccessible */
    } else if (!strcmp(k, "write_after_free_256k") || !strcmp(k, "read_after_free_256k") ||
               !strcmp(k, "write_after_free_2m")) {
        /* A large block, written, freed, then used: the default keeps it for reuse, readable
           but write-protected, so the read sees the old bytes and the write faults. */
        size_t size = !strcmp(k, "write_after_free_2m") ? (size_t)2 << 20 : (size_t)256 << 10;
        char *b = launder(malloc(size));
        poke(b, 0, 'x', size);
        free(b);
        if (!strcmp(k, "read_after_free_256k")) {
            printf("read after free: %c\n", ((volatile char *)b)[1000]);
        } else {
            poke(b, 1000, 1, 1);
            /* Not reached where the write faults: a second user of the pages sees it. */
            char *c = launder(malloc(size));
            printf("after the write: %s\n", c == b && c[1000] != 'x' ? "corrupted" : "unseen");
            free(c);
        }
    } else if (!strcmp(k, "free_sized_wrong") || !strcmp(k, "free_sized_right")) {
        /* C23's free_sized (glibc 2.36 has none: the preload's, looked up at run time). */
        void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
        if (!fs) return 3;
        fs(p, !strcmp(k, "free_sized_wrong") ? 400 : 40);
    } else if (!strcmp(k, "sized_delete_right")) {
        /* Sizes whose blocks are classes, SLOB units, page blocks and OS blocks: all accepted. */
        void (*del)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
        if (!del) return 3;
        static const size_t sizes[] = {1,    24,   40,   100,  1000,   3000,
                                       4096, 6144, 8192, 9000, 100000, 5 << 20};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i)
            del(launder(malloc(sizes[i])), sizes[i]);
        free(p);
    } else if (!strcmp(k, "sized_delete_wrong")) {
        /* operator delete(void *, size_t) with a size the block was not allocated with. */
        void (*del)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
        if (!del) return 3;
        del(p, 8);
    } else if (!strcmp(k, "sized_delete_wrong_large")) {
        /* An OS block (above the caches) deleted with a smaller size than it was made with. */
        void (*del)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
        if (!del) return 3;
        del(launder(malloc(300000)), 200000);
    } else if (!strcmp(k, "usable_size_after_free")) {
        free(p);
        printf("usable size after free: %zu\n", malloc_usable_size(p));
    } else if (!strcmp(k, "realloc_after_free")) {
        free(p);
        sink = realloc(p, 100);
    } else if (!strcmp(k, "zero_size_write") || !strcmp(k, "zero_size_read")) {
        char *z = launder(malloc(0));
        if (!strcmp(k, "zero_size_write"))
            poke(z, 0, 1, 1);
        else
            printf("zero-size block holds %02x\n", (unsigned char)*(volatile char *)z);
        free(z);
    } else if (!strcmp(k, "zero_size_ok")) {
        /* What a program may do with malloc(0)'s pointer: compare, free, realloc, ask its size. */
        char *a = launder(malloc(0)), *b = launder(malloc(0));
        if (!a || !b || a == b) return 4;
        if (malloc_usable_size(a) != 0) return 5;
        char *c = launder(realloc(a, 10));
        if (!c) return 6;
        memset(c, 1, 10);
        free(c);
        free(b);
        free(launder(malloc(0)));
    } else if (!strcmp(k, "zero_size_double_free")) {
        char *z = launder(malloc(0));
        free(z);
        free(z);
    } else if (!strcmp(k, "delete_of_new_array") || !strcmp(k, "delete_array_of_new") ||
               !strcmp(k, "new_delete_right")) {
        /* operator new, new[], delete and delete[] as a C++ program calls them (the preload's,
         * looked up at run time: this program is C). */
        void *(*new_object)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
        void *(*new_array)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znam");
        void (*delete_object)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdlPv");
        void (*delete_array)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdaPv");
        if (!new_object || !new_array || !delete_object || !delete_array) return 3;
        if (!strcmp(k, "delete_of_new_array")) {
            delete_object(launder(new_array(40)));
        } else if (!strcmp(k, "delete_array_of_new")) {
            delete_array(launder(new_object(40)));
        } else {
            delete_object(launder(new_object(40)));
            delete_array(launder(new_array(40)));
            delete_object(launder(new_object(3000)));
            delete_array(launder(new_array(100000)));
        }
        free(p);
    } else if (!strcmp(k, "aligned_free_wrong")) {
        void (*fas)(void *, size_t, size_t) =
            (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
        if (!fas) return 3;
        void *a = aligned_alloc(64, 64);
        fas(launder((char *)a + 16), 64, 64); /* not the block's start, nor 64-aligned */
    } else {
        fprintf(stderr, "heap_bugs: unknown kind '%s'\n", k);
        return 2;
    }
    puts("survived");
    return 0;
}
