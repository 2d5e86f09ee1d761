// configs.hpp - the allocator configurations a workload runs under.
//
// A configuration is one way of giving a workload its objects, named as the tables show it:
//   slqb slub slab slob sheaves     each design of the build (slabkit_designs(): design_names
//                                   below) through the kmem_cache API and kmalloc, linked
//                                   (SLABKIT_ALLOCATOR=<design>): fam_cache
//   slub-o0 slab-o0 sheaves-o0      SLUB, SLAB and the sheaves (over SLUB's slab layer) with
//                                   slabs of order 0 only (SLABKIT_SLUB_MAX_ORDER=0,
//                                   SLABKIT_SLAB_MAX_ORDER=0) beside their high orders (the plain
//                                   names): fam_order. SLQB and SLOB always use order-0 pages,
//                                   so they have no such variant (slqb-o3 raises SLQB's).
//   slqb-thread slqb-cpu            SLQB with threads' own slots and with the CPUs' slots
//                                   (SLABKIT_SLOTS=thread|cpu; the plain name is auto): fam_slots
//   slqb+debug ...                  each design with debugging on (SLABKIT_DEBUG=1): fam_debug
//   slqb-malloc ...                 each design's malloc replacement, libslabkit-malloc.so
//                                   preloaded: fam_malloc
//   glibc jemalloc tcmalloc mimalloc  the peers through malloc/free (preloaded, but glibc):
//                                   fam_peers
// The workers of malloc configurations call malloc/free; of the others, slabkit's API.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace slabbench {

struct config {
    std::string name;
    unsigned family = 0;     // one of workload.hpp's fam_* bits
    bool malloc_api = false; // the worker allocates with malloc/free (else slabkit's API)
    std::string design;      // slabkit's design, "" for the peers
    std::string preload;     // a library to LD_PRELOAD, "" for none
    std::vector<std::pair<std::string, std::string>> env; // set for the run
    std::string what;                                     // one line for --help and the report
    std::string missing; // non-empty: cannot run here, and why (a library not installed)
    std::string worker;  // the slabbench binary that runs its workers ("": this one)
};

// The designs this build has, in slabkit_designs()' order ("slqb", "slub", "slab", "slob",
// "sheaves"): the one list every per-design configuration, is_design_config and the report's
// design list come from.
const std::vector<std::string> &design_names();

// The environment variable that caps a design's slab order (its `-o0` configuration), "" for a
// design whose slabs have no such cap (SLQB, SLOB).
std::string max_order_variable(const std::string &design);

// Every configuration this build and machine know of, available or not. `malloc_library` is
// libslabkit-malloc.so (found next to the program by default).
std::vector<config> all_configs(const std::string &malloc_library);
const config *find_config(const std::vector<config> &all, const std::string &name);

// The configurations an --allocators list names: each item a configuration's name or a family
// (designs, order, slots, debug, malloc, peers, all); all of them for "". Throws
// std::runtime_error naming an item it does not know, and what it knows.
std::set<std::string> select_configs(const std::string &spec, const std::vector<config> &all);

// Other allocators as peers, each a "NAME=LIBRARY" preloaded like Debian's (--peer), and the
// strongest peers that ../shared/peers/build.sh builds into `strong_dir` (snmalloc and mimalloc
// 3: libsnmalloc.so, libmimalloc3.so) when they are there. Throws std::runtime_error naming a
// malformed item, a library that is not a file, or a name that is taken.
std::vector<config> with_extra_peers(std::vector<config> all, const std::vector<std::string> &specs,
                                     const std::string &strong_dir);

// Before and after in one run: for each of slabkit's configurations among `chosen`, the same
// configuration from another build folder of the project (`build`: its slabbench as the worker,
// its libslabkit-malloc.so preloaded), named "<name>@base" and placed right after it. A build
// without slabbench gives configurations marked missing, with why.
std::vector<config> with_compare_build(const std::vector<config> &all,
                                       const std::set<std::string> &chosen,
                                       const std::string &build);

// The environment a run under `cfg` gets: the driver's own, without LD_PRELOAD and the
// SLABKIT_* variables that would change what is measured, plus the configuration's.
std::vector<std::string> config_environment(const config &cfg);

// The peers' library files, where Debian installs them (none for glibc).
std::string find_library(const std::string &filename);

} // namespace slabbench
