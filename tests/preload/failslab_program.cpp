// failslab_program.cpp - fault injection under the preload (preload_failslab_<design>): run with
// SLABKIT_FAILSLAB=0 (armed, failing nothing), it sets every other allocation to fail through
// slabkit_set_failslab (the preload's, looked up at run time: the program does not link slabkit),
// then makes each kind of allocation a hundred times (each one allocation: a failed new's
// bad_alloc is one more, the runtime's) and checks that each failure is the one its call promises -
// NULL and ENOMEM from malloc, calloc, realloc (the old block kept intact), posix_memalign's
// ENOMEM, std::bad_alloc from new, nullptr from new(nothrow) - that the library counted exactly the
// failures the program saw, and that it did not fail more than it was told.
//   failslab_program [SETTINGS]  (default "100:2": every second allocation fails)
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <new>

namespace {

int problems = 0;
void problem(const char *what, int i) {
    if (++problems <= 10) std::fprintf(stderr, "failslab_program: %s (call %d)\n", what, i);
}

void *volatile sink;

} // namespace

int main(int argc, char **argv) {
    using set_fn = int (*)(const char *, const char *, const char **);
    using count_fn = uint64_t (*)(const void *);
    auto set = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "slabkit_set_failslab"));
    auto failures = reinterpret_cast<count_fn>(dlsym(RTLD_DEFAULT, "slabkit_failslab_failures"));
    if (!set || !failures) {
        std::puts("not under libslabkit-malloc.so");
        return 3;
    }
    const char *settings = argc > 1 ? argv[1] : "100:2";
    const int n = 100;
    int failed[8] = {};
    void *keep[n];
    const char *why = nullptr;
    const uint64_t before = failures(nullptr);
    if (set(settings, "", &why) != 0) {
        std::printf("slabkit_set_failslab refused '%s': %s\n", settings, why ? why : "?");
        return 1;
    }
    // The calls below make exactly one allocation each (no stdio in between).
    for (int i = 0; i < n; ++i) {
        errno = 0;
        void *p = std::malloc(64);
        if (!p) {
            ++failed[0];
            if (errno != ENOMEM) problem("malloc failed without ENOMEM", i);
        }
        keep[i] = p;
    }
    for (int i = 0; i < n; ++i) {
        errno = 0;
        void *p = std::calloc(10, 10);
        if (!p) {
            ++failed[1];
            if (errno != ENOMEM) problem("calloc failed without ENOMEM", i);
        } else if (static_cast<unsigned char *>(p)[99] != 0) {
            problem("calloc's block is not zeroed", i);
        }
        std::free(p);
    }
    for (int i = 0; i < n; ++i) {
        // Grown from 64 bytes to 3000: a new block.
        char *p = static_cast<char *>(keep[i]);
        if (!p) continue; // its malloc failed above
        std::memset(p, 'k', 64);
        errno = 0;
        char *q = static_cast<char *>(std::realloc(p, 3000));
        if (!q) {
            ++failed[2];
            if (errno != ENOMEM) problem("realloc failed without ENOMEM", i);
            if (p[0] != 'k' || p[63] != 'k') problem("a failed realloc changed the old block", i);
            q = p;
        }
        keep[i] = q;
    }
    for (int i = 0; i < n; ++i) {
        void *p = nullptr;
        const int rc = posix_memalign(&p, 256, 100);
        if (rc != 0) {
            ++failed[3];
            if (rc != ENOMEM || p != nullptr) problem("posix_memalign failed without ENOMEM", i);
        }
        std::free(p);
    }
    for (int i = 0; i < n; ++i) {
        try {
            sink = new char[100];
            delete[] static_cast<char *>(sink);
        } catch (const std::bad_alloc &) {
            ++failed[4];
        }
    }
    for (int i = 0; i < n; ++i) {
        char *p = new (std::nothrow) char[200];
        if (!p) ++failed[5];
        delete[] p;
    }
    for (int i = 0; i < n / 10; ++i) {
        // Above the caches: a block of the page allocator or of the region.
        void *p = std::malloc(size_t{1} << 20);
        if (!p) ++failed[6];
        std::free(p);
    }
    for (int i = 0; i < n; ++i) std::free(keep[i]);
    const uint64_t counted = failures(nullptr) - before;
    set("off", nullptr, nullptr);
    int seen = 0;
    for (int f : failed) seen += f;
    std::printf("failed: malloc %d calloc %d realloc %d posix_memalign %d new %d nothrow %d "
                "large %d; counted %llu, seen %d\n",
                failed[0], failed[1], failed[2], failed[3], failed[4], failed[5], failed[6],
                static_cast<unsigned long long>(counted), seen);
    if (counted != static_cast<uint64_t>(seen)) problem("the library counted other failures", 0);
    // Off: nothing fails any more.
    for (int i = 0; i < n; ++i) {
        void *p = std::malloc(64);
        if (!p) problem("an allocation failed with injection off", i);
        std::free(p);
    }
    std::printf("%s\n", problems ? "problems" : "ok");
    return problems ? 1 : 0;
}
