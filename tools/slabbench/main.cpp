// main.cpp - slabbench: the seeds' benchmarks side by side for slabkit's designs and for
// glibc, jemalloc, tcmalloc and mimalloc, with statistics over repeated runs (docs/slabbench.md).
//
// The driver runs every run of every workload under every configuration in a process of its
// own: itself, started as a worker (`--worker`, not for users), with the configuration's
// environment (SLABKIT_ALLOCATOR, LD_PRELOAD ...). So a configuration's crash, a hang (killed
// at a time limit) or a failed check is reported and that configuration skipped, and no run
// inherits another's heap. Runs are interleaved (run 1 of every configuration, then run 2 ...)
// so that a machine whose speed drifts spreads the drift over all of them.
#include "common.hpp"
#include "configs.hpp"
#include "heap.hpp"
#include "outcome.hpp"
#include "output.hpp"
#include "runner.hpp"
#include "tables.hpp"
#include "workload.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace sb = slabbench;
namespace fs = std::filesystem;

namespace {

const char *scale_name(sb::scale s) {
    return s == sb::scale::tiny ? "tiny" : s == sb::scale::quick ? "quick" : "full";
}

// The workload's parameters at this scale, with the --set overrides for it.
std::map<std::string, std::string> params_for(const sb::workload &w, sb::scale s,
                                              const std::map<std::string, std::string> &set) {
    std::map<std::string, std::string> out;
    for (const sb::param &p : w.params)
        out[p.name] = s == sb::scale::tiny ? p.tiny : s == sb::scale::quick ? p.quick : p.full;
    for (const auto &[k, v] : set)
        if (k.rfind(w.name + ".", 0) == 0) out[k.substr(w.name.size() + 1)] = v;
    return out;
}

// ---- the worker ----------------------------------------------------------------------------

// The shared object the process's malloc comes from (LD_PRELOAD silently does nothing when
// ld.so cannot load the library: it only prints a line).
std::string malloc_comes_from() {
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info{};
    if (!sym || !dladdr(sym, &info) || !info.dli_fname) return "";
    return info.dli_fname;
}

int worker_main(const std::string &name, const std::string &api, const std::string &expect,
                sb::scale size, unsigned run, unsigned threads,
                const std::vector<std::string> &param_args, bool counters) {
    sb::result out;
    const sb::workload *w = sb::find_workload(name);
    if (!w || !w->run) {
        out.fail(fmt::format("no in-process workload '{}'", name));
    } else {
        const std::string from = malloc_comes_from();
        const bool right_malloc = expect.empty()
                                      ? from.find("libc.so") != std::string::npos
                                      : fs::path(from).filename() == fs::path(expect).filename();
        if (api == "malloc" && !right_malloc) {
            out.fail(fmt::format("malloc comes from {}, not {}", from.empty() ? "?" : from,
                                 expect.empty() ? "glibc" : expect));
        } else {
            sb::heap h(api != "malloc");
            sb::run_context ctx;
            ctx.heap = &h;
            ctx.size = size;
            ctx.threads = threads;
            ctx.cpus = sb::allowed_cpus();
            ctx.run = run;
            for (const std::string &kv : param_args) {
                const size_t eq = kv.find('=');
                if (eq != std::string::npos) ctx.params[kv.substr(0, eq)] = kv.substr(eq + 1);
            }
            const sb::heap::activity before = h.total_activity();
            const std::map<std::string, uint64_t> counters_before =
                counters ? h.design_counters() : std::map<std::string, uint64_t>{};
            try {
                w->run(ctx, out);
            } catch (const std::exception &e) {
                out.fail(fmt::format("{}: {}", name, e.what()));
            }
            const sb::heap::activity after = h.total_activity();
            if (counters && h.slabkit()) {
                // Every counter of the design that moved over the run, and the allocations
                // they are read against (tables.hpp, format_counters).
                for (const auto &[k, v] : h.design_counters()) {
                    auto was = counters_before.find(k);
                    const uint64_t start = was == counters_before.end() ? 0 : was->second;
                    if (v > start) out.note(sb::kCounterNote + k, static_cast<double>(v - start));
                }
                out.note(sb::kCounterAllocsNote, static_cast<double>(after.allocs - before.allocs));
            }
            if (h.slabkit() && after.allocs > before.allocs) {
                out.note("alloc_slow_pct",
                         100.0 * static_cast<double>(after.alloc_slow - before.alloc_slow) /
                             static_cast<double>(after.allocs - before.allocs));
                if (after.frees > before.frees)
                    out.note("free_slow_pct",
                             100.0 * static_cast<double>(after.free_slow - before.free_slow) /
                                 static_cast<double>(after.frees - before.frees));
            }
            out.note("peak_rss_kib", static_cast<double>(sb::peak_rss_kib()));
        }
    }
    const std::string text = out.to_json() + "\n";
    // Descriptor 3 is the driver's result pipe; run by hand, the result goes to stdout.
    const int fd = fcntl(3, F_GETFD) != -1 ? 3 : 1;
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    return 0;
}

// ---- the driver ----------------------------------------------------------------------------

struct options {
    std::vector<std::string> workloads;
    sb::scale size = sb::scale::quick;
    unsigned runs = 0; // 0: the scale's
    std::string allocators;
    unsigned threads = 0;
    std::string json, csv, report;
    std::string baseline;
    std::vector<std::string> set;
    double timeout_s = 0; // 0: the scale's
    std::string malloc_library;
    std::string compare;            // another build folder: before and after in one run
    std::vector<std::string> peers; // --peer NAME=LIBRARY
    bool strong_peers = true;       // snmalloc and mimalloc 3 from build/peers when built
    bool progress = true;
    bool strict = false;
    bool counters = false; // workers note their design's counters; a table per workload
    std::string command;
};

std::string default_malloc_library() {
    const fs::path self = sb::self_path();
    for (const fs::path &p :
         {self.parent_path() / "libslabkit-malloc.so",
          self.parent_path().parent_path().parent_path() / "libslabkit-malloc.so"})
        if (fs::exists(p)) return fs::weakly_canonical(p).string();
    return (self.parent_path().parent_path().parent_path() / "libslabkit-malloc.so").string();
}

// Where ../shared/peers/build.sh puts snmalloc and mimalloc 3 for the project's benchmarks.
std::string strong_peers_dir() {
    return (fs::path(SLABBENCH_REPO_DIR) / "build" / "peers").string();
}

// A progress line on stderr: rewritten in place on a terminal, one line per configuration
// otherwise (a log stays short).
class progress {
  public:
    progress(bool on, size_t total)
        : on_(on), tty_(isatty(2)), total_(total), start_(sb::now_ns()) {}
    void show(const std::string &workload, const std::string &config, unsigned run, unsigned runs) {
        if (!on_) return;
        const double elapsed = static_cast<double>(sb::now_ns() - start_) * 1e-9;
        std::string eta;
        if (done_ > 0) {
            const double left =
                elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_);
            eta = fmt::format(", about {:.0f} s left", left);
        }
        const std::string line = fmt::format("[{}/{}] {} {} run {}/{} ({:.0f} s{})", done_ + 1,
                                             total_, workload, config, run + 1, runs, elapsed, eta);
        if (tty_)
            std::fprintf(stderr, "\r\033[K%s", line.c_str());
        else if (run == 0)
            std::fprintf(stderr, "%s\n", line.c_str());
        std::fflush(stderr);
    }
    void step() { ++done_; }
    void clear() {
        if (on_ && tty_) std::fprintf(stderr, "\r\033[K");
    }
    void add_total(long delta) { total_ = static_cast<size_t>(static_cast<long>(total_) + delta); }

  private:
    bool on_, tty_;
    size_t total_, done_ = 0;
    uint64_t start_;
};

sb::run_record run_once(const options &opt, const sb::workload &w, const sb::config &cfg,
                        const std::map<std::string, std::string> &params, unsigned run,
                        double timeout_s, const std::string &work_root) {
    sb::run_record rec;
    rec.config = cfg.name;
    rec.run = run;
    const uint64_t start = sb::now_ns();
    if (w.run_external) {
        const std::string dir = fmt::format("{}/{}-{}-{}", work_root, w.name, cfg.name, run);
        std::error_code ec;
        fs::create_directories(dir, ec);
        sb::run_context ctx;
        ctx.size = opt.size;
        ctx.threads = opt.threads;
        ctx.cpus = sb::allowed_cpus();
        ctx.run = run;
        ctx.params = params;
        try {
            w.run_external(ctx, cfg, dir, rec.res);
        } catch (const std::exception &e) {
            rec.res.fail(e.what());
        }
        fs::remove_all(dir, ec);
    } else {
        sb::program_spec spec;
        spec.argv = {cfg.worker.empty() ? sb::self_path() : cfg.worker,
                     "--worker",
                     w.name,
                     "--api",
                     cfg.malloc_api ? "malloc" : "cache",
                     "--expect-malloc",
                     cfg.preload,
                     "--scale",
                     scale_name(opt.size),
                     "--run",
                     std::to_string(run)};
        if (opt.counters) spec.argv.push_back("--counters");
        if (opt.threads) {
            spec.argv.push_back("--threads");
            spec.argv.push_back(std::to_string(opt.threads));
        }
        for (const auto &[k, v] : params) {
            spec.argv.push_back("--param");
            spec.argv.push_back(k + "=" + v);
        }
        spec.env = sb::config_environment(cfg);
        spec.timeout_s = timeout_s;
        spec.capture_out = false;
        spec.result_fd = true;
        const sb::program_run pr = sb::run_program(spec);
        if (!pr.ok()) {
            rec.res.fail(fmt::format("the worker {}{}", pr.how_it_ended(timeout_s),
                                     pr.err.empty() ? "" : ": " + sb::last_lines(pr.err, 3)));
        } else {
            try {
                rec.res = sb::result::from_json(pr.result);
            } catch (const std::exception &e) {
                rec.res.fail(e.what());
            }
        }
    }
    rec.wall_s = static_cast<double>(sb::now_ns() - start) * 1e-9;
    rec.ok = rec.res.ok();
    if (!rec.ok) {
        rec.error = rec.res.error;
        for (const auto &c : rec.res.checks)
            if (!c.ok)
                rec.error += fmt::format("{}check '{}' failed: {}", rec.error.empty() ? "" : "; ",
                                         c.name, c.detail);
        if (rec.res.values.empty() && rec.error.empty()) rec.error = "no values";
    }
    return rec;
}

int driver_main(options &opt) {
    std::vector<sb::config> configs =
        sb::all_configs(opt.malloc_library.empty() ? default_malloc_library() : opt.malloc_library);
    std::set<std::string> chosen;
    std::vector<const sb::workload *> todo;
    std::map<std::string, std::string> set;
    try {
        configs = sb::with_extra_peers(std::move(configs), opt.peers,
                                       opt.strong_peers ? strong_peers_dir() : "");
        chosen = sb::select_configs(opt.allocators, configs);
        if (!opt.compare.empty()) {
            configs = sb::with_compare_build(configs, chosen, opt.compare);
            for (const sb::config &c : configs)
                if (c.name.ends_with("@base") && chosen.count(c.name.substr(0, c.name.size() - 5)))
                    chosen.insert(c.name);
        }
        if (opt.workloads.empty())
            for (const sb::workload &w : sb::all_workloads()) todo.push_back(&w);
        for (const std::string &n : opt.workloads) {
            const sb::workload *w = sb::find_workload(n);
            if (!w) {
                std::string known;
                for (const sb::workload &x : sb::all_workloads()) known += " " + x.name;
                throw std::runtime_error(fmt::format("no workload '{}' (workloads:{})", n, known));
            }
            todo.push_back(w);
        }
        for (const std::string &kv : opt.set) {
            const size_t dot = kv.find('.'), eq = kv.find('=');
            if (dot == std::string::npos || eq == std::string::npos || eq < dot)
                throw std::runtime_error(fmt::format(
                    "--set '{}': give WORKLOAD.PARAM=VALUE, e.g. netperf.sizes=64,1024", kv));
            const std::string wn = kv.substr(0, dot), pn = kv.substr(dot + 1, eq - dot - 1);
            const sb::workload *w = sb::find_workload(wn);
            if (!w) throw std::runtime_error(fmt::format("--set '{}': no workload '{}'", kv, wn));
            bool known = false;
            std::string names;
            for (const sb::param &p : w->params) {
                known |= p.name == pn;
                names += " " + p.name;
            }
            if (!known)
                throw std::runtime_error(fmt::format(
                    "--set '{}': {} has no parameter '{}' (it has:{})", kv, wn, pn, names));
            set[wn + "." + pn] = kv.substr(eq + 1);
        }
        if (!opt.baseline.empty() && !sb::find_config(configs, opt.baseline))
            throw std::runtime_error(
                fmt::format("--baseline: no configuration '{}'", opt.baseline));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "slabbench: %s\n", e.what());
        return 2;
    }
    const unsigned runs = opt.runs                       ? opt.runs
                          : opt.size == sb::scale::tiny  ? 1
                          : opt.size == sb::scale::quick ? 3
                                                         : 10;
    const double timeout_s = opt.timeout_s > 0             ? opt.timeout_s
                             : opt.size == sb::scale::full ? 900
                                                           : 180;
    char root_template[] = "/tmp/slabbench-XXXXXX";
    const char *root = mkdtemp(root_template);
    if (!root) {
        std::fprintf(stderr, "slabbench: cannot make a folder in /tmp: %s\n", std::strerror(errno));
        return 1;
    }

    // What runs, and what is skipped before anything starts.
    std::vector<sb::workload_outcome> outcomes;
    size_t total = 0;
    for (const sb::workload *w : todo) {
        sb::workload_outcome o;
        o.w = w;
        o.params = params_for(*w, opt.size, set);
        if (w->available) o.why = w->available();
        if (!o.why.empty()) o.status = "skipped";
        for (const sb::config &c : configs) {
            if (!(c.family & w->families) || !chosen.count(c.name)) continue;
            sb::config_status st{c.name, c.what, "ok", ""};
            if (!c.missing.empty()) st = {c.name, c.what, "skipped", c.missing};
            o.configs.push_back(st);
        }
        o.baseline = opt.baseline.empty() ? w->baseline : opt.baseline;
        bool have_base = false;
        for (const sb::config_status &c : o.configs)
            have_base |= c.name == o.baseline && c.status == "ok";
        if (!have_base)
            for (const sb::config_status &c : o.configs)
                if (c.status == "ok") {
                    o.baseline = c.name;
                    break;
                }
        if (o.status == "ok")
            for (const sb::config_status &c : o.configs) total += c.status == "ok" ? runs : 0;
        outcomes.push_back(std::move(o));
    }

    sb::kill_programs_on_interrupt();
    progress bar(opt.progress, total);
    bool our_failure = false, any_failure = false;
    std::printf("slabbench: %s scale, %u run%s per configuration; %% is better than the baseline "
                "(+: more throughput or less time or memory), ~ marks a difference within noise "
                "(Welch's t-test, p >= %g), ? one that cannot be tested (one run)\n\n",
                scale_name(opt.size), runs, runs == 1 ? "" : "s", sb::kNoiseLevel);
    std::fflush(stdout);
    for (sb::workload_outcome &o : outcomes) {
        if (o.status == "ok") {
            for (unsigned r = 0; r < runs; ++r) {
                for (sb::config_status &st : o.configs) {
                    if (st.status != "ok") continue;
                    const sb::config &cfg = *sb::find_config(configs, st.name);
                    bar.show(o.w->name, cfg.name, r, runs);
                    sb::run_record rec = run_once(opt, *o.w, cfg, o.params, r, timeout_s, root);
                    bar.step();
                    if (!rec.ok) {
                        st.status = "failed";
                        st.why = fmt::format("run {}: {}", r + 1, rec.error);
                        bar.add_total(-static_cast<long>(runs - r - 1));
                        any_failure = true;
                        our_failure |= sb::is_design_config(cfg.name);
                    }
                    o.runs.push_back(std::move(rec));
                }
            }
        }
        std::vector<std::string> order;
        for (const sb::config_status &c : o.configs) order.push_back(c.name);
        sb::summarize_outcome(o, order);
        bar.clear();
        std::printf("%s", sb::format_workload(o).c_str());
        if (opt.counters) std::printf("%s", sb::format_counters(o).c_str());
        std::fflush(stdout);
    }
    const std::vector<sb::target_outcome> targets = sb::evaluate_targets(outcomes);
    std::printf("%s", sb::format_summary(outcomes, targets).c_str());

    const sb::run_header header{opt.command, scale_name(opt.size), runs};
    const nlohmann::json machine = sb::describe_machine();
    const nlohmann::json all = sb::outcome_json(header, machine, outcomes, targets);
    std::string why;
    int status = (our_failure || (opt.strict && any_failure)) ? 1 : 0;
    auto write = [&](const std::string &path, const std::string &text) {
        if (!sb::write_file(path, text, why)) {
            std::fprintf(stderr, "slabbench: %s\n", why.c_str());
            status = 1;
        }
    };
    if (!opt.json.empty()) write(opt.json, all.dump(1) + "\n");
    if (!opt.csv.empty()) write(opt.csv, sb::outcome_csv(outcomes));
    if (!opt.report.empty()) {
        std::error_code ec;
        fs::create_directories(opt.report, ec);
        write(opt.report + "/results.json", all.dump(1) + "\n");
        write(opt.report + "/results.csv", sb::outcome_csv(outcomes));
        fs::path script = fs::path(sb::self_path()).parent_path() / "report.py";
        if (!fs::exists(script)) script = fs::path(SLABBENCH_TOOL_DIR) / "report.py";
        sb::program_spec spec;
        spec.argv = {"/usr/bin/python3", script.string(), opt.report + "/results.json", opt.report};
        spec.env = sb::config_environment(sb::config{});
        spec.timeout_s = 300;
        const sb::program_run pr = sb::run_program(spec);
        if (!pr.ok()) {
            std::fprintf(stderr, "slabbench: the report (%s) %s: %s\n", script.c_str(),
                         pr.how_it_ended(300).c_str(), sb::last_lines(pr.err, 5).c_str());
            status = 1;
        } else {
            std::printf("report: %s/index.html (plots, tables), %s/results.json, %s/results.csv\n",
                        opt.report.c_str(), opt.report.c_str(), opt.report.c_str());
        }
    }
    std::error_code ec;
    fs::remove_all(root, ec);
    return status;
}

std::string workload_list() {
    std::string out = "Workloads (each maps to a seed of ../shared/seeds; docs/slabbench.md):\n";
    for (const sb::workload &w : sb::all_workloads()) {
        out += fmt::format("  {:<10} {}\n", w.name, w.seed);
        std::string params;
        for (const sb::param &p : w.params) params += fmt::format(" {}", p.name);
        if (!params.empty())
            out +=
                fmt::format("  {:<10}   parameters (--set {}.NAME=VALUE):{}\n", "", w.name, params);
    }
    std::string designs, orders;
    for (const std::string &d : sb::design_names()) {
        designs += (designs.empty() ? "" : " ") + d;
        if (!sb::max_order_variable(d).empty()) orders += d + "-o0 ";
    }
    out += fmt::format("Allocator families for --allocators: designs ({}, kmem_cache API), "
                       "order ({}slqb-o3), slots (slqb-thread slqb-cpu), debug (<design>+debug), "
                       "malloc (<design>-malloc, preloaded), peers (glibc jemalloc tcmalloc "
                       "mimalloc, snmalloc mimalloc3 from build/peers, --peer), all.",
                       designs, orders);
    return out;
}

void print_details() {
    for (const sb::workload &w : sb::all_workloads()) {
        std::printf("%s: %s\n  maps to: %s\n  cannot: %s\n  baseline: %s\n", w.name.c_str(),
                    w.seed.c_str(), w.maps_to.c_str(), w.cannot.c_str(), w.baseline.c_str());
        for (const sb::param &p : w.params)
            std::printf("  %s: %s (tiny %s, quick %s, full %s)\n", p.name.c_str(), p.help.c_str(),
                        p.tiny.c_str(), p.quick.c_str(), p.full.c_str());
        std::printf("\n");
    }
    std::printf("Configurations:\n");
    for (const sb::config &c :
         sb::with_extra_peers(sb::all_configs(default_malloc_library()), {}, strong_peers_dir()))
        std::printf("  %-14s %s%s\n", c.name.c_str(), c.what.c_str(),
                    c.missing.empty() ? "" : fmt::format(" [not here: {}]", c.missing).c_str());
}

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"slabbench: the seeds' benchmarks (hackbench, netperf, volanoMark, sysbench OLTP, "
                 "kbuild, boot footprint) side by side for slabkit's designs (SLQB, SLUB, SLAB, "
                 "SLOB, sheaves) and glibc, jemalloc, tcmalloc and mimalloc. With no workload "
                 "named, runs a quick version of every one."};
    app.footer(workload_list());
    options opt;
    bool quick = false, full = false, tiny = false, list = false;
    app.add_option("workloads", opt.workloads, "workloads to run (default: all)");
    app.add_flag("--quick", quick, "short runs (the default)");
    app.add_flag("--full", full, "long runs, 10 of each (the seeds' tables)");
    app.add_flag("--tiny", tiny, "tiny runs: the correctness checks of the test command");
    app.add_option("--runs", opt.runs, "runs per configuration (default: tiny 1, quick 3, full 10)")
        ->check(CLI::Range(1u, 1000u));
    app.add_option("--allocators", opt.allocators,
                   "configurations or families to run, comma-separated (default: every one a "
                   "workload applies to)");
    app.add_option("--threads", opt.threads, "threads, for the workloads that take a count")
        ->check(CLI::Range(1u, 4096u));
    app.add_option("--baseline", opt.baseline,
                   "configuration the % columns compare against "
                   "(default: each workload's own, e.g. slub)");
    app.add_option("--set", opt.set, "a workload's parameter, WORKLOAD.NAME=VALUE (repeatable)");
    app.add_option("--json", opt.json, "write every run and the statistics as JSON");
    app.add_option("--csv", opt.csv, "write every value of every run as CSV");
    app.add_option("--report", opt.report,
                   "write results.json, results.csv, plots and index.html into this folder");
    app.add_option("--timeout", opt.timeout_s, "seconds one run may take (default 180, full 900)");
    app.add_option("--compare", opt.compare,
                   "another build folder of slabkit (e.g. an older commit's build/release): each "
                   "of slabkit's configurations also runs from there, as <name>@base, in the same "
                   "run (before and after)");
    app.add_option("--peer", opt.peers,
                   "another allocator's LD_PRELOAD library as a peer, NAME=LIBRARY (repeatable); "
                   "snmalloc and mimalloc 3 join the peers by themselves when "
                   "../shared/peers/build.sh built them into build/peers");
    bool no_strong_peers = false;
    app.add_flag("--no-strong-peers", no_strong_peers, "leave out the peers of build/peers");
    app.add_option("--malloc-library", opt.malloc_library,
                   "libslabkit-malloc.so (default: the one in this build)");
    bool no_progress = false;
    app.add_flag("--no-progress", no_progress, "no progress line on stderr");
    app.add_flag("--strict", opt.strict, "exit 1 if any configuration fails, peers included");
    app.add_flag("--counters", opt.counters,
                 "after each workload's table, the design's own statistics counters (SLQB's "
                 "FREE_REMOTE, SLUB's ALLOC_SLOWPATH, the sheaves' SHEAF_REFILL ...) per 1000 "
                 "allocations, averaged over the runs of slabkit's kmem_cache configurations "
                 "(also kept in the JSON as run notes \"counter:NAME\")");
    app.add_flag("--list", list, "describe every workload, its parameters and the configurations");
    // The worker's options (the driver starts them; not for users).
    std::string worker, api = "cache", expect, scale_arg = "quick";
    unsigned run = 0;
    std::vector<std::string> params;
    app.add_option("--worker", worker)->group("");
    app.add_option("--api", api)->group("");
    app.add_option("--expect-malloc", expect)->group("");
    app.add_option("--scale", scale_arg)->group("");
    app.add_option("--run", run)->group("");
    app.add_option("--param", params)->group("");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    if (!worker.empty()) {
        const sb::scale s = scale_arg == "tiny"   ? sb::scale::tiny
                            : scale_arg == "full" ? sb::scale::full
                                                  : sb::scale::quick;
        return worker_main(worker, api, expect, s, run, opt.threads, params, opt.counters);
    }
    if (list) {
        print_details();
        return 0;
    }
    if (quick + full + tiny > 1) {
        std::fprintf(stderr, "slabbench: give one of --tiny, --quick, --full\n");
        return 2;
    }
    opt.size = full ? sb::scale::full : tiny ? sb::scale::tiny : sb::scale::quick;
    opt.progress = !no_progress;
    opt.strong_peers = !no_strong_peers;
    for (int i = 0; i < argc; ++i) opt.command += (i ? " " : "") + std::string(argv[i]);
    return driver_main(opt);
}
