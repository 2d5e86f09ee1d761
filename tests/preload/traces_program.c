/* traces_program.c - known allocation and free sites for slabinfo --traces (traces_e2e.py):
 * under the preload with owner tracking (SLABKIT_DEBUG=U,malloc-64) and live statistics, 30
 * blocks of 64 bytes from site_a, 12 from site_b, 10 of site_a's freed by free_site; then it
 * says "ready <pid>" and waits for a line on stdin. Built with its symbols exported, so that the
 * sites have names. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

/* Not tail calls: the caller's frame must be the site (the store after the call). */
__attribute__((noinline)) void *site_a(void) {
    void *p = malloc(64);
    sink = p;
    return p;
}
__attribute__((noinline)) void *site_b(void) {
    void *p = malloc(64);
    sink = p;
    return p;
}
__attribute__((noinline)) void free_site(void *p) {
    free(p);
    sink = 0;
}

int main(void) {
    void *a[30], *b[12];
    for (int i = 0; i < 30; ++i) a[i] = site_a();
    for (int i = 0; i < 12; ++i) b[i] = site_b();
    for (int i = 0; i < 10; ++i) free_site(a[i]);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (int i = 10; i < 30; ++i) free(a[i]);
    for (int i = 0; i < 12; ++i) free(b[i]);
    return 0;
}
