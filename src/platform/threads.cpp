// threads.cpp - futex sleeping for platform::mutex, thread-exit hooks and fork hooks.
#include "base/compiler.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace slabkit::platform {

// ---------------------------------------------------------------------------------------------
// Futex
// ---------------------------------------------------------------------------------------------

namespace {
// Keeps errno: a FUTEX_WAIT that finds the word changed fails with EAGAIN, and callers such as
// free() must not change errno.
long futex(std::atomic<uint32_t> *word, int op, uint32_t value) {
    int saved = errno;
    long r = syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), op | FUTEX_PRIVATE_FLAG, value,
                     nullptr, nullptr, 0);
    errno = saved;
    return r;
}
} // namespace

void futex_lock_slow(std::atomic<uint32_t> *word) {
    // Spin briefly: the holders of slabkit's locks keep them for short list operations.
    for (int spin = 0; spin < 100; ++spin) {
        uint32_t expected = 0;
        if (word->load(std::memory_order_relaxed) == 0 &&
            word->compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed))
            return;
        __builtin_ia32_pause();
    }
    // Mark the lock contended (2) and sleep until we take it in that state.
    while (word->exchange(2, std::memory_order_acquire) != 0) futex(word, FUTEX_WAIT, 2);
}

void futex_wake_one(std::atomic<uint32_t> *word) {
    futex(word, FUTEX_WAKE, 1);
}

void futex_wait_shared(std::atomic<uint32_t> *word, uint32_t expected, uint64_t timeout_ns) {
    timespec ts{static_cast<time_t>(timeout_ns / 1000000000u),
                static_cast<long>(timeout_ns % 1000000000u)};
    int saved = errno;
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
    errno = saved;
}

void futex_wake_shared(std::atomic<uint32_t> *word) {
    int saved = errno;
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
    errno = saved;
}

void sleep_ms(unsigned ms) {
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

// ---------------------------------------------------------------------------------------------
// Helper threads
// ---------------------------------------------------------------------------------------------

namespace {
struct thread_start {
    void (*fn)(void *);
    void *arg;
};
thread_start g_thread_start; // one start at a time (under the caller's lock); read before return
std::atomic<bool> g_thread_started{false};

void *thread_main(void *) {
    thread_start start = g_thread_start;
    g_thread_started.store(true, std::memory_order_release);
    start.fn(start.arg);
    return nullptr;
}
} // namespace

bool start_thread(void (*fn)(void *), void *arg, thread_handle *out, os_status *status) {
    // Every signal blocked in the new thread: it inherits the mask it is created with.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    g_thread_start = {fn, arg};
    g_thread_started.store(false, std::memory_order_relaxed);
    pthread_t t;
    int err = pthread_create(&t, nullptr, thread_main, nullptr);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (err != 0) {
        *status = {"pthread_create", err};
        return false;
    }
    while (!g_thread_started.load(std::memory_order_acquire)) sched_yield();
    out->id = static_cast<unsigned long>(t);
    *status = {};
    return true;
}

void join_thread(thread_handle t) {
    pthread_join(static_cast<pthread_t>(t.id), nullptr);
}

void detach_thread(thread_handle t) {
    pthread_detach(static_cast<pthread_t>(t.id));
}

// ---------------------------------------------------------------------------------------------
// Thread exit
// ---------------------------------------------------------------------------------------------

namespace {

void (*g_exit_hooks[kMaxThreadExitHooks])();
std::atomic<unsigned> g_exit_hook_count{0};
mutex g_exit_hook_lock;
pthread_key_t g_exit_key;
pthread_once_t g_exit_key_once = PTHREAD_ONCE_INIT;

thread_local bool tls_armed SLABKIT_TLS = false;
thread_local bool tls_exiting SLABKIT_TLS = false;

void run_exit_hooks(void *) {
    tls_exiting = true;
    unsigned n = g_exit_hook_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) g_exit_hooks[i]();
}

void make_exit_key() {
    pthread_key_create(&g_exit_key, run_exit_hooks);
}

// The key is made at load for the reason topology.cpp reads the topology then: no thread can be
// inside the once-call when another forks.
__attribute__((constructor)) void make_exit_key_at_load() {
    pthread_once(&g_exit_key_once, make_exit_key);
}

} // namespace

bool add_thread_exit_hook(void (*hook)()) {
    lock_guard guard(g_exit_hook_lock);
    unsigned n = g_exit_hook_count.load(std::memory_order_relaxed);
    if (n == kMaxThreadExitHooks) return false;
    g_exit_hooks[n] = hook;
    g_exit_hook_count.store(n + 1, std::memory_order_release);
    return true;
}

void arm_thread_exit() {
    if (SLABKIT_LIKELY(tls_armed)) return;
    pthread_once(&g_exit_key_once, make_exit_key);
    // Any non-null value makes pthread call the destructor at thread exit.
    pthread_setspecific(g_exit_key, reinterpret_cast<void *>(1));
    tls_armed = true;
}

bool thread_exiting() {
    return tls_exiting;
}

void yield_cpu() {
    sched_yield();
}

unsigned thread_id() {
    return static_cast<unsigned>(syscall(SYS_gettid));
}

namespace {
constinit thread_local bool tls_capturing SLABKIT_TLS = false;
}

unsigned capture_stack(uintptr_t *out, unsigned max, unsigned skip) {
    if (tls_capturing) return 0;
    tls_capturing = true;
    void *frames[32];
    unsigned want = max + skip + 1 < 32 ? max + skip + 1 : 32;
    int n = backtrace(frames, static_cast<int>(want));
    tls_capturing = false;
    unsigned got = 0;
    for (int i = static_cast<int>(skip) + 1; i < n && got < max; ++i)
        out[got++] = reinterpret_cast<uintptr_t>(frames[i]);
    return got;
}

void describe_address(uintptr_t addr, char *buf, size_t size) {
    Dl_info info;
    // A return address points after its call: look up the byte before it. Only one that can be
    // a user-space code address: a report of overwritten metadata may hand us the overwriting
    // bytes (0x4141414141414141), on which glibc 2.36's dladdr faults.
    if (addr < 4096 || addr >= (uintptr_t{1} << 47) ||
        dladdr(reinterpret_cast<void *>(addr - 1), &info) == 0 || !info.dli_fname) {
        snprintf(buf, size, "0x%lx", static_cast<unsigned long>(addr));
        return;
    }
    const char *module = strrchr(info.dli_fname, '/');
    module = module ? module + 1 : info.dli_fname;
    if (info.dli_sname) {
        snprintf(buf, size, "0x%lx %s+0x%lx (%s)", static_cast<unsigned long>(addr), info.dli_sname,
                 static_cast<unsigned long>(addr - reinterpret_cast<uintptr_t>(info.dli_saddr)),
                 module);
    } else {
        snprintf(buf, size, "0x%lx (%s+0x%lx)", static_cast<unsigned long>(addr), module,
                 static_cast<unsigned long>(addr - reinterpret_cast<uintptr_t>(info.dli_fbase)));
    }
}

bool in_own_module(uintptr_t addr) {
    Dl_info mine, info, program;
    if (addr < 4096 || addr >= (uintptr_t{1} << 47)) return false;
    if (dladdr(reinterpret_cast<void *>(&in_own_module), &mine) == 0) return false;
    if (dladdr(reinterpret_cast<void *>(addr - 1), &info) == 0) return false;
    if (info.dli_fbase != mine.dli_fbase) return false;
    // A library of its own (libslabkit.so, the preload): every frame in it is slabkit's.
    const auto phdr = reinterpret_cast<void *>(getauxval(AT_PHDR));
    if (!phdr || dladdr(phdr, &program) == 0 || program.dli_fbase != mine.dli_fbase) return true;
    // Linked into the program: slabkit's frames are its namespace's, its C API's and the malloc
    // family's it defines (a program linked with -rdynamic names them), and those the loader
    // cannot name (internal linkage: slabkit's unnamed namespaces; a program's static function
    // is passed over too, and its caller named).
    const char *n = info.dli_sname;
    if (!n) return true;
    static const char *const kEntries[] = {"malloc",        "calloc",        "realloc", "free",
                                           "reallocarray",  "memalign",      "valloc",  "pvalloc",
                                           "aligned_alloc", "posix_memalign"};
    if (strncmp(n, "_ZN7slabkit", 11) == 0 || strncmp(n, "slabkit_", 8) == 0 ||
        strncmp(n, "_Znw", 4) == 0 || strncmp(n, "_Zna", 4) == 0)
        return true;
    for (const char *e : kEntries)
        if (strcmp(n, e) == 0) return true;
    return false;
}

// ---------------------------------------------------------------------------------------------
// Fork
// ---------------------------------------------------------------------------------------------

namespace {

fork_hooks g_fork_hooks[kMaxForkHooks];
unsigned g_fork_hook_count = 0;
mutex g_fork_hook_lock;
bool g_atfork_registered = false;

void fork_prepare() {
    // The table lock is held across fork so that no hook is added half-way; released after.
    g_fork_hook_lock.lock();
    for (unsigned i = 0; i < g_fork_hook_count; ++i)
        if (g_fork_hooks[i].prepare) g_fork_hooks[i].prepare();
}

void fork_parent() {
    for (unsigned i = g_fork_hook_count; i-- > 0;)
        if (g_fork_hooks[i].parent) g_fork_hooks[i].parent();
    g_fork_hook_lock.unlock();
}

void fork_child() {
    for (unsigned i = g_fork_hook_count; i-- > 0;)
        if (g_fork_hooks[i].child) g_fork_hooks[i].child();
    g_fork_hook_lock.reset_after_fork();
    // The child's only thread keeps its slot; hooks run again at its exit if it was armed.
}

} // namespace

bool add_fork_hooks(const fork_hooks &hooks) {
    lock_guard guard(g_fork_hook_lock);
    if (g_fork_hook_count == kMaxForkHooks) return false;
    if (!g_atfork_registered) {
        if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0) return false;
        g_atfork_registered = true;
    }
    // Keep the table sorted by rank (insertion sort; a handful of entries).
    unsigned at = g_fork_hook_count;
    while (at > 0 && g_fork_hooks[at - 1].rank > hooks.rank) {
        g_fork_hooks[at] = g_fork_hooks[at - 1];
        --at;
    }
    g_fork_hooks[at] = hooks;
    ++g_fork_hook_count;
    return true;
}

// ---------------------------------------------------------------------------------------------
// A copy of the process
// ---------------------------------------------------------------------------------------------

long run_in_copy(size_t (*fn)(void *arg, char *out, size_t out_size), void *arg, char *out,
                 size_t out_size, unsigned timeout_ms, os_status *status) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        *status = {"pipe2", errno};
        return -1;
    }
    fork_prepare();
    // A raw clone: glibc's fork() would run the program's pthread_atfork handlers too. No exit
    // signal: the program gets no SIGCHLD for it, and its waitpid(-1) does not see it (only a
    // wait with __WALL does, as below).
    long pid = syscall(SYS_clone, 0, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) {
        fork_child();
        int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null_fd >= 0) dup2(null_fd, kStderrFd);
        close(fds[0]);
        size_t n = fn(arg, out, out_size);
        if (n > out_size) n = out_size;
        for (size_t done = 0; done < n;) {
            ssize_t w = write(fds[1], out + done, n - done);
            if (w <= 0) break;
            done += static_cast<size_t>(w);
        }
        _exit(0);
    }
    int clone_err = errno;
    fork_parent();
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        *status = {"clone", clone_err};
        return -1;
    }
    size_t got = 0;
    bool timed_out = false;
    const uint64_t deadline = now_ns() + uint64_t{timeout_ms} * 1000000u;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline) {
            timed_out = true;
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        int r = poll(&p, 1, static_cast<int>((deadline - now) / 1000000u) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        ssize_t n = read(fds[0], out + got, got < out_size ? out_size - got : 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break; // the copy closed its end: done (or it had nothing to say)
        got += static_cast<size_t>(n);
        if (got >= out_size) break;
    }
    close(fds[0]);
    if (timed_out) kill(static_cast<pid_t>(pid), SIGKILL);
    int wstatus = 0;
    while (waitpid(static_cast<pid_t>(pid), &wstatus, __WALL) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        *status = {"the copy did not finish in time", ETIMEDOUT};
        return -1;
    }
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        *status = {"the copy died", WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : EIO};
        return -1;
    }
    *status = {};
    return static_cast<long>(got);
}

} // namespace slabkit::platform
