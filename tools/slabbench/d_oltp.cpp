// d_oltp.cpp - oltp: sysbench's OLTP tests against a real MariaDB server under each malloc.
//
// Seed 003 (Pekka Enberg, "Mainline kernel OLTP performance update") ran sysbench in OLTP
// read-only mode against MySQL 5.0 (16 threads, a 1,000,000-row table, 100,000 requests) on a
// 2-CPU Core 2 and gave the transactions per second of 10 runs: SLAB 845.10 average (sd 4.72),
// SLUB 836.74 (sd 8.57). The kernel's slab served the database's sockets, files and pages.
//
// Here the database server itself is the program under test: mariadbd starts on a private data
// folder and unix socket (no networking) with the configuration's allocator preloaded (each
// design's malloc replacement, or a peer), and sysbench, under the driver's plain environment,
// runs oltp_read_only and then oltp_read_write against it. Cases "read-only" and "read-write" are
// sysbench's transactions per second (higher is better). Checks: the server answered on its socket,
// the preloaded library is mapped into it, each sysbench run exited 0 with transactions done, and
// the server shut down cleanly. The server's peak RSS is a note.
//
// The tables are made once (mariadb-install-db, then sysbench's prepare, under glibc's malloc)
// into a template folder kept under the system's temporary folder (slabbench-oltp-<uid>), keyed by
// the table count and size and the installed programs, and reused by later driver processes;
// every run copies it into its own work folder, so each run starts from the same data.
#include "common.hpp"
#include "configs.hpp"
#include "runner.hpp"
#include "workload.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace slabbench {

namespace {

// Bump when the template's making changes, so that older templates are not reused.
constexpr int template_format = 1;
constexpr double answer_limit_s = 60;  // a server that does not answer by then is not starting
constexpr double stop_grace_s = 60;    // InnoDB's clean shutdown flushes the buffer pool
constexpr double setup_limit_s = 1200; // mariadb-install-db, sysbench prepare of the full tables
constexpr const char *log_file_size = "32M"; // InnoDB's redo log: small to copy, big enough
                                             // that a read-write run does not wait on it

struct oltp_setup {
    long long tables = 1, rows = 100, threads = 2, seconds = 1, events = 0;
    std::string buffer_pool = "64M";
};

std::string install_db_program() {
    std::string p = which("mariadb-install-db");
    return p.empty() ? which("mysql_install_db") : p;
}

std::vector<std::string> plain_environment() {
    return config_environment(config{});
}

// mariadbd's options, the same for the template's making and for every run.
std::vector<std::string> server_argv(const std::string &data, const std::string &socket,
                                     const std::string &pid_file, const oltp_setup &s) {
    std::vector<std::string> argv = {
        which("mariadbd"), "--no-defaults", "--datadir=" + data, "--socket=" + socket,
        "--skip-networking", "--pid-file=" + pid_file, "--innodb-buffer-pool-size=" + s.buffer_pool,
        std::string("--innodb-log-file-size=") + log_file_size,
        // No fsync per commit and no doublewrite: the read-write test then measures the
        // server's CPU work (and its allocator), not the disk.
        "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--skip-log-bin",
        "--max-connections=512"};
    // mariadbd refuses to run as root unless told to.
    if (geteuid() == 0) argv.push_back("--user=root");
    return argv;
}

std::vector<std::string> sysbench_argv(const std::string &test, const std::string &socket,
                                       const oltp_setup &s, const std::string &command) {
    std::vector<std::string> argv = {"sysbench",
                                     test,
                                     "--db-driver=mysql",
                                     "--mysql-socket=" + socket,
                                     "--mysql-user=root",
                                     "--mysql-db=sbtest",
                                     fmt::format("--tables={}", s.tables),
                                     fmt::format("--table-size={}", s.rows)};
    if (command == "run") {
        argv.push_back(fmt::format("--threads={}", s.threads));
        argv.push_back(fmt::format("--time={}", s.seconds));
        // A transaction count ends a test sooner than its shortest time (1 s) when set.
        if (s.events > 0) argv.push_back(fmt::format("--events={}", s.events));
        // The same stream of requests for every configuration.
        argv.push_back("--rand-seed=1");
    }
    argv.push_back(command);
    return argv;
}

std::string file_text(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Whether the process has exited, without reaping it (stop_program still collects its status).
bool has_exited(int pid) {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == pid;
}

// Whether a server answers on the socket: it sends its handshake first, protocol version 10.
bool answers(const std::string &socket_path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
    bool ok = false;
    if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0) {
        unsigned char buf[64];
        size_t got = 0;
        pollfd p{fd, POLLIN, 0};
        while (got < 5 && poll(&p, 1, 2000) == 1) {
            const ssize_t n = read(fd, buf + got, sizeof buf - got);
            if (n <= 0) break;
            got += static_cast<size_t>(n);
        }
        ok = got >= 5 && buf[4] == 10;
    }
    close(fd);
    return ok;
}

// Waits for the server to answer; "" when it does, else why not.
std::string wait_for_server(const background_program &p, const std::string &socket,
                            double limit_s) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        if (has_exited(p.pid)) return "mariadbd exited before it answered";
        if (answers(socket)) return "";
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (waited > limit_s) return fmt::format("mariadbd did not answer within {:g} s", limit_s);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// A unix socket's path must fit sockaddr_un (108 bytes); a long work folder gets one in `spare`.
std::string socket_path(const std::string &dir, const std::string &spare) {
    static unsigned serial = 0;
    const std::string p = dir + "/mysqld.sock";
    if (p.size() < sizeof(sockaddr_un{}.sun_path) - 1) return p;
    return fmt::format("{}/s{}-{}.sock", spare, getpid(), serial++);
}

// The cache folder under the system's temporary folder; must be ours alone.
std::string cache_folder(std::string &why) {
    std::error_code ec;
    fs::path tmp = fs::temp_directory_path(ec);
    if (ec) tmp = "/tmp";
    const std::string dir = (tmp / fmt::format("slabbench-oltp-{}", getuid())).string();
    mkdir(dir.c_str(), 0700);
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 077) != 0) {
        why = fmt::format("{} is not a private folder of this user (remove it)", dir);
        return "";
    }
    return dir;
}

// What the template depends on: the programs that make and read it, and its shape.
std::string template_key(const oltp_setup &s) {
    uint64_t h = 14695981039346656037ull;
    auto mix = [&h](uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= 1099511628211ull;
        }
    };
    for (const std::string &prog : {which("mariadbd"), which("sysbench"), install_db_program()}) {
        struct stat st {};
        if (stat(prog.c_str(), &st) == 0) {
            mix(static_cast<uint64_t>(st.st_size));
            mix(static_cast<uint64_t>(st.st_mtime));
        }
    }
    mix(template_format);
    return fmt::format("t{}x{}-{:016x}", s.tables, s.rows, h);
}

// Removes what earlier driver processes left: half-made templates of processes that are gone,
// and templates of other program versions.
void tidy_cache(const std::string &cache, const std::string &key) {
    const std::string hash = key.substr(key.rfind('-'));
    std::error_code ec;
    for (const auto &e : fs::directory_iterator(cache, ec)) {
        const std::string name = e.path().filename().string();
        if (name.starts_with("build-")) {
            const int pid = std::atoi(name.c_str() + 6);
            if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
        } else if (name.starts_with("t") && !name.ends_with(hash) && e.is_directory(ec)) {
            fs::remove_all(e.path(), ec);
        }
    }
}

// Makes the template: a new data folder, sbtest's tables made by sysbench, a clean shutdown.
std::string build_template(const std::string &cache, const std::string &key, const oltp_setup &s) {
    const std::string build = fmt::format("{}/build-{}-{}", cache, getpid(), key);
    std::error_code ec;
    fs::remove_all(build, ec);
    fs::create_directories(build, ec);
    if (ec) return fmt::format("cannot make {}: {}", build, ec.message());
    const std::string data = build + "/data";
    const std::vector<std::string> env = plain_environment();
    auto fail = [&](const std::string &why) {
        fs::remove_all(build, ec);
        return why;
    };

    program_spec install;
    install.argv = {install_db_program(), "--no-defaults",
                    "--datadir=" + data,  "--auth-root-authentication-method=normal",
                    "--skip-test-db",     std::string("--innodb-log-file-size=") + log_file_size};
    if (geteuid() == 0) install.argv.push_back("--user=root");
    install.env = env;
    install.timeout_s = setup_limit_s;
    const program_run made = run_program(install);
    if (!made.ok())
        return fail(fmt::format("{} {}: {}", install.argv[0], made.how_it_ended(setup_limit_s),
                                last_lines(made.out + "\n" + made.err, 4)));

    // sysbench needs its database; the server makes it from an init file, with no client needed.
    const std::string init = build + "/init.sql";
    std::ofstream(init) << "CREATE DATABASE IF NOT EXISTS sbtest;\n";
    const std::string socket = socket_path(build, cache);
    program_spec server;
    server.argv = server_argv(data, socket, build + "/mariadbd.pid", s);
    server.argv.push_back("--init-file=" + init);
    server.env = env;
    background_program bg = start_program(server, build + "/mariadbd.log");
    if (bg.pid < 0) return fail("mariadbd: " + bg.error);
    std::string why = wait_for_server(bg, socket, answer_limit_s);
    if (!why.empty()) {
        stop_program(bg, stop_grace_s);
        return fail(
            fmt::format("making the tables: {}: {}", why, last_lines(file_text(bg.log_path), 4)));
    }
    program_spec prepare;
    prepare.argv = sysbench_argv("oltp_read_only", socket, s, "prepare");
    prepare.env = env;
    prepare.timeout_s = setup_limit_s;
    const program_run prepared = run_program(prepare);
    const int stopped = stop_program(bg, stop_grace_s);
    if (!prepared.ok())
        return fail(fmt::format("sysbench prepare {}: {}", prepared.how_it_ended(setup_limit_s),
                                last_lines(prepared.out + "\n" + prepared.err, 4)));
    if (stopped != 0)
        return fail(fmt::format("mariadbd did not shut down cleanly after sysbench prepare: {}",
                                last_lines(file_text(bg.log_path), 4)));
    fs::remove(socket, ec);
    // Another process may have made the same template meanwhile: then theirs is used.
    if (rename(data.c_str(), (cache + "/" + key).c_str()) != 0 && errno != EEXIST &&
        errno != ENOTEMPTY)
        return fail(
            fmt::format("cannot move the template to {}/{}: {}", cache, key, std::strerror(errno)));
    fs::remove_all(build, ec);
    return "";
}

// The template's folder for `s`, made when there is none; "" and `why` when it cannot be.
std::string data_template(const oltp_setup &s, std::string &why) {
    static std::mutex lock;
    std::lock_guard<std::mutex> hold(lock);
    const std::string cache = cache_folder(why);
    if (cache.empty()) return "";
    const std::string key = template_key(s);
    const std::string dir = cache + "/" + key;
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir;
    tidy_cache(cache, key);
    why = build_template(cache, key, s);
    if (!why.empty()) return "";
    return dir;
}

// Whether `library` is mapped into process `pid`.
bool library_mapped(int pid, const std::string &library) {
    std::error_code ec;
    const fs::path want = fs::canonical(library, ec);
    if (ec) return false;
    std::ifstream maps(fmt::format("/proc/{}/maps", pid));
    std::string line;
    while (std::getline(maps, line)) {
        const size_t slash = line.find('/');
        if (slash == std::string::npos) continue;
        const fs::path have = fs::canonical(line.substr(slash), ec);
        if (!ec && have == want) return true;
    }
    return false;
}

struct sysbench_figures {
    bool parsed = false;
    double transactions = 0, tps = 0, ignored = 0;
};

// sysbench's report: "transactions:  7260   (3626.02 per sec.)", "ignored errors:  0  (0.00 ...".
sysbench_figures parse_sysbench(const std::string &text) {
    sysbench_figures f;
    std::stringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        key.erase(0, key.find_first_not_of(" \t"));
        double count = 0, rate = 0;
        if (std::sscanf(line.c_str() + colon + 1, " %lf (%lf per sec.)", &count, &rate) != 2)
            continue;
        if (key == "transactions") {
            f.transactions = count;
            f.tps = rate;
            f.parsed = true;
        } else if (key == "ignored errors") {
            f.ignored = count;
        }
    }
    return f;
}

void run_oltp(const run_context &ctx, const config &cfg, const std::string &work_dir, result &out) {
    oltp_setup s;
    s.tables = ctx.get_int("tables");
    s.rows = ctx.get_int("table_size");
    s.threads = ctx.threads ? ctx.threads : ctx.get_int("threads");
    s.seconds = ctx.get_int("seconds");
    s.events = ctx.get_int("events");
    s.buffer_pool = ctx.get("buffer_pool");
    if (s.tables < 1 || s.rows < 1 || s.threads < 1 || s.seconds < 1 || s.events < 0)
        return out.fail(
            "oltp.tables, table_size, threads and seconds must be at least 1, events at least 0");

    std::string why;
    const std::string tmpl = data_template(s, why);
    if (tmpl.empty()) return out.fail("making the tables: " + why);
    const std::string data = work_dir + "/data";
    std::error_code ec;
    fs::copy(tmpl, data, fs::copy_options::recursive, ec);
    if (ec) return out.fail(fmt::format("copying {} to {}: {}", tmpl, data, ec.message()));

    const std::string cache = fs::path(tmpl).parent_path().string();
    const std::string socket = socket_path(work_dir, cache);
    program_spec server;
    server.argv = server_argv(data, socket, work_dir + "/mariadbd.pid", s);
    server.env = config_environment(cfg);
    const auto start = std::chrono::steady_clock::now();
    background_program bg = start_program(server, work_dir + "/mariadbd.log");
    if (bg.pid < 0) return out.fail("mariadbd: " + bg.error);
    why = wait_for_server(bg, socket, answer_limit_s);
    out.note("server_start_s",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!why.empty()) {
        const int status = stop_program(bg, stop_grace_s);
        return out.fail(fmt::format("under {}, {} (exit status {}): {}", cfg.name, why, status,
                                    last_lines(file_text(bg.log_path), 5)));
    }
    out.check("server-answered", true, "mariadbd answered on " + socket);
    if (!cfg.preload.empty())
        out.check("allocator-loaded", library_mapped(bg.pid, cfg.preload),
                  cfg.preload + " mapped into mariadbd");

    const std::vector<std::string> plain = plain_environment();
    const double limit = static_cast<double>(s.seconds) * 3 + 120;
    for (const auto &[test, name] :
         {std::pair<const char *, const char *>{"oltp_read_only", "read-only"},
          {"oltp_read_write", "read-write"}}) {
        program_spec bench;
        bench.argv = sysbench_argv(test, socket, s, "run");
        bench.env = plain;
        bench.timeout_s = limit;
        const program_run r = run_program(bench);
        const sysbench_figures f = parse_sysbench(r.out);
        const bool fatal =
            r.out.find("FATAL") != std::string::npos || r.err.find("FATAL") != std::string::npos;
        const bool ok = r.ok() && f.parsed && !fatal && f.transactions > 0;
        out.check(name, ok,
                  ok ? fmt::format("{:.0f} transactions, {:.0f} ignored errors", f.transactions,
                                   f.ignored)
                     : fmt::format("sysbench {} {}: {}", test, r.how_it_ended(limit),
                                   last_lines(r.out + "\n" + r.err, 4)));
        if (ok) out.add(name, "tps", "tx/s", better::higher, f.tps);
        out.note(std::string(name) + "_ignored_errors", f.ignored);
        if (has_exited(bg.pid)) break;
    }

    const bool died = has_exited(bg.pid);
    uint64_t rss_kib = 0;
    const int status = stop_program(bg, stop_grace_s, &rss_kib);
    out.check("server-stopped", !died && status == 0,
              died          ? fmt::format("mariadbd died during the tests: {}",
                                          last_lines(file_text(bg.log_path), 5))
              : status == 0 ? "mariadbd shut down cleanly"
                            : fmt::format("mariadbd ended with status {}: {}", status,
                                          last_lines(file_text(bg.log_path), 5)));
    out.note("server_peak_rss_mib", static_cast<double>(rss_kib) / 1024.0);
    fs::remove_all(data, ec); // 50 MB or more a run: not kept for the driver to remove
}

std::string oltp_available() {
    std::string missing;
    if (which("mariadbd").empty()) missing = "mariadbd";
    if (install_db_program().empty())
        missing += (missing.empty() ? "" : ", ") + std::string("mariadb-install-db");
    if (!missing.empty()) missing += " (Debian's mariadb-server)";
    if (which("sysbench").empty())
        missing += (missing.empty() ? "" : "; ") + std::string("sysbench (Debian's sysbench)");
    return missing.empty() ? "" : "not installed: " + missing;
}

} // namespace

workload oltp_workload() {
    workload w;
    w.name = "oltp";
    w.seed = "seed 003: sysbench OLTP";
    w.maps_to =
        "Seed 003 gave sysbench OLTP read-only transactions per second against MySQL (min, max, "
        "avg, sd of 10 runs; SLAB 845.10, SLUB 836.74 on 2 CPUs). Here a MariaDB server on a "
        "private socket runs with each malloc preloaded, and sysbench's oltp_read_only and "
        "oltp_read_write give its transactions per second.";
    w.cannot = "The seed's allocator was the kernel's, under the server's sockets, files and page "
               "cache; here only the server's own malloc changes, while the kernel under it (and "
               "the client's allocator) stays the host's.";
    w.families = fam_malloc | fam_peers;
    w.baseline = "slub-malloc";
    w.params = {
        {"tables", "1", "1", "2", "sysbench tables"},
        {"table_size", "100", "10000", "20000", "rows per table"},
        {"threads", "2", "4", "16", "sysbench client threads (--threads overrides)"},
        {"seconds", "10", "1", "5", "seconds per sysbench test (at most, with events)"},
        {"events", "100", "0", "0",
         "transactions per sysbench test (0: as many as fit in seconds)"},
        {"buffer_pool", "64M", "64M", "128M", "InnoDB buffer pool size"},
    };
    w.run_external = run_oltp;
    w.available = oltp_available;
    return w;
}

} // namespace slabbench
