// pattern_bench.cpp - allocation patterns of real programs, run on the process's malloc/free:
// glibc, or whatever LD_PRELOAD puts first (slabkit's libslabkit-malloc.so, jemalloc, tcmalloc,
// mimalloc). This program is not linked with slabkit, so the preload alone decides the malloc.
// One pattern per process (--pattern), so that the peak RSS is that pattern's.
//
// Patterns and their operation counts at --scale 1 (each count is multiplied by --scale, with
// the floor in brackets; "ops" in the output = malloc calls, every one matched by a free):
//   xthread-mixed  4 threads (--threads), each with a working set of 4096 blocks: 84% of sizes
//                  16..256 B, 15% 257..4096 B, 1% 4097..16384 B (uniform within each range).
//                  2,000,000 replacements per thread [10,000]: a random slot's block is checked
//                  and either freed by the thread (half of the time) or handed to the next thread
//                  of a ring through a mutex-protected mailbox in batches of 64, which checks and
//                  frees it; then a new block of a random size takes the slot. Every thread
//                  empties its mailbox every 64 replacements. A mailbox is full at 4096 blocks:
//                  a thread whose next thread's mailbox is full empties its own and sleeps 50 us
//                  until there is room (counted as "waits"; a thread descheduled for long, or
//                  asleep on a lock, makes that happen), so that what waits in the mailboxes
//                  stays within one working set per thread. Figure: wall time.
//   bursts         16 threads (--threads; more threads than this machine's CPUs on purpose),
//                  1000 rounds each [10]: free what the previous thread of the ring handed over,
//                  allocate a burst of 500 blocks of 16..2048 B (uniform), hand the burst to the
//                  next thread, sleep 1 ms. Figure: CPU time (the sleeps are not the allocator's).
//   large-fixed    one 8 MiB block at a time: malloc, write every page, check, free; 600 times
//   [10]. large-2m       the same with 2 MiB blocks, 5000 times [10]. large-random   up to 4 live
//   blocks of 1..32 MiB, log-uniform (the size's log2 is uniform
//                  between 0 and 5, times 1 MiB; rounded to 4 KiB), every page written: 200
//                  mallocs [20], the first 4 fill the slots, each later one replaces a random
//                  slot's block (checked and freed first).
//   large-256k     one 256 KiB block at a time (a page block above the per-slot lists' orders),
//                  as large-fixed, 20000 times [10]. mid-random   up to 8 live blocks of 64 KiB
//                  to 1 MiB, log-uniform, every page written: 20000 mallocs [20], as
//                  large-random (page blocks of orders 4 to 8).
//   store          an in-memory key-value store: 200,000 keys [1,000], each value one malloc of
//                  1040 B (a 16 B header: key, length, version; then a 1024 B payload, written
//                  whole), kept in a vector indexed by key; filled, then 1,000,000 updates
//                  [5,000] of random keys (check the old value, free it, malloc and fill the new
//                  one); all freed at the end. Peak RSS is the figure that matters here.
//   server         a thread per batch: 2000 batches [20]; the main thread allocates 64 requests
//                  of 64..1024 B, a new thread takes them, allocates a response of 16..4096 B
//                  and 4 scratch blocks of 16..256 B per request, frees the scratch and the
//                  request (the main thread's block), hands the responses back and exits; the
//                  main thread frees them and sleeps 100 us. Figure: CPU time (the pauses are
//                  not the allocator's).
//   small-mt       4 threads (--threads), 2000 rounds each [10]: an array of 1000 blocks of
//                  8..128 B is filled, every other block freed and allocated again, then all
//                  freed in reverse order. Nothing crosses threads. Figure: wall time.
//   pc-16, pc-64, pc-256, pc-1024, pc-4096
//                  a producer and a consumer, each pinned to a CPU of its own (the first two the
//                  process may run on; unpinned with one): the producer mallocs 2,000,000 blocks
//                  [10,000] of the pattern's size and hands each over through a ring of 1024
//                  slots (one writer, one reader, no lock); the consumer checks and frees them.
//                  Every free is of a block malloc'd on the other CPU. Figure: wall time.
//   threads        many live threads, each doing the same small loop (a thread-per-connection
//                  server on a few cores): 200 threads (--threads) are all started first, each
//                  mallocs and frees one block (its first malloc, so that the allocator's
//                  per-thread setup is done), and they wait at a barrier, so that all of them
//                  are alive at once; then each does R rounds of: malloc 64 blocks of 32..511 B
//                  (uniform), then check and free the 64 in allocation order (first allocated,
//                  first freed). R = 20,000,000 / (64 x threads) per thread [10]: about
//                  20,000,000 mallocs in all at --scale 1, whatever the threads (312,500 x 64 =
//                  20,000,000 with 1 thread; 1562 rounds each with 200). Figure: the timed
//                  phase, wall time from the barrier's release to the last thread's end of its
//                  rounds, divided by the mallocs of all threads in it (timed_ops): ns per
//                  malloc/free pair per op over all threads (not per thread: with N threads on
//                  C CPUs, a thread's own pair took about N/C times that).
//   threads-live   the same live data held by few or many threads: 256 threads (--threads)
//                  together hold 247,000 blocks [1,000] of 32..511 B (uniform; their sizes
//                  average 271.5 B, so about 64 MiB at --scale 1), split evenly (the first
//                  threads take one more when it does not divide). Each thread allocates its
//                  share, then all wait at a barrier (its release: live_rss_kib, the VmRSS with
//                  every share allocated); then they make 1,000,000 replacements [10,000] in
//                  all, split the same way: a random block of the thread's share is checked and
//                  freed and a block of a new random size takes its place; a second barrier, then
//                  each thread checks and frees its share. Figures: peak RSS and live_rss_kib
//                  (run it with 2 threads and with 256 to compare); the timed phase is the
//                  replacements (barrier to barrier).
// Every block is written when allocated (its first and last byte, and one byte of every page of
// a block of a page or more; store's values whole) and those bytes are read back and checked
// before it is freed: a mismatch is reported and the exit status is 2. The bytes read are summed
// into a checksum that depends only on the pattern, --scale and --seed (not on the allocator, nor
// on which thread freed what), so a driver can compare it across allocators.
//
// Measured, around the pattern only (not the process's start): wall time (steady clock), CPU
// time (user + system of the whole process, getrusage RUSAGE_SELF), minor page faults; and the
// peak RSS of the process (VmHWM of /proc/self/status, ru_maxrss if that cannot be read), with
// the RSS before the pattern and after it (VmRSS) for reference. The threads patterns time a
// phase of their own too (timed_s, timed_ops: the thread starts and joins are outside it); for
// the others the timed phase is the whole pattern.
//
// Usage: pattern_bench --pattern NAME [--scale F] [--seed N] [--threads N] [--json]
//        pattern_bench --list          the patterns, one per line (name, then a description)
//        pattern_bench --which-malloc  one JSON line: where malloc comes from, and exit
// --json prints one JSON line: pattern, wall_s, cpu_s, user_s, sys_s, peak_rss_kib,
// start_rss_kib, end_rss_kib, minflt, ops, waits, backlog, checksum, threads, scale, seed,
// timed_s, timed_ops (the timed phase's wall time and mallocs: wall_s and ops but for the
// threads patterns), ns_per_op (timed_s / timed_ops in ns), live_rss_kib (threads-live: the
// VmRSS once every share is allocated; null for the others),
// malloc_from (the shared object defining the malloc this process calls: dladdr of
// dlsym(RTLD_DEFAULT, "malloc")), slabkit_design and slabkit_designs (slabkit_allocator() and
// slabkit_designs() when that object is slabkit's, else ""). bench/pattern_ratios.py runs it.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <dlfcn.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

// ---- pieces every pattern uses ------------------------------------------------------------------

// splitmix64: small, fast and good enough to pick sizes and slots.
class rng {
  public:
    explicit rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    // Uniform in [lo, hi] (the modulo bias is irrelevant at these ranges).
    uint64_t between(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  private:
    uint64_t state_;
};

size_t page_size() {
    static const size_t size = [] {
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? static_cast<size_t>(p) : size_t{4096};
    }();
    return size;
}

[[noreturn]] void fail(const std::string &what) {
    fmt::print(stderr, "pattern_bench: {}\n", what);
    std::exit(2);
}

struct block {
    unsigned char *p;
    size_t size;
    uint8_t tag;
};

// The byte a block holds at its first byte, its last byte and the start of each page.
uint8_t page_byte(uint8_t tag, size_t page) {
    return static_cast<uint8_t>(tag + page * 7);
}
uint8_t last_byte(uint8_t tag) {
    return static_cast<uint8_t>(tag ^ 0x5a);
}

block make_block(size_t size, uint8_t tag) {
    auto *p = static_cast<unsigned char *>(std::malloc(size));
    if (!p) fail(fmt::format("malloc({}) returned NULL", size));
    const size_t page = page_size();
    for (size_t off = 0, i = 0; off < size; off += page, ++i) p[off] = page_byte(tag, i);
    p[size - 1] = last_byte(tag);
    return {p, size, tag};
}

// Reads back what make_block wrote, frees the block, and returns what goes into the checksum.
uint64_t check_and_free(const block &b) {
    const size_t page = page_size();
    uint64_t sum = b.size;
    for (size_t off = 0, i = 0; off < b.size; off += page, ++i) {
        // (a page that starts at the last byte holds the last byte's value instead)
        if (off != b.size - 1 && b.p[off] != page_byte(b.tag, i))
            fail(fmt::format("block {} of {} B: byte {} is {}, expected {}",
                             static_cast<void *>(b.p), b.size, off, b.p[off], page_byte(b.tag, i)));
        sum += b.p[off];
    }
    if (b.p[b.size - 1] != last_byte(b.tag))
        fail(fmt::format("block {} of {} B: last byte is {}, expected {}", static_cast<void *>(b.p),
                         b.size, b.p[b.size - 1], last_byte(b.tag)));
    sum += b.p[b.size - 1];
    std::free(b.p);
    return sum;
}

uint64_t scaled(double base, double scale, uint64_t floor) {
    const long long n = std::llround(base * scale);
    return std::max<uint64_t>(floor, n > 0 ? static_cast<uint64_t>(n) : 0);
}

struct options {
    double scale = 1.0;
    uint64_t seed = 2026;
    unsigned threads = 0; // 0: the pattern's own default
};

struct outcome {
    uint64_t ops = 0;      // malloc calls (each matched by a free)
    uint64_t checksum = 0; // of the bytes read back before each free
    uint64_t waits = 0;    // xthread-mixed: times a thread found the next one's mailbox full
    uint64_t backlog = 0;  // the most blocks a mailbox held (after a post)
    unsigned threads = 1;
    bool mailboxes = false; // xthread-mixed, bursts: backlog means something
    // The threads patterns' timed phase (the barriers' releases, in wall time) and its mallocs;
    // for the others the whole pattern (timed_s < 0: main fills in wall_s and ops).
    double timed_s = -1;
    uint64_t timed_ops = 0;
    std::optional<long> live_rss_kib; // threads-live: VmRSS once every share is allocated
};

// A thread's mailbox: other threads append blocks under the lock, the owner swaps the whole
// vector out and frees what it got.
struct mailbox {
    std::mutex lock;
    std::vector<block> items;
};

// Appends a batch to a mailbox; returns how many blocks the mailbox then holds.
size_t post(mailbox &to, std::vector<block> &batch) {
    std::lock_guard<std::mutex> guard(to.lock);
    to.items.insert(to.items.end(), batch.begin(), batch.end());
    batch.clear();
    return to.items.size();
}

// Frees what the mailbox holds (checking each block); `spare` is an empty vector whose capacity
// is swapped in, so that the mailboxes do not allocate once warm.
uint64_t drain(mailbox &box, std::vector<block> &spare) {
    {
        std::lock_guard<std::mutex> guard(box.lock);
        box.items.swap(spare);
    }
    uint64_t sum = 0;
    for (const block &b : spare) sum += check_and_free(b);
    spare.clear();
    return sum;
}

// Called by a thread of a ring once it has posted its last block: keeps freeing what reaches its
// mailbox until every thread has posted its last, then frees the rest. (A thread that waited
// idle instead would let its mailbox fill while the others finish.)
uint64_t drain_until_all_done(mailbox &box, std::vector<block> &spare,
                              std::atomic<unsigned> &finished, unsigned threads) {
    finished.fetch_add(1, std::memory_order_release);
    uint64_t sum = 0;
    while (finished.load(std::memory_order_acquire) < threads) {
        sum += drain(box, spare);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return sum + drain(box, spare); // nobody posts any more
}

// ---- xthread-mixed ------------------------------------------------------------------------------

size_t mixed_size(rng &r) {
    const uint64_t pick = r.next() % 100;
    if (pick < 84) return r.between(16, 256);
    if (pick < 99) return r.between(257, 4096);
    return r.between(4097, 16384);
}

outcome xthread_mixed(const options &opt) {
    constexpr size_t kWorkingSet = 4096;
    constexpr size_t kBatch = 64;
    constexpr size_t kMailboxLimit = 4096; // blocks: one working set
    const unsigned threads = opt.threads ? opt.threads : 4;
    const uint64_t per_thread = scaled(2'000'000, opt.scale, 10'000);
    std::vector<mailbox> boxes(threads);
    std::vector<uint64_t> sums(threads), waits(threads), backlogs(threads);
    std::barrier sync(threads); // the threads start together
    std::atomic<unsigned> finished{0};
    auto body = [&](unsigned t) {
        rng r(opt.seed * 1000003 + t);
        mailbox &next = boxes[(t + 1) % threads];
        std::vector<block> slots(kWorkingSet), out, spare;
        out.reserve(kBatch);
        uint64_t sum = 0, local_waits = 0, backlog = 0;
        for (auto &s : slots) s = make_block(mixed_size(r), static_cast<uint8_t>(r.next()));
        sync.arrive_and_wait();
        for (uint64_t op = 0; op < per_thread; ++op) {
            block &s = slots[r.next() % kWorkingSet];
            if (r.next() & 1) {
                out.push_back(s);
                if (out.size() == kBatch) {
                    // Flow control: while the next thread's mailbox is full, free what reached
                    // ours (so that a ring of waiting threads still moves) and wait a little.
                    for (;;) {
                        size_t held;
                        {
                            std::lock_guard<std::mutex> guard(next.lock);
                            held = next.items.size();
                            if (held < kMailboxLimit)
                                next.items.insert(next.items.end(), out.begin(), out.end());
                        }
                        if (held < kMailboxLimit) {
                            backlog = std::max<uint64_t>(backlog, held + out.size());
                            break;
                        }
                        ++local_waits;
                        sum += drain(boxes[t], spare);
                        std::this_thread::sleep_for(std::chrono::microseconds(50));
                    }
                    out.clear();
                }
            } else {
                sum += check_and_free(s);
            }
            s = make_block(mixed_size(r), static_cast<uint8_t>(r.next()));
            if (op % kBatch == kBatch - 1) sum += drain(boxes[t], spare);
        }
        backlog = std::max<uint64_t>(backlog, post(next, out));
        for (const block &s : slots) sum += check_and_free(s);
        sum += drain_until_all_done(boxes[t], spare, finished, threads);
        sums[t] = sum;
        waits[t] = local_waits;
        backlogs[t] = backlog;
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(body, t);
    for (auto &th : pool) th.join();
    outcome o;
    o.threads = threads;
    o.mailboxes = true;
    o.ops = static_cast<uint64_t>(threads) * (kWorkingSet + per_thread);
    for (unsigned t = 0; t < threads; ++t) {
        o.checksum += sums[t];
        o.waits += waits[t];
        o.backlog = std::max(o.backlog, backlogs[t]);
    }
    return o;
}

// ---- bursts -------------------------------------------------------------------------------------

outcome bursts(const options &opt) {
    constexpr size_t kBurst = 500;
    const unsigned threads = opt.threads ? opt.threads : 16;
    const uint64_t rounds = scaled(1000, opt.scale, 10);
    std::vector<mailbox> boxes(threads);
    std::vector<uint64_t> sums(threads), backlogs(threads);
    std::barrier sync(threads); // the threads start together
    std::atomic<unsigned> finished{0};
    auto body = [&](unsigned t) {
        rng r(opt.seed * 1000003 + 7919 + t);
        mailbox &next = boxes[(t + 1) % threads];
        std::vector<block> burst, spare;
        burst.reserve(kBurst);
        uint64_t sum = 0, backlog = 0;
        sync.arrive_and_wait();
        for (uint64_t round = 0; round < rounds; ++round) {
            sum += drain(boxes[t], spare);
            for (size_t i = 0; i < kBurst; ++i)
                burst.push_back(make_block(r.between(16, 2048), static_cast<uint8_t>(r.next())));
            backlog = std::max<uint64_t>(backlog, post(next, burst));
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        sums[t] = sum + drain_until_all_done(boxes[t], spare, finished, threads);
        backlogs[t] = backlog;
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(body, t);
    for (auto &th : pool) th.join();
    outcome o;
    o.threads = threads;
    o.mailboxes = true;
    o.ops = static_cast<uint64_t>(threads) * rounds * kBurst;
    for (unsigned t = 0; t < threads; ++t) {
        o.checksum += sums[t];
        o.backlog = std::max(o.backlog, backlogs[t]);
    }
    return o;
}

// ---- large blocks -------------------------------------------------------------------------------

outcome large_repeat(const options &opt, size_t size, double base) {
    const uint64_t times = scaled(base, opt.scale, 10);
    rng r(opt.seed);
    outcome o;
    for (uint64_t i = 0; i < times; ++i)
        o.checksum += check_and_free(make_block(size, static_cast<uint8_t>(r.next())));
    o.ops = times;
    return o;
}

// Up to live_max live blocks of `smallest` to 2^doublings times it (log-uniform, whole pages).
outcome large_random(const options &opt, size_t live_max, size_t smallest, double doublings,
                     double base_ops) {
    const uint64_t ops = scaled(base_ops, opt.scale, 20);
    rng r(opt.seed);
    const size_t page = page_size();
    auto size = [&] {
        const double bytes = std::exp2(r.unit() * doublings) * static_cast<double>(smallest);
        return std::max(page, static_cast<size_t>(bytes) / page * page);
    };
    std::vector<block> live;
    outcome o;
    for (uint64_t i = 0; i < ops; ++i) {
        const size_t bytes = size();
        const auto tag = static_cast<uint8_t>(r.next());
        if (live.size() < live_max) {
            live.push_back(make_block(bytes, tag));
            continue;
        }
        block &victim = live[r.next() % live_max];
        o.checksum += check_and_free(victim);
        victim = make_block(bytes, tag);
    }
    for (const block &b : live) o.checksum += check_and_free(b);
    o.ops = ops;
    return o;
}

// ---- store --------------------------------------------------------------------------------------

struct value {
    uint64_t key;
    uint32_t length;
    uint32_t version;
    unsigned char payload[1024];
};
static_assert(sizeof(value) == 1040);

uint8_t payload_byte(uint64_t key, uint32_t version) {
    return static_cast<uint8_t>(key * 31 + version * 17 + 1);
}

value *make_value(uint64_t key, uint32_t version) {
    auto *v = static_cast<value *>(std::malloc(sizeof(value)));
    if (!v) fail(fmt::format("malloc({}) returned NULL", sizeof(value)));
    v->key = key;
    v->length = sizeof v->payload;
    v->version = version;
    std::memset(v->payload, payload_byte(key, version), sizeof v->payload);
    return v;
}

uint64_t check_and_free(value *v, uint64_t key) {
    const uint8_t want = payload_byte(key, v->version);
    if (v->key != key || v->length != sizeof v->payload || v->payload[0] != want ||
        v->payload[sizeof v->payload / 2] != want || v->payload[sizeof v->payload - 1] != want)
        fail(fmt::format("store value {} of key {}: header or payload damaged",
                         static_cast<void *>(v), key));
    const uint64_t sum = v->key + v->version + v->payload[0] + v->payload[sizeof v->payload - 1];
    std::free(v);
    return sum;
}

outcome store(const options &opt) {
    const uint64_t keys = scaled(200'000, opt.scale, 1'000);
    const uint64_t updates = scaled(1'000'000, opt.scale, 5'000);
    rng r(opt.seed);
    std::vector<value *> table(keys);
    outcome o;
    for (uint64_t k = 0; k < keys; ++k) table[k] = make_value(k, 0);
    for (uint64_t i = 0; i < updates; ++i) {
        const uint64_t k = r.next() % keys;
        const uint32_t version = table[k]->version + 1;
        o.checksum += check_and_free(table[k], k);
        table[k] = make_value(k, version);
    }
    for (uint64_t k = 0; k < keys; ++k) o.checksum += check_and_free(table[k], k);
    o.ops = keys + updates;
    return o;
}

// ---- many live threads --------------------------------------------------------------------------

long status_kib(const char *field);

using clock_type = std::chrono::steady_clock;

// Runs body(t) on `threads` threads, all started before any is joined; a thread that cannot be
// started ends the process (the others would wait at their barrier for ever).
void run_threads(unsigned threads, const std::function<void(unsigned)> &body) {
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t) {
        try {
            pool.emplace_back(body, t);
        } catch (const std::system_error &e) {
            fail(fmt::format("cannot start thread {} of {}: {}", t + 1, threads, e.what()));
        }
    }
    for (auto &th : pool) th.join();
}

// Thread t's part of `total` split evenly over `threads` (the first ones take one more).
uint64_t share_of(uint64_t total, unsigned threads, unsigned t) {
    return total / threads + (t < total % threads ? 1 : 0);
}

size_t small_size(rng &r) {
    return r.between(32, 511);
}

outcome threads_loop(const options &opt) {
    constexpr size_t kBlocks = 64;
    const unsigned threads = opt.threads ? opt.threads : 200;
    const uint64_t rounds = scaled(20'000'000.0 / (kBlocks * threads), opt.scale, 10);
    std::vector<uint64_t> sums(threads);
    clock_type::time_point start, end;
    auto released = [&]() noexcept { start = clock_type::now(); };
    auto finished = [&]() noexcept { end = clock_type::now(); };
    std::barrier go(threads, released);   // every thread alive, its first malloc done
    std::barrier done(threads, finished); // the last thread's rounds are over
    run_threads(threads, [&](unsigned t) {
        rng r(opt.seed * 1000003 + 104729 + t);
        uint64_t sum = check_and_free(make_block(small_size(r), static_cast<uint8_t>(r.next())));
        block live[kBlocks];
        go.arrive_and_wait();
        for (uint64_t round = 0; round < rounds; ++round) {
            for (auto &b : live) b = make_block(small_size(r), static_cast<uint8_t>(r.next()));
            for (const auto &b : live) sum += check_and_free(b);
        }
        done.arrive_and_wait();
        sums[t] = sum;
    });
    outcome o;
    o.threads = threads;
    o.timed_ops = static_cast<uint64_t>(threads) * rounds * kBlocks;
    o.ops = o.timed_ops + threads; // and each thread's first malloc, before the barrier
    o.timed_s = std::chrono::duration<double>(end - start).count();
    for (uint64_t s : sums) o.checksum += s;
    return o;
}

outcome threads_live(const options &opt) {
    const unsigned threads = opt.threads ? opt.threads : 256;
    const uint64_t blocks = scaled(247'000, opt.scale, 1'000);
    const uint64_t replacements = scaled(1'000'000, opt.scale, 10'000);
    if (blocks < threads)
        fail(fmt::format("threads-live: {} blocks cannot be shared by {} threads (raise --scale)",
                         blocks, threads));
    std::vector<uint64_t> sums(threads);
    clock_type::time_point start, end;
    long live_rss = -1;
    auto allocated = [&]() noexcept {
        live_rss = status_kib("VmRSS");
        start = clock_type::now();
    };
    auto replaced = [&]() noexcept { end = clock_type::now(); };
    std::barrier full(threads, allocated);   // every share allocated
    std::barrier settled(threads, replaced); // every replacement made
    run_threads(threads, [&](unsigned t) {
        rng r(opt.seed * 1000003 + 130363 + t);
        std::vector<block> share(share_of(blocks, threads, t));
        for (auto &b : share) b = make_block(small_size(r), static_cast<uint8_t>(r.next()));
        full.arrive_and_wait();
        uint64_t sum = 0;
        const uint64_t mine = share_of(replacements, threads, t);
        for (uint64_t i = 0; i < mine; ++i) {
            block &b = share[r.next() % share.size()];
            sum += check_and_free(b);
            b = make_block(small_size(r), static_cast<uint8_t>(r.next()));
        }
        settled.arrive_and_wait();
        for (const auto &b : share) sum += check_and_free(b);
        sums[t] = sum;
    });
    outcome o;
    o.threads = threads;
    o.ops = blocks + replacements;
    o.timed_ops = replacements;
    o.timed_s = std::chrono::duration<double>(end - start).count();
    o.live_rss_kib = live_rss;
    for (uint64_t s : sums) o.checksum += s;
    return o;
}

// ---- server: a thread per batch -----------------------------------------------------------------

// A server that hands each batch of requests to a thread of its own: the main thread allocates
// the batch's requests, a new thread takes them, allocates a response and some scratch per
// request, frees the scratch and the requests (blocks of another thread), hands the responses
// back and exits; the main thread frees the responses (blocks of a thread that is gone), then
// pauses. Each batch's thread is new: its first allocations meet whatever the allocator gives a
// new thread, and what it leaves behind must be taken over by others when it exits.
outcome server(const options &opt) {
    constexpr size_t kRequests = 64, kScratch = 4;
    const uint64_t batches = scaled(2000, opt.scale, 20);
    rng r(opt.seed * 1000003 + 15485863);
    std::vector<block> requests, responses;
    uint64_t sum = 0;
    for (uint64_t batch = 0; batch < batches; ++batch) {
        for (size_t i = 0; i < kRequests; ++i)
            requests.push_back(make_block(r.between(64, 1024), static_cast<uint8_t>(r.next())));
        const uint64_t seed = r.next();
        uint64_t worker_sum = 0;
        std::thread worker([&] {
            rng w(seed);
            for (const block &req : requests) {
                block scratch[kScratch];
                for (auto &b : scratch)
                    b = make_block(w.between(16, 256), static_cast<uint8_t>(w.next()));
                responses.push_back(
                    make_block(w.between(16, 4096), static_cast<uint8_t>(req.tag ^ w.next())));
                for (const auto &b : scratch) worker_sum += check_and_free(b);
                worker_sum += check_and_free(req);
            }
            requests.clear();
        });
        worker.join();
        sum += worker_sum;
        for (const block &b : responses) sum += check_and_free(b);
        responses.clear();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    outcome o;
    o.threads = 2;
    o.ops = batches * kRequests * (2 + kScratch);
    o.checksum = sum;
    return o;
}

// ---- pc-<size>: a producer and a consumer on two CPUs -----------------------------------------

// The CPUs this process may run on, in order (the first two pin the pair).
std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

void pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        fail(fmt::format("cannot pin a thread to CPU {}", cpu));
}

// One writer, one reader: head and tail on lines of their own, so that the ring's traffic is
// one line per slot and not the allocator's figure.
struct spsc_ring {
    static constexpr size_t kSlots = 1024;
    alignas(64) std::atomic<uint64_t> head{0}; // next to write (producer)
    alignas(64) std::atomic<uint64_t> tail{0}; // next to read (consumer)
    alignas(64) block slots[kSlots];
};

// Waits politely: spin a while (the other CPU is about to move), then give the CPU away (one
// CPU, or a pair that shares one with other work).
void backoff(unsigned &spins) {
    if (++spins < 256) {
        __builtin_ia32_pause();
        return;
    }
    spins = 0;
    std::this_thread::yield();
}

outcome producer_consumer(const options &opt, size_t size) {
    const uint64_t blocks = scaled(2'000'000, opt.scale, 10'000);
    const std::vector<int> cpus = allowed_cpus();
    auto ring = std::make_unique<spsc_ring>();
    uint64_t sum = 0;
    std::thread consumer([&] {
        if (cpus.size() >= 2) pin_self(cpus[1]);
        uint64_t s = 0;
        unsigned spins = 0;
        for (uint64_t i = 0; i < blocks; ++i) {
            while (ring->head.load(std::memory_order_acquire) == i) backoff(spins);
            s += check_and_free(ring->slots[i % spsc_ring::kSlots]);
            ring->tail.store(i + 1, std::memory_order_release);
        }
        sum = s;
    });
    std::thread producer([&] {
        if (cpus.size() >= 2) pin_self(cpus[0]);
        rng r(opt.seed * 1000003 + size);
        unsigned spins = 0;
        for (uint64_t i = 0; i < blocks; ++i) {
            block b = make_block(size, static_cast<uint8_t>(r.next()));
            while (i - ring->tail.load(std::memory_order_acquire) >= spsc_ring::kSlots)
                backoff(spins);
            ring->slots[i % spsc_ring::kSlots] = b;
            ring->head.store(i + 1, std::memory_order_release);
        }
    });
    producer.join();
    consumer.join();
    outcome o;
    o.threads = 2;
    o.ops = blocks;
    o.checksum = sum;
    return o;
}

// ---- small-mt: small allocations on several threads ---------------------------------------------

// Several threads, each running the same small-object test on its own: an array of blocks of
// 8..128 B is filled, then half of it (every other slot) is freed and allocated again, then
// all of it is freed in reverse order; over and over. Nothing crosses threads: the figure is the
// allocator's own-thread paths when several threads use them at once.
outcome small_mt(const options &opt) {
    constexpr size_t kArray = 1000;
    const unsigned threads = opt.threads ? opt.threads : 4;
    const uint64_t rounds = scaled(2000, opt.scale, 10);
    std::vector<uint64_t> sums(threads);
    run_threads(threads, [&](unsigned t) {
        rng r(opt.seed * 1000003 + 49979687 + t);
        std::vector<block> a(kArray);
        uint64_t sum = 0;
        for (uint64_t round = 0; round < rounds; ++round) {
            for (auto &b : a) b = make_block(r.between(8, 128), static_cast<uint8_t>(r.next()));
            for (size_t i = 0; i < kArray; i += 2) {
                sum += check_and_free(a[i]);
                a[i] = make_block(r.between(8, 128), static_cast<uint8_t>(r.next()));
            }
            for (size_t i = kArray; i-- > 0;) sum += check_and_free(a[i]);
        }
        sums[t] = sum;
    });
    outcome o;
    o.threads = threads;
    o.ops = static_cast<uint64_t>(threads) * rounds * (kArray + kArray / 2);
    for (uint64_t s : sums) o.checksum += s;
    return o;
}

// ---- the table of patterns ----------------------------------------------------------------------

struct pattern {
    const char *name;
    const char *description;
    std::function<outcome(const options &)> run;
};

const std::vector<pattern> &patterns() {
    static const std::vector<pattern> all = {
        {"xthread-mixed",
         "4 threads x 2M replacements in 4096-block working sets, 16 B..16 KiB skewed, half the "
         "frees by the next thread",
         xthread_mixed},
        {"bursts",
         "16 threads x 1000 rounds: a burst of 500 blocks of 16..2048 B freed by the "
         "next thread, then 1 ms asleep",
         bursts},
        {"large-fixed", "8 MiB malloc, every page written, free; 600 times",
         [](const options &o) { return large_repeat(o, size_t{8} << 20, 600); }},
        {"large-2m", "2 MiB malloc, every page written, free; 5000 times",
         [](const options &o) { return large_repeat(o, size_t{2} << 20, 5000); }},
        {"large-random",
         "up to 4 live blocks of 1..32 MiB (log-uniform), every page written; "
         "200 mallocs",
         [](const options &o) { return large_random(o, 4, size_t{1} << 20, 5.0, 200); }},
        {"large-256k", "256 KiB malloc, every page written, free; 20000 times",
         [](const options &o) { return large_repeat(o, size_t{256} << 10, 20000); }},
        {"mid-random",
         "up to 8 live blocks of 64 KiB..1 MiB (log-uniform), every page written; "
         "20000 mallocs",
         [](const options &o) { return large_random(o, 8, size_t{64} << 10, 4.0, 20000); }},
        {"store", "key-value store: 200k values of 1040 B, then 1M random updates", store},
        {"server",
         "2000 batches, each a new thread: 64 requests of 64..1024 B from the main thread, a "
         "response of 16..4096 B and 4 scratch blocks each, responses freed by the main thread; "
         "100 us pause",
         server},
        {"small-mt",
         "4 threads x 2000 rounds: 1000 blocks of 8..128 B, every other one replaced, all freed "
         "in reverse",
         small_mt},
        {"pc-16", "a producer and a consumer pinned to two CPUs: 2M blocks of 16 B handed over",
         [](const options &o) { return producer_consumer(o, 16); }},
        {"pc-64", "a producer and a consumer pinned to two CPUs: 2M blocks of 64 B handed over",
         [](const options &o) { return producer_consumer(o, 64); }},
        {"pc-256", "a producer and a consumer pinned to two CPUs: 2M blocks of 256 B handed over",
         [](const options &o) { return producer_consumer(o, 256); }},
        {"pc-1024", "a producer and a consumer pinned to two CPUs: 2M blocks of 1 KiB handed over",
         [](const options &o) { return producer_consumer(o, 1024); }},
        {"pc-4096", "a producer and a consumer pinned to two CPUs: 2M blocks of 4 KiB handed over",
         [](const options &o) { return producer_consumer(o, 4096); }},
        {"threads",
         "200 live threads (all started, then a barrier), 20M mallocs in all: rounds of 64 "
         "blocks of 32..511 B allocated, then freed",
         threads_loop},
        {"threads-live",
         "256 threads hold 247k blocks of 32..511 B (about 64 MiB) in all, then 1M random "
         "replacements; RSS with every share allocated",
         threads_live},
    };
    return all;
}

// ---- measuring ----------------------------------------------------------------------------------

// A field of /proc/self/status in KiB ("VmHWM", "VmRSS"), or -1.
long status_kib(const char *field) {
    FILE *f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    const size_t len = std::strlen(field);
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = std::strtol(line + len + 1, nullptr, 10);
            break;
        }
    }
    std::fclose(f);
    return kib;
}

double seconds(const timeval &tv) {
    return static_cast<double>(tv.tv_sec) + tv.tv_usec * 1e-6;
}

struct malloc_origin {
    std::string from;            // the shared object that defines the malloc we call
    std::string design, designs; // slabkit_allocator(), slabkit_designs() of that object
};

// The malloc this program calls is the first definition in the global lookup order: the
// preloaded library's when LD_PRELOAD took, otherwise libc's. When that object is slabkit's,
// its design and designs are asked too (never linked in: looked up at run time).
malloc_origin find_malloc() {
    malloc_origin o{"?", "", ""};
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info{};
    if (!sym || !dladdr(sym, &info)) return o;
    if (info.dli_fname) o.from = info.dli_fname;
    auto same_object = [&](const char *name) -> void * {
        void *fn = dlsym(RTLD_DEFAULT, name);
        Dl_info fi{};
        return fn && dladdr(fn, &fi) && fi.dli_fbase == info.dli_fbase ? fn : nullptr;
    };
    using text_fn = const char *(*)();
    if (void *fn = same_object("slabkit_allocator")) {
        const char *s = reinterpret_cast<text_fn>(fn)();
        o.design = s ? s : "";
    }
    if (void *fn = same_object("slabkit_designs")) {
        const char *s = reinterpret_cast<text_fn>(fn)();
        o.designs = s ? s : "";
    }
    return o;
}

std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
            out += c;
        }
    }
    return out + "\"";
}

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"Allocation patterns on the process's malloc (choose it with LD_PRELOAD); "
                 "prints time and peak RSS"};
    std::string name;
    options opt;
    bool json = false, list = false, which = false;
    app.add_option("--pattern", name, "the pattern to run (--list shows them)");
    app.add_option("--scale", opt.scale, "multiplies the operation counts (default 1)")
        ->check(CLI::Range(0.0001, 1000.0));
    app.add_option("--seed", opt.seed, "seed of the random choices (default 2026)");
    app.add_option("--threads", opt.threads,
                   "threads of xthread-mixed (default 4), bursts (16), threads (200) or "
                   "threads-live (256)")
        ->check(CLI::Range(1, 16384));
    app.add_flag("--json", json, "print one JSON line instead of text");
    app.add_flag("--list", list, "print the patterns and exit");
    app.add_flag("--which-malloc", which, "print where malloc comes from as JSON and exit");
    CLI11_PARSE(app, argc, argv);

    if (list) {
        for (const auto &p : patterns()) fmt::print("{}  {}\n", p.name, p.description);
        return 0;
    }
    const malloc_origin origin = find_malloc();
    if (which) {
        fmt::print("{{\"malloc_from\": {}, \"slabkit_design\": {}, \"slabkit_designs\": {}}}\n",
                   json_string(origin.from), json_string(origin.design),
                   json_string(origin.designs));
        return 0;
    }
    const auto it = std::find_if(patterns().begin(), patterns().end(),
                                 [&](const pattern &p) { return name == p.name; });
    if (it == patterns().end()) {
        fmt::print(stderr, "pattern_bench: {} (--list shows the patterns)\n",
                   name.empty() ? "no --pattern" : "unknown pattern '" + name + "'");
        return 1;
    }

    const long start_rss = status_kib("VmRSS");
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const auto t0 = std::chrono::steady_clock::now();
    const outcome out = it->run(opt);
    const auto t1 = std::chrono::steady_clock::now();
    getrusage(RUSAGE_SELF, &after);
    long peak = status_kib("VmHWM");
    if (peak < 0) peak = after.ru_maxrss; // KiB on Linux
    const long end_rss = status_kib("VmRSS");

    const double wall = std::chrono::duration<double>(t1 - t0).count();
    const double user = seconds(after.ru_utime) - seconds(before.ru_utime);
    const double sys = seconds(after.ru_stime) - seconds(before.ru_stime);
    const long minflt = after.ru_minflt - before.ru_minflt;
    const double timed = out.timed_s >= 0 ? out.timed_s : wall;
    const uint64_t timed_ops = out.timed_s >= 0 ? out.timed_ops : out.ops;
    const double ns_per_op = timed_ops ? timed * 1e9 / static_cast<double>(timed_ops) : 0.0;
    if (json) {
        fmt::print(
            "{{\"pattern\": {}, \"wall_s\": {:.6f}, \"cpu_s\": {:.6f}, \"user_s\": {:.6f}, "
            "\"sys_s\": {:.6f}, \"peak_rss_kib\": {}, \"start_rss_kib\": {}, "
            "\"end_rss_kib\": {}, \"minflt\": {}, \"ops\": {}, \"waits\": {}, \"backlog\": {}, "
            "\"checksum\": {}, \"threads\": {}, \"scale\": {}, \"seed\": {}, "
            "\"timed_s\": {:.6f}, \"timed_ops\": {}, \"ns_per_op\": {:.3f}, "
            "\"live_rss_kib\": {}, "
            "\"malloc_from\": {}, \"slabkit_design\": {}, \"slabkit_designs\": {}}}\n",
            json_string(it->name), wall, user + sys, user, sys, peak, start_rss, end_rss, minflt,
            out.ops, out.waits, out.backlog, out.checksum, out.threads, opt.scale, opt.seed, timed,
            timed_ops, ns_per_op,
            out.live_rss_kib ? std::to_string(*out.live_rss_kib) : std::string("null"),
            json_string(origin.from), json_string(origin.design), json_string(origin.designs));
    } else {
        fmt::print("{}: {:.3f} s wall, {:.3f} s CPU ({:.3f} user, {:.3f} sys), peak RSS {:.1f} "
                   "MiB (at start {:.1f}, at end {:.1f}), {} minor faults, {} mallocs, "
                   "{} threads, checksum {}\nmalloc from {}{}\n",
                   it->name, wall, user + sys, user, sys, peak / 1024.0, start_rss / 1024.0,
                   end_rss / 1024.0, minflt, out.ops, out.threads, out.checksum, origin.from,
                   origin.design.empty() ? "" : " (slabkit design " + origin.design + ")");
        if (out.mailboxes)
            fmt::print("the most blocks waiting in a thread's mailbox: {}\n", out.backlog);
        if (out.timed_s >= 0)
            fmt::print("timed phase (barrier to barrier): {:.3f} s, {} mallocs, {:.2f} ns per "
                       "malloc/free pair over all threads\n",
                       timed, timed_ops, ns_per_op);
        if (out.live_rss_kib)
            fmt::print("RSS with every share allocated: {:.1f} MiB\n", *out.live_rss_kib / 1024.0);
        if (out.waits) fmt::print("{} waits for a full mailbox\n", out.waits);
    }
    return 0;
}
