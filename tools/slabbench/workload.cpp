// workload.cpp - a run's parameters and its result as JSON (workload.hpp).
#include "workload.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace slabbench {

const std::string &run_context::get(const std::string &name) const {
    auto it = params.find(name);
    if (it == params.end()) throw std::runtime_error(fmt::format("no parameter '{}'", name));
    return it->second;
}

namespace {

long long to_int(const std::string &name, const std::string &text) {
    size_t used = 0;
    long long v = 0;
    try {
        v = std::stoll(text, &used, 0);
    } catch (const std::exception &) {
        used = 0;
    }
    if (used == 0 || used != text.size())
        throw std::runtime_error(
            fmt::format("parameter '{}': '{}' is not a whole number", name, text));
    return v;
}

} // namespace

long long run_context::get_int(const std::string &name) const {
    return to_int(name, get(name));
}

double run_context::get_double(const std::string &name) const {
    const std::string &text = get(name);
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception &) {
        used = 0;
    }
    if (used == 0 || used != text.size() || !std::isfinite(v))
        throw std::runtime_error(fmt::format("parameter '{}': '{}' is not a number", name, text));
    return v;
}

std::vector<std::string> run_context::get_list(const std::string &name) const {
    std::vector<std::string> out;
    std::stringstream in(get(name));
    std::string item;
    while (std::getline(in, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

std::vector<long long> run_context::get_ints(const std::string &name) const {
    std::vector<long long> out;
    for (const std::string &s : get_list(name)) out.push_back(to_int(name, s));
    return out;
}

void result::add(const std::string &name, const std::string &metric, const std::string &unit,
                 better dir, double v) {
    values.push_back({name, metric, unit, dir, v});
}

void result::check(const std::string &name, bool ok, const std::string &detail) {
    checks.push_back({name, ok, detail});
}

void result::fail(const std::string &why) {
    if (error.empty()) error = why;
}

void result::note(const std::string &key, double v) {
    notes[key] = v;
}

bool result::ok() const {
    if (!error.empty()) return false;
    for (const auto &c : checks)
        if (!c.ok) return false;
    return true;
}

std::string result::to_json() const {
    nlohmann::json j;
    j["values"] = nlohmann::json::array();
    for (const auto &v : values)
        j["values"].push_back({{"case", v.name},
                               {"metric", v.metric},
                               {"unit", v.unit},
                               {"better", v.dir == better::higher ? "higher" : "lower"},
                               {"value", v.v}});
    j["checks"] = nlohmann::json::array();
    for (const auto &c : checks)
        j["checks"].push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
    j["notes"] = notes;
    j["error"] = error;
    return j.dump();
}

result result::from_json(const std::string &text) {
    result r;
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
        for (const auto &v : j.at("values"))
            r.values.push_back(
                {v.at("case").get<std::string>(), v.at("metric").get<std::string>(),
                 v.at("unit").get<std::string>(),
                 v.at("better").get<std::string>() == "higher" ? better::higher : better::lower,
                 v.at("value").get<double>()});
        for (const auto &c : j.at("checks"))
            r.checks.push_back({c.at("name").get<std::string>(), c.at("ok").get<bool>(),
                                c.at("detail").get<std::string>()});
        for (const auto &[k, v] : j.at("notes").items()) r.notes[k] = v.get<double>();
        r.error = j.at("error").get<std::string>();
    } catch (const nlohmann::json::exception &e) {
        throw std::runtime_error(fmt::format("a worker's result is not valid JSON: {}", e.what()));
    }
    return r;
}

} // namespace slabbench
