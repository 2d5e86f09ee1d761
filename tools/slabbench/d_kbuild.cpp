// d_kbuild.cpp - kbuild: real g++ compiles of this project's own sources under each malloc.
//
// Seed 000 (Zhang Yanmin testing SLQB against SLUB on 2.6.28-rc8) timed a kernel build: SLQB
// about 20% faster than SLUB on an 8-core machine, about 6% slower on a 16-core one, with
// kmalloc-4096 the busy cache. There the slab allocator serves the kernel's side of make -j: the
// fork/exec, pipe, file and page-cache objects of thousands of short compiler processes.
//
// Userspace has no kernel to build under another slab allocator, so this measures the other half
// of a build: the compiler itself, whose malloc is the allocator under test. Each file is compiled
// with `g++ -std=c++20 -O2 -c` under the configuration's environment; LD_PRELOAD passes from the
// g++ driver to cc1plus and as, so the compiler proper allocates through the design's malloc
// replacement or the peer. Case "build" is the wall time of the whole set with `jobs` compilers
// at a time (make -jN: from the first compiler started to the last one reaped), in seconds;
// "peak-rss" is the largest peak RSS of one compile (wait4's ru_maxrss of g++, which covers the
// cc1plus it waited for), in MiB. Checks: every compile exited 0 and wrote its object file, and
// every object file is byte for byte the one glibc's malloc gives (an untimed compile of the set
// once per driver process, which also warms the page cache): a malloc that corrupts memory may
// still let the compiler exit 0.
//
// Every run compiles one snapshot of the sources (include/, src/, tests/, bench/ copied to a
// temporary folder once per driver process), so that an edit made during a suite changes no run
// and the objects stay comparable.
#include "common.hpp"
#include "configs.hpp"
#include "runner.hpp"
#include "workload.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#ifndef SLABBENCH_REPO_DIR
#error "SLABBENCH_REPO_DIR (the project's source folder) must be defined"
#endif

namespace fs = std::filesystem;

namespace slabbench {

namespace {

constexpr const char *source_folders[] = {"include", "src", "tests", "bench"};
constexpr double compile_limit_s = 600; // far beyond any file of the set: a hung compiler

struct compile_result {
    std::string file; // relative to the snapshot
    program_run run;
};

// The files a `files` list names: paths relative to the project, a folder ("src/") standing for
// every .cpp under it, sorted.
std::vector<std::string> expand_files(const fs::path &root, const std::vector<std::string> &list,
                                      std::string &why) {
    std::vector<std::string> out;
    for (const std::string &item : list) {
        const fs::path p = root / item;
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<std::string> found;
            for (auto it = fs::recursive_directory_iterator(p, ec);
                 !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
                if (it->is_regular_file(ec) && it->path().extension() == ".cpp")
                    found.push_back(fs::relative(it->path(), root, ec).string());
            std::sort(found.begin(), found.end());
            if (found.empty()) {
                why = fmt::format("no .cpp files under {} in the project's sources", item);
                return {};
            }
            out.insert(out.end(), found.begin(), found.end());
        } else if (fs::is_regular_file(p, ec)) {
            out.push_back(item);
        } else {
            why = fmt::format("{} is not in the project's sources ({})", item, SLABBENCH_REPO_DIR);
            return {};
        }
    }
    return out;
}

// The snapshot of the sources, made once per process and removed at its exit.
struct snapshot {
    std::string root; // "" until made
    std::string error;
};

std::string snapshot_folder;

void remove_snapshot() {
    std::error_code ec;
    if (!snapshot_folder.empty()) fs::remove_all(snapshot_folder, ec);
}

const snapshot &source_snapshot() {
    static std::mutex lock;
    static snapshot snap;
    std::lock_guard<std::mutex> hold(lock);
    if (!snap.root.empty() || !snap.error.empty()) return snap;
    std::error_code ec;
    const fs::path tmp = fs::temp_directory_path(ec);
    std::string pattern =
        ((ec ? fs::path("/tmp") : tmp) / fmt::format("slabbench-kbuild-{}-XXXXXX", getuid()))
            .string();
    if (!mkdtemp(pattern.data())) {
        snap.error = fmt::format("cannot make a folder {}: {}", pattern, std::strerror(errno));
        return snap;
    }
    snapshot_folder = pattern;
    std::atexit(remove_snapshot);
    for (const char *folder : source_folders) {
        const fs::path from = fs::path(SLABBENCH_REPO_DIR) / folder;
        if (!fs::is_directory(from, ec)) continue;
        fs::copy(from, fs::path(pattern) / folder, fs::copy_options::recursive, ec);
        if (ec) {
            snap.error = fmt::format("copying {} to {}: {}", from.string(), pattern, ec.message());
            return snap;
        }
    }
    snap.root = pattern;
    return snap;
}

std::string object_name(const std::string &file) {
    std::string s = file;
    std::replace(s.begin(), s.end(), '/', '_');
    return s + ".o";
}

std::vector<std::string> compile_argv(const std::string &root, const std::string &file,
                                      const std::string &out_dir) {
    return {"g++",
            "-std=c++20",
            "-O2",
            "-c",
            "-I" + root + "/include",
            "-I" + root + "/src",
            "-I" + root + "/tests",
            root + "/" + file,
            "-o",
            out_dir + "/" + object_name(file)};
}

// Compiles every file, `jobs` at a time as make -jN does; returns the wall time of the set.
double compile_set(const std::string &root, const std::vector<std::string> &files,
                   const std::string &out_dir, const std::vector<std::string> &env, unsigned jobs,
                   std::vector<compile_result> &results) {
    results.assign(files.size(), {});
    std::mutex lock;
    size_t next = 0;
    auto worker = [&] {
        for (;;) {
            size_t i;
            {
                std::lock_guard<std::mutex> hold(lock);
                if (next == files.size()) return;
                i = next++;
            }
            program_spec spec;
            spec.argv = compile_argv(root, files[i], out_dir);
            spec.env = env;
            spec.timeout_s = compile_limit_s;
            spec.capture_out = false;
            results[i].file = files[i];
            results[i].run = run_program(spec);
        }
    };
    const auto start = std::chrono::steady_clock::now();
    jobs = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(files.size())));
    if (jobs == 1) {
        worker();
    } else {
        std::vector<std::thread> crew;
        for (unsigned j = 0; j < jobs; ++j) crew.emplace_back(worker);
        for (std::thread &t : crew) t.join();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// FNV-1a over the object file's bytes; 0 when it cannot be read or is empty.
uint64_t file_hash(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return 0;
    uint64_t h = 14695981039346656037ull;
    char buf[65536];
    size_t total = 0;
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        const auto n = static_cast<size_t>(in.gcount());
        for (size_t i = 0; i < n; ++i) {
            h ^= static_cast<unsigned char>(buf[i]);
            h *= 1099511628211ull;
        }
        total += n;
    }
    return total ? h : 0;
}

// Each file's compile under glibc's malloc, shared by the runs of this process: its object file's
// hash and its wall time.
struct reference_compile {
    uint64_t hash = 0;
    double wall_s = 0;
};
std::mutex reference_lock;
std::map<std::string, reference_compile> reference;

// Compiles the files that have no reference yet under glibc's malloc, untimed. As kbuild.py's
// warm-up, this also brings the sources and headers into the page cache before any timed run,
// whichever configuration comes first, and gives the order of the timed runs.
std::string make_reference(const std::string &root, const std::vector<std::string> &files,
                           const std::string &work_dir, unsigned jobs) {
    std::vector<std::string> missing;
    {
        std::lock_guard<std::mutex> hold(reference_lock);
        for (const std::string &f : files)
            if (!reference.count(f)) missing.push_back(f);
    }
    if (missing.empty()) return "";
    const std::string dir = work_dir + "/reference";
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::vector<compile_result> results;
    compile_set(root, missing, dir, config_environment(config{}), jobs, results);
    std::lock_guard<std::mutex> hold(reference_lock);
    for (const compile_result &r : results) {
        if (!r.run.ok())
            return fmt::format("{} does not compile under glibc's malloc ({}): {}", r.file,
                               r.run.how_it_ended(compile_limit_s), last_lines(r.run.err, 3));
        const uint64_t h = file_hash(dir + "/" + object_name(r.file));
        if (!h) return fmt::format("{}: no object file under glibc's malloc", r.file);
        reference[r.file] = {h, r.run.wall_s};
    }
    fs::remove_all(dir, ec);
    return "";
}

void run_kbuild(const run_context &ctx, const config &cfg, const std::string &work_dir,
                result &out) {
    const snapshot &snap = source_snapshot();
    if (!snap.error.empty()) return out.fail(snap.error);
    std::string why;
    std::vector<std::string> files = expand_files(snap.root, ctx.get_list("files"), why);
    if (!why.empty()) return out.fail(why);
    if (files.empty()) return out.fail("kbuild.files names no file");
    const long long jobs_param = ctx.threads ? ctx.threads : ctx.get_int("jobs");
    if (jobs_param < 1) return out.fail("kbuild.jobs must be at least 1");
    const auto jobs = static_cast<unsigned>(jobs_param);

    why = make_reference(snap.root, files, work_dir, jobs);
    if (!why.empty()) return out.fail(why);
    // Longest first, so that the set does not end on one long compile alone (as make's order
    // would roughly give); the same order for every configuration.
    {
        std::lock_guard<std::mutex> hold(reference_lock);
        std::stable_sort(files.begin(), files.end(),
                         [](const std::string &a, const std::string &b) {
                             return reference[a].wall_s > reference[b].wall_s;
                         });
    }

    const std::string dir = work_dir + "/objects";
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return out.fail(fmt::format("cannot make {}: {}", dir, ec.message()));
    std::vector<compile_result> results;
    const double wall = compile_set(snap.root, files, dir, config_environment(cfg), jobs, results);

    size_t exited_ok = 0, with_object = 0, same = 0;
    std::string first_failure, first_missing, first_differs;
    uint64_t peak_kib = 0;
    double sum_s = 0;
    {
        std::lock_guard<std::mutex> hold(reference_lock);
        for (const compile_result &r : results) {
            peak_kib = std::max(peak_kib, r.run.max_rss_kib);
            sum_s += r.run.wall_s;
            if (r.run.ok()) {
                ++exited_ok;
            } else if (first_failure.empty()) {
                first_failure =
                    fmt::format("; {}: {}: {}", r.file, r.run.how_it_ended(compile_limit_s),
                                last_lines(r.run.err, 3));
            }
            const uint64_t h = file_hash(dir + "/" + object_name(r.file));
            if (h) {
                ++with_object;
            } else if (first_missing.empty()) {
                first_missing = "; none from " + r.file;
            }
            if (h && reference[r.file].hash == h) {
                ++same;
            } else if (h && first_differs.empty()) {
                first_differs = "; " + r.file + " differs";
            }
        }
    }
    out.check("compiled", exited_ok == files.size(),
              fmt::format("{} of {} compiles exited 0{}", exited_ok, files.size(), first_failure));
    out.check(
        "objects", with_object == files.size(),
        fmt::format("{} of {} object files written{}", with_object, files.size(), first_missing));
    out.check("same-objects", same == files.size(),
              fmt::format("{} of {} object files identical to glibc's malloc's{}", same,
                          files.size(), first_differs));
    out.add("build", "time", "s", better::lower, wall);
    out.add("peak-rss", "rss", "MiB", better::lower, static_cast<double>(peak_kib) / 1024.0);
    out.note("files", static_cast<double>(files.size()));
    out.note("jobs", jobs);
    out.note("compile_s_sum", sum_s);
}

std::string kbuild_available() {
    if (which("g++").empty()) return "g++ is not installed (Debian's g++)";
    std::error_code ec;
    if (!fs::is_directory(fs::path(SLABBENCH_REPO_DIR) / "src", ec))
        return fmt::format("the project's sources are not at {} (kbuild compiles them)",
                           SLABBENCH_REPO_DIR);
    return "";
}

} // namespace

workload kbuild_workload() {
    workload w;
    w.name = "kbuild";
    w.seed = "seed 000: kbuild";
    w.maps_to =
        "Seed 000 timed a kernel build (make -j) under SLQB against SLUB: about 20% faster on 8 "
        "cores, 6% slower on 16, kmalloc-4096 the busy cache. Here real g++ -O2 compiles of this "
        "project's sources run under each malloc (preloaded into g++ and cc1plus): 'build' is "
        "the wall time of the set with `jobs` compilers at a time (make -jN), 'peak-rss' the "
        "largest peak RSS of one compile.";
    w.cannot = "The kernel's side of a build (fork, exec, pipes, dentries, the page cache: the "
               "slab traffic the seed measured) stays in the host kernel's allocator; only the "
               "compiler's own malloc is under test, and each compiler process has a private "
               "heap, so nothing is shared between CPUs as kernel caches are.";
    w.families = fam_malloc | fam_peers;
    w.baseline = "glibc";
    w.params = {
        {"files", "src/core/slabinfo.cpp",
         "src/slqb/slqb_alloc.cpp,src/core/cache.cpp,src/kmalloc/kmalloc.cpp",
         "src/slqb/,src/slub/,src/kmalloc/,src/core/cache.cpp,tests/api/kmalloc_test.cpp",
         "sources to compile, relative to the project; a folder (src/) means every .cpp under it"},
        {"jobs", "1", "2", "2", "compilers at a time, as make -jN (--threads overrides)"},
    };
    w.run_external = run_kbuild;
    w.available = kbuild_available;
    return w;
}

} // namespace slabbench
