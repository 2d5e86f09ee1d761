// page_bench.cpp - the buddy page allocator against mmap/munmap and glibc malloc/free.
//
// Three contenders hand out blocks of the same size - order 0 (4 KiB) and order 3 (32 KiB):
//   slabkit  page_allocator::global().alloc(order) / free(addr, order)
//   mmap     mmap(MAP_PRIVATE | MAP_ANONYMOUS) / munmap
//   malloc   glibc malloc / free (32 KiB is below glibc's mmap threshold: served from the heap)
// in two patterns, each run by 1 and by 2 threads (every thread allocates and frees its own
// blocks; wall-clock time, UseRealTime):
//   pair   allocate a block, touch it, free it
//   batch  allocate kBatch blocks touching each, then free them newest first (LIFO)
// Every benchmark counts blocks as items, so items_per_second is blocks allocated and freed per
// second over all threads. Names read BM_<pattern><<contender>,order<N>>/real_time/threads:<T>;
// bench/page_ratios.py runs this binary and prints the slabkit/mmap and slabkit/malloc ratios.
#include "page/page.hpp"
#include "page/page_allocator.hpp"

#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <string>

namespace {

constexpr unsigned kOrders[] = {0, 3};
constexpr size_t kBatch = 64;

// Each contender is constructed once per benchmark thread, before the timed loop, and destroyed
// after it (untimed).
class slabkit_pages {
  public:
    explicit slabkit_pages(unsigned order)
        : pa_(slabkit::page_allocator::global()), order_(order) {}
    // Every run starts from the same state, whatever ran before it: the per-thread page lists
    // empty and every free page back in the buddy lists, merged as far as it goes.
    ~slabkit_pages() { pa_.drain(); }
    slabkit_pages(const slabkit_pages &) = delete;
    slabkit_pages &operator=(const slabkit_pages &) = delete;
    void *alloc() { return pa_.alloc(order_); }
    void release(void *block) { pa_.free(block, order_); }

  private:
    slabkit::page_allocator &pa_;
    unsigned order_;
};

class mmap_munmap {
  public:
    explicit mmap_munmap(unsigned order) : bytes_(slabkit::kPageSize << order) {}
    void *alloc() {
        void *block =
            ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return block == MAP_FAILED ? nullptr : block;
    }
    void release(void *block) { ::munmap(block, bytes_); }

  private:
    size_t bytes_;
};

class malloc_free {
  public:
    explicit malloc_free(unsigned order) : bytes_(slabkit::kPageSize << order) {}
    void *alloc() { return std::malloc(bytes_); }
    void release(void *block) { std::free(block); }

  private:
    size_t bytes_;
};

// Writes the first byte of a fresh block, as any user of it would. Every contender pays for it
// in the same way: for mmap it is the page fault that brings the page in, for slabkit and malloc
// a store to memory that is usually resident already. DoNotOptimize makes the block escape (and,
// being a compiler memory barrier, commits the store), so the compiler can neither drop the
// store nor elide a malloc/free pair.
inline void touch(void *block) {
    static_cast<unsigned char *>(block)[0] = 1;
    benchmark::DoNotOptimize(block);
}

// Untimed, before the loop: takes the thread's slot (slabkit), grows the arena by its first chunk
// (slabkit) or sets up the thread's heap arena (malloc), so that the first timed round does not.
template <class Contender>
void warm_up(Contender &contender) {
    if (void *block = contender.alloc()) {
        touch(block);
        contender.release(block);
    }
}

template <class Contender>
void pair(benchmark::State &state, unsigned order) {
    Contender contender(order);
    warm_up(contender);
    for (auto _ : state) {
        void *block = contender.alloc();
        if (!block) {
            state.SkipWithError("allocation failed");
            break;
        }
        touch(block);
        contender.release(block);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

template <class Contender>
void batch(benchmark::State &state, unsigned order) {
    Contender contender(order);
    warm_up(contender);
    void *blocks[kBatch];
    for (auto _ : state) {
        size_t got = 0;
        for (; got < kBatch; ++got) {
            void *block = contender.alloc();
            if (!block) break;
            touch(block);
            blocks[got] = block;
        }
        for (size_t i = got; i-- > 0;) contender.release(blocks[i]);
        if (got < kBatch) {
            state.SkipWithError("allocation failed");
            break;
        }
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

using bench_fn = void (*)(benchmark::State &, unsigned order);

void add(const char *pattern, const char *contender, unsigned order, bench_fn fn) {
    const std::string name =
        std::string("BM_") + pattern + "<" + contender + ",order" + std::to_string(order) + ">";
    benchmark::RegisterBenchmark(name.c_str(),
                                 [fn, order](benchmark::State &state) { fn(state, order); })
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
}

// The three contenders of one (pattern, order) run next to each other, so that a change in the
// machine's load during the run hits them alike.
[[maybe_unused]] const bool registered = [] {
    for (unsigned order : kOrders) {
        add("pair", "slabkit", order, pair<slabkit_pages>);
        add("pair", "mmap", order, pair<mmap_munmap>);
        add("pair", "malloc", order, pair<malloc_free>);
    }
    for (unsigned order : kOrders) {
        add("batch", "slabkit", order, batch<slabkit_pages>);
        add("batch", "mmap", order, batch<mmap_munmap>);
        add("batch", "malloc", order, batch<malloc_free>);
    }
    return true;
}();

} // namespace

BENCHMARK_MAIN();
