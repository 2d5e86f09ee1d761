// configs.cpp - the allocator configurations (configs.hpp).
#include "configs.hpp"

#include "workload.hpp"

#include <slabkit/slabkit.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>

extern char **environ;

namespace slabbench {

namespace {

// A design as the configurations' descriptions name it: SLQB, SLUB, SLAB, SLOB, Sheaves.
std::string upper(std::string s) {
    if (s == "sheaves") return "Sheaves";
    for (char &c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return s;
}

std::string possessive(const std::string &s) {
    return s.ends_with('s') ? s + "'" : s + "'s";
}

} // namespace

const std::vector<std::string> &design_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        std::stringstream in(slabkit_designs());
        std::string d;
        while (in >> d) out.push_back(d);
        return out;
    }();
    return names;
}

std::string max_order_variable(const std::string &design) {
    // The sheaves sit on SLUB's slab layer, which reads SLUB's variable.
    if (design == "slub" || design == "sheaves") return "SLABKIT_SLUB_MAX_ORDER";
    if (design == "slab") return "SLABKIT_SLAB_MAX_ORDER";
    return "";
}

std::string find_library(const std::string &filename) {
    for (const char *dir : {"/usr/lib/x86_64-linux-gnu/", "/usr/lib/aarch64-linux-gnu/",
                            "/lib/x86_64-linux-gnu/", "/usr/lib/", "/usr/local/lib/"}) {
        const std::string path = dir + filename;
        if (access(path.c_str(), R_OK) == 0) return path;
    }
    return "";
}

std::vector<config> all_configs(const std::string &malloc_library) {
    std::vector<config> out;
    const std::vector<std::string> &designs = design_names();
    for (const std::string &d : designs)
        out.push_back({d,
                       fam_cache,
                       false,
                       d,
                       "",
                       {{"SLABKIT_ALLOCATOR", d}},
                       fmt::format("{} through the kmem_cache API and kmalloc", upper(d)),
                       "",
                       ""});
    for (const std::string &d : designs) {
        const std::string var = max_order_variable(d);
        if (var.empty()) continue;
        out.push_back({d + "-o0",
                       fam_order,
                       false,
                       d,
                       "",
                       {{"SLABKIT_ALLOCATOR", d}, {var, "0"}},
                       fmt::format("{} with order-0 slabs only ({}=0)", upper(d), var),
                       "",
                       ""});
    }
    // SLQB's slabs are order 0 (order 1 against waste) by design; its high-order variant is
    // the experiment its slqb_min_order= setting was added for: every slab 32 KiB, SLUB's
    // slub_max_order.
    for (const std::string &d : designs) {
        if (d != "slqb") continue;
        out.push_back({d + "-o3",
                       fam_order,
                       false,
                       d,
                       "",
                       {{"SLABKIT_ALLOCATOR", d}, {"SLABKIT_SLQB_MIN_ORDER", "3"}},
                       "SLQB with order-3 slabs (SLABKIT_SLQB_MIN_ORDER=3, slqb_min_order=3)",
                       "",
                       ""});
    }
    for (const std::string &d : designs) {
        if (d != "slqb") continue;
        for (const char *mode : {"thread", "cpu"})
            out.push_back(
                {d + "-" + mode,
                 fam_slots,
                 false,
                 d,
                 "",
                 {{"SLABKIT_ALLOCATOR", d}, {"SLABKIT_SLOTS", mode}},
                 fmt::format("{} with {} slots (SLABKIT_SLOTS={})", upper(d),
                             std::strcmp(mode, "cpu") == 0 ? "the CPUs'" : "threads' own", mode),
                 "",
                 ""});
    }
    for (const std::string &d : designs)
        out.push_back({d + "+debug",
                       fam_debug,
                       false,
                       d,
                       "",
                       {{"SLABKIT_ALLOCATOR", d}, {"SLABKIT_DEBUG", "1"}},
                       fmt::format("{} with debugging on every cache (SLABKIT_DEBUG=1)", upper(d)),
                       "",
                       ""});
    const bool have_malloc = access(malloc_library.c_str(), R_OK) == 0;
    for (const std::string &d : designs)
        out.push_back({d + "-malloc",
                       fam_malloc,
                       true,
                       d,
                       malloc_library,
                       {{"SLABKIT_ALLOCATOR", d}},
                       fmt::format("{} malloc replacement, libslabkit-malloc.so preloaded",
                                   possessive(upper(d))),
                       have_malloc ? ""
                                   : fmt::format("{} not found (build the slabkit_malloc target)",
                                                 malloc_library),
                       ""});
    out.push_back({"glibc", fam_peers, true, "", "", {}, "glibc's malloc (no preload)", "", ""});
    static const struct {
        const char *name, *file, *package;
    } peers[] = {{"jemalloc", "libjemalloc.so.2", "libjemalloc2"},
                 {"tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"},
                 {"mimalloc", "libmimalloc.so.2", "libmimalloc2.0"}};
    for (const auto &p : peers) {
        const std::string path = find_library(p.file);
        out.push_back({p.name,
                       fam_peers,
                       true,
                       "",
                       path,
                       {},
                       fmt::format("{} ({}, Debian's {}) preloaded", p.name,
                                   path.empty() ? p.file : path, p.package),
                       path.empty()
                           ? fmt::format("{} not found (install Debian's {})", p.file, p.package)
                           : "",
                       ""});
    }
    return out;
}

std::vector<config> with_extra_peers(std::vector<config> all, const std::vector<std::string> &specs,
                                     const std::string &strong_dir) {
    auto add = [&all](const std::string &name, const std::string &path, const std::string &what) {
        for (const config &c : all)
            if (c.name == name)
                throw std::runtime_error(
                    fmt::format("--peer {}: the name {} is taken by a configuration", name, name));
        all.push_back({name, fam_peers, true, "", path, {}, what, "", ""});
    };
    static const struct {
        const char *name, *file, *what;
    } strong[] = {{"snmalloc", "libsnmalloc.so", "snmalloc 0.7.5"},
                  {"mimalloc3", "libmimalloc3.so", "mimalloc 3.4.3"}};
    std::set<std::string> named;
    for (const std::string &spec : specs) named.insert(spec.substr(0, spec.find('=')));
    if (!strong_dir.empty())
        for (const auto &p : strong)
            if (!named.count(p.name) && access((strong_dir + "/" + p.file).c_str(), R_OK) == 0)
                add(p.name, strong_dir + "/" + p.file,
                    fmt::format("{} ({}/{}, built by ../shared/peers/build.sh) preloaded", p.what,
                                strong_dir, p.file));
    for (const std::string &spec : specs) {
        const size_t eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
            throw std::runtime_error(fmt::format("--peer '{}': expected NAME=LIBRARY", spec));
        const std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
        struct stat st;
        if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
            throw std::runtime_error(fmt::format("--peer '{}': {} is not a file", spec, path));
        add(name, path, fmt::format("{} ({}) preloaded", name, path));
    }
    return all;
}

std::vector<config> with_compare_build(const std::vector<config> &all,
                                       const std::set<std::string> &chosen,
                                       const std::string &build) {
    const std::string worker = build + "/tools/slabbench/slabbench";
    const std::string library = build + "/libslabkit-malloc.so";
    const bool have_worker = access(worker.c_str(), X_OK) == 0;
    std::vector<config> out;
    for (const config &c : all) {
        out.push_back(c);
        if (c.design.empty() || !chosen.count(c.name)) continue;
        config b = c;
        b.name = c.name + "@base";
        b.worker = worker;
        if (!b.preload.empty()) b.preload = library;
        b.what = c.what + ", from " + build;
        if (!have_worker)
            b.missing = fmt::format("{} not found (build the slabbench target there)", worker);
        else if (!b.preload.empty() && access(library.c_str(), R_OK) != 0)
            b.missing =
                fmt::format("{} not found (build the slabkit_malloc target there)", library);
        out.push_back(std::move(b));
    }
    return out;
}

const config *find_config(const std::vector<config> &all, const std::string &name) {
    for (const config &c : all)
        if (c.name == name) return &c;
    return nullptr;
}

std::vector<std::string> config_environment(const config &cfg) {
    std::vector<std::string> env;
    for (char **e = environ; e && *e; ++e) {
        const std::string_view kv(*e);
        if (kv.starts_with("LD_PRELOAD=") || kv.starts_with("SLABKIT_")) continue;
        env.emplace_back(kv);
    }
    if (!cfg.preload.empty()) env.push_back("LD_PRELOAD=" + cfg.preload);
    for (const auto &[k, v] : cfg.env) env.push_back(k + "=" + v);
    return env;
}

// The configurations --allocators names: each item a configuration or a family (designs,
// order, slots, debug, malloc, peers, all). Throws naming what it does not know.
std::set<std::string> select_configs(const std::string &spec, const std::vector<config> &all) {
    static const std::map<std::string, unsigned> families = {
        {"designs", fam_cache}, {"order", fam_order}, {"slots", fam_slots}, {"debug", fam_debug},
        {"malloc", fam_malloc}, {"peers", fam_peers}, {"all", ~0u}};
    std::set<std::string> out;
    if (spec.empty()) {
        for (const config &c : all) out.insert(c.name);
        return out;
    }
    std::stringstream in(spec);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item.empty()) continue;
        if (auto f = families.find(item); f != families.end()) {
            for (const config &c : all)
                if (c.family & f->second) out.insert(c.name);
        } else if (find_config(all, item)) {
            out.insert(item);
        } else {
            std::string known;
            for (const config &c : all) known += " " + c.name;
            throw std::runtime_error(fmt::format(
                "--allocators: no configuration or family '{}' (configurations:{}; families: "
                "designs, order, slots, debug, malloc, peers, all)",
                item, known));
        }
    }
    return out;
}

} // namespace slabbench
