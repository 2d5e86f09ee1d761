// linked_pair: the kmem_cache alloc+free pair as a program that links the shared library gets
// it (only the public header, libslabkit.so), beside the process's malloc/free pair (glibc's,
// or a peer's under LD_PRELOAD), in one process. bench/linked_ratios.py runs it under each
// allocator and prints the ratios.
//
//   BM_cache_pair/<size>       slabkit_cache_alloc + slabkit_cache_free as the header gives them
//                              (include/slabkit/inline.h: SLQB's, SLUB's and SLAB's own-slot
//                              fast paths inlined here; SLOB's calls the library)
//   BM_cache_pair_call/<size>  the same through the library's exported functions (what users got
//                              before the inline paths, and what SLABKIT_NO_INLINE gives)
//   BM_malloc_pair/<size>      malloc + free of the process
//   BM_floor_pair/<size>       the floor: a bare LIFO free list in thread-local memory, popped
//                              and pushed inline with nothing else (no checks, no counters, no
//                              slow path); what any allocator whose per-thread free list lives
//                              in memory pays at least, on this machine
//   BM_floor_counted/<size>    the same list with a count beside its head, as SLQB's queues and
//                              tcmalloc's per-CPU arrays keep one
#include "slabkit/slabkit.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <string>

namespace {

// The library's own functions: a call through these pointers is never inlined.
void *(*volatile g_alloc_call)(slabkit_cache *, unsigned) = slabkit_cache_alloc;
void (*volatile g_free_call)(slabkit_cache *, void *) = slabkit_cache_free;

slabkit_cache *cache_of(size_t size) {
    std::string name = "linked-pair-" + std::to_string(size);
    slabkit_cache *c = slabkit_cache_create(name.c_str(), size, 0, 0, nullptr);
    if (!c) {
        std::fprintf(stderr, "linked_pair: cannot create cache %s\n", name.c_str());
        std::exit(1);
    }
    return c;
}

// The pair loop over a fresh cache of the benchmark's size, with `alloc` and `free_` as given.
template <class Alloc, class Free>
void cache_pair_loop(benchmark::State &state, Alloc alloc, Free free_) {
    slabkit_cache *c = cache_of(static_cast<size_t>(state.range(0)));
    for (auto _ : state) {
        void *p = alloc(c);
        benchmark::DoNotOptimize(p);
        free_(c, p);
    }
    slabkit_cache_destroy(c);
}

void BM_cache_pair(benchmark::State &state) {
    cache_pair_loop(
        state, [](slabkit_cache *c) { return slabkit_cache_alloc(c, 0); },
        [](slabkit_cache *c, void *p) { slabkit_cache_free(c, p); });
}

void BM_cache_pair_call(benchmark::State &state) {
    auto *alloc = g_alloc_call;
    auto *free_ = g_free_call;
    cache_pair_loop(
        state, [alloc](slabkit_cache *c) { return alloc(c, 0); },
        [free_](slabkit_cache *c, void *p) { free_(c, p); });
}

void BM_malloc_pair(benchmark::State &state) {
    const size_t size = static_cast<size_t>(state.range(0));
    for (auto _ : state) {
        void *p = std::malloc(size);
        benchmark::DoNotOptimize(p);
        std::free(p);
    }
}

// The floor's list. Its head (and count) are in memory between the pop and the push, as an
// allocator's are: DoNotOptimize's memory clobber makes the compiler store and reload them, so
// each pair is one load and one store of the head per side (and of the count), and the next
// pair's pop waits on the previous push's store. Nothing an allocator adds can make it cheaper.
struct floor_list {
    void *head;
    unsigned long count;
};
thread_local floor_list t_floor;

void floor_seed(size_t size) {
    // A few objects of the benchmark's size from the process's malloc, freed at the end.
    for (int i = 0; i < 8; ++i) {
        void *p = std::malloc(size < sizeof(void *) ? sizeof(void *) : size);
        if (!p) std::abort();
        *static_cast<void **>(p) = t_floor.head;
        t_floor.head = p;
        ++t_floor.count;
    }
}

void floor_drain() {
    while (void *p = t_floor.head) {
        t_floor.head = *static_cast<void **>(p);
        std::free(p);
    }
    t_floor.count = 0;
}

template <bool Counted>
void floor_loop(benchmark::State &state) {
    floor_seed(static_cast<size_t>(state.range(0)));
    for (auto _ : state) {
        void *p = t_floor.head;
        t_floor.head = *static_cast<void **>(p);
        if (Counted) --t_floor.count;
        benchmark::DoNotOptimize(p);
        *static_cast<void **>(p) = t_floor.head;
        t_floor.head = p;
        if (Counted) ++t_floor.count;
        benchmark::ClobberMemory();
    }
    floor_drain();
}

void BM_floor_pair(benchmark::State &state) {
    floor_loop<false>(state);
}
void BM_floor_counted(benchmark::State &state) {
    floor_loop<true>(state);
}

BENCHMARK(BM_cache_pair)->Arg(32)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_cache_pair_call)->Arg(32)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_malloc_pair)->Arg(32)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_floor_pair)->Arg(32)->Arg(64)->Arg(256)->Arg(1024);
BENCHMARK(BM_floor_counted)->Arg(32)->Arg(64)->Arg(256)->Arg(1024);

} // namespace

int main(int argc, char **argv) {
    // Where malloc comes from, and slabkit's design, for the runner's checks.
    Dl_info info{};
    const char *from =
        dladdr(reinterpret_cast<void *>(&malloc), &info) && info.dli_fname ? info.dli_fname : "?";
    benchmark::AddCustomContext("malloc_from", from);
    benchmark::AddCustomContext("slabkit_design", slabkit_allocator());
#ifdef SLABKIT_HAVE_INLINE
    benchmark::AddCustomContext("inline_paths", "yes");
#else
    benchmark::AddCustomContext("inline_paths", "no");
#endif
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
