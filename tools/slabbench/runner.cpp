// runner.cpp - starting programs with a time limit and collecting what they wrote (runner.hpp).
//
// Each program gets its own process group, so that a time limit kills what it started too
// (g++ starts cc1plus and as; a worker may have threads blocked in the allocator).
#include "runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace slabbench {

namespace {

double seconds_now() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The process groups of the programs running now, for the interrupt handler: a program runs in
// a group of its own (so that a time limit reaches what it started), which a Ctrl-C at the
// terminal does not reach.
// Lock-free atomics: programs start from several threads (kbuild's parallel compiles), and the
// handler may read the slots at any moment.
constexpr int kTracked = 16;
std::atomic<pid_t> g_groups[kTracked];
static_assert(std::atomic<pid_t>::is_always_lock_free);

void track(pid_t pg, bool on) {
    for (int i = 0; i < kTracked; ++i) {
        pid_t expected = on ? 0 : pg;
        if (g_groups[i].compare_exchange_strong(expected, on ? pg : 0)) return;
    }
}

void on_interrupt(int sig) {
    for (int i = 0; i < kTracked; ++i) {
        const pid_t pg = g_groups[i].load();
        if (pg > 0) kill(-pg, SIGKILL);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

std::vector<char *> c_strings(const std::vector<std::string> &v) {
    std::vector<char *> out;
    out.reserve(v.size() + 1);
    for (const std::string &s : v) out.push_back(const_cast<char *>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

// In the child, after fork: the descriptors, the folder, then exec. Only async-signal-safe
// calls here (the driver has no threads, but a library might).
[[noreturn]] void exec_child(const program_spec &spec, char *const *argv, char *const *envp,
                             int out_fd, int err_fd, int result_fd, const char *path) {
    setpgid(0, 0);
    const int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(out_fd >= 0 ? out_fd : devnull, 1);
    if (err_fd >= 0) dup2(err_fd, 2);
    if (result_fd >= 0) {
        dup2(result_fd, 3);
    } else {
        close(3);
    }
    if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) _exit(126);
    execve(path, argv, envp);
    _exit(127);
}

void drain(int fd, std::string &into, size_t keep) {
    char buf[65536];
    for (;;) {
        const ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return;
        into.append(buf, static_cast<size_t>(n));
        if (into.size() > 2 * keep) into.erase(0, into.size() - keep);
    }
}

std::string resolve(const std::string &program) {
    if (program.find('/') != std::string::npos) return program;
    return which(program);
}

} // namespace

void kill_programs_on_interrupt() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

std::string program_run::how_it_ended(double limit_s) const {
    if (!started) return fmt::format("could not be started: {}", error);
    if (timed_out) return fmt::format("timed out after {:g} s", limit_s);
    if (signal) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
    return fmt::format("exit status {}", status);
}

std::string which(const std::string &program) {
    const char *path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t end = dirs.find(':', start);
        if (end == std::string::npos) end = dirs.size();
        const std::string_view dir = std::string_view(dirs).substr(start, end - start);
        const std::string full =
            fmt::format("{}/{}", dir.empty() ? std::string_view(".") : dir, program);
        if (access(full.c_str(), X_OK) == 0) return full;
        start = end + 1;
    }
    // Servers live in sbin folders that a user's PATH may not have.
    for (const char *dir : {"/usr/sbin", "/sbin", "/usr/local/sbin"}) {
        const std::string full = fmt::format("{}/{}", dir, program);
        if (access(full.c_str(), X_OK) == 0) return full;
    }
    return "";
}

std::string self_path() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "";
    buf[n] = '\0';
    return buf;
}

program_run run_program(const program_spec &spec) {
    program_run r;
    if (spec.argv.empty()) {
        r.error = "no program given";
        return r;
    }
    const std::string path = resolve(spec.argv[0]);
    if (path.empty() || access(path.c_str(), X_OK) != 0) {
        r.error = fmt::format("{}: not found", spec.argv[0]);
        return r;
    }
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, res_pipe[2] = {-1, -1};
    auto close_all = [&] {
        for (int *p : {out_pipe, err_pipe, res_pipe})
            for (int i = 0; i < 2; ++i)
                if (p[i] >= 0) close(p[i]), p[i] = -1;
    };
    if ((spec.capture_out && pipe2(out_pipe, O_CLOEXEC) != 0) ||
        (spec.capture_err && pipe2(err_pipe, O_CLOEXEC) != 0) ||
        (spec.result_fd && pipe2(res_pipe, O_CLOEXEC) != 0)) {
        r.error = fmt::format("pipe: {}", std::strerror(errno));
        close_all();
        return r;
    }
    std::vector<char *> argv = c_strings(spec.argv);
    std::vector<char *> envp = c_strings(spec.env);
    const double start = seconds_now();
    const pid_t pid = fork();
    if (pid < 0) {
        r.error = fmt::format("fork: {}", std::strerror(errno));
        close_all();
        return r;
    }
    if (pid == 0)
        exec_child(spec, argv.data(), envp.data(), out_pipe[1], err_pipe[1], res_pipe[1],
                   path.c_str());
    setpgid(pid, pid); // also here, so a kill before the child's own call reaches the group
    track(pid, true);
    r.started = true;
    for (int *p : {out_pipe, err_pipe, res_pipe})
        if (p[1] >= 0) close(p[1]), p[1] = -1;
    struct source {
        int fd;
        std::string *into;
        size_t keep;
    };
    std::vector<source> sources;
    if (out_pipe[0] >= 0) sources.push_back({out_pipe[0], &r.out, 16u << 20});
    if (err_pipe[0] >= 0) sources.push_back({err_pipe[0], &r.err, 64u << 10});
    if (res_pipe[0] >= 0) sources.push_back({res_pipe[0], &r.result, 64u << 20});
    for (const source &s : sources) fcntl(s.fd, F_SETFL, O_NONBLOCK);
    int wstatus = 0;
    rusage ru{};
    bool reaped = false;
    while (!reaped) {
        const double left = spec.timeout_s - (seconds_now() - start);
        if (left <= 0 && !r.timed_out) {
            r.timed_out = true;
            kill(-pid, SIGKILL);
        }
        std::vector<pollfd> fds;
        for (const source &s : sources)
            if (s.fd >= 0) fds.push_back({s.fd, POLLIN, 0});
        const int wait_ms = r.timed_out ? 50 : static_cast<int>(std::min(left, 0.05) * 1000) + 1;
        if (!fds.empty())
            poll(fds.data(), fds.size(), wait_ms);
        else
            usleep(static_cast<useconds_t>(wait_ms) * 1000u);
        for (const source &s : sources)
            if (s.fd >= 0) drain(s.fd, *s.into, s.keep);
        const pid_t got = wait4(pid, &wstatus, WNOHANG, &ru);
        if (got == pid) reaped = true;
    }
    r.wall_s = seconds_now() - start;
    // The program is gone, but a child it left may hold the pipes: read what is there, then
    // end the group so nothing it started outlives the run.
    kill(-pid, SIGKILL);
    track(pid, false);
    for (source &s : sources) {
        drain(s.fd, *s.into, s.keep);
        close(s.fd);
    }
    r.max_rss_kib = static_cast<uint64_t>(ru.ru_maxrss);
    if (WIFEXITED(wstatus)) {
        r.status = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
        r.signal = WTERMSIG(wstatus);
        if (r.timed_out && r.signal == SIGKILL) r.signal = 0;
    }
    return r;
}

background_program start_program(const program_spec &spec, const std::string &log_path) {
    background_program p;
    p.log_path = log_path;
    const std::string path = spec.argv.empty() ? "" : resolve(spec.argv[0]);
    if (path.empty()) {
        p.error = fmt::format("{}: not found", spec.argv.empty() ? "" : spec.argv[0]);
        return p;
    }
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log < 0) {
        p.error = fmt::format("{}: {}", log_path, std::strerror(errno));
        return p;
    }
    std::vector<char *> argv = c_strings(spec.argv);
    std::vector<char *> envp = c_strings(spec.env);
    const pid_t pid = fork();
    if (pid < 0) {
        p.error = fmt::format("fork: {}", std::strerror(errno));
        close(log);
        return p;
    }
    if (pid == 0) exec_child(spec, argv.data(), envp.data(), log, log, -1, path.c_str());
    setpgid(pid, pid);
    track(pid, true);
    close(log);
    p.pid = pid;
    return p;
}

int stop_program(background_program &p, double grace_s, uint64_t *max_rss_kib) {
    if (p.pid <= 0) return -1;
    kill(p.pid, SIGTERM);
    const double start = seconds_now();
    int wstatus = 0;
    rusage ru{};
    pid_t got = 0;
    while ((got = wait4(p.pid, &wstatus, WNOHANG, &ru)) == 0) {
        if (seconds_now() - start > grace_s) {
            kill(-p.pid, SIGKILL);
            got = wait4(p.pid, &wstatus, 0, &ru);
            break;
        }
        usleep(20000);
    }
    kill(-p.pid, SIGKILL);
    track(p.pid, false);
    p.pid = -1;
    if (max_rss_kib) *max_rss_kib = static_cast<uint64_t>(ru.ru_maxrss);
    if (got > 0 && WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
    return -1;
}

} // namespace slabbench
