// workload.hpp - what a slabbench workload is, and what one run of it reports.
//
// A workload is one of the seeds' benchmarks (hackbench, netperf, ...) rebuilt over an object
// source (heap.hpp). The driver (main.cpp) runs every run of every workload under every
// allocator configuration (configs.hpp) in a process of its own; that process is slabbench
// itself started as a worker (`slabbench --worker ...`), which runs the workload once and writes
// one JSON result to the result descriptor. Workloads that measure other programs (kbuild: g++,
// oltp: a MariaDB server) run in the driver instead and start those programs themselves with
// the configuration's environment (run_external).
//
// A run reports values per case ("stream/1024", "read-only", ...): one number per case and
// metric, with its unit and which way is better. It also reports checks: what must hold for the
// run to count (messages delivered, counts balanced, nothing leaked). A failed check fails the
// run; the driver reports it and leaves that configuration out of the tables.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace slabbench {

class heap;
struct config;

enum class better { higher, lower };

// How big a run is: tiny (the test command's correctness runs), quick (the default), full.
enum class scale { tiny, quick, full };

// One of a workload's options, with its default at each scale (given on the command line as
// --set WORKLOAD.NAME=VALUE, e.g. --set netperf.sizes=64,1024).
struct param {
    std::string name;
    std::string tiny, quick, full;
    std::string help;
};

// Which allocator configurations a workload is run under (configs.hpp names each family).
enum family : unsigned {
    fam_cache = 1u << 0,  // each design through the kmem_cache API, linked
    fam_order = 1u << 1,  // SLUB and SLAB at order 0 beside their high orders
    fam_slots = 1u << 2,  // SLQB with threads' slots and with CPUs' slots (rseq)
    fam_debug = 1u << 3,  // each design with debugging on (SLABKIT_DEBUG=1)
    fam_malloc = 1u << 4, // each design's malloc replacement, preloaded
    fam_peers = 1u << 5,  // glibc, jemalloc, tcmalloc, mimalloc through malloc
};

// What a run is given.
struct run_context {
    slabbench::heap *heap = nullptr; // the object source (null for external workloads)
    scale size = scale::quick;
    unsigned threads = 0;                      // --threads (0: the workload's own default)
    unsigned cpus = 1;                         // CPUs this process may run on
    unsigned run = 0;                          // which run of the series (0-based)
    std::map<std::string, std::string> params; // every param, defaults filled in

    const std::string &get(const std::string &name) const;
    long long get_int(const std::string &name) const;
    double get_double(const std::string &name) const;
    std::vector<long long> get_ints(const std::string &name) const; // comma list
    std::vector<std::string> get_list(const std::string &name) const;
};

// What a run reports.
class result {
  public:
    // A measured value of case `name` (metric `metric`, in `unit`).
    void add(const std::string &name, const std::string &metric, const std::string &unit,
             better dir, double value);
    // A check that must hold; `detail` says what was seen ("12000 of 12000 messages").
    void check(const std::string &name, bool ok, const std::string &detail);
    // A run that could not be made (why), e.g. a program missing.
    void fail(const std::string &why);
    // Extra figures about the run (the design's counters, the process's peak RSS), kept in the
    // JSON beside the values.
    void note(const std::string &key, double value);

    struct value {
        std::string name, metric, unit;
        better dir;
        double v;
    };
    struct check_result {
        std::string name;
        bool ok;
        std::string detail;
    };
    std::vector<value> values;
    std::vector<check_result> checks;
    std::map<std::string, double> notes;
    std::string error; // non-empty: the run failed

    bool ok() const;
    std::string to_json() const;
    static result from_json(const std::string &text); // throws std::runtime_error
};

// How a workload's table is laid out.
enum class layout {
    by_config, // per case: a row per configuration with min, max, avg, sd, %, noise
    matrix,    // a row per case, a column per configuration (netperf's size sweep)
};

struct workload {
    std::string name;
    std::string seed;    // "seed 000: hackbench" ...
    std::string maps_to; // how it maps to its seed
    std::string cannot;  // what it cannot reproduce from a kernel
    unsigned families = fam_cache;
    std::string baseline = "slub"; // the default configuration the % column compares against
    layout shape = layout::by_config;
    std::vector<param> params;
    // In-process workloads: one run in this (worker) process, over ctx.heap.
    std::function<void(const run_context &ctx, result &out)> run;
    // External workloads (kbuild, oltp): one run under `cfg`, from the driver; `work_dir` is a
    // private folder for the run's files. When set, `run` is not used.
    std::function<void(const run_context &ctx, const config &cfg, const std::string &work_dir,
                       result &out)>
        run_external;
    // External workloads: a check before any run that the programs they need are there (empty:
    // fine; otherwise why not, and the workload is skipped with that reason).
    std::function<std::string()> available;
};

// The registry. Each workload's file defines a function returning its description, listed in
// workloads.cpp in the order --help and the default run show them.
const std::vector<workload> &all_workloads();
const workload *find_workload(const std::string &name);

workload hackbench_workload();
workload netperf_workload();
workload volano_workload();
workload oltp_workload();
workload kbuild_workload();
workload boot_workload();
workload micro_workload();
workload pages_workload();

} // namespace slabbench
