// rseq.cpp - finding the calling thread's rseq area (glibc's or slabkit's own), membarrier's
// rseq fence, and the affinity mask.
#include "platform/rseq.hpp"

#include "platform/platform.hpp"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

// glibc 2.35 and later: where it put each thread's registered area, and its size (0 when glibc
// did not register one: an older kernel, or GLIBC_TUNABLES=glibc.pthread.rseq=0). Weak, so that
// slabkit also loads with an older glibc.
extern "C" {
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
}

namespace slabkit::platform {

namespace detail {
ptrdiff_t g_rseq_offset = 0;
} // namespace detail
std::atomic<uint64_t> g_rseq_restarts{0};

namespace {

#if SLABKIT_HAVE_RSEQ
// slabkit's own area, used when glibc registered none; cpu_id starts as "not registered".
constinit thread_local rseq_area tls_area SLABKIT_TLS = {0, ~0u, 0, 0, 0, 0, 0};
constinit thread_local bool tls_registered SLABKIT_TLS = false;

bool register_own() {
    if (tls_registered) return true;
    long rc =
        syscall(__NR_rseq, &tls_area, static_cast<uint32_t>(sizeof(rseq_area)), 0, kRseqSignature);
    if (rc != 0 && errno != EBUSY) {
        tls_area.cpu_id = ~1u;
        return false;
    }
    tls_registered = true;
    return true;
}
#endif

rseq_status discover() {
    rseq_status st;
#if !SLABKIT_HAVE_RSEQ
    st.why = "not built with rseq (slabkit's critical sections are written for x86-64, and "
             "ThreadSanitizer cannot see them)";
    return st;
#else
    if (&__rseq_size != nullptr && __rseq_size >= 20) {
        detail::g_rseq_offset = __rseq_offset;
        st.source = rseq_source::glibc;
        st.why = "glibc registered rseq for every thread (__rseq_size > 0): slabkit shares it";
    } else {
        int saved = errno;
        bool ok = register_own();
        int err = errno;
        errno = saved;
        if (!ok) {
            st.why = err == ENOSYS ? "the kernel has no rseq system call (ENOSYS)"
                                   : "the kernel refused slabkit's rseq registration";
            return st;
        }
        detail::g_rseq_offset =
            reinterpret_cast<char *>(&tls_area) - static_cast<char *>(__builtin_thread_pointer());
        st.source = rseq_source::own;
        st.why = "glibc registered no rseq area: slabkit registers its own, thread by thread";
    }
    int saved = errno;
    st.fence = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0;
    errno = saved;
    return st;
#endif
}

} // namespace

namespace {
// Found once. Not a function-local static: its guard, held by a thread that was discovering at
// fork, would never be released in the child (which has only the forking thread).
rseq_status g_state;
std::atomic<int> g_state_ready{0}; // 0: not found, 1: a thread is finding it, 2: found
} // namespace

const rseq_status &rseq_state() {
    if (SLABKIT_LIKELY(g_state_ready.load(std::memory_order_acquire) == 2)) return g_state;
    for (;;) {
        int expected = 0;
        if (g_state_ready.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
            g_state = discover();
            g_state_ready.store(2, std::memory_order_release);
            return g_state;
        }
        if (expected == 2) return g_state;
        yield_cpu(); // another thread is finding it: a few system calls
    }
}

void rseq_after_fork_child() {
    // A thread that was finding the state does not exist here: find it again.
    int finding = 1;
    g_state_ready.compare_exchange_strong(finding, 0, std::memory_order_relaxed);
}

bool rseq_register_thread() {
#if SLABKIT_HAVE_RSEQ
    const rseq_status &st = rseq_state();
    if (st.source == rseq_source::glibc) return true;
    if (st.source == rseq_source::none) return false;
    int saved = errno;
    bool ok = register_own();
    errno = saved;
    return ok;
#else
    return false;
#endif
}

bool rseq_fence_cpu(unsigned cpu) {
    if (!rseq_state().fence) return false;
    int saved = errno;
    long rc = syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
                      MEMBARRIER_CMD_FLAG_CPU, static_cast<int>(cpu));
    errno = saved;
    return rc == 0;
}

bool allowed_cpus(uint64_t *bits, size_t words) {
    cpu_set_t set;
    CPU_ZERO(&set);
    // The system call itself (it fills the mask's first bytes and returns how many): glibc's
    // wrapper sits on a page of its code that programs seldom run, and faulting it in maps a
    // 64 KiB window of libc into every process that frees (clock.cpp says more).
    int saved = errno;
    long rc = syscall(SYS_sched_getaffinity, 0, sizeof(set), &set);
    errno = saved;
    if (rc < 0) return false;
    memset(bits, 0, words * sizeof(uint64_t));
    for (size_t cpu = 0; cpu < words * 64 && cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &set)) bits[cpu / 64] |= uint64_t{1} << (cpu % 64);
    return true;
}

} // namespace slabkit::platform
