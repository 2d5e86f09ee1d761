/* leaks_program.c - planted leaks for slabinfo --leaks (leaks_e2e.py): under the preload with
 * owner tracking and live statistics, 7 blocks of 64 bytes whose pointers are dropped
 * (leak_site), and blocks that are referenced only in ways a conservative scan must follow: 5
 * from a global array (kept_global), a list of 4 whose nodes point to each other from one global
 * head (kept_chain), 3 from thread-local storage (kept_tls), 2 from another thread's stack while
 * it waits (kept_by_thread). It says "ready <pid>" and waits for a line on stdin. Its symbols are
 * exported, so that the sites have names. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;
void *kept[5];
struct node {
    struct node *next;
    char pad[56];
};
struct node *head;
__thread void *tls_kept[3];
static int hold[2];

__attribute__((noinline)) void leak_site(void) {
    for (int i = 0; i < 7; ++i) {
        sink = malloc(64);
        memset(sink, 0x11, 64); /* no pointer inside */
    }
    sink = 0;
}
__attribute__((noinline)) void kept_global(void) {
    for (int i = 0; i < 5; ++i) kept[i] = malloc(64);
}
__attribute__((noinline)) void kept_chain(void) {
    for (int i = 0; i < 4; ++i) {
        struct node *n = malloc(sizeof *n);
        memset(n->pad, 0, sizeof n->pad);
        n->next = head;
        head = n;
    }
}
__attribute__((noinline)) void kept_tls(void) {
    for (int i = 0; i < 3; ++i) tls_kept[i] = malloc(64);
}
__attribute__((noinline)) void *kept_by_thread(void *arg) {
    (void)arg;
    void *volatile mine[2] = {malloc(64), malloc(64)};
    char c;
    if (read(hold[0], &c, 1) < 0) return 0; /* waits with its two pointers on its stack */
    free(mine[0]);
    free(mine[1]);
    return 0;
}
/* Writes over the stack below this frame: the dropped pointers of leak_site's frame must not
 * stay there for the scan to find. */
__attribute__((noinline)) void scrub_stack(void) {
    volatile char buf[65536];
    for (size_t i = 0; i < sizeof buf; ++i) buf[i] = 0;
}

int main(void) {
    if (pipe(hold) != 0) return 1;
    leak_site();
    kept_global();
    kept_chain();
    kept_tls();
    pthread_t t;
    if (pthread_create(&t, 0, kept_by_thread, 0) != 0) return 1;
    scrub_stack();
    usleep(100000); /* the thread has made its blocks */
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 1;
    if (write(hold[1], "x", 1) != 1) return 1;
    pthread_join(t, 0);
    return 0;
}
