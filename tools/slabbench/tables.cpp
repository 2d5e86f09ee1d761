// tables.cpp - printing the tables (tables.hpp).
#include "tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace slabbench {

std::string short_number(double v) {
    if (std::isnan(v)) return "-";
    const double a = std::fabs(v);
    if (a >= 1e6) return fmt::format("{:.4g}", v);
    if (a >= 1000) return fmt::format("{:.0f}", v);
    if (a >= 100) return fmt::format("{:.1f}", v);
    if (a >= 10) return fmt::format("{:.2f}", v);
    if (a >= 1 || a == 0) return fmt::format("{:.3f}", v);
    return fmt::format("{:.3g}", v);
}

namespace {

std::string pct_text(double pct) {
    if (std::isnan(pct)) return "";
    return fmt::format("{:+.1f}%", pct);
}

// "~" within noise; "" a real difference; "?" when it cannot be told (one run).
const char *noise_mark(int noise) {
    return noise == 1 ? "~" : noise == 0 ? "" : "?";
}

std::string direction(const case_summary &c) {
    return fmt::format("{} ({}), {} is better", c.metric, c.unit,
                       c.dir == better::higher ? "higher" : "lower");
}

std::string status_lines(const workload_outcome &o) {
    std::string out;
    for (const config_status &c : o.configs)
        if (c.status != "ok") out += fmt::format("  {} {}: {}\n", c.name, c.status, c.why);
    return out;
}

std::string by_config(const workload_outcome &o) {
    std::string out;
    size_t width = 8;
    for (const config_status &c : o.configs) width = std::max(width, c.name.size());
    for (const case_summary &c : o.cases) {
        out += fmt::format("{} {}: {}; % against {}, ~ within noise\n", o.w->name, c.name,
                           direction(c), c.baseline);
        out += fmt::format("  {:<{}} {:>3} {:>10} {:>10} {:>10} {:>9} {:>8} {}\n", "config", width,
                           "n", "min", "max", "avg", "sd", "%", "");
        for (const case_row &r : c.rows)
            out += fmt::format("  {:<{}} {:>3} {:>10} {:>10} {:>10} {:>9} {:>8} {}\n", r.config,
                               width, r.s.n, short_number(r.s.min), short_number(r.s.max),
                               short_number(r.s.avg), short_number(r.s.sd), pct_text(r.pct),
                               r.config == c.baseline ? "(base)" : noise_mark(r.noise));
        out += "\n";
    }
    return out;
}

// A sweep: a row per case, a column per configuration; first the averages, then the change
// against the baseline with the noise marks.
std::string matrix(const workload_outcome &o) {
    std::string out;
    std::vector<std::string> cols;
    for (const config_status &c : o.configs)
        if (c.status == "ok") cols.push_back(c.name);
    size_t first = 6;
    for (const case_summary &c : o.cases) first = std::max(first, c.name.size());
    // Cases of one metric share a table.
    std::vector<std::string> metrics;
    for (const case_summary &c : o.cases)
        if (std::find(metrics.begin(), metrics.end(), c.metric + "|" + c.unit) == metrics.end())
            metrics.push_back(c.metric + "|" + c.unit);
    for (const std::string &m : metrics) {
        const case_summary *any = nullptr;
        for (const case_summary &c : o.cases)
            if (c.metric + "|" + c.unit == m) any = &c;
        out += fmt::format("{}: {}, averages of the runs; then % against {}, ~ within noise\n",
                           o.w->name, direction(*any), any->baseline);
        std::string head = fmt::format("  {:<{}}", "case", first);
        for (const std::string &col : cols) head += fmt::format(" {:>10}", col.substr(0, 10));
        for (int part = 0; part < 2; ++part) {
            out += head + "\n";
            for (const case_summary &c : o.cases) {
                if (c.metric + "|" + c.unit != m) continue;
                std::string line = fmt::format("  {:<{}}", c.name, first);
                for (const std::string &col : cols) {
                    const case_row *r = c.row(col);
                    // Built by a return, not assigned: g++ 12 at -O3 warns (-Wrestrict, a
                    // false positive) on the assignment of a literal to a string here.
                    auto cell_text = [&]() -> std::string {
                        if (!r) return "-";
                        if (part == 0) return short_number(r->s.avg);
                        if (col == c.baseline) return "base";
                        return pct_text(r->pct) + noise_mark(r->noise);
                    };
                    line += fmt::format(" {:>10}", cell_text());
                }
                out += line + "\n";
            }
            out += "\n";
        }
    }
    return out;
}

} // namespace

std::string format_workload(const workload_outcome &o) {
    std::string out = fmt::format("== {}: {} ==\n", o.w->name, o.w->seed);
    if (o.status != "ok") return out + fmt::format("  skipped: {}\n\n", o.why);
    const std::string status = status_lines(o);
    if (!status.empty()) out += status + "\n";
    if (o.cases.empty()) return out + "  no configuration completed a run\n\n";
    out += o.w->shape == layout::matrix ? matrix(o) : by_config(o);
    return out;
}

std::string format_counters(const workload_outcome &o) {
    // Per configuration, the sums over its ok runs and the runs counted.
    std::vector<std::string> cols, rows;
    std::map<std::string, std::map<std::string, double>> sum;
    std::map<std::string, int> runs;
    for (const config_status &c : o.configs)
        for (const run_record &r : o.runs) {
            if (r.config != c.name || !r.ok || !r.res.notes.count(kCounterAllocsNote)) continue;
            if (!runs.count(c.name)) cols.push_back(c.name);
            ++runs[c.name];
            for (const auto &[k, v] : r.res.notes) {
                if (k.rfind(kCounterNote, 0) != 0 || k == kCounterAllocsNote) continue;
                const std::string name = k.substr(kCounterNote.size());
                if (std::find(rows.begin(), rows.end(), name) == rows.end()) rows.push_back(name);
                sum[c.name][name] += v;
            }
            sum[c.name][""] += r.res.notes.at(kCounterAllocsNote);
        }
    if (cols.empty()) return "";
    std::sort(rows.begin(), rows.end());
    size_t first = 12;
    for (const std::string &r : rows) first = std::max(first, r.size());
    std::string out = fmt::format(
        "{} counters: per 1000 allocations, averages of the runs (- none); allocations per run "
        "first\n",
        o.w->name);
    std::string head = fmt::format("  {:<{}}", "counter", first);
    for (const std::string &c : cols) head += fmt::format(" {:>14}", c.substr(0, 14));
    out += head + "\n";
    auto line = [&](const std::string &label, const std::string &key, bool per_alloc) {
        std::string l = fmt::format("  {:<{}}", label, first);
        for (const std::string &c : cols) {
            const auto &m = sum[c];
            auto it = m.find(key);
            const double allocs = m.count("") ? m.at("") : 0;
            std::string cell = "-";
            if (it != m.end() && it->second > 0)
                cell = per_alloc ? (allocs > 0 ? short_number(it->second / allocs * 1000) : "-")
                                 : short_number(it->second / runs[c]);
            l += fmt::format(" {:>14}", cell);
        }
        out += l + "\n";
    };
    line("allocations", "", false);
    for (const std::string &r : rows) line(r, r, true);
    return out + "\n";
}

std::string format_summary(const std::vector<workload_outcome> &all,
                           const std::vector<target_outcome> &targets) {
    std::string out = "== Who won ==\n";
    out += fmt::format("  {:<10} {:>5}  {:<34} {:<34}\n", "workload", "cases",
                       "best configuration (cases won)", "best design (cases won)");
    for (const workload_outcome &o : all) {
        if (o.status != "ok" || o.cases.empty()) continue;
        std::map<std::string, int> best, design;
        for (const case_summary &c : o.cases) {
            if (const case_row *r = c.best()) ++best[r->config];
            if (const case_row *r = c.best_design()) ++design[r->config];
        }
        auto top = [](const std::map<std::string, int> &m) {
            std::vector<std::pair<int, std::string>> v;
            for (const auto &[k, n] : m) v.push_back({-n, k});
            std::sort(v.begin(), v.end());
            std::string s;
            for (size_t i = 0; i < v.size() && i < 3; ++i)
                s += fmt::format("{}{} ({})", i ? ", " : "", v[i].second, -v[i].first);
            return s;
        };
        out += fmt::format("  {:<10} {:>5}  {:<34} {:<34}\n", o.w->name, o.cases.size(), top(best),
                           top(design));
    }
    out += "\n== Targets ==\n";
    for (const target_outcome &t : targets)
        out += fmt::format("  [{}] {}: {}\n",
                           !t.measured ? "not run"
                           : t.met     ? "met"
                                       : "not met",
                           t.name, t.detail);
    return out + "\n";
}

} // namespace slabbench
