// w_micro.cpp - the allocation fast paths in isolation: bench/slab_bench's workloads as timed
// loops, and the cost of an allocation as the number of live objects grows.
//
// Seeds: none directly. The threads' claims ("SLQB's fast path is as short as SLUB's", "SLOB is
// slow", "remote frees are SLAB's weak spot") rest on what these loops isolate; bench/slab_bench
// measured them with Google Benchmark, and this workload puts them beside the other seeds'
// benchmarks, under every configuration, in one table.
//
// Per object size (param `sizes`), through a cache of that size (heap.alloc/free), and under
// slabkit configurations also through kmalloc (cases "kmalloc-<series>/<size>"; under malloc
// both would be malloc, so they are left out):
//   pair/<size>    allocate one object, write its first byte, free it
//   lifo/<size>    allocate 1000 objects (writing the first byte of each), then free them
//   fifo/<size>    newest first, oldest first, or in one random order computed before the
//   random/<size>  timed loop and used in every round
//   remote/<size>  a producer thread on one CPU allocates and passes each object through a
//                  bounded single-producer single-consumer ring to a consumer on the other CPU,
//                  which frees it: every free is a remote one
// and, through a 64-byte cache:
//   live/<n>       n objects held live (allocated upfront), then a loop that frees a random one
//                  and allocates its replacement: the cache misses on objects and slab
//                  metadata, and the slab and page structures at scale, as n grows
//   fill/<n>       the upfront allocation of those n objects, per object
// Single-thread cases report ns per object (allocated and freed; live: per pair), timed in the
// thread's CPU time (time descheduled on a busy machine does not count); remote reports Mobj/s
// in wall-clock time, as a stream of objects needs both threads running.
#include "common.hpp"
#include "heap.hpp"
#include "spsc_ring.hpp"
#include "workload.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace slabbench {

namespace {

constexpr size_t kBatch = 1000;  // objects per round of lifo, fifo and random
constexpr size_t kRing = 1024;   // pointers the remote ring holds
constexpr uint32_t kSeed = 2026; // of the random order and the live victims
// A case stops early after `max_ms` (its clock read once in this many objects, which keeps the
// clock's own cost under a tenth of a nanosecond per object): an allocator that is slow at a
// size - glibc trimming its heap top under a batch of 4 KiB blocks, SLOB at a million live
// objects - is measured over fewer objects instead of holding up the suite.
constexpr uint64_t kClockEvery = 4096;

// Writes the first byte, as a user of a fresh object would, and makes the pointer escape with a
// compiler barrier, so that no allocate/free pair can be elided and the store is committed.
inline void touch(void *p) {
    *static_cast<volatile unsigned char *>(p) = 1;
    asm volatile("" ::"r"(p) : "memory");
}

// The two ways to the same objects; both inline to the heap's one branch per call.
struct via_cache {
    heap *h;
    const heap::cache *c;
    void *alloc() const { return h->alloc(c); }
    void release(void *p) const { h->free(c, p); }
};
struct via_kmalloc {
    heap *h;
    size_t n;
    void *alloc() const { return h->kmalloc(n); }
    void release(void *p) const { h->kfree(p); }
};

struct tally {
    uint64_t allocated = 0, freed = 0, failed = 0;
};

template <class Api>
double pair_ns(const Api &api, uint64_t ops, uint64_t max_ns, tally &t) {
    if (void *p = api.alloc()) { // the thread's first allocation sets things up: untimed
        touch(p);
        api.release(p);
        ++t.allocated, ++t.freed;
    }
    const uint64_t t0 = thread_cpu_ns();
    uint64_t done = 0;
    for (; done < ops; ++done) {
        void *p = api.alloc();
        if (!p) {
            ++t.failed;
            break;
        }
        touch(p);
        api.release(p);
        if (done % kClockEvery == kClockEvery - 1 && thread_cpu_ns() - t0 > max_ns) {
            ++done;
            break;
        }
    }
    const uint64_t dt = thread_cpu_ns() - t0;
    t.allocated += done, t.freed += done;
    return done ? double(dt) / double(done) : 0;
}

// Allocates kBatch objects into objs; returns how many it got.
template <class Api>
size_t fill(const Api &api, void **objs) {
    for (size_t i = 0; i < kBatch; ++i) {
        void *p = api.alloc();
        if (!p) return i;
        touch(p);
        objs[i] = p;
    }
    return kBatch;
}

// All three orders free through an index array, so they differ only in the order.
template <class Api>
double batch_ns(const Api &api, const std::vector<uint32_t> &seq, uint64_t ops, uint64_t max_ns,
                tally &t) {
    std::vector<void *> objs(kBatch);
    const uint64_t rounds = std::max<uint64_t>(1, ops / kBatch);
    // An untimed round: the slabs under a batch are in place before timing starts.
    size_t got = fill(api, objs.data());
    for (size_t i = 0; i < got; ++i) api.release(objs[i]);
    t.allocated += got, t.freed += got;
    if (got < kBatch) {
        ++t.failed;
        return 0;
    }
    const uint64_t t0 = thread_cpu_ns();
    uint64_t r = 0;
    for (; r < rounds; ++r) {
        got = fill(api, objs.data());
        if (got < kBatch) {
            for (size_t i = 0; i < got; ++i) api.release(objs[i]);
            t.allocated += got, t.freed += got;
            ++t.failed;
            break;
        }
        for (uint32_t index : seq) api.release(objs[index]);
        if (r % 8 == 7 && thread_cpu_ns() - t0 > max_ns) {
            ++r;
            break;
        }
    }
    const uint64_t dt = thread_cpu_ns() - t0;
    t.allocated += r * kBatch, t.freed += r * kBatch;
    return r ? double(dt) / double(r * kBatch) : 0;
}

using remote_ring = spsc_ring<kRing>;

// Pushed after a failed allocation: the consumer stops there.
void *const kStop = reinterpret_cast<void *>(uintptr_t{1});

struct remote_outcome {
    double mobj_s = 0;
    bool balanced = false;
    std::string detail;
    int producer_cpu = -1, consumer_cpu = -1; // where each ran (sched_getcpu after pinning)
};

template <class Api>
remote_outcome remote_run(const Api &api, uint64_t ops, uint64_t max_ns, tally &t) {
    auto ring = std::make_unique<remote_ring>();
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    uint64_t made = 0, freed = 0, t_start = 0, t_end = 0;
    bool failed = false;
    int producer_cpu = -1, consumer_cpu = -1;
    // Each thread's first allocation and free (its slot, its caches) happen before the start.
    auto warm = [&] {
        if (void *p = api.alloc()) {
            touch(p);
            api.release(p);
        }
    };
    std::thread consumer([&] {
        pin_to_cpu(1);
        consumer_cpu = sched_getcpu();
        warm();
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) cpu_relax();
        for (;;) {
            void *p = ring->pop();
            if (p == kStop) break;
            api.release(p);
            ++freed;
        }
        t_end = now_ns();
    });
    std::thread producer([&] {
        pin_to_cpu(0);
        producer_cpu = sched_getcpu();
        warm();
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) cpu_relax();
        for (uint64_t i = 0; i < ops; ++i) {
            void *p = api.alloc();
            if (!p) {
                failed = true;
                break;
            }
            touch(p);
            ring->push(p);
            ++made;
            if (i % kClockEvery == kClockEvery - 1 && now_ns() - t_start > max_ns) break;
        }
        ring->push(kStop);
        ring->flush();
    });
    while (ready.load() < 2) std::this_thread::yield();
    t_start = now_ns();
    go.store(true, std::memory_order_release);
    producer.join();
    consumer.join();
    t.allocated += made, t.freed += freed;
    if (failed) ++t.failed;
    remote_outcome r;
    r.balanced = made == freed && ring->pushed() == ring->popped() && ring->pushed() == made + 1;
    r.detail = fmt::format("{} passed, {} freed, ring {} in {} out", made, freed, ring->pushed(),
                           ring->popped());
    r.mobj_s = t_end > t_start ? double(freed) * 1e3 / double(t_end - t_start) : 0;
    r.producer_cpu = producer_cpu;
    r.consumer_cpu = consumer_cpu;
    return r;
}

// One cheap generator for the live victims (xorshift64*), the same cost under every allocator.
struct victim_picker {
    uint64_t x;
    size_t next(size_t n) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        const uint64_t r = x * 0x2545f4914f6cdd1dull;
        return size_t((static_cast<unsigned __int128>(r) * n) >> 64);
    }
};

struct live_outcome {
    double fill_ns = 0; // per object of the upfront allocation
    double pair_ns = 0; // per free+alloc pair; 0 when the fill did not finish
    size_t filled = 0;
};

// Holds n live objects, then replaces random ones. The fill is timed too (fill/<n>: what the
// n-th allocation costs as the population grows) and stops after max_fill_ns, so that a design
// whose allocation is slower the more objects it holds shows as that, not as a hung suite.
live_outcome live_run(const via_cache &api, size_t n, uint64_t ops, uint64_t max_ns,
                      uint64_t max_fill_ns, tally &t) {
    live_outcome r;
    std::vector<void *> objs(n);
    size_t have = 0;
    bool full = true;
    const uint64_t f0 = thread_cpu_ns();
    for (; have < n; ++have) {
        void *p = api.alloc();
        if (!p) {
            ++t.failed;
            full = false;
            break;
        }
        touch(p);
        objs[have] = p;
        if (have % kClockEvery == kClockEvery - 1 && thread_cpu_ns() - f0 > max_fill_ns) {
            ++have;
            full = have == n;
            break;
        }
    }
    const uint64_t fill_dt = thread_cpu_ns() - f0;
    t.allocated += have;
    r.filled = have;
    r.fill_ns = have ? double(fill_dt) / double(have) : 0;
    if (full) {
        victim_picker pick{kSeed * 0x9e3779b97f4a7c15ull + n};
        const uint64_t t0 = thread_cpu_ns();
        uint64_t done = 0;
        for (; done < ops; ++done) {
            const size_t k = pick.next(n);
            api.release(objs[k]);
            void *p = api.alloc();
            if (!p) {
                objs[k] = objs[--have]; // that one is gone; keep the rest freeable
                ++t.failed;
                ++t.freed;
                break;
            }
            touch(p);
            objs[k] = p;
            if (done % kClockEvery == kClockEvery - 1 && thread_cpu_ns() - t0 > max_ns) {
                ++done;
                break;
            }
        }
        const uint64_t dt = thread_cpu_ns() - t0;
        t.allocated += done, t.freed += done;
        r.pair_ns = done ? double(dt) / double(done) : 0;
    }
    for (size_t i = 0; i < have; ++i) api.release(objs[i]);
    t.freed += have;
    return r;
}

std::vector<uint32_t> free_order(const std::string &kind) {
    std::vector<uint32_t> seq(kBatch);
    std::iota(seq.begin(), seq.end(), 0u);
    if (kind == "lifo") std::reverse(seq.begin(), seq.end());
    if (kind == "random") std::shuffle(seq.begin(), seq.end(), std::mt19937(kSeed));
    return seq;
}

// What the remote cases' checks collect over a run: the ring balanced, and the producer and
// the consumer on two CPUs (where the process has two).
struct remote_checks {
    bool balanced = true;
    std::string balanced_detail;
    bool two_cpus = true;
    std::string cpus_detail;
    // slabkit's activity over the remote/<size> cases alone (the targets' cases; noted as
    // remote/alloc_slow_pct and remote/free_slow_pct, so that a target names the path that cost
    // SLQB there rather than in the whole workload's batches).
    heap::activity activity;
};

template <class Api>
void run_series(const Api &api, const std::string &prefix, size_t size, uint64_t ops,
                uint64_t max_ns, result &out, tally &t, remote_checks &rc) {
    const std::string sz = std::to_string(size);
    out.add(prefix + "pair/" + sz, "alloc+free", "ns/obj", better::lower,
            pair_ns(api, ops, max_ns, t));
    for (const char *kind : {"lifo", "fifo", "random"})
        out.add(prefix + kind + "/" + sz, "alloc+free", "ns/obj", better::lower,
                batch_ns(api, free_order(kind), ops, max_ns, t));
    const bool counted = prefix.empty() && api.h->slabkit();
    const heap::activity before = counted ? api.h->total_activity() : heap::activity{};
    const remote_outcome r = remote_run(api, ops, max_ns, t);
    if (counted) {
        const heap::activity after = api.h->total_activity();
        rc.activity.allocs += after.allocs - before.allocs;
        rc.activity.alloc_slow += after.alloc_slow - before.alloc_slow;
        rc.activity.frees += after.frees - before.frees;
        rc.activity.free_slow += after.free_slow - before.free_slow;
    }
    const std::string name = prefix + "remote/" + sz;
    out.add(name, "remote free", "Mobj/s", better::higher, r.mobj_s);
    if (!r.balanced) {
        rc.balanced = false;
        rc.balanced_detail = name + ": " + r.detail;
    } else if (rc.balanced_detail.empty()) {
        rc.balanced_detail = r.detail;
    }
    const std::string cpus = fmt::format("{}: producer on CPU {}, consumer on CPU {}", name,
                                         r.producer_cpu, r.consumer_cpu);
    if (allowed_cpus() >= 2 && (r.producer_cpu < 0 || r.producer_cpu == r.consumer_cpu)) {
        rc.two_cpus = false;
        rc.cpus_detail = cpus;
    } else if (rc.cpus_detail.empty()) {
        rc.cpus_detail = allowed_cpus() >= 2 ? cpus : cpus + " (the process has one CPU)";
    }
}

void run_micro(const run_context &ctx, result &out) {
    heap &h = *ctx.heap;
    const std::vector<long long> sizes = ctx.get_ints("sizes");
    const std::vector<long long> lives = ctx.get_ints("live");
    const long long ops = ctx.get_int("ops");
    const long long live_ops = ctx.get_int("live_ops");
    const long long max_ms = ctx.get_int("max_ms");
    if (ops <= 0 || live_ops <= 0 || max_ms <= 0)
        throw std::runtime_error("micro: ops, live_ops and max_ms must be > 0");
    const uint64_t max_ns = uint64_t(max_ms) * 1000000u;
    const long long max_fill_ms = ctx.get_int("max_fill_ms");
    if (max_fill_ms <= 0) throw std::runtime_error("micro: max_fill_ms must be > 0");
    const uint64_t max_fill_ns = uint64_t(max_fill_ms) * 1000000u;
    for (long long s : sizes)
        if (s <= 0 || s > (1 << 20)) throw std::runtime_error("micro: sizes are 1 to 1048576");
    for (long long n : lives)
        if (n <= 0) throw std::runtime_error("micro: live counts must be > 0");
    pin_to_cpu(0);

    tally t;
    remote_checks rc;
    std::vector<heap::cache *> made;
    for (long long s : sizes) {
        heap::cache *c = h.make_cache(fmt::format("micro-{}", s), size_t(s));
        made.push_back(c);
        run_series(via_cache{&h, c}, "", size_t(s), uint64_t(ops), max_ns, out, t, rc);
        if (h.slabkit())
            run_series(via_kmalloc{&h, size_t(s)}, "kmalloc-", size_t(s), uint64_t(ops), max_ns,
                       out, t, rc);
    }
    if (!lives.empty()) {
        heap::cache *c = h.make_cache("micro-live-64", 64);
        made.push_back(c);
        for (long long n : lives) {
            const live_outcome r =
                live_run(via_cache{&h, c}, size_t(n), uint64_t(live_ops), max_ns, max_fill_ns, t);
            out.add(fmt::format("fill/{}", n), "alloc", "ns/obj", better::lower, r.fill_ns);
            if (r.filled < size_t(n)) {
                // The larger populations would take longer still: note where it stopped.
                out.note(fmt::format("live_stopped_at_{}", n), double(r.filled));
                break;
            }
            out.add(fmt::format("live/{}", n), "free+alloc", "ns/pair", better::lower, r.pair_ns);
        }
    }

    out.check("allocations", t.failed == 0,
              fmt::format("{} allocations, {} failed", t.allocated, t.failed));
    out.check("balanced", t.allocated == t.freed,
              count_detail(t.freed, t.allocated, "objects freed"));
    out.check("remote ring", rc.balanced, rc.balanced_detail);
    out.check("remote across CPUs", rc.two_cpus, rc.cpus_detail);
    if (rc.activity.allocs)
        out.note("remote/alloc_slow_pct",
                 100.0 * double(rc.activity.alloc_slow) / double(rc.activity.allocs));
    if (rc.activity.frees)
        out.note("remote/free_slow_pct",
                 100.0 * double(rc.activity.free_slow) / double(rc.activity.frees));
    if (h.slabkit()) {
        const long long live = h.live_objects();
        out.check("no leak", live == 0,
                  fmt::format("{} objects live in the caches at the end", live));
    }
    out.note("peak_rss_kib", double(peak_rss_kib()));
}

} // namespace

workload micro_workload() {
    workload w;
    w.name = "micro";
    w.seed = "bench/slab_bench (no seed thread of its own)";
    w.maps_to = "bench/slab_bench's workloads as timed loops: pair, batches of 1000 freed LIFO, "
                "FIFO and in random order (ns per object, thread CPU time), remote frees through "
                "an SPSC ring between two CPUs (Mobj/s, wall clock), per object size, through a "
                "cache and (slabkit only) kmalloc; and live/<n>: freeing a random one of n live "
                "64-byte objects and allocating its replacement (ns per pair), and fill/<n>: the n "
                "allocations that made them live (ns per object).";
    w.cannot = "No kernel: no interrupts disabled or preemption off around the fast paths, no "
               "real per-CPU data (slots stand in for CPUs), and user-space timing of loops "
               "this short includes the clock's and the loop's own cost.";
    w.families = fam_cache | fam_malloc | fam_peers;
    w.baseline = "slub"; // so that the kmalloc rows have a % too
    w.shape = layout::matrix;
    w.params = {
        {"sizes", "64", "32,64,256,1024", "16,32,64,128,256,512,1024,2048,4096",
         "object sizes in bytes"},
        {"ops", "5000", "100000", "1000000", "objects per case and size"},
        {"live", "1000,10000", "1000,100000,1000000", "1000,10000,100000,1000000,10000000",
         "live 64-byte objects held in the live/<n> cases"},
        {"live_ops", "2000", "50000", "1000000", "free+alloc pairs timed per live/<n> case"},
        {"max_ms", "100", "50", "200",
         "a case's timed loop stops after this long even if it has not done its ops"},
        {"max_fill_ms", "2000", "3000", "10000",
         "the upfront allocation of a live/<n> case stops after this long (that case and the "
         "larger ones are then left out)"},
    };
    w.run = [](const run_context &ctx, result &out) {
        try {
            run_micro(ctx, out);
        } catch (const std::exception &e) {
            out.fail(e.what());
        }
    };
    return w;
}

} // namespace slabbench
