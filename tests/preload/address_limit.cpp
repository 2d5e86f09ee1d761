// address_limit.cpp - a program run under an address-space limit (ulimit -v), on the system
// allocator and under the preload (tests/preload/CMakeLists.txt, preload_limit_<design>_<MiB>).
// It prints only what every allocator that keeps the C and C++ contracts prints: work that fits
// the limit succeeds, requests beyond it fail the way the language says (NULL and ENOMEM, or
// std::bad_alloc), running the heap out fails the same way without a crash, and after freeing
// everything allocation works again. No counts: where each allocator runs out differs.
#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

namespace {

// Fills blocks of `size` until malloc says no; true when it said so with ENOMEM and every block
// kept its bytes. The pointers live in a malloc'd array grown by realloc, which may run out first.
// Blocks of a page or more are marked at both ends only: touching all of a 2 GiB limit would
// take most of a minute of page faults.
bool run_out(size_t size, size_t *count) {
    size_t cap = 1024, n = 0;
    auto **v = static_cast<unsigned char **>(malloc(cap * sizeof(void *)));
    if (!v) return false;
    bool ok = true;
    for (;;) {
        errno = 0;
        auto *p = static_cast<unsigned char *>(malloc(size));
        if (!p) {
            ok = errno == ENOMEM;
            break;
        }
        if (size < 4096) {
            memset(p, static_cast<int>(n & 0xff), size);
        } else {
            p[0] = static_cast<unsigned char>(n & 0xff);
            p[size - 1] = static_cast<unsigned char>(n & 0xff);
        }
        if (n == cap) {
            auto **w = static_cast<unsigned char **>(realloc(v, 2 * cap * sizeof(void *)));
            if (!w) {
                ok = errno == ENOMEM;
                free(p);
                break;
            }
            v = w;
            cap *= 2;
        }
        v[n++] = p;
    }
    for (size_t i = 0; i < n; ++i) {
        if (v[i][0] != (i & 0xff) || v[i][size - 1] != (i & 0xff)) ok = false;
        free(v[i]);
    }
    free(v);
    *count = n;
    return ok;
}

bool new_throws(size_t size) {
    try {
        char *p = new char[size];
        delete[] p;
        return false;
    } catch (const std::bad_alloc &) {
        return true;
    }
}

} // namespace

int main() {
    struct rlimit lim {};
    if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) {
        puts("no address-space limit: run me under ulimit -v");
        return 2;
    }
    const size_t limit = lim.rlim_cur;

    // Work that fits: small blocks of every class, some threads.
    std::vector<void *> blocks;
    for (size_t i = 0; i < 100000; ++i) blocks.push_back(malloc(16 + (i * 37) % 2000));
    bool all = true;
    for (void *p : blocks) all = all && p != nullptr;
    for (void *p : blocks) free(p);
    std::vector<std::thread> threads;
    std::vector<int> done(4, 0);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&done, t] {
            std::vector<std::vector<int>> v;
            for (int i = 0; i < 20000; ++i) v.emplace_back(static_cast<size_t>(i % 50), i);
            done[static_cast<size_t>(t)] = static_cast<int>(v.size());
        });
    for (auto &th : threads) th.join();
    for (int d : done) all = all && d == 20000;
    printf("work within the limit: %s\n", all ? "ok" : "FAILED");

    // Requests beyond the limit.
    errno = 0;
    void *p = malloc(2 * limit);
    printf("malloc beyond the limit: %s\n", !p && errno == ENOMEM ? "NULL, ENOMEM" : "WRONG");
    free(p);
    errno = 0;
    p = calloc(limit / 1024, 2048);
    printf("calloc beyond the limit: %s\n", !p && errno == ENOMEM ? "NULL, ENOMEM" : "WRONG");
    free(p);
    void *small = malloc(100);
    memset(small, 7, 100);
    errno = 0;
    void *grown = realloc(small, 2 * limit);
    printf("realloc beyond the limit: %s\n",
           !grown && errno == ENOMEM && static_cast<unsigned char *>(small)[99] == 7
               ? "NULL, ENOMEM, the block kept"
               : "WRONG");
    free(grown ? grown : small);
    void *aligned = nullptr;
    printf("posix_memalign beyond the limit: %s\n",
           posix_memalign(&aligned, 4096, 2 * limit) == ENOMEM ? "ENOMEM" : "WRONG");
    printf("operator new[] beyond the limit: %s\n",
           new_throws(2 * limit) ? "std::bad_alloc" : "WRONG");
    char *nothrow = new (std::nothrow) char[2 * limit];
    printf("operator new[](nothrow) beyond the limit: %s\n", nothrow ? "WRONG" : "nullptr");
    delete[] nothrow;

    // Running the heap out, with large, page-sized and small blocks; under the small limits only
    // (filling 2 GiB takes seconds of page faults, and adds nothing the 512 MiB run does not).
    for (size_t size : {size_t{1} << 20, size_t{64} << 10, size_t{1000}}) {
        if (limit > (size_t{512} << 20)) break;
        size_t n = 0;
        bool ok = run_out(size, &n);
        printf("filling the limit with %zu-byte blocks: %s\n", size,
               ok && n > 0 ? "NULL, ENOMEM, nothing lost" : "WRONG");
    }
    printf("operator new[] once the heap was full and freed: %s\n",
           new_throws(1 << 20) ? "WRONG" : "ok");

    // Everything freed: allocation works again.
    void *again = malloc(1 << 20);
    void *again_small = malloc(48);
    printf("after freeing: %s\n", again && again_small ? "malloc works" : "WRONG");
    free(again);
    free(again_small);
    return 0;
}
