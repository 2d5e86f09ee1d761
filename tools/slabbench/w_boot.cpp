// w_boot.cpp - the memory a set of kernel-like caches takes after a "boot".
//
// Seed 002 (Pekka Enberg, Jan 2008) booted a 32 MB lguest guest to init=/bin/sh ten times per
// allocator and read MemTotal - MemFree: SLUB 2658 kB, SLOB 2968 kB, SLAB 3200 kB, SLUB with
// debugging 3356 kB (min/max/avg of the ten runs). What that figure holds is the slab caches a
// boot leaves behind - dentries, inodes, buffer heads, VMAs, kernfs nodes, the kmalloc-N
// buckets - and the pages their allocator needs for them: partly used slabs, per-CPU and free
// slabs kept for reuse, the allocator's own metadata.
//
// Here the caches and their object counts come from a real /proc/slabinfo (a snapshot of the
// build machine's, data/slabinfo-<date>.txt, or the `slabinfo` param): the `caches` largest by
// active memory (active_objs * objsize) plus every kmalloc-N bucket (kmalloc-cg-N, -rcl-N and
// dma-kmalloc-N too: kmalloc calls with other GFP flags). Each count is scaled by `scale`; the
// full default gives a few MB of live objects, the seed's order of magnitude. A boot creates the
// caches, then allocates in an interleaved random order across them (seeded by the run index:
// runs differ, and each is reproducible). Of every cache's allocations a fraction `free` are
// temporaries; they are freed in random order while the boot goes on (at most `window` of them
// alive at once, the rest at the end), so the scaled snapshot counts are what survives and the
// holes the temporaries leave make partial slabs. kmalloc-N objects are requested through
// heap.kmalloc with a size drawn uniformly above the next smaller bucket, so the designs'
// rounding up to a bucket (SLOB's lack of it) shows as in a kernel. Every object is written
// whole when allocated, as a constructor or memset would.
//
// Cases (kB, lower is better): "memory", for slabkit configurations the pages slabkit hands out
// after the boot (slabs and large blocks, heap.pages_in_use(), the counterpart of the seed's
// Used column); "rss", the process's resident set grown over the boot, for every configuration
// so that the malloc peers get a figure too. Notes: object_kib (the live objects' own bytes)
// and overhead (memory or rss over object_kib).
#include "common.hpp"
#include "heap.hpp"
#include "workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifndef SLABBENCH_SOURCE_DIR
#define SLABBENCH_SOURCE_DIR "tools/slabbench"
#endif

namespace slabbench {

namespace {

constexpr const char *kSnapshot = SLABBENCH_SOURCE_DIR "/data/slabinfo-2026-12-04.txt";

struct slab_line {
    std::string name;
    long long active = 0;
    size_t objsize = 0;
    size_t kmalloc = 0;      // the bucket's size for a kmalloc-N cache, else 0
    size_t kmalloc_low = 0;  // the next smaller bucket (requests are above it)
    long long survivors = 0; // after scaling
    long long temps = 0;
};

// The kernel's kmalloc buckets (KMALLOC_MIN_SIZE 8 on x86-64, with the 96 and 192 ones).
constexpr size_t kBuckets[] = {8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192};

size_t bucket_below(size_t n) {
    size_t below = 0;
    for (size_t b : kBuckets)
        if (b < n) below = b;
    return below;
}

// The bucket size of a kmalloc cache's name - kmalloc-N, kmalloc-cg-N, kmalloc-rcl-N,
// kmalloc-dma-N, dma-kmalloc-N, N in bytes or with a k suffix - or 0 for any other name.
size_t kmalloc_bucket(std::string name) {
    if (name.rfind("dma-", 0) == 0) name.erase(0, 4);
    if (name.rfind("kmalloc-", 0) != 0) return 0;
    name.erase(0, 8);
    for (const char *infix : {"cg-", "rcl-", "dma-"})
        if (name.rfind(infix, 0) == 0) name.erase(0, std::strlen(infix));
    size_t digits = 0, n = 0;
    while (digits < name.size() && digits < 9 && name[digits] >= '0' && name[digits] <= '9')
        n = n * 10 + size_t(name[digits++] - '0');
    if (digits == 0) return 0;
    if (digits == name.size()) return n;
    if (digits + 1 == name.size() && name[digits] == 'k') return n * 1024;
    return 0;
}

// Reads a /proc/slabinfo 2.1 text: name active_objs num_objs objsize ... (comment lines '#').
std::vector<slab_line> read_slabinfo(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(fmt::format("cannot read slabinfo file {}", path));
    std::vector<slab_line> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#' || line.rfind("slabinfo", 0) == 0) continue;
        std::istringstream fields(line);
        slab_line s;
        long long num = 0, objsize = 0;
        if (!(fields >> s.name >> s.active >> num >> objsize) || s.active < 0 || objsize <= 0)
            throw std::runtime_error(fmt::format("{}: cannot parse line '{}'", path, line));
        s.objsize = static_cast<size_t>(objsize);
        s.kmalloc = kmalloc_bucket(s.name);
        s.kmalloc_low = bucket_below(s.kmalloc);
        out.push_back(s);
    }
    if (out.empty()) throw std::runtime_error(fmt::format("{}: no caches in it", path));
    return out;
}

// The largest `top` caches by active memory, then every kmalloc bucket with objects.
std::vector<slab_line> choose(std::vector<slab_line> all, long long top) {
    std::vector<slab_line> chosen, plain;
    for (const slab_line &s : all) {
        if (s.active == 0) continue;
        (s.kmalloc ? chosen : plain).push_back(s);
    }
    std::stable_sort(plain.begin(), plain.end(), [](const slab_line &a, const slab_line &b) {
        return a.active * static_cast<long long>(a.objsize) >
               b.active * static_cast<long long>(b.objsize);
    });
    if (static_cast<long long>(plain.size()) > top) plain.resize(static_cast<size_t>(top));
    chosen.insert(chosen.begin(), plain.begin(), plain.end());
    return chosen;
}

// The names of the caches live in this process (slabkit refuses a second cache of a name).
std::vector<std::string> existing_cache_names(const heap &h) {
    std::vector<std::string> names;
    if (!h.slabkit()) return names;
    std::vector<slabkit_cache_stats> all(slabkit_cache_count() + 16);
    const size_t n = std::min(all.size(), slabkit_stats(all.data(), all.size()));
    for (size_t i = 0; i < n; ++i) names.emplace_back(all[i].name);
    return names;
}

struct object {
    void *p;
    size_t bytes;
    uint32_t cache;
};

void run_boot(const run_context &ctx, result &out) {
    heap &h = *ctx.heap;
    const std::string path = ctx.get("slabinfo").empty() ? kSnapshot : ctx.get("slabinfo");
    const double scale = ctx.get_double("scale");
    const double free_frac = ctx.get_double("free");
    const double window = ctx.get_double("window");
    if (scale <= 0 || free_frac < 0 || free_frac >= 1 || window < 0 || window > 1)
        throw std::runtime_error("boot: scale > 0, 0 <= free < 1 and 0 <= window <= 1, please");
    std::vector<slab_line> caches = choose(read_slabinfo(path), ctx.get_int("caches"));

    // Every cache with objects in the snapshot keeps at least one: each cache's fixed cost (a
    // slab of its own, or none under SLOB) is part of what a small boot measures.
    long long survivors = 0, temps = 0;
    for (slab_line &s : caches) {
        s.survivors = std::max(1LL, std::llround(static_cast<double>(s.active) * scale));
        s.temps = std::llround(static_cast<double>(s.survivors) * free_frac / (1 - free_frac));
        survivors += s.survivors;
        temps += s.temps;
    }
    const long long total = survivors + temps;

    // The boot's order: one entry per allocation (cache index, temporary or not), shuffled.
    std::mt19937_64 rng(0x5eed0002u + 7919u * ctx.run);
    std::vector<uint32_t> order;
    order.reserve(static_cast<size_t>(total));
    for (size_t i = 0; i < caches.size(); ++i) {
        for (long long k = 0; k < caches[i].survivors; ++k) order.push_back(uint32_t(i) << 1);
        for (long long k = 0; k < caches[i].temps; ++k) order.push_back(uint32_t(i) << 1 | 1);
    }
    std::shuffle(order.begin(), order.end(), rng);
    // Room for every record before the "before" figures, so that the bookkeeping's own memory
    // is not counted as the boot's.
    std::vector<object> kept(static_cast<size_t>(survivors));
    std::vector<object> pending(static_cast<size_t>(temps) + 1);
    kept.clear();
    pending.clear();
    const size_t max_pending = std::max<size_t>(1, size_t(double(temps) * window));

    const uint64_t pages_before = h.pages_in_use();
    const uint64_t rss_before = current_rss_kib();
    const uint64_t t0 = now_ns();

    std::vector<heap::cache *> made(caches.size(), nullptr);
    const std::vector<std::string> taken = existing_cache_names(h);
    for (size_t i = 0; i < caches.size(); ++i) {
        if (caches[i].kmalloc) continue;
        std::string name = caches[i].name;
        // slabkit's own caches (its kmem_cache) keep their names; ours get a suffix.
        if (std::find(taken.begin(), taken.end(), name) != taken.end()) name += "-boot";
        made[i] = h.make_cache(name, caches[i].objsize);
    }

    long long failed = 0, allocated = 0, freed = 0;
    auto release = [&](const object &o) {
        if (made[o.cache])
            h.free(made[o.cache], o.p);
        else
            h.kfree(o.p);
        ++freed;
    };
    auto free_random_pending = [&] {
        std::uniform_int_distribution<size_t> pick(0, pending.size() - 1);
        const size_t k = pick(rng);
        release(pending[k]);
        pending[k] = pending.back();
        pending.pop_back();
    };
    for (uint32_t entry : order) {
        const uint32_t i = entry >> 1;
        const slab_line &s = caches[i];
        size_t bytes = s.objsize;
        void *p = nullptr;
        if (made[i]) {
            p = h.alloc(made[i]);
        } else {
            bytes = std::uniform_int_distribution<size_t>(s.kmalloc_low + 1, s.kmalloc)(rng);
            p = h.kmalloc(bytes);
        }
        if (!p) {
            ++failed;
            continue;
        }
        ++allocated;
        std::memset(p, 0x5a, bytes);
        if (entry & 1) {
            pending.push_back({p, bytes, i});
            if (pending.size() > max_pending) free_random_pending();
        } else {
            kept.push_back({p, bytes, i});
        }
    }
    while (!pending.empty()) free_random_pending();
    const uint64_t boot_ns = now_ns() - t0;

    double object_bytes = 0;
    for (const object &o : kept) object_bytes += double(o.bytes);
    const double object_kib = object_bytes / 1024;
    const double rss_kib = double(current_rss_kib()) - double(rss_before);
    out.note("object_kib", object_kib);
    out.note("objects", double(kept.size()));
    out.note("caches", double(caches.size()));
    out.note("boot_ms", double(boot_ns) / 1e6);
    if (h.slabkit()) {
        const double memory_kib = (double(h.pages_in_use()) - double(pages_before)) * 4;
        out.add("memory", "used after boot", "kB", better::lower, memory_kib);
        out.note("overhead", object_kib > 0 ? memory_kib / object_kib : 0);
        out.note("slab_kib", double(h.slab_pages()) * 4);
    } else {
        out.note("overhead", object_kib > 0 ? rss_kib / object_kib : 0);
    }
    out.add("rss", "RSS growth over boot", "kB", better::lower, rss_kib);

    // A shutdown: every survivor goes, in random order.
    std::shuffle(kept.begin(), kept.end(), rng);
    for (const object &o : kept) release(o);
    kept.clear();
    if (h.slabkit())
        out.note("kib_after_free", (double(h.pages_in_use()) - double(pages_before)) * 4);

    out.check("allocations", failed == 0,
              count_detail(uint64_t(allocated), uint64_t(total), "allocations succeeded"));
    out.check("freed", freed == allocated,
              count_detail(uint64_t(freed), uint64_t(allocated), "objects freed"));
    if (h.slabkit()) {
        const long long live = h.live_objects();
        out.check("no leak", live == 0,
                  fmt::format("{} objects live in the caches at the end", live));
    }
}

} // namespace

workload boot_workload() {
    workload w;
    w.name = "boot";
    w.seed = "seed 002: memory used after boot (SLUB, SLOB, SLAB, SLUB+debug)";
    w.maps_to = "The seed booted a small guest 10 times per allocator and read MemTotal - MemFree "
                "(SLUB 2658 kB, SLOB 2968 kB, SLAB 3200 kB, SLUB+debug 3356 kB). Here a boot "
                "creates the largest caches of a real /proc/slabinfo plus every kmalloc bucket, "
                "allocates their scaled object counts in random interleaved order with "
                "temporaries freed along the way, and reports the pages slabkit then hands out "
                "(memory, kB) and the RSS growth (rss, kB, for every configuration); each run "
                "has its own seed, as each of the seed's boots differed.";
    w.cannot = "No kernel: no page cache, no boot-time allocations outside the slab (page "
               "tables, vmalloc, the memory map), no RCU-delayed frees, and the object counts are "
               "a 2026 machine's, scaled, not a 2008 guest's; kmalloc request sizes are drawn "
               "uniformly inside their bucket.";
    w.families = fam_cache | fam_debug | fam_malloc | fam_peers;
    w.baseline = "slub";
    w.shape = layout::by_config;
    w.params = {
        {"scale", "0.002", "0.025", "0.05",
         "fraction of the snapshot's object counts that survive the boot (1: as in the snapshot, "
         "about 120 MB)"},
        {"caches", "40", "40", "40", "the largest caches by active memory taken, besides kmalloc"},
        {"free", "0.3", "0.3", "0.3", "fraction of each cache's allocations that are temporaries"},
        {"window", "0.25", "0.25", "0.25",
         "the most temporaries alive at once, as a fraction of them (the rest are freed at the "
         "end of the boot)"},
        {"slabinfo", "", "", "",
         "a /proc/slabinfo file to take the caches from (default: "
         "tools/slabbench/data/slabinfo-2026-12-04.txt)"},
    };
    w.run = [](const run_context &ctx, result &out) {
        try {
            run_boot(ctx, out);
        } catch (const std::exception &e) {
            out.fail(e.what());
        }
    };
    return w;
}

} // namespace slabbench
