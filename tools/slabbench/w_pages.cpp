// w_pages.cpp - slabkit's buddy page allocator against the OS's mmap/munmap and the process's
// malloc of page-sized blocks: bench/page_bench's comparison as timed loops.
//
// Seeds: none directly. Every slab design takes its slabs from the page allocator, as the
// kernel's take theirs from the buddy allocator; the threads argue about slab orders (SLUB's
// order-3 slabs against SLAB's and SLQB's order 0) on the assumption that a page allocation is
// cheap next to an object allocation and that higher orders cost little more. This workload
// measures that for slabkit's page allocator, and, beside it, what a user-space program would
// pay without one: mmap/munmap of the same size, or malloc/free (glibc serves 128 KiB and more
// with mmap too).
//
// Contenders (param `orders`: block sizes of 2^order pages of 4 KiB):
//   alloc-free/<order>  page_allocator::global().alloc(order), touch, free(block, order)
//   mmap/<order>        mmap(PRIVATE|ANONYMOUS), touch (a page fault), munmap
//   malloc/<order>      malloc(4096 << order), touch, free
// and the same as batches of 64 blocks freed newest first ("batch/<order>", "mmap-batch/<order>",
// "malloc-batch/<order>"). Every block has its first byte written, as any user would. Values are
// ns per allocate+free pair (lower is better), in the thread's CPU time (system time included:
// mmap's page faults and munmap's TLB flushes count). With param `threads` above 1 (cases
// "<series>-<T>t/<order>") each of T threads, pinned to CPUs of their own where there are,
// runs the loop on its own blocks; those report wall-clock time per pair per thread (a thread
// asleep on mmap's lock uses no CPU, so CPU time would hide the contention).
//
// The page allocator is the same under every slab design, so the cache configurations should
// agree here; each runs it in its own process, with the design's own slabs beside it.
#include "common.hpp"
#include "workload.hpp"

#include "page/page.hpp"
#include "page/page_allocator.hpp"

#include <fmt/format.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace slabbench {

namespace {

constexpr size_t kBatch = 64; // blocks per round of the batch pattern
// The time limit is checked on the wall clock (vDSO: a few ns) once in this many pairs.
constexpr uint64_t kClockEvery = 64;

inline void touch(void *block) {
    *static_cast<volatile unsigned char *>(block) = 1;
    asm volatile("" ::"r"(block) : "memory");
}

struct counts {
    std::atomic<uint64_t> allocated{0}, freed{0}, failed{0};
};

class buddy_pages {
  public:
    explicit buddy_pages(unsigned order) : pa_(slabkit::page_allocator::global()), order_(order) {}
    void *alloc() { return pa_.alloc(order_); }
    bool release(void *block) {
        pa_.free(block, order_);
        return true;
    }
    // Every case starts from the same state, whatever ran before it: the per-slot page lists
    // empty and the free pages merged back in the buddy lists (untimed).
    void settle() { pa_.drain(); }

  private:
    slabkit::page_allocator &pa_;
    unsigned order_;
};

class mmap_pages {
  public:
    explicit mmap_pages(unsigned order) : bytes_(slabkit::kPageSize << order) {}
    void *alloc() {
        void *p =
            ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
    }
    bool release(void *block) { return ::munmap(block, bytes_) == 0; }
    void settle() {}

  private:
    size_t bytes_;
};

class malloc_pages {
  public:
    explicit malloc_pages(unsigned order) : bytes_(slabkit::kPageSize << order) {}
    void *alloc() { return std::malloc(bytes_); }
    bool release(void *block) {
        std::free(block);
        return true;
    }
    void settle() {}

  private:
    size_t bytes_;
};

struct loop_result {
    uint64_t pairs = 0;
    uint64_t cpu_ns = 0;
};

// One thread's loop: `ops` pairs (or until the wall-clock deadline), singly or in batches.
template <class Contender>
loop_result run_loop(unsigned order, bool batch, uint64_t ops, uint64_t deadline, counts &c) {
    Contender k(order);
    loop_result r;
    // Untimed: the thread's slot (slabkit), the first chunk (slabkit), the arena (malloc).
    if (void *b = k.alloc()) {
        touch(b);
        if (!k.release(b)) c.failed.fetch_add(1);
        c.allocated.fetch_add(1), c.freed.fetch_add(1);
    }
    uint64_t allocated = 0, freed = 0, failed = 0;
    const uint64_t t0 = thread_cpu_ns();
    if (!batch) {
        for (uint64_t i = 0; i < ops; ++i) {
            void *b = k.alloc();
            if (!b) {
                ++failed;
                break;
            }
            touch(b);
            ++allocated;
            if (k.release(b))
                ++freed;
            else
                ++failed;
            if (i % kClockEvery == kClockEvery - 1 && now_ns() > deadline) break;
        }
    } else {
        void *blocks[kBatch];
        const uint64_t rounds = std::max<uint64_t>(1, ops / kBatch);
        for (uint64_t round = 0; round < rounds; ++round) {
            size_t got = 0;
            for (; got < kBatch; ++got) {
                void *b = k.alloc();
                if (!b) break;
                touch(b);
                blocks[got] = b;
            }
            allocated += got;
            for (size_t i = got; i-- > 0;) {
                if (k.release(blocks[i]))
                    ++freed;
                else
                    ++failed;
            }
            if (got < kBatch) {
                ++failed;
                break;
            }
            if (now_ns() > deadline) break;
        }
    }
    r.cpu_ns = thread_cpu_ns() - t0;
    r.pairs = freed;
    k.settle();
    c.allocated.fetch_add(allocated), c.freed.fetch_add(freed), c.failed.fetch_add(failed);
    return r;
}

// ns per pair: one thread in its CPU time, several in wall-clock time per pair per thread.
template <class Contender>
double measure(unsigned order, bool batch, unsigned threads, uint64_t ops, uint64_t max_ns,
               counts &c) {
    if (threads <= 1) {
        const loop_result r = run_loop<Contender>(order, batch, ops, now_ns() + max_ns, c);
        return r.pairs ? double(r.cpu_ns) / double(r.pairs) : 0;
    }
    std::atomic<unsigned> ready{0};
    std::atomic<bool> go{false};
    std::atomic<uint64_t> pairs{0};
    std::atomic<uint64_t> deadline{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            pin_to_cpu(t);
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            const loop_result r =
                run_loop<Contender>(order, batch, ops, deadline.load(std::memory_order_relaxed), c);
            pairs.fetch_add(r.pairs);
        });
    while (ready.load() < threads) std::this_thread::yield();
    const uint64_t t0 = now_ns();
    deadline.store(t0 + max_ns, std::memory_order_relaxed);
    go.store(true, std::memory_order_release);
    for (std::thread &th : pool) th.join();
    const uint64_t wall = now_ns() - t0;
    const uint64_t per_thread = pairs.load() / threads;
    return per_thread ? double(wall) / double(per_thread) : 0;
}

void run_pages(const run_context &ctx, result &out) {
    const std::vector<long long> orders = ctx.get_ints("orders");
    const std::vector<long long> thread_counts =
        ctx.threads ? std::vector<long long>{ctx.threads} : ctx.get_ints("threads");
    const long long ops = ctx.get_int("ops");
    const long long max_ms = ctx.get_int("max_ms");
    if (ops <= 0 || max_ms <= 0) throw std::runtime_error("pages: ops and max_ms must be > 0");
    for (long long o : orders)
        if (o < 0 || o > long(slabkit::kMaxOrder))
            throw std::runtime_error(fmt::format("pages: orders are 0 to {}", slabkit::kMaxOrder));
    for (long long t : thread_counts)
        if (t < 1 || t > 64) throw std::runtime_error("pages: threads are 1 to 64");
    const uint64_t max_ns = uint64_t(max_ms) * 1000000u;

    slabkit::page_allocator &pa = slabkit::page_allocator::global();
    pa.drain();
    slabkit::page_stats before{};
    pa.snapshot(&before);

    counts c;
    for (long long t : thread_counts) {
        const unsigned threads = unsigned(t);
        const std::string suffix = threads > 1 ? fmt::format("-{}t", threads) : "";
        for (bool batch : {false, true}) {
            for (long long o : orders) {
                const unsigned order = unsigned(o);
                const std::string pre = batch ? "batch" : "alloc-free";
                const std::string at = fmt::format("{}/{}", suffix, order);
                // The three contenders of one order run next to each other, so that a change
                // in the machine's load hits them alike.
                out.add(pre + at, "alloc+free", "ns/pair", better::lower,
                        measure<buddy_pages>(order, batch, threads, uint64_t(ops), max_ns, c));
                out.add((batch ? "mmap-batch" : "mmap") + at, "alloc+free", "ns/pair",
                        better::lower,
                        measure<mmap_pages>(order, batch, threads, uint64_t(ops), max_ns, c));
                out.add((batch ? "malloc-batch" : "malloc") + at, "alloc+free", "ns/pair",
                        better::lower,
                        measure<malloc_pages>(order, batch, threads, uint64_t(ops), max_ns, c));
            }
        }
    }

    pa.drain();
    slabkit::page_stats after{};
    pa.snapshot(&after);
    out.check("allocations", c.failed.load() == 0,
              fmt::format("{} blocks allocated, {} failed allocations or frees", c.allocated.load(),
                          c.failed.load()));
    out.check("balanced", c.allocated.load() == c.freed.load(),
              count_detail(c.freed.load(), c.allocated.load(), "blocks freed"));
    out.check(
        "pages in use", after.in_use == before.in_use,
        fmt::format("{} pages in use at the end, {} at the start", after.in_use, before.in_use));
    out.note("pcp_refills", double(after.pcp_refills - before.pcp_refills));
    out.note("pcp_flushes", double(after.pcp_flushes - before.pcp_flushes));
    out.note("pages_returned", double(after.returned - before.returned));
    out.note("chunks", double(after.chunks));
}

} // namespace

workload pages_workload() {
    workload w;
    w.name = "pages";
    w.seed = "bench/page_bench (no seed thread of its own)";
    w.maps_to = "bench/page_bench's comparison as timed loops: slabkit's buddy page allocator "
                "(alloc-free/<order>, batch/<order>) against mmap/munmap and malloc/free of the "
                "same 2^order pages, one block at a time and in batches of 64 freed LIFO, ns "
                "per allocate+free pair (thread CPU time; wall clock per thread with threads "
                "> 1, cases <series>-<T>t/<order>).";
    w.cannot = "No kernel: the kernel's buddy allocator has no system call or page fault "
               "behind it; here mmap's cost includes both, and slabkit's pages were faulted in "
               "once and are reused warm.";
    w.families = fam_cache;
    w.baseline = "slqb";
    w.shape = layout::matrix;
    w.params = {
        {"orders", "0,3", "0,2,4,6,8,10", "0,1,2,3,4,5,6,7,8,9,10", "block sizes, 2^order pages"},
        {"threads", "1,2", "1", "1,2", "threads per case, each on its own blocks"},
        {"ops", "500", "20000", "200000", "allocate+free pairs per case"},
        {"max_ms", "20", "10", "50",
         "a case stops after this long even if it has not done its ops"},
    };
    w.run = [](const run_context &ctx, result &out) {
        try {
            run_pages(ctx, out);
        } catch (const std::exception &e) {
            out.fail(e.what());
        }
    };
    return w;
}

} // namespace slabbench
