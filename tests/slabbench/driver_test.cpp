// driver_test.cpp - slabbench's driver: statistics, Welch's t-test, configurations, the runner,
// results as JSON, tables and targets (tools/slabbench).
#include "common.hpp"
#include "configs.hpp"
#include "outcome.hpp"
#include "output.hpp"
#include "runner.hpp"
#include "stats.hpp"
#include "tables.hpp"
#include "workload.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

extern char **environ;

namespace sb = slabbench;

namespace {

std::vector<std::string> our_env() {
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) env.emplace_back(*e);
    return env;
}

} // namespace

TEST(SlabbenchStats, SummaryOfASeries) {
    const sb::summary s = sb::summarize({4, 2, 6, 8});
    EXPECT_EQ(s.n, 4u);
    EXPECT_DOUBLE_EQ(s.min, 2);
    EXPECT_DOUBLE_EQ(s.max, 8);
    EXPECT_DOUBLE_EQ(s.avg, 5);
    EXPECT_NEAR(s.sd, std::sqrt(20.0 / 3), 1e-12); // the sample deviation (n - 1)
    EXPECT_EQ(sb::summarize({7}).sd, 0);
    EXPECT_EQ(sb::summarize({}).n, 0u);
}

TEST(SlabbenchStats, WelchMatchesScipy) {
    // scipy.stats.ttest_ind(a, b, equal_var=False).pvalue
    EXPECT_NEAR(sb::welch_p({1, 2, 3, 4, 5}, {2, 3, 4, 5, 9}), 0.2937254912355017, 1e-9);
    EXPECT_NEAR(sb::welch_p({10.1, 10.3, 9.9}, {12.0, 12.4, 11.8, 12.1}), 9.171200298350426e-05,
                1e-10);
    EXPECT_TRUE(std::isnan(sb::welch_p({1}, {1, 2})));
    EXPECT_EQ(sb::welch_p({3, 3}, {3, 3}), 1.0);
    EXPECT_EQ(sb::welch_p({3, 3}, {4, 4}), 0.0);
}

TEST(SlabbenchStats, PercentBetterFollowsTheDirection) {
    EXPECT_DOUBLE_EQ(sb::pct_better(110, 100, sb::better::higher), 10);
    EXPECT_DOUBLE_EQ(sb::pct_better(90, 100, sb::better::lower), 10);
    EXPECT_DOUBLE_EQ(sb::pct_better(120, 100, sb::better::lower), -20);
    EXPECT_TRUE(std::isnan(sb::pct_better(1, 0, sb::better::lower)));
}

TEST(SlabbenchResult, JsonRoundTrip) {
    sb::result r;
    r.add("stream/64", "throughput", "MB/s", sb::better::higher, 812.5);
    r.check("delivered", true, "10 of 10 messages");
    r.check("leaked", false, "3 objects live");
    r.note("peak_rss_kib", 5120);
    const sb::result back = sb::result::from_json(r.to_json());
    ASSERT_EQ(back.values.size(), 1u);
    EXPECT_EQ(back.values[0].name, "stream/64");
    EXPECT_EQ(back.values[0].dir, sb::better::higher);
    EXPECT_DOUBLE_EQ(back.values[0].v, 812.5);
    ASSERT_EQ(back.checks.size(), 2u);
    EXPECT_FALSE(back.checks[1].ok);
    EXPECT_FALSE(back.ok()); // a failed check fails the run
    EXPECT_DOUBLE_EQ(back.notes.at("peak_rss_kib"), 5120);
    EXPECT_THROW(sb::result::from_json("{\"values\": 3"), std::runtime_error);
    EXPECT_THROW(sb::result::from_json("{}"), std::runtime_error);
}

TEST(SlabbenchParams, TypedAccessNamesTheParameter) {
    sb::run_context ctx;
    ctx.params = {{"sizes", "64,1024,16384"}, {"loops", "12"}, {"bad", "12x"}, {"f", "0.25"}};
    EXPECT_EQ(ctx.get_ints("sizes"), (std::vector<long long>{64, 1024, 16384}));
    EXPECT_EQ(ctx.get_int("loops"), 12);
    EXPECT_DOUBLE_EQ(ctx.get_double("f"), 0.25);
    try {
        ctx.get_int("bad");
        FAIL() << "no throw";
    } catch (const std::runtime_error &e) {
        EXPECT_NE(std::string(e.what()).find("'bad'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(ctx.get("missing"), std::runtime_error);
}

TEST(SlabbenchConfigs, FamiliesAndNames) {
    const std::vector<sb::config> all = sb::all_configs("/nonexistent/libslabkit-malloc.so");
    const sb::config *slqb = sb::find_config(all, "slqb");
    ASSERT_NE(slqb, nullptr);
    EXPECT_FALSE(slqb->malloc_api);
    const sb::config *m = sb::find_config(all, "slub-malloc");
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(m->malloc_api);
    EXPECT_NE(m->missing.find("/nonexistent/libslabkit-malloc.so"), std::string::npos);
    EXPECT_NE(sb::find_config(all, "slub-o0"), nullptr);
    EXPECT_NE(sb::find_config(all, "slqb-cpu"), nullptr);
    EXPECT_NE(sb::find_config(all, "glibc"), nullptr);
    const auto peers = sb::select_configs("peers", all);
    EXPECT_EQ(peers, (std::set<std::string>{"glibc", "jemalloc", "tcmalloc", "mimalloc"}));
    const auto two = sb::select_configs("slqb,order", all);
    EXPECT_EQ(two, (std::set<std::string>{"slqb", "slub-o0", "slab-o0", "sheaves-o0", "slqb-o3"}));
    const sb::config *o3 = sb::find_config(all, "slqb-o3");
    ASSERT_NE(o3, nullptr);
    const std::vector<std::pair<std::string, std::string>> o3_env = {
        {"SLABKIT_ALLOCATOR", "slqb"}, {"SLABKIT_SLQB_MIN_ORDER", "3"}};
    EXPECT_EQ(o3->env, o3_env);
    // The sheaves sit on SLUB's slab layer: their order variant caps SLUB's order.
    const sb::config *sheaves_o0 = sb::find_config(all, "sheaves-o0");
    ASSERT_NE(sheaves_o0, nullptr);
    const std::vector<std::pair<std::string, std::string>> sheaves_o0_env = {
        {"SLABKIT_ALLOCATOR", "sheaves"}, {"SLABKIT_SLUB_MAX_ORDER", "0"}};
    EXPECT_EQ(sheaves_o0->env, sheaves_o0_env);
    try {
        sb::select_configs("slqb,hoard", all);
        FAIL() << "no throw";
    } catch (const std::runtime_error &e) {
        EXPECT_NE(std::string(e.what()).find("'hoard'"), std::string::npos) << e.what();
    }
}

// Every per-design configuration comes from the build's one list of designs (slabkit_designs()),
// the sheaves included, and is slabkit's own.
TEST(SlabbenchConfigs, EveryDesignHasItsConfigurations) {
    EXPECT_EQ(sb::design_names(),
              (std::vector<std::string>{"slqb", "slub", "slab", "slob", "sheaves"}));
    const std::vector<sb::config> all = sb::all_configs("/x/libslabkit-malloc.so");
    for (const std::string &d : sb::design_names()) {
        for (const std::string &name : {d, d + "+debug", d + "-malloc"}) {
            const sb::config *c = sb::find_config(all, name);
            ASSERT_NE(c, nullptr) << name;
            EXPECT_EQ(c->design, d) << name;
            EXPECT_EQ(c->env.front(), (std::pair<std::string, std::string>{"SLABKIT_ALLOCATOR", d}))
                << name;
            EXPECT_TRUE(sb::is_design_config(name)) << name;
        }
        EXPECT_EQ(sb::find_config(all, d + "-o0") != nullptr, !sb::max_order_variable(d).empty())
            << d;
    }
    EXPECT_EQ(sb::select_configs("designs", all),
              (std::set<std::string>{"slqb", "slub", "slab", "slob", "sheaves"}));
    const std::set<std::string> malloc = sb::select_configs("malloc", all);
    EXPECT_TRUE(malloc.count("sheaves-malloc"));
    EXPECT_EQ(malloc.size(), 5u);
    EXPECT_EQ(sb::find_config(all, "sheaves")->what,
              "Sheaves through the kmem_cache API and kmalloc");
    EXPECT_EQ(sb::find_config(all, "sheaves-malloc")->what,
              "Sheaves' malloc replacement, libslabkit-malloc.so preloaded");
    EXPECT_FALSE(sb::is_design_config("glibc"));
    EXPECT_FALSE(sb::is_design_config("mimalloc3"));
}

TEST(SlabbenchConfigs, CompareBuildAddsOurConfigurationsFromTheOtherBuild) {
    const std::vector<sb::config> all = sb::all_configs("/x/libslabkit-malloc.so");
    const std::vector<sb::config> both =
        sb::with_compare_build(all, {"slqb", "slqb-malloc", "glibc"}, "/nonexistent/build");
    EXPECT_EQ(both.size(), all.size() + 2); // the peers have no other build
    for (size_t i = 0; i + 1 < both.size(); ++i) {
        if (both[i].name != "slqb" && both[i].name != "slqb-malloc") continue;
        const sb::config &b = both[i + 1];
        EXPECT_EQ(b.name, both[i].name + "@base");
        EXPECT_EQ(b.worker, "/nonexistent/build/tools/slabbench/slabbench");
        EXPECT_NE(b.missing.find("/nonexistent/build/tools/slabbench/slabbench"),
                  std::string::npos);
        if (both[i].malloc_api) {
            EXPECT_EQ(b.preload, "/nonexistent/build/libslabkit-malloc.so");
        }
    }
    EXPECT_EQ(sb::find_config(both, "glibc@base"), nullptr);
}

TEST(SlabbenchConfigs, ExtraPeersJoinThePeersAndBadOnesAreNamed) {
    const std::vector<sb::config> all = sb::all_configs("/x/libslabkit-malloc.so");
    // A folder with one of the strong peers' libraries (any readable file stands in).
    char dir[] = "/tmp/slabbench-peers-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string snmalloc = std::string(dir) + "/libsnmalloc.so";
    std::fclose(std::fopen(snmalloc.c_str(), "w"));

    std::vector<sb::config> with = sb::with_extra_peers(all, {"mine=/bin/true"}, dir);
    ASSERT_EQ(with.size(), all.size() + 2); // mimalloc 3 is not in the folder
    const sb::config *sn = sb::find_config(with, "snmalloc");
    ASSERT_NE(sn, nullptr);
    EXPECT_EQ(sn->preload, snmalloc);
    EXPECT_TRUE(sn->malloc_api);
    EXPECT_TRUE(sn->design.empty());
    EXPECT_EQ(sb::find_config(with, "mimalloc3"), nullptr);
    const sb::config *mine = sb::find_config(with, "mine");
    ASSERT_NE(mine, nullptr);
    EXPECT_EQ(mine->preload, "/bin/true");
    // Both are peers: the family selects them.
    const std::set<std::string> peers = sb::select_configs("peers", with);
    EXPECT_TRUE(peers.count("snmalloc") && peers.count("mine") && peers.count("glibc"));
    // A --peer of a strong peer's name replaces the folder's library.
    with = sb::with_extra_peers(all, {"snmalloc=/bin/true"}, dir);
    ASSERT_NE(sb::find_config(with, "snmalloc"), nullptr);
    EXPECT_EQ(sb::find_config(with, "snmalloc")->preload, "/bin/true");
    EXPECT_EQ(with.size(), all.size() + 1);
    // No folder: no strong peers.
    EXPECT_EQ(sb::with_extra_peers(all, {}, "").size(), all.size());

    auto error_of = [&all](const std::string &spec) {
        try {
            sb::with_extra_peers(all, {spec}, "");
        } catch (const std::runtime_error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(error_of("noequals").find("expected NAME=LIBRARY"), std::string::npos);
    EXPECT_NE(error_of("=/bin/true").find("expected NAME=LIBRARY"), std::string::npos);
    EXPECT_NE(error_of("x=").find("expected NAME=LIBRARY"), std::string::npos);
    EXPECT_NE(error_of("x=/no/such/lib.so").find("/no/such/lib.so is not a file"),
              std::string::npos);
    EXPECT_NE(error_of("x=/tmp").find("/tmp is not a file"), std::string::npos);
    EXPECT_NE(error_of("glibc=/bin/true").find("the name glibc is taken"), std::string::npos);
    EXPECT_NE(error_of("slqb-malloc=/bin/true").find("is taken"), std::string::npos);
    std::remove(snmalloc.c_str());
    rmdir(dir);
}

TEST(SlabbenchConfigs, EnvironmentDropsWhatWouldChangeTheMeasurement) {
    setenv("SLABKIT_DEBUG", "1", 1);
    setenv("LD_PRELOAD", "/x.so", 1);
    sb::config c;
    c.preload = "/y.so";
    c.env = {{"SLABKIT_ALLOCATOR", "slub"}};
    const std::vector<std::string> env = sb::config_environment(c);
    unsetenv("SLABKIT_DEBUG");
    unsetenv("LD_PRELOAD");
    int preloads = 0;
    for (const std::string &e : env) {
        EXPECT_NE(e, "SLABKIT_DEBUG=1");
        EXPECT_NE(e, "LD_PRELOAD=/x.so");
        preloads += e.rfind("LD_PRELOAD=", 0) == 0;
    }
    EXPECT_EQ(preloads, 1);
    EXPECT_NE(std::find(env.begin(), env.end(), "LD_PRELOAD=/y.so"), env.end());
    EXPECT_NE(std::find(env.begin(), env.end(), "SLABKIT_ALLOCATOR=slub"), env.end());
}

TEST(SlabbenchRunner, CapturesOutputsStatusAndResult) {
    sb::program_spec spec;
    spec.argv = {"/bin/sh", "-c", "echo out; echo err >&2; echo '{\"r\":1}' >&3; exit 3"};
    spec.env = our_env();
    spec.result_fd = true;
    const sb::program_run r = sb::run_program(spec);
    EXPECT_TRUE(r.started);
    EXPECT_EQ(r.status, 3);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.out, "out\n");
    EXPECT_EQ(r.err, "err\n");
    EXPECT_EQ(r.result, "{\"r\":1}\n");
    EXPECT_EQ(r.how_it_ended(1), "exit status 3");
}

TEST(SlabbenchRunner, TimeLimitKillsTheProgramAndItsChildren) {
    sb::program_spec spec;
    spec.argv = {"/bin/sh", "-c", "sleep 30 & sleep 30; echo never"};
    spec.env = our_env();
    spec.timeout_s = 0.3;
    const sb::program_run r = sb::run_program(spec);
    EXPECT_TRUE(r.timed_out);
    EXPECT_LT(r.wall_s, 10); // the child sleep holding the pipe did not keep it waiting
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.how_it_ended(0.3).find("timed out"), std::string::npos);
}

TEST(SlabbenchRunner, SignalsAndMissingProgramsAreReported) {
    sb::program_spec spec;
    spec.argv = {"/bin/sh", "-c", "kill -SEGV $$"};
    spec.env = our_env();
    const sb::program_run r = sb::run_program(spec);
    EXPECT_EQ(r.signal, 11);
    EXPECT_NE(r.how_it_ended(1).find("signal 11"), std::string::npos);
    spec.argv = {"no-such-program-slabbench"};
    const sb::program_run m = sb::run_program(spec);
    EXPECT_FALSE(m.started);
    EXPECT_NE(m.error.find("no-such-program-slabbench"), std::string::npos);
}

namespace {

sb::workload fake_workload(const std::string &name) {
    sb::workload w;
    w.name = name;
    w.seed = "seed 000";
    return w;
}

sb::run_record fake_run(const std::string &config, unsigned run, const std::string &c, double v,
                        sb::better dir = sb::better::lower) {
    sb::run_record r;
    r.config = config;
    r.run = run;
    r.ok = true;
    r.res.add(c, "time", "s", dir, v);
    return r;
}

} // namespace

TEST(SlabbenchOutcome, BaselineNoiseAndFailedRuns) {
    const sb::workload w = fake_workload("hackbench");
    sb::workload_outcome o;
    o.w = &w;
    o.baseline = "slub";
    o.configs = {{"slqb", "", "ok", ""}, {"slub", "", "ok", ""}, {"glibc", "", "ok", ""}};
    for (unsigned i = 0; i < 3; ++i) {
        o.runs.push_back(fake_run("slub", i, "groups/1", 10.0 + i * 0.1));
        o.runs.push_back(fake_run("slqb", i, "groups/1", 8.0 + i * 0.1));  // clearly better
        o.runs.push_back(fake_run("glibc", i, "groups/1", 9.9 + i * 0.2)); // within noise
    }
    sb::run_record failed = fake_run("glibc", 3, "groups/1", 1000);
    failed.ok = false; // a failed run's values are not counted
    o.runs.push_back(failed);
    sb::summarize_outcome(o, {"slqb", "slub", "glibc"});
    ASSERT_EQ(o.cases.size(), 1u);
    const sb::case_summary &c = o.cases[0];
    ASSERT_EQ(c.rows.size(), 3u);
    const sb::case_row *q = c.row("slqb");
    EXPECT_NEAR(q->pct, 100.0 * (10.1 - 8.1) / 10.1, 1e-9);
    EXPECT_EQ(q->noise, 0);
    EXPECT_EQ(c.row("glibc")->s.n, 3u);
    EXPECT_EQ(c.row("glibc")->noise, 1);
    EXPECT_TRUE(std::isnan(c.row("slub")->pct));
    EXPECT_EQ(c.best()->config, "slqb");
    const std::string table = sb::format_workload(o);
    EXPECT_NE(table.find("(base)"), std::string::npos) << table;
    EXPECT_NE(table.find("~"), std::string::npos) << table;
    EXPECT_NE(table.find("+19.8%"), std::string::npos) << table;
}

TEST(SlabbenchOutcome, TargetsSayWhatTheyMeasured) {
    const sb::workload boot = fake_workload("boot"), hack = fake_workload("hackbench");
    sb::workload_outcome b;
    b.w = &boot;
    b.baseline = "slub";
    b.configs = {{"slqb", "", "ok", ""}, {"slub", "", "ok", ""}, {"slob", "", "ok", ""}};
    b.runs = {fake_run("slqb", 0, "memory", 2600), fake_run("slub", 0, "memory", 2658),
              fake_run("slob", 0, "memory", 2300)};
    sb::summarize_outcome(b, {"slqb", "slub", "slob"});
    sb::workload_outcome h;
    h.w = &hack;
    h.baseline = "slub";
    h.configs = {{"slqb", "", "ok", ""}, {"slub", "", "ok", ""}};
    h.runs = {fake_run("slqb", 0, "groups/1", 3.0), fake_run("slub", 0, "groups/1", 2.0)};
    h.runs[0].res.note("alloc_slow_pct", 1.0);
    h.runs[0].res.note("free_slow_pct", 40.0);
    h.runs[1].res.note("alloc_slow_pct", 2.0);
    h.runs[1].res.note("free_slow_pct", 5.0);
    sb::summarize_outcome(h, {"slqb", "slub"});
    // micro's remote cases, with counters over those cases beside the whole run's: the target
    // names the cases' own.
    const sb::workload micro = fake_workload("micro");
    sb::workload_outcome m;
    m.w = &micro;
    m.baseline = "slub";
    m.configs = {{"slqb", "", "ok", ""}, {"slab", "", "ok", ""}};
    m.runs = {fake_run("slqb", 0, "remote/64", 10.0, sb::better::higher),
              fake_run("slab", 0, "remote/64", 20.0, sb::better::higher)};
    m.runs[0].res.note("alloc_slow_pct", 30.0); // the batches' slabs, in the whole run
    m.runs[0].res.note("free_slow_pct", 1.0);
    m.runs[0].res.note("remote/alloc_slow_pct", 0.2);
    m.runs[0].res.note("remote/free_slow_pct", 0.4);
    m.runs[1].res.note("alloc_slow_pct", 5.0);
    m.runs[1].res.note("free_slow_pct", 2.0);
    m.runs[1].res.note("remote/alloc_slow_pct", 1.5);
    m.runs[1].res.note("remote/free_slow_pct", 1.6);
    sb::summarize_outcome(m, {"slqb", "slab"});
    const std::vector<sb::target_outcome> t = sb::evaluate_targets({b, h, m});
    ASSERT_GE(t.size(), 8u);
    EXPECT_TRUE(t[0].measured);
    EXPECT_TRUE(t[0].met) << t[0].detail;  // 2600 <= 2658
    EXPECT_FALSE(t[1].met) << t[1].detail; // 2600 is 13% over 2300
    EXPECT_NE(t[1].detail.find("+13.0%"), std::string::npos) << t[1].detail;
    EXPECT_EQ(t[2].name, "SLQB ahead of SLUB on hackbench");
    EXPECT_TRUE(t[2].measured);
    EXPECT_FALSE(t[2].met);
    EXPECT_NE(t[2].detail.find("free path"), std::string::npos) << t[2].detail;
    EXPECT_EQ(t[3].name, "SLQB ahead of SLUB on micro (remote/*)");
    EXPECT_FALSE(t[3].measured); // no slub in micro
    EXPECT_EQ(t[4].name, "SLQB ahead of SLUB on netperf (stream64/*)");
    EXPECT_FALSE(t[4].measured); // netperf did not run
    EXPECT_EQ(t[6].name, "SLQB ahead of SLAB on micro (remote/*)");
    EXPECT_TRUE(t[6].measured);
    EXPECT_FALSE(t[6].met);
    EXPECT_NE(t[6].detail.find("over the remote/* cases: SLQB 0.2% of allocations and 0.4% of "
                               "frees, slab 1.5% and 1.6%"),
              std::string::npos)
        << t[6].detail;
    EXPECT_NE(t[6].detail.find("neither slow path"), std::string::npos) << t[6].detail;
    const std::string s = sb::format_summary({b, h}, t);
    EXPECT_NE(s.find("[not met]"), std::string::npos) << s;
    EXPECT_NE(s.find("[not run]"), std::string::npos) << s;
}

// --counters: the workers' "counter:" notes as a table per 1000 allocations, a column per
// configuration that noted them, "-" where a design has no such counter.
TEST(SlabbenchOutput, CountersTablePerThousandAllocations) {
    const sb::workload w = fake_workload("hackbench");
    sb::workload_outcome o;
    o.w = &w;
    o.baseline = "slub";
    o.configs = {{"slub", "", "ok", ""}, {"sheaves", "", "ok", ""}, {"glibc", "", "ok", ""}};
    for (unsigned i = 0; i < 2; ++i) {
        sb::run_record a = fake_run("slub", i, "groups/1", 1.0);
        a.res.note(sb::kCounterAllocsNote, 10000);
        a.res.note(sb::kCounterNote + "ALLOC_SLOWPATH", 200 + 100 * i); // 25 per 1000 on average
        sb::run_record b = fake_run("sheaves", i, "groups/1", 1.0);
        b.res.note(sb::kCounterAllocsNote, 20000);
        b.res.note(sb::kCounterNote + "SHEAF_REFILL", 500);
        o.runs.push_back(a);
        o.runs.push_back(b);
        o.runs.push_back(fake_run("glibc", i, "groups/1", 1.0)); // no counters: no column
    }
    sb::summarize_outcome(o, {"slub", "sheaves", "glibc"});
    const std::string t = sb::format_counters(o);
    EXPECT_NE(t.find("hackbench counters: per 1000 allocations"), std::string::npos) << t;
    EXPECT_EQ(t.find("glibc"), std::string::npos) << t;
    auto row = [&t](const std::string &name) {
        const size_t at = t.find("  " + name + " ");
        return at == std::string::npos ? std::string() : t.substr(at, t.find('\n', at) - at);
    };
    EXPECT_NE(row("allocations").find("10000"), std::string::npos) << t;
    EXPECT_NE(row("allocations").find("20000"), std::string::npos) << t;
    const std::string slow = row("ALLOC_SLOWPATH"), refill = row("SHEAF_REFILL");
    EXPECT_NE(slow.find("25.00"), std::string::npos) << t;
    EXPECT_LT(slow.find("25.00"), slow.find('-')) << t; // slub's column, then none for sheaves
    EXPECT_NE(refill.find("25.00"), std::string::npos) << t;
    EXPECT_LT(refill.find('-'), refill.find("25.00")) << t;
    sb::workload_outcome none = o;
    for (sb::run_record &r : none.runs) r.res.notes.clear();
    EXPECT_EQ(sb::format_counters(none), "");
}

TEST(SlabbenchOutput, CsvQuotesAndJsonCarriesEverything) {
    const sb::workload w = fake_workload("oltp");
    sb::workload_outcome o;
    o.w = &w;
    o.baseline = "glibc";
    o.configs = {{"glibc", "", "ok", ""}, {"jemalloc", "", "skipped", "not installed"}};
    o.runs = {fake_run("glibc", 0, "read,write", 1.5)};
    sb::summarize_outcome(o, {"glibc", "jemalloc"});
    const std::string csv = sb::outcome_csv({o});
    EXPECT_NE(csv.find("oltp,\"read,write\",time,s,lower,glibc,0,1.5\n"), std::string::npos) << csv;
    const nlohmann::json j =
        sb::outcome_json({"slabbench oltp", "tiny", 1}, nlohmann::json::object(), {o}, {});
    EXPECT_EQ(j["slabbench"], 1);
    EXPECT_EQ(j["designs"], nlohmann::json(sb::design_names())); // the report's design list
    EXPECT_EQ(j["workloads"][0]["configs"][1]["status"], "skipped");
    EXPECT_EQ(j["workloads"][0]["summary"][0]["rows"][0]["avg"], 1.5);
    EXPECT_TRUE(j["workloads"][0]["summary"][0]["rows"][0]["pct"].is_null());
}

// A thread pins itself among the CPUs the process started with, not among the ones it inherited:
// micro pins its main thread to CPU 0 before it starts the remote case's two threads.
TEST(SlabbenchPinning, ThreadsOfAPinnedCreatorStillReachEveryCpu) {
    if (sb::allowed_cpus() < 2) GTEST_SKIP() << "one CPU: nothing to tell apart";
    cpu_set_t before;
    ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
    int cpu[2] = {-1, -1};
    std::thread([&] {
        ASSERT_TRUE(sb::pin_to_cpu(0)); // the creator, pinned as micro's main thread is
        for (unsigned n : {0u, 1u})
            std::thread([&cpu, n] {
                ASSERT_TRUE(sb::pin_to_cpu(n));
                cpu[n] = sched_getcpu();
            }).join();
    }).join();
    EXPECT_NE(cpu[0], -1);
    EXPECT_NE(cpu[1], -1);
    EXPECT_NE(cpu[0], cpu[1]);
    // This thread's own mask is untouched (the pinning happened in the threads above).
    cpu_set_t after;
    ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

TEST(SlabbenchRegistry, EveryWorkloadIsDescribed) {
    for (const char *name :
         {"hackbench", "netperf", "volano", "oltp", "kbuild", "boot", "micro", "pages"}) {
        const sb::workload *w = sb::find_workload(name);
        ASSERT_NE(w, nullptr) << name;
        EXPECT_FALSE(w->seed.empty()) << name;
        EXPECT_FALSE(w->maps_to.empty()) << name;
        EXPECT_FALSE(w->cannot.empty()) << name;
        EXPECT_TRUE(w->run || w->run_external) << name;
        for (const sb::param &p : w->params) EXPECT_FALSE(p.help.empty()) << name << "." << p.name;
    }
}
