/* small_mallocs: a small C program's allocations, for bench/start_ratios.py's footprint table.
 * One thread, 20 rounds: 10,000 blocks of 16 to 256 bytes allocated and written (about 1.3 MiB
 * live), then freed in allocation order. Its peak RSS is the allocator's footprint on a small
 * program: the live blocks, what it adds around them, and what it holds from its start.
 * Exit status 1 if a block does not read back what was written. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kBlocks = 10000, kRounds = 20 };

int main(void) {
    static unsigned char *blocks[kBlocks];
    static size_t sizes[kBlocks];
    uint32_t x = 12345;
    for (int r = 0; r < kRounds; r++) {
        for (int i = 0; i < kBlocks; i++) {
            x = x * 1103515245u + 12345u;
            sizes[i] = 16 + (x >> 16) % 241;
            blocks[i] = malloc(sizes[i]);
            if (!blocks[i]) return 2;
            memset(blocks[i], (unsigned char)i, sizes[i]);
        }
        for (int i = 0; i < kBlocks; i++) {
            if (blocks[i][sizes[i] - 1] != (unsigned char)i) {
                fprintf(stderr, "small_mallocs: block %d changed\n", i);
                return 1;
            }
            free(blocks[i]);
        }
    }
    return 0;
}
