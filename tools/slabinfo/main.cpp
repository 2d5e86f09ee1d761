// main.cpp - the slabinfo command (docs/slabinfo.md): the options, then one view of a live
// process (-p PID) or of a snapshot saved with -o.
//
// Exit status: 0 done; 1 an error (one line "slabinfo: ..." on stderr); 2 bad options.
#include "slabinfo/segment.hpp"
#include "slabinfo/snapshot.hpp"
#include "slabinfo/views.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace {

using namespace slabinfo;

// What one run shows: one view at a time.
enum class view {
    list,           // (none), -l
    activity,       // -D, -A
    totals,         // -T
    cache_report,   // -r
    buddy,          // -b
    validate,       // -v
    shrink,         // -s
    process_report, // --report
    failslab,       // --failslab
    traces,         // --traces
    leaks,          // --leaks
    json,           // --json
    processes,      // --list
    none,           // only -o
};

struct options {
    int pid = 0;
    bool has_pid = false;
    std::vector<std::string> args; // [FILE] [regex]
    bool list = false, display_active = false, activity = false, totals = false, report_one = false,
         sort_size = false, show_empty = false, buddy = false, validate = false, shrink = false,
         process_report = false, json = false, processes = false, traces = false, leaks = false;
    uint64_t min_age_ms = 0; // --min-age, with --leaks
    double watch = 0;        // seconds; 0: once
    unsigned count = 0;
    std::string output;
    std::string failslab; // --failslab's settings ("show": read only)
    bool has_failslab = false;
    double timeout = 5.0;

    std::string file;  // without -p: the first argument
    std::string regex; // the argument after it (with -p: the first)
    view shown = view::list;
};

// A usage error: status 2.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string errno_text(int e) {
    return std::error_code(e, std::generic_category()).message();
}

uint64_t realtime_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Checks the combination of options and decides the view.
void resolve(options &o) {
    struct named {
        bool on;
        const char *name;
        view v;
    };
    const named views[] = {
        {o.list, "-l", view::list},
        {o.display_active || o.activity, o.activity ? "-A" : "-D", view::activity},
        {o.totals, "-T", view::totals},
        {o.report_one, "-r", view::cache_report},
        {o.buddy, "-b", view::buddy},
        {o.validate, "-v", view::validate},
        {o.shrink, "-s", view::shrink},
        {o.process_report, "--report", view::process_report},
        {o.has_failslab, "--failslab", view::failslab},
        {o.traces, "--traces", view::traces},
        {o.leaks, "--leaks", view::leaks},
        {o.json, "--json", view::json},
        {o.processes, "--list", view::processes},
    };
    const named *chosen = nullptr;
    for (const auto &n : views) {
        if (!n.on) continue;
        if (chosen)
            throw usage_error(fmt::format("{} and {} cannot be combined: one view at a time",
                                          chosen->name, n.name));
        chosen = &n;
    }
    const bool saving = !o.output.empty();
    if (o.sort_size && o.activity)
        throw usage_error("-S and -A cannot be combined: one sort order");

    if (o.processes) {
        if (o.has_pid || !o.args.empty() || saving || o.watch > 0)
            throw usage_error("--list takes no -p, FILE, regex, -o or --watch");
        o.shown = view::processes;
        return;
    }
    if (o.has_pid) {
        if (o.args.size() > 1)
            throw usage_error(fmt::format("too many arguments: with -p, only a regex ('{}' is one "
                                          "too many)",
                                          one_line(o.args[1], 80)));
        if (!o.args.empty()) o.regex = o.args[0];
    } else {
        if (o.args.empty())
            throw usage_error("give -p PID (a live process) or a snapshot FILE; slabinfo --list "
                              "shows the processes that publish");
        if (o.args.size() > 2)
            throw usage_error(fmt::format("too many arguments: FILE and a regex ('{}' is one too "
                                          "many)",
                                          one_line(o.args[2], 80)));
        o.file = o.args[0];
        if (o.args.size() > 1) o.regex = o.args[1];
    }
    const bool request = o.validate || o.shrink || o.process_report || o.has_failslab || o.traces;
    if (request && !o.has_pid)
        throw usage_error(fmt::format("{} asks a live process: use -p PID", chosen->name));
    if (request && saving)
        throw usage_error(fmt::format("-o and {} cannot be combined", chosen->name));
    if (o.process_report && !o.regex.empty())
        throw usage_error("--report is the whole process's report: it takes no regex");
    if (o.has_failslab && !o.regex.empty())
        throw usage_error("--failslab names its caches after a ';' in its settings: it takes no "
                          "regex");
    if (o.leaks && !o.regex.empty())
        throw usage_error("--leaks scans the whole process: it takes no regex");
    if (o.has_failslab && o.failslab.empty())
        throw usage_error("--failslab needs settings (probability[:interval[:times[:space]]]"
                          "[;caches], off, or show)");
    if (o.watch > 0) {
        if (!o.has_pid) throw usage_error("--watch redraws a live process: use -p PID");
        if (request || o.json || saving)
            throw usage_error(
                fmt::format("--watch redraws a table: not with {}", saving ? "-o" : chosen->name));
    } else if (o.count > 0) {
        throw usage_error("--count goes with --watch");
    }
    if (chosen) {
        o.shown = chosen->v;
    } else {
        // Only -o: save quietly, unless a regex asks for the list too.
        o.shown = saving && o.regex.empty() ? view::none : view::list;
    }
}

std::string read_file(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw slabinfo_error(fmt::format("cannot read {}: {}", path, errno_text(errno)));
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } guard{fd};
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > (off_t{256} << 20))
        throw slabinfo_error(fmt::format("{} is too large for a snapshot ({} bytes)", path,
                                         static_cast<long long>(st.st_size)));
    std::string text;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw slabinfo_error(fmt::format("cannot read {}: {}", path, errno_text(errno)));
        if (n == 0) break;
        text.append(buf, static_cast<size_t>(n));
        if (text.size() > (size_t{256} << 20))
            throw slabinfo_error(fmt::format("{} is too large for a snapshot", path));
    }
    return text;
}

void write_file(const std::string &path, const std::string &text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw slabinfo_error(fmt::format("cannot write {}: {}", path, errno_text(errno)));
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            ::close(fd);
            throw slabinfo_error(fmt::format("cannot write {}: {}", path, errno_text(e)));
        }
        done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0)
        throw slabinfo_error(fmt::format("cannot write {}: {}", path, errno_text(errno)));
}

// The text of a table view of s.
std::string render(const options &o, const snapshot &s, bool require_match) {
    selection sel;
    sel.pattern = o.regex;
    sel.show_empty = o.show_empty;
    sel.order =
        o.activity ? sort_order::activity : (o.sort_size ? sort_order::space : sort_order::name);
    switch (o.shown) {
    case view::list:
        return list_view(s, select_caches(s, sel, require_match));
    case view::activity:
        return activity_view(s, select_caches(s, sel, require_match));
    case view::totals: {
        sel.show_empty = true; // the totals count the empty caches too
        return totals_view(s, select_caches(s, sel, require_match));
    }
    case view::cache_report:
        return cache_report(s, report_cache(s, o.regex));
    case view::buddy:
        return buddy_view(s);
    case view::json: {
        sel.order = sort_order::creation; // the schema's order, whatever -S or -A say
        return to_json(with_caches(s, select_caches(s, sel, require_match))) + "\n";
    }
    default:
        return {};
    }
}

void print(const std::string &text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
}

int run(options &o) {
    if (o.shown == view::processes) {
        print(process_list_view(list_segments(), realtime_ns()));
        return 0;
    }
    const seconds timeout(o.timeout);
    segment_options so;
    so.request_timeout = timeout;
    so.read_timeout = std::min(seconds(2.0), timeout);
    so.writable = o.shown == view::validate || o.shown == view::shrink ||
                  o.shown == view::process_report || o.shown == view::failslab ||
                  o.shown == view::traces || o.shown == view::leaks;

    std::optional<live_segment> seg;
    std::function<snapshot()> load;
    if (o.has_pid) {
        seg.emplace(live_segment::open(o.pid, so));
        load = [&] { return seg->read_snapshot(); };
    } else {
        load = [&] { return parse_snapshot(read_file(o.file), o.file); };
    }

    switch (o.shown) {
    case view::validate: {
        std::vector<std::string> targets{""};
        if (!o.regex.empty()) targets = request_targets(load(), o.regex);
        std::vector<std::pair<std::string, validate_result>> results;
        for (const auto &name : targets) results.emplace_back(name, request_validate(*seg, name));
        print(validate_view(o.pid, results));
        return 0;
    }
    case view::shrink: {
        std::vector<std::string> targets{""};
        if (!o.regex.empty()) targets = request_targets(load(), o.regex);
        std::vector<shrink_result> results;
        for (const auto &name : targets) results.push_back(request_shrink(*seg, name));
        print(shrink_view(results));
        return 0;
    }
    case view::leaks:
        print(leaks_view(o.pid, request_leaks(*seg, o.min_age_ms)));
        return 0;
    case view::traces: {
        std::vector<std::string> targets{""};
        if (!o.regex.empty()) targets = request_targets(load(), o.regex);
        std::vector<cache_traces> results;
        for (const auto &name : targets)
            for (auto &t : request_traces(*seg, name)) results.push_back(std::move(t));
        print(traces_view(results));
        return 0;
    }
    case view::failslab: {
        print(failslab_view(o.pid, request_failslab(*seg, o.failslab == "show" ? "" : o.failslab)));
        return 0;
    }
    case view::process_report: {
        std::string text = request_report(*seg);
        if (!text.empty() && text.back() != '\n') text += '\n';
        print(text);
        return 0;
    }
    default:
        break;
    }

    if (o.watch > 0) {
        for (unsigned frame = 0; o.count == 0 || frame < o.count; frame++) {
            if (frame > 0) {
                std::fflush(stdout);
                std::this_thread::sleep_for(seconds(o.watch));
                seg->check_publishing();
            }
            const snapshot s = load();
            const std::string text = render(o, s, frame == 0);
            print("\033[H\033[2J" + watch_title(s, o.watch, realtime_ns()) + text);
        }
        return 0;
    }

    snapshot s = load();
    if (!o.output.empty()) {
        snapshot saved = s;
        saved.saved_from = o.has_pid ? fmt::format("pid {}", o.pid) : o.file;
        write_file(o.output, to_json(saved) + "\n");
    }
    if (o.shown != view::none) print(render(o, s, true));
    return 0;
}

// CLI11's message on one line.
std::string flat(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text;
}

} // namespace

int main(int argc, char **argv) {
    options o;
    CLI::App app{"slabinfo: the slab caches of a process that uses slabkit, read from its live "
                 "statistics (SLABKIT_STATS=live) or from a snapshot saved with -o",
                 "slabinfo"};
    app.footer("Usage:\n"
               "  slabinfo -p PID [options] [regex]   a live process\n"
               "  slabinfo FILE [options] [regex]     a snapshot saved with -o\n"
               "  slabinfo --list                     the processes that publish now\n"
               "The regex (ECMAScript, case-insensitive) selects caches by name. Without a view "
               "option, -o saves quietly (with a regex it lists the caches too).\n"
               "Exit status: 0 done, 1 an error, 2 bad options. docs/slabinfo.md has the rest.");
    app.add_option("-p", o.pid, "the process to read (it publishes with SLABKIT_STATS=live)")
        ->type_name("PID")
        ->check(CLI::Range(1, INT_MAX));
    app.add_option("args", o.args, "without -p: FILE, then a regex; with -p: the regex")
        ->type_name("[FILE] [regex]");
    app.add_flag("-l", o.list, "one line per cache (the default view)");
    app.add_flag("-D", o.display_active, "activity: allocations, frees, fast-path percentages");
    app.add_flag("-A", o.activity, "activity, busiest caches first");
    app.add_flag("-T", o.totals, "totals of the caches, the heap and the page allocator");
    app.add_flag("-r", o.report_one, "a full report of the one cache the regex names");
    app.add_flag("-S", o.sort_size, "sort by Space, largest first (default: by name)");
    app.add_flag("-e", o.show_empty, "show empty caches too");
    app.add_flag("-b,--buddy", o.buddy, "the page allocator's free blocks per node (buddyinfo)");
    app.add_flag("-v", o.validate, "ask the process to validate the caches (all, or the regex's)");
    app.add_flag("-s", o.shrink, "ask the process to shrink the caches (all, or the regex's)");
    app.add_flag("--report", o.process_report, "the process's own statistics report");
    auto *leaks = app.add_flag("--leaks", o.leaks,
                               "scan the process for objects of debug caches nothing points to "
                               "(kmemleak's idea; conservative)");
    app.add_option("--min-age", o.min_age_ms,
                   "with --leaks: leave out objects younger than MS milliseconds (default 0)")
        ->type_name("MS")
        ->needs(leaks);
    app.add_flag("--traces", o.traces,
                 "debug mode with owner tracking: the caches' allocation and free sites, "
                 "grouped (all, or the regex's)");
    app.add_option("--failslab", o.failslab,
                   "set the process's fault injection: probability[:interval[:times[:space]]] "
                   "[;cache,cache...], off, or show (docs/failslab.md)")
        ->type_name("SETTINGS");
    auto *watch = app.add_option("--watch", o.watch, "redraw every N seconds, like slabtop")
                      ->type_name("N")
                      ->check(CLI::Range(0.01, 86400.0));
    app.add_option("--count", o.count, "with --watch: stop after K screens")
        ->type_name("K")
        ->check(CLI::Range(1u, UINT_MAX))
        ->needs(watch);
    app.add_flag("--json", o.json, "the snapshot of the selected caches as JSON");
    app.add_option("-o", o.output,
                   "save the whole snapshot to FILE (JSON, readable by slabinfo FILE)")
        ->type_name("FILE");
    app.add_flag("--list", o.processes, "the processes that publish statistics now");
    app.add_option("--timeout", o.timeout,
                   "seconds to wait for a request's answer (and, at most 2 of them, for a "
                   "consistent snapshot); default 5")
        ->type_name("S")
        ->check(CLI::Range(0.001, 86400.0));

    try {
        app.parse(argc, argv);
        o.has_pid = app.count("-p") > 0;
        o.has_failslab = app.count("--failslab") > 0;
        resolve(o);
    } catch (const CLI::ParseError &e) {
        if (e.get_exit_code() == 0) return app.exit(e); // --help
        std::fprintf(stderr, "slabinfo: %s (slabinfo --help lists the options)\n",
                     flat(e.what()).c_str());
        return 2;
    } catch (const usage_error &e) {
        std::fprintf(stderr, "slabinfo: %s\n", e.what());
        return 2;
    }

    try {
        const int status = run(o);
        if (std::fflush(stdout) != 0 || std::ferror(stdout))
            throw slabinfo_error(fmt::format("cannot write the output: {}", errno_text(errno)));
        return status;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "slabinfo: %s\n", one_line(e.what(), 400).c_str());
        return 1;
    }
}
