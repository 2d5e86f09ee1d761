/* A program linked with slabkit::malloc: its malloc family is slabkit's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The C API that libslabkit-malloc.so exports beside the malloc names. */
const char *slabkit_allocator(void);

static int fail(const char *what) {
    fprintf(stderr, "uses_malloc: %s\n", what);
    return 1;
}

int main(void) {
    /* The malloc that the program's calls reach, and the file it comes from. */
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL)
        return fail("dladdr(malloc)");
    if (strstr(info.dli_fname, "libslabkit-malloc") == NULL) {
        fprintf(stderr, "uses_malloc: malloc comes from %s\n", info.dli_fname);
        return 1;
    }
    char *p = malloc(100);
    if (p == NULL || malloc_usable_size(p) < 100) return fail("malloc");
    strcpy(p, "slabkit");
    p = realloc(p, 100000);
    if (p == NULL || strcmp(p, "slabkit") != 0) return fail("realloc");
    free(p);
    printf("uses_malloc: ok (malloc from %s, design %s)\n", info.dli_fname, slabkit_allocator());
    return 0;
}
