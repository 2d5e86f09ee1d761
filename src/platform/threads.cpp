// threads.cpp - futex sleeping for platform::mutex, thread-exit hooks and fork hooks.
#include "base/compiler.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <execinfo.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
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
    // A return address points after its call: look up the byte before it.
    if (dladdr(reinterpret_cast<void *>(addr - 1), &info) == 0 || !info.dli_fname) {
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

} // namespace slabkit::platform
