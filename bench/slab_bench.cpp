// slab_bench.cpp - slabkit's object allocators side by side with the process's malloc/free.
//
// Three interfaces hand out objects of one size (32, 64, 256 and 1024 bytes by default):
//   cache    slabkit's kmem_cache API: slabkit_cache_create(size) once, then
//            slabkit_cache_alloc / slabkit_cache_free
//   kmalloc  slabkit_kmalloc(size) / slabkit_kfree
//            (both in the process's design: SLABKIT_ALLOCATOR, default slqb)
//   malloc   the process's malloc / free: glibc, or jemalloc, tcmalloc, mimalloc or slabkit's
//            libslabkit-malloc.so when the process runs with LD_PRELOAD of one of them
//            (bench/slab_ratios.py does that)
// in five workloads:
//   pair     allocate one object, write its first byte, free it
//   lifo     allocate kBatch objects (writing the first byte of each), then free them newest
//   fifo     first (lifo), oldest first (fifo) or in a random order (random: one permutation,
//   random   computed before the timed loop and used in every round)
//   remote   two threads: the producer allocates objects, writes the first byte of each and
//            passes them through a bounded single-producer single-consumer ring to the consumer,
//            which frees them; every object is freed by a thread other than its allocator's
// Every benchmark counts objects as items: items_per_second is objects allocated and freed per
// second. The single-thread workloads are timed in the thread's CPU time (time the thread spends
// descheduled on a busy machine does not count); remote in wall-clock time, with the items
// counted by the producer only, so its items_per_second is objects passed and freed per second.
//
// Names read BM_<workload><<interface>,<size>>, e.g. BM_pair<cache,64>, and
// BM_remote<malloc,64>/real_time/threads:2. Options of this program, besides Google Benchmark's:
//   --interfaces=cache,kmalloc,malloc  register only these interfaces (default: all three)
//   --sizes=32,64,256,1024             object sizes in bytes (default: these)
//   --expect_malloc=NAME               refuse to run (exit status 3) unless the process's malloc
//                                      is NAME: glibc, jemalloc, tcmalloc, mimalloc or
//                                      slabkit (libslabkit-malloc.so)
//   --which_malloc                     print the process's malloc and the file it comes from
//   --list_designs                     print the designs this build has (slabkit_designs(),
//                                      separated by spaces), e.g. "slqb", and exit
// The process's malloc and slabkit design are also written into the JSON output's context
// ("malloc", "malloc_from", "slabkit_allocator", "slabkit_designs"). bench/slab_ratios.py runs
// this binary once per design (SLABKIT_ALLOCATOR=<design>) for the cache and kmalloc interfaces
// and glibc's malloc, and once per preloaded malloc (each design's libslabkit-malloc.so and each
// peer), and prints the tables.
#include <slabkit/slabkit.h>

#include "spsc_ring.hpp" // tools/slabbench: shared with slabbench's micro workload

#include <benchmark/benchmark.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBatch = 1000;  // objects per round of lifo, fifo and random
constexpr size_t kRing = 1024;   // pointers the remote workload's ring holds
constexpr uint32_t kSeed = 2026; // of the random workload's permutation

// ---- the process's malloc ----------------------------------------------------------------------

struct malloc_identity {
    std::string name; // glibc, jemalloc, tcmalloc, mimalloc, or unknown
    std::string from; // the shared object that defines the malloc this process calls
};

// The malloc this program calls is the first definition in the global lookup order: the
// preloaded library's when LD_PRELOAD works, otherwise libc's. Each peer is recognised by an
// entry point of its own (jemalloc's mallocx, tcmalloc's tc_malloc, mimalloc's mi_malloc) that
// must come from the same shared object as that malloc.
malloc_identity identify_malloc() {
    malloc_identity id{"unknown", "?"};
    void *malloc_sym = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info{};
    if (!malloc_sym || !dladdr(malloc_sym, &info)) return id;
    if (info.dli_fname) id.from = info.dli_fname;
    static constexpr struct {
        const char *name;
        const char *marker;
    } kPeers[] = {{"jemalloc", "mallocx"}, {"tcmalloc", "tc_malloc"}, {"mimalloc", "mi_malloc"}};
    for (const auto &peer : kPeers) {
        void *marker = dlsym(RTLD_DEFAULT, peer.marker);
        Dl_info marker_info{};
        if (marker && dladdr(marker, &marker_info) && marker_info.dli_fbase == info.dli_fbase) {
            id.name = peer.name;
            return id;
        }
    }
    // slabkit's malloc replacement is known by its file name (its exports are the malloc
    // family's names only).
    if (id.from.find("/libslabkit-malloc.so") != std::string::npos) id.name = "slabkit";
    if (id.from.find("/libc.so") != std::string::npos) id.name = "glibc";
    return id;
}

// ---- the three interfaces ----------------------------------------------------------------------

// One cache per object size, created when a benchmark first needs it (never in a process that
// only measures malloc) and destroyed at exit, which reports any object a benchmark leaked.
class bench_caches {
  public:
    static slabkit_cache *get(size_t size) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto &entry : caches_) {
            if (entry.size == size) return entry.cache;
        }
        const std::string name = "bench-" + std::to_string(size);
        slabkit_cache *cache = slabkit_cache_create(name.c_str(), size, 0, 0, nullptr);
        if (cache) caches_.push_back({size, cache});
        return cache;
    }
    static void destroy_all() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto &entry : caches_) slabkit_cache_destroy(entry.cache);
        caches_.clear();
    }

  private:
    struct entry {
        size_t size;
        slabkit_cache *cache;
    };
    static inline std::mutex mutex_;
    static inline std::vector<entry> caches_;
};

class cache_api {
  public:
    explicit cache_api(size_t size) : cache_(bench_caches::get(size)) {}
    bool ready() const { return cache_ != nullptr; }
    // Forced inline: the header's inlined free made GCC keep release() out of line, a call
    // layer of the benchmark's own that users' loops need not have.
    __attribute__((always_inline)) void *alloc() { return slabkit_cache_alloc(cache_, 0); }
    __attribute__((always_inline)) void release(void *obj) { slabkit_cache_free(cache_, obj); }

  private:
    slabkit_cache *cache_;
};

class kmalloc_api {
  public:
    explicit kmalloc_api(size_t size) : size_(size) {}
    bool ready() const { return true; }
    void *alloc() { return slabkit_kmalloc(size_, 0); }
    void release(void *obj) { slabkit_kfree(obj); }

  private:
    size_t size_;
};

class malloc_api {
  public:
    explicit malloc_api(size_t size) : size_(size) {}
    bool ready() const { return true; }
    void *alloc() { return std::malloc(size_); }
    void release(void *obj) { std::free(obj); }

  private:
    size_t size_;
};

// Writes the first byte of a fresh object, as any user of it would. DoNotOptimize makes the
// object escape (and, being a compiler memory barrier, commits the store), so the compiler can
// neither drop the store nor elide an allocate/free pair.
inline void touch(void *obj) {
    static_cast<unsigned char *>(obj)[0] = 1;
    benchmark::DoNotOptimize(obj);
}

// ---- single-thread workloads -------------------------------------------------------------------

template <class Api>
void pair(benchmark::State &state, size_t size) {
    Api api(size);
    if (!api.ready()) {
        state.SkipWithError("cannot create the cache");
        return;
    }
    if (void *obj = api.alloc()) { // untimed: the thread's first allocation sets things up
        touch(obj);
        api.release(obj);
    }
    for (auto _ : state) {
        void *obj = api.alloc();
        if (!obj) {
            state.SkipWithError("allocation failed");
            break;
        }
        touch(obj);
        api.release(obj);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

enum class free_order { lifo, fifo, random };

std::vector<uint32_t> free_sequence(free_order order) {
    std::vector<uint32_t> seq(kBatch);
    std::iota(seq.begin(), seq.end(), 0u);
    if (order == free_order::lifo) std::reverse(seq.begin(), seq.end());
    if (order == free_order::random) std::shuffle(seq.begin(), seq.end(), std::mt19937(kSeed));
    return seq;
}

// Allocates kBatch objects; returns how many it got (fewer only when allocation failed).
template <class Api>
size_t fill(Api &api, void **objs) {
    for (size_t i = 0; i < kBatch; ++i) {
        void *obj = api.alloc();
        if (!obj) return i;
        touch(obj);
        objs[i] = obj;
    }
    return kBatch;
}

template <class Api>
void batch(benchmark::State &state, size_t size, free_order order) {
    Api api(size);
    if (!api.ready()) {
        state.SkipWithError("cannot create the cache");
        return;
    }
    // All three orders free through the same index array, so they differ only in the order.
    const std::vector<uint32_t> seq = free_sequence(order);
    std::vector<void *> objs(kBatch);
    // One untimed round: the pages under a batch are in place before timing starts.
    size_t got = fill(api, objs.data());
    for (size_t i = got; i-- > 0;) api.release(objs[i]);
    if (got < kBatch) {
        state.SkipWithError("allocation failed");
        return;
    }
    for (auto _ : state) {
        got = fill(api, objs.data());
        if (got < kBatch) {
            for (size_t i = 0; i < got; ++i) api.release(objs[i]);
            state.SkipWithError("allocation failed");
            break;
        }
        for (uint32_t index : seq) api.release(objs[index]);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
}

// ---- producer/consumer ---------------------------------------------------------------------

using spsc_ring = slabbench::spsc_ring<kRing>;

// Shared by the two threads of the running remote benchmark (benchmarks run one at a time).
// Both threads run the same number of iterations, one object each, so the ring is empty again
// when a run ends.
spsc_ring g_ring;
// Pushed by a producer whose allocation failed: the consumer stops too.
void *const kPoison = reinterpret_cast<void *>(uintptr_t{1});

template <class Api>
void remote(benchmark::State &state, size_t size) {
    Api api(size);
    if (!api.ready()) {
        state.SkipWithError("cannot create the cache");
        return;
    }
    if (state.thread_index() == 0) { // producer
        // The consumer runs as many iterations as the producer: the last object is published
        // before the loop ends (Google Benchmark's threads meet at its end).
        benchmark::IterationCount left = state.max_iterations;
        for (auto _ : state) {
            void *obj = api.alloc();
            if (!obj) {
                state.SkipWithError("allocation failed");
                g_ring.push(kPoison);
                g_ring.flush();
                break;
            }
            touch(obj);
            g_ring.push(obj);
            if (--left == 0) g_ring.flush();
        }
        state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
    } else { // consumer
        for (auto _ : state) {
            void *obj = g_ring.pop();
            if (obj == kPoison) {
                state.SkipWithError("the producer's allocation failed");
                break;
            }
            api.release(obj);
        }
    }
}

// ---- registration ------------------------------------------------------------------------------

struct options {
    std::vector<std::string> interfaces{"cache", "kmalloc", "malloc"};
    std::vector<size_t> sizes{32, 64, 256, 1024};
    std::string expect_malloc;
    bool which_malloc = false;
    bool list_designs = false;
};

std::vector<std::string> split(std::string_view list) {
    std::vector<std::string> out;
    while (!list.empty()) {
        const size_t comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        if (!item.empty()) out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    return out;
}

[[noreturn]] void usage_error(const std::string &message) {
    std::fprintf(stderr, "slab_bench: %s\n", message.c_str());
    std::exit(2);
}

// Takes this program's own options out of argv (Google Benchmark sees only the rest).
options parse_options(int &argc, char **argv) {
    options opts;
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        auto value = [&](std::string_view flag) -> std::string_view {
            return arg.substr(flag.size());
        };
        if (arg.starts_with("--interfaces=")) {
            opts.interfaces = split(value("--interfaces="));
            for (const auto &name : opts.interfaces) {
                if (name != "cache" && name != "kmalloc" && name != "malloc")
                    usage_error("unknown interface '" + name + "' (cache, kmalloc, malloc)");
            }
        } else if (arg.starts_with("--sizes=")) {
            opts.sizes.clear();
            for (const auto &item : split(value("--sizes="))) {
                char *end = nullptr;
                const unsigned long size = std::strtoul(item.c_str(), &end, 10);
                if (*end != '\0' || size == 0 || size > SLABKIT_KMALLOC_MAX_CACHE_SIZE)
                    usage_error("bad size '" + item + "' (1.." +
                                std::to_string(SLABKIT_KMALLOC_MAX_CACHE_SIZE) + " bytes)");
                opts.sizes.push_back(size);
            }
        } else if (arg.starts_with("--expect_malloc=")) {
            opts.expect_malloc = value("--expect_malloc=");
        } else if (arg == "--which_malloc") {
            opts.which_malloc = true;
        } else if (arg == "--list_designs") {
            opts.list_designs = true;
        } else {
            argv[kept++] = argv[i];
        }
    }
    argc = kept;
    argv[argc] = nullptr;
    if (opts.interfaces.empty() || opts.sizes.empty())
        usage_error("--interfaces and --sizes need at least one item");
    return opts;
}

using bench_fn = void (*)(benchmark::State &, size_t size);

template <class Api>
bench_fn pick(std::string_view workload) {
    if (workload == "pair") return pair<Api>;
    if (workload == "lifo")
        return [](benchmark::State &s, size_t size) { batch<Api>(s, size, free_order::lifo); };
    if (workload == "fifo")
        return [](benchmark::State &s, size_t size) { batch<Api>(s, size, free_order::fifo); };
    if (workload == "random")
        return [](benchmark::State &s, size_t size) { batch<Api>(s, size, free_order::random); };
    return remote<Api>;
}

bench_fn pick(std::string_view workload, std::string_view interface) {
    if (interface == "cache") return pick<cache_api>(workload);
    if (interface == "kmalloc") return pick<kmalloc_api>(workload);
    return pick<malloc_api>(workload);
}

// The interfaces of one (workload, size) run next to each other, so that a change in the
// machine's load during the run hits them alike.
void register_all(const options &opts) {
    static constexpr const char *kWorkloads[] = {"pair", "lifo", "fifo", "random", "remote"};
    static constexpr const char *kInterfaces[] = {"cache", "kmalloc", "malloc"};
    for (std::string_view workload : kWorkloads) {
        for (size_t size : opts.sizes) {
            for (std::string_view interface : kInterfaces) {
                if (std::find(opts.interfaces.begin(), opts.interfaces.end(), interface) ==
                    opts.interfaces.end())
                    continue;
                const std::string name = "BM_" + std::string(workload) + "<" +
                                         std::string(interface) + "," + std::to_string(size) + ">";
                const bench_fn fn = pick(workload, interface);
                auto *b = benchmark::RegisterBenchmark(
                    name.c_str(), [fn, size](benchmark::State &state) { fn(state, size); });
                if (workload == "remote") b->Threads(2)->UseRealTime();
            }
        }
    }
}

} // namespace

int main(int argc, char **argv) {
    const options opts = parse_options(argc, argv);
    if (opts.list_designs) {
        std::printf("%s\n", slabkit_designs());
        return 0;
    }
    const malloc_identity id = identify_malloc();
    if (opts.which_malloc) {
        std::printf("%s %s\n", id.name.c_str(), id.from.c_str());
        return 0;
    }
    if (!opts.expect_malloc.empty() && opts.expect_malloc != id.name) {
        std::fprintf(stderr,
                     "slab_bench: expected %s's malloc, but malloc is %s's (from %s): is "
                     "LD_PRELOAD set right?\n",
                     opts.expect_malloc.c_str(), id.name.c_str(), id.from.c_str());
        return 3;
    }
    benchmark::AddCustomContext("malloc", id.name);
    benchmark::AddCustomContext("malloc_from", id.from);
    // The design of the cache and kmalloc interfaces (and of slabkit's malloc when it is the
    // preloaded one: it reads the same SLABKIT_ALLOCATOR).
    benchmark::AddCustomContext("slabkit_allocator", slabkit_allocator());
    benchmark::AddCustomContext("slabkit_designs", slabkit_designs());
    register_all(opts);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    bench_caches::destroy_all();
    return 0;
}
