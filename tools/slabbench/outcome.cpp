// outcome.cpp - statistics per case, winners and targets (outcome.hpp).
#include "outcome.hpp"

#include "configs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace slabbench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool better_than(double a, double b, better dir) {
    return dir == better::higher ? a > b : a < b;
}

const case_row *best_of(const case_summary &c, bool designs_only) {
    const case_row *best = nullptr;
    for (const case_row &r : c.rows) {
        if (designs_only && !is_design_config(r.config)) continue;
        if (!best || better_than(r.s.avg, best->s.avg, c.dir)) best = &r;
    }
    return best;
}

} // namespace

bool is_design_config(const std::string &config) {
    for (const std::string &d : design_names())
        if (config.rfind(d, 0) == 0) return true;
    return false;
}

const case_row *case_summary::best() const {
    return best_of(*this, false);
}
const case_row *case_summary::best_design() const {
    return best_of(*this, true);
}

const case_row *case_summary::row(const std::string &config) const {
    for (const case_row &r : rows)
        if (r.config == config) return &r;
    return nullptr;
}

void summarize_outcome(workload_outcome &o, const std::vector<std::string> &order) {
    o.cases.clear();
    // Cases in the order the runs first report them; values per configuration.
    struct collected {
        std::string name, metric, unit;
        better dir;
        std::map<std::string, std::vector<double>> by_config;
    };
    std::vector<collected> cases;
    auto find = [&](const result::value &v) -> collected & {
        for (collected &c : cases)
            if (c.name == v.name && c.metric == v.metric) return c;
        cases.push_back({v.name, v.metric, v.unit, v.dir, {}});
        return cases.back();
    };
    for (const run_record &r : o.runs) {
        if (!r.ok) continue;
        for (const result::value &v : r.res.values) find(v).by_config[r.config].push_back(v.v);
    }
    for (const collected &c : cases) {
        case_summary cs{c.name, c.metric, c.unit, c.dir, o.baseline, {}};
        auto base_it = c.by_config.find(o.baseline);
        const std::vector<double> *base = base_it == c.by_config.end() ? nullptr : &base_it->second;
        const double base_avg = base ? summarize(*base).avg : kNaN;
        for (const std::string &name : order) {
            auto it = c.by_config.find(name);
            if (it == c.by_config.end()) continue;
            case_row row{name, summarize(it->second), it->second, kNaN, kNaN, -1};
            if (base && name != o.baseline) {
                row.pct = pct_better(row.s.avg, base_avg, c.dir);
                row.p = welch_p(it->second, *base);
                if (!std::isnan(row.p)) row.noise = row.p >= kNoiseLevel ? 1 : 0;
            }
            cs.rows.push_back(std::move(row));
        }
        o.cases.push_back(std::move(cs));
    }
}

namespace {

const workload_outcome *find_outcome(const std::vector<workload_outcome> &all, const char *name) {
    for (const workload_outcome &o : all)
        if (o.w && o.w->name == name && o.status == "ok") return &o;
    return nullptr;
}

// The average of a run note over a configuration's ok runs (NaN when none has it).
double note_avg(const workload_outcome &o, const std::string &config, const std::string &key) {
    double sum = 0;
    int n = 0;
    for (const run_record &r : o.runs) {
        if (!r.ok || r.config != config) continue;
        auto it = r.res.notes.find(key);
        if (it == r.res.notes.end()) continue;
        sum += it->second;
        ++n;
    }
    return n ? sum / n : kNaN;
}

// Which of the design's paths cost it, from the counters the workers note: the share of
// allocations and frees that took the slow path, SLQB beside the other design. A workload may
// note them over the target's cases alone (`<prefix>alloc_slow_pct`, micro's remote cases);
// otherwise they cover the whole run.
std::string slow_path_detail(const workload_outcome &o, const std::string &other,
                             const std::string &prefix) {
    auto counters = [&](const std::string &key_prefix, double v[4]) {
        v[0] = note_avg(o, "slqb", key_prefix + "alloc_slow_pct");
        v[1] = note_avg(o, "slqb", key_prefix + "free_slow_pct");
        v[2] = note_avg(o, other, key_prefix + "alloc_slow_pct");
        v[3] = note_avg(o, other, key_prefix + "free_slow_pct");
        return !std::isnan(v[0]) && !std::isnan(v[2]);
    };
    double v[4];
    std::string over = fmt::format(" over the {}* cases", prefix);
    if (prefix.empty() || !counters(prefix, v)) {
        over = "";
        if (!counters("", v)) return "";
    }
    const double qa = v[0], qf = v[1], oa = v[2], of = v[3];
    std::string where;
    if (qf - of > qa - oa && qf > of)
        where = "its free path";
    else if (qa > oa)
        where = "its allocation path";
    else
        where = "neither slow path more often (the cost is per object: the fast paths, and the "
                "work a batched slow path does for each object it moves)";
    return fmt::format("; slow paths{}: SLQB {:.1f}% of allocations and {:.1f}% of frees, {} "
                       "{:.1f}% and {:.1f}%: the cost is in {}",
                       over, qa, qf, other, oa, of, where);
}

// SLQB ahead of `other` on every case of `o` whose name starts with `prefix` ("" for all).
target_outcome ahead(const workload_outcome *o, const char *workload, const std::string &prefix,
                     const std::string &other) {
    target_outcome t;
    t.name = fmt::format("SLQB ahead of {} on {}{}", other == "slub" ? "SLUB" : "SLAB", workload,
                         prefix.empty() ? "" : fmt::format(" ({}*)", prefix));
    if (!o) {
        t.detail = fmt::format("{} was not run", workload);
        return t;
    }
    int cases = 0, wins = 0;
    std::string lost;
    for (const case_summary &c : o->cases) {
        if (!prefix.empty() && c.name.rfind(prefix, 0) != 0) continue;
        const case_row *q = c.row("slqb"), *x = c.row(other);
        if (!q || !x) continue;
        ++cases;
        if (better_than(q->s.avg, x->s.avg, c.dir)) {
            ++wins;
        } else {
            lost += fmt::format("{}{} ({:.4g} against {:.4g} {})", lost.empty() ? "" : ", ", c.name,
                                q->s.avg, x->s.avg, c.unit);
        }
    }
    if (cases == 0) {
        t.detail = fmt::format("no case of {} has both slqb and {}", workload, other);
        return t;
    }
    t.measured = true;
    t.met = wins == cases;
    t.detail = fmt::format("SLQB better in {} of {} cases", wins, cases);
    if (!lost.empty()) t.detail += "; behind in " + lost + slow_path_detail(*o, other, prefix);
    return t;
}

} // namespace

std::vector<target_outcome> evaluate_targets(const std::vector<workload_outcome> &all) {
    std::vector<target_outcome> out;
    const workload_outcome *boot = find_outcome(all, "boot");
    const case_summary *memory = nullptr;
    if (boot)
        for (const case_summary &c : boot->cases)
            if (c.name == "memory") memory = &c;
    auto row = [&](const char *cfg) { return memory ? memory->row(cfg) : nullptr; };
    {
        target_outcome t;
        t.name = "SLQB's boot footprint at most SLUB's";
        if (row("slqb") && row("slub")) {
            t.measured = true;
            t.met = row("slqb")->s.avg <= row("slub")->s.avg;
            t.detail = fmt::format("SLQB {:.0f} kB, SLUB {:.0f} kB (averages)", row("slqb")->s.avg,
                                   row("slub")->s.avg);
        } else {
            t.detail = "boot did not run with both slqb and slub";
        }
        out.push_back(t);
    }
    {
        target_outcome t;
        t.name = "SLQB's boot footprint within 10% of SLOB's";
        if (row("slqb") && row("slob")) {
            t.measured = true;
            const double over =
                (row("slqb")->s.avg - row("slob")->s.avg) / row("slob")->s.avg * 100;
            t.met = over <= 10;
            t.detail = fmt::format("SLQB {:.0f} kB, SLOB {:.0f} kB: {:+.1f}%", row("slqb")->s.avg,
                                   row("slob")->s.avg, over);
        } else {
            t.detail = "boot did not run with both slqb and slob";
        }
        out.push_back(t);
    }
    const workload_outcome *hack = find_outcome(all, "hackbench");
    const workload_outcome *micro = find_outcome(all, "micro");
    const workload_outcome *net = find_outcome(all, "netperf");
    for (const char *other : {"slub", "slab"}) {
        out.push_back(ahead(hack, "hackbench", "", other));
        out.push_back(ahead(micro, "micro", "remote/", other));
        out.push_back(ahead(net, "netperf", "stream64/", other));
    }
    return out;
}

} // namespace slabbench
