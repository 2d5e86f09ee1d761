// output.cpp - the machine's description, JSON and CSV (output.hpp).
#include "output.hpp"

#include "configs.hpp"
#include "runner.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

extern char **environ;

namespace slabbench {

namespace {

std::string first_line_with(const char *path, const char *key) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key, 0) == 0) {
            const size_t at = line.find_first_of(":=");
            std::string v = at == std::string::npos ? "" : line.substr(at + 1);
            while (!v.empty() && (v.front() == ' ' || v.front() == '\t' || v.front() == '"'))
                v.erase(0, 1);
            while (!v.empty() && (v.back() == '"' || v.back() == ' ')) v.pop_back();
            return v;
        }
    return "";
}

nlohmann::json number(double v) {
    return std::isnan(v) ? nlohmann::json() : nlohmann::json(v);
}

std::string csv_field(const std::string &s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

} // namespace

nlohmann::json describe_machine() {
    nlohmann::json m;
    m["cpu"] = first_line_with("/proc/cpuinfo", "model name");
    m["cpu_family"] = first_line_with("/proc/cpuinfo", "cpu family");
    m["cpu_mhz"] = first_line_with("/proc/cpuinfo", "cpu MHz");
    m["cpus"] = sysconf(_SC_NPROCESSORS_ONLN);
    const std::string mem = first_line_with("/proc/meminfo", "MemTotal");
    m["memory_kib"] = std::strtoull(mem.c_str(), nullptr, 10);
    utsname u{};
    if (uname(&u) == 0) {
        m["kernel"] = std::string(u.release);
        m["host"] = std::string(u.nodename);
        m["arch"] = std::string(u.machine);
    }
    m["os"] = first_line_with("/etc/os-release", "PRETTY_NAME");
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    m["date"] = date;
    program_spec git;
    git.argv = {"git", "-C", SLABBENCH_REPO_DIR, "rev-parse", "--short", "HEAD"};
    for (char **e = environ; e && *e; ++e) git.env.emplace_back(*e);
    git.timeout_s = 10;
    const program_run r = run_program(git);
    std::string commit = r.ok() ? r.out : "";
    while (!commit.empty() && (commit.back() == '\n' || commit.back() == ' ')) commit.pop_back();
    m["commit"] = commit;
    return m;
}

nlohmann::json outcome_json(const run_header &h, const nlohmann::json &machine,
                            const std::vector<workload_outcome> &all,
                            const std::vector<target_outcome> &targets) {
    nlohmann::json j;
    j["slabbench"] = 1;
    j["machine"] = machine;
    j["command"] = h.command;
    j["scale"] = h.scale;
    j["runs"] = h.runs;
    j["designs"] = design_names(); // slabkit's designs: the report's configurations of its own
    j["noise_test"] =
        fmt::format("Welch's t-test, two-sided, p >= {:g} is within noise", kNoiseLevel);
    j["workloads"] = nlohmann::json::array();
    for (const workload_outcome &o : all) {
        nlohmann::json w;
        w["name"] = o.w->name;
        w["seed"] = o.w->seed;
        w["maps_to"] = o.w->maps_to;
        w["cannot"] = o.w->cannot;
        w["baseline"] = o.baseline;
        w["layout"] = o.w->shape == layout::matrix ? "matrix" : "by_config";
        w["params"] = o.params;
        w["status"] = o.status;
        w["why"] = o.why;
        w["configs"] = nlohmann::json::array();
        for (const config_status &c : o.configs)
            w["configs"].push_back(
                {{"name", c.name}, {"what", c.what}, {"status", c.status}, {"why", c.why}});
        w["runs"] = nlohmann::json::array();
        for (const run_record &r : o.runs) {
            nlohmann::json run = nlohmann::json::parse(r.res.to_json());
            run["config"] = r.config;
            run["run"] = r.run;
            run["ok"] = r.ok;
            run["error"] = r.error;
            run["wall_s"] = r.wall_s;
            w["runs"].push_back(run);
        }
        w["summary"] = nlohmann::json::array();
        w["winner"] = nlohmann::json::array();
        for (const case_summary &c : o.cases) {
            nlohmann::json cs;
            cs["case"] = c.name;
            cs["metric"] = c.metric;
            cs["unit"] = c.unit;
            cs["better"] = c.dir == better::higher ? "higher" : "lower";
            cs["baseline"] = c.baseline;
            cs["rows"] = nlohmann::json::array();
            for (const case_row &r : c.rows)
                cs["rows"].push_back(
                    {{"config", r.config},
                     {"n", r.s.n},
                     {"min", r.s.min},
                     {"max", r.s.max},
                     {"avg", r.s.avg},
                     {"sd", r.s.sd},
                     {"pct", number(r.pct)},
                     {"p", number(r.p)},
                     {"noise", r.noise < 0 ? nlohmann::json() : nlohmann::json(r.noise == 1)},
                     {"values", r.values}});
            w["summary"].push_back(cs);
            const case_row *b = c.best(), *d = c.best_design();
            w["winner"].push_back(
                {{"case", c.name}, {"config", b ? b->config : ""}, {"design", d ? d->config : ""}});
        }
        j["workloads"].push_back(w);
    }
    j["targets"] = nlohmann::json::array();
    for (const target_outcome &t : targets)
        j["targets"].push_back(
            {{"name", t.name}, {"met", t.met}, {"measured", t.measured}, {"detail", t.detail}});
    return j;
}

std::string outcome_csv(const std::vector<workload_outcome> &all) {
    std::string out = "workload,case,metric,unit,better,config,run,value\n";
    for (const workload_outcome &o : all)
        for (const run_record &r : o.runs) {
            if (!r.ok) continue;
            for (const result::value &v : r.res.values)
                out += fmt::format("{},{},{},{},{},{},{},{:.9g}\n", csv_field(o.w->name),
                                   csv_field(v.name), csv_field(v.metric), csv_field(v.unit),
                                   v.dir == better::higher ? "higher" : "lower",
                                   csv_field(r.config), r.run, v.v);
        }
    return out;
}

bool write_file(const std::string &path, const std::string &text, std::string &why) {
    FILE *f = std::fopen(path.c_str(), "w");
    if (!f) {
        why = fmt::format("{}: {}", path, std::strerror(errno));
        return false;
    }
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const bool closed = std::fclose(f) == 0;
    if (!ok || !closed) {
        why = fmt::format("{}: could not write ({})", path, std::strerror(errno));
        return false;
    }
    return true;
}

} // namespace slabbench
