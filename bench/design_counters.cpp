// design_counters.cpp - what each design does per object, from its own statistics counters: the
// workloads of slab_bench (pair, batch LIFO, remote producer/consumer) run once per design on a
// fresh cache, and every counter that moved is printed per 1000 objects, as a markdown table per
// workload. Not a timing: the counters say why the timings differ (which path each object took,
// how many locked or atomic steps it cost).
//
// Usage: design_counters [--objects=N] [--size=BYTES] [--designs=slqb,slub]
#include <slabkit/slabkit.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using counters = std::map<std::string, uint64_t>;

counters read_counters(slabkit_cache *c) {
    slabkit_cache_stats st;
    slabkit_get_cache_stats(c, &st);
    counters out;
    for (unsigned i = 0; i < st.nr_counters && i < 24; ++i)
        out[st.counter_names[i]] = st.counters[i];
    return out;
}

void pair(slabkit_cache *c, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
        void *p = slabkit_cache_alloc(c, 0);
        static_cast<volatile char *>(p)[0] = 1;
        slabkit_cache_free(c, p);
    }
}

void batch_lifo(slabkit_cache *c, uint64_t n) {
    constexpr uint64_t kBatch = 1000;
    std::vector<void *> objs(kBatch);
    for (uint64_t done = 0; done < n; done += kBatch) {
        for (auto &p : objs) {
            p = slabkit_cache_alloc(c, 0);
            static_cast<volatile char *>(p)[0] = 1;
        }
        for (size_t i = kBatch; i-- > 0;) slabkit_cache_free(c, objs[i]);
    }
}

// One thread allocates and passes objects through a ring to another, which frees them (as
// slab_bench's remote workload, with a simple spinning ring).
void remote(slabkit_cache *c, uint64_t n) {
    constexpr size_t kRing = 1024;
    std::vector<std::atomic<void *>> ring(kRing);
    for (auto &slot : ring) slot.store(nullptr);
    std::thread consumer([&] {
        size_t at = 0;
        for (uint64_t i = 0; i < n; ++i) {
            void *p;
            while (!(p = ring[at].load(std::memory_order_acquire))) std::this_thread::yield();
            ring[at].store(nullptr, std::memory_order_relaxed);
            at = (at + 1) % kRing;
            slabkit_cache_free(c, p);
        }
    });
    size_t at = 0;
    for (uint64_t i = 0; i < n; ++i) {
        void *p = slabkit_cache_alloc(c, 0);
        static_cast<volatile char *>(p)[0] = 1;
        while (ring[at].load(std::memory_order_acquire)) std::this_thread::yield();
        ring[at].store(p, std::memory_order_release);
        at = (at + 1) % kRing;
    }
    consumer.join();
}

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"slabkit: each design's statistics counters per 1000 objects of slab_bench's "
                 "workloads"};
    uint64_t objects = 1000000;
    size_t size = 64;
    std::string designs = slabkit_designs();
    app.add_option("--objects", objects, "objects per workload")->check(CLI::Range(1000, 1 << 30));
    app.add_option("--size", size, "object size in bytes")->check(CLI::Range(1, 8192));
    app.add_option("--designs", designs, "designs, separated by commas or spaces");
    CLI11_PARSE(app, argc, argv);
    for (char &ch : designs)
        if (ch == ',') ch = ' ';
    std::vector<std::string> list;
    std::istringstream in(designs);
    for (std::string d; in >> d;) list.push_back(d);

    struct workload {
        const char *name;
        void (*run)(slabkit_cache *, uint64_t);
    } workloads[] = {{"pair", pair}, {"batch LIFO (1000)", batch_lifo}, {"remote", remote}};
    fmt::print("Counters per 1000 objects, {} objects of {} B per workload, a fresh cache each "
               "(design_counters --objects={} --size={}).\n\n",
               objects, size, objects, size);
    for (const workload &w : workloads) {
        fmt::print("{}:\n\n| design | counter | per 1000 objects |\n| --- | --- | ---: |\n",
                   w.name);
        for (const std::string &d : list) {
            std::string name = "counters-" + d;
            slabkit_cache *c =
                slabkit_cache_create_in(d.c_str(), name.c_str(), size, 0, 0, nullptr);
            if (!c) {
                fmt::print(stderr, "design_counters: cannot create a cache in design '{}'\n", d);
                return 1;
            }
            counters before = read_counters(c);
            w.run(c, objects);
            slabkit_cache_shrink(c);
            counters after = read_counters(c);
            for (const auto &[counter, value] : after) {
                uint64_t moved = value - before[counter];
                if (moved == 0) continue;
                fmt::print("| {} | {} | {:.2f} |\n", d, counter,
                           1000.0 * static_cast<double>(moved) / static_cast<double>(objects));
            }
            slabkit_cache_destroy(c);
        }
        fmt::print("\n");
    }
    return 0;
}
