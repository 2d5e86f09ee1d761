// rseq.hpp - restartable sequences: per-CPU data touched without locks or atomics.
//
// The kernel keeps, in a small area of each registered thread (struct rseq), the CPU the thread
// runs on, and aborts a *critical section* the thread is in when it is preempted, migrated or
// signalled: it moves the thread's instruction pointer to the section's abort handler. A section
// is a run of instructions that reads per-CPU data, checks that the thread still runs on that
// CPU, and ends in one committing store: either everything it did counts, or (before the
// commit) nothing it wrote is visible as done, and its caller retries. This header holds the
// area's layout, how slabkit finds the area (glibc 2.35 and later registers it for every thread:
// slabkit shares that registration through __rseq_offset and __rseq_size; where glibc does not,
// slabkit registers an area of its own, thread by thread), membarrier's rseq fence (which
// restarts the sections running on a CPU, for those who touch that CPU's data from elsewhere),
// and the few critical sections slabkit uses, as x86-64 inline assembly.
//
// Available when built for x86-64 without ThreadSanitizer (which cannot see the assembly's
// accesses) and when the kernel accepts the registration; `rseq_state()` says which and why.
#pragma once

#include "base/compiler.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#if defined(__has_feature)
#if !__has_feature(thread_sanitizer)
#define SLABKIT_HAVE_RSEQ 1
#endif
#else
#define SLABKIT_HAVE_RSEQ 1
#endif
#endif
#ifndef SLABKIT_HAVE_RSEQ
#define SLABKIT_HAVE_RSEQ 0
#endif

namespace slabkit::platform {

// What struct rseq holds (the kernel's ABI; only the fields slabkit reads or writes).
struct alignas(32) rseq_area {
    uint32_t cpu_id_start;
    uint32_t cpu_id; // the CPU now; ~0u: not registered yet, ~1u: registration failed
    uint64_t rseq_cs;
    uint32_t flags;
    uint32_t node_id;
    uint32_t mm_cid;
    uint32_t padding;
};
inline constexpr size_t kRseqAreaOffsetCpu = 4;
inline constexpr size_t kRseqAreaOffsetCs = 8;
// The signature before every abort handler: glibc's for x86, so that an area glibc registered
// accepts slabkit's sections.
inline constexpr uint32_t kRseqSignature = 0x53053053;

enum class rseq_source : uint8_t {
    none,  // no rseq: see rseq_state().why
    glibc, // glibc registered every thread's area; slabkit shares it
    own,   // slabkit registers an area of its own, each thread on its first use
};

struct rseq_status {
    rseq_source source = rseq_source::none;
    bool fence = false;        // membarrier's rseq fence is available (fence_cpu works)
    const char *why = nullptr; // a sentence: how the source was chosen, or why there is none
};

// Finds (once) how this process gets rseq; thread-safe.
const rseq_status &rseq_state();
// For the fork child's hook: a discovery that another thread had begun is begun again.
void rseq_after_fork_child();
// Makes sure the calling thread's area is registered (a no-op with glibc's). False when it
// cannot be (the thread keeps to the paths without rseq).
bool rseq_register_thread();
// Restarts every critical section running on `cpu` now (membarrier's expedited rseq fence),
// after which that CPU's next sections see every store the caller made before. False when the
// fence is not available or failed.
bool rseq_fence_cpu(unsigned cpu);
// The CPUs this process may run on now (sched_getaffinity of the calling thread), as bits.
// False when the OS cannot say.
bool allowed_cpus(uint64_t *bits, size_t words);

namespace detail {
// The area's offset from the thread pointer (the same for every thread: glibc's, or slabkit's
// initial-exec thread-local one). Meaningful once rseq_state().source != none.
extern SLABKIT_HIDDEN ptrdiff_t g_rseq_offset;
} // namespace detail
// Critical sections restarted since the process started (their abort handler counts them).
extern SLABKIT_HIDDEN std::atomic<uint64_t> g_rseq_restarts;

// A LIFO of free objects in one word: the head's address in the low 48 bits, the count in the
// high 16, so that a push or a pop is one committing store.
inline constexpr unsigned kPackedCountShift = 48;
inline constexpr uint64_t kPackedHeadMask = (uint64_t{1} << kPackedCountShift) - 1;

#if SLABKIT_HAVE_RSEQ

// The CPU the calling thread runs on, from its rseq area: one load. ~0u or ~1u when the thread
// has no registered area (only with rseq_source::own, before rseq_register_thread()).
SLABKIT_ALWAYS_INLINE unsigned rseq_cpu() {
    unsigned cpu;
    asm volatile("movl %%fs:4(%1), %0" : "=r"(cpu) : "r"(detail::g_rseq_offset));
    return cpu;
}
// The same, always a possible CPU's number (0 before registration): for picking the per-CPU
// structure a critical section then checks with rseq_cpu() - which fails it if the thread is not
// registered yet, or has moved since.
SLABKIT_ALWAYS_INLINE unsigned rseq_cpu_start() {
    unsigned cpu;
    asm volatile("movl %%fs:0(%1), %0" : "=r"(cpu) : "r"(detail::g_rseq_offset));
    return cpu;
}

// ---- critical sections ----------------------------------------------------------------------
//
// Each section: point the area's rseq_cs at the section's descriptor (start, length, abort
// handler; in section __rseq_cs), check that the thread still runs on `cpu`, check that the
// CPU's lock word is zero (someone holds the CPU's slot for a slow path otherwise), do the work,
// and commit with one store. The abort handler, preceded by the signature (as the kernel
// requires), counts the restart and leaves like a CPU mismatch or a held lock does: through
// `fail`, after which the caller takes its slow path (which holds the slot and finishes the
// work). The sections are leaves with few registers, so that the fast paths that inline them
// need no stack frame.

// Shared head of every section: descriptor, abort trampoline, arming, CPU and lock checks.
// Operands: %[off] the rseq offset, %[cpu] the expected CPU, %[lock] the CPU's lock word,
// %[tmp] a scratch register, %[restarts] the restart counter.
#define SLABKIT_RSEQ_BEGIN                                                                         \
    ".pushsection __rseq_cs, \"aw\"\n\t"                                                           \
    ".balign 32\n\t"                                                                               \
    "3:\n\t"                                                                                       \
    ".long 0, 0\n\t"                                                                               \
    ".quad 1f, (2f - 1f), 4f\n\t"                                                                  \
    ".popsection\n\t"                                                                              \
    ".pushsection __rseq_failure, \"ax\"\n\t"                                                      \
    ".byte 0x0f, 0xb9, 0x3d\n\t"                                                                   \
    ".long 0x53053053\n\t"                                                                         \
    "4:\n\t"                                                                                       \
    "lock incq %[restarts]\n\t"                                                                    \
    "jmp %l[fail]\n\t"                                                                             \
    ".popsection\n\t"                                                                              \
    "leaq 3b(%%rip), %[tmp]\n\t"                                                                   \
    "movq %[tmp], %%fs:8(%[off])\n\t"                                                              \
    "1:\n\t"                                                                                       \
    "cmpl %[cpu], %%fs:4(%[off])\n\t"                                                              \
    "jnz %l[fail]\n\t"                                                                             \
    "cmpl $0, (%[lock])\n\t"                                                                       \
    "jnz %l[fail]\n\t"

// Takes a CPU's lock word (0 -> 1) while running on that CPU. Everyone who takes it does so on
// its CPU, so no section of that CPU can be between its lock check and its commit meanwhile:
// those that were are aborted by the preemption that let the taker run. False when the word
// was taken already, or the thread is not (or no longer) on `cpu`: the caller reads the CPU
// again and retries, or goes without.
SLABKIT_ALWAYS_INLINE bool rseq_lock(std::atomic<uint32_t> *lock, unsigned cpu) {
    uint64_t tmp;
    asm volatile goto(SLABKIT_RSEQ_BEGIN "movl $1, (%[lock])\n\t"
                                         "2:\n\t"
                      : [tmp] "=&r"(tmp)
                      : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock),
                        [restarts] "m"(g_rseq_restarts)
                      : "memory", "cc"
                      : fail);
    return true;
fail:
    return false;
}

// The sections below work on a CPU's structure `c`, which they load from `*entry` (the CPU's
// entry of a per-slot pointer array) inside the section and fail on when it is null: a visitor
// that holds the CPU's slot may free the structure, and a section that loaded it earlier is
// aborted by the visitor's fence. The template arguments are byte offsets into `c`. Counters
// are bumped just before the commit: an abort in between counts an operation twice, the one
// inexactness of the statistics of the CPUs' slots.
#define SLABKIT_RSEQ_LOAD_C                                                                        \
    "movq (%[entry]), %[c]\n\t"                                                                    \
    "testq %[c], %[c]\n\t"                                                                         \
    "jz %l[fail]\n\t"

// Free pointers, stored obfuscated in hardened builds (SLABKIT_FREELIST_HARDENED; the rule is
// core/cache.hpp's): an object's next pointer is the stored word ^ the cache's secret ^ the
// byte-swapped address of the word. SLABKIT_RSEQ_LOAD_NEXT(obj, dst) loads obj's next pointer
// into dst (operands %[fp], and %[secret], the secret in memory); SLABKIT_RSEQ_ENCODE(reg) turns
// the next pointer in reg into what is stored (operand %[key]: the secret ^ the byte-swapped
// address, computed before the section). SLABKIT_RSEQ_SECRET / _KEY add those operands.
#if SLABKIT_FREELIST_HARDENED
#define SLABKIT_RSEQ_LOAD_NEXT(obj, dst)                                                           \
    "leaq (%[" obj "], %[fp]), %[" dst "]\n\t"                                                     \
    "bswapq %[" dst "]\n\t"                                                                        \
    "xorq (%[" obj "], %[fp]), %[" dst "]\n\t"                                                     \
    "xorq %[secret], %[" dst "]\n\t"
#define SLABKIT_RSEQ_ENCODE(reg) "xorq %[key], %[" reg "]\n\t"
#define SLABKIT_RSEQ_SECRET(secret) , [secret] "m"(*(secret))
#define SLABKIT_RSEQ_KEY(key) , [key] "r"(key)
#else
#define SLABKIT_RSEQ_LOAD_NEXT(obj, dst) "movq (%[" obj "], %[fp]), %[" dst "]\n\t"
#define SLABKIT_RSEQ_ENCODE(reg) ""
#define SLABKIT_RSEQ_SECRET(secret)
#define SLABKIT_RSEQ_KEY(key)
#endif

// The hardening check of every free (SLABKIT_FREELIST_CHECK, core/report.hpp): a push of the
// list's own first object is a double free, which leaves through %l[twice] before any store.
#if SLABKIT_FREELIST_CHECK
#define SLABKIT_RSEQ_CHECK_TWICE(head)                                                             \
    "cmpq %[obj], %[" head "]\n\t"                                                                 \
    "je %l[twice]\n\t"
#else
#define SLABKIT_RSEQ_CHECK_TWICE(head) ""
#endif
// What a push returns when obj was the list's first object already.
inline constexpr uint32_t kRseqDoubleFree = UINT32_MAX;

// Pops the head of the packed LIFO at c + word_disp (its next pointer `fp_offset` bytes into
// the object) and bumps the counter at c + stat_disp. nullptr when empty or when the section
// failed (see above): the caller takes its slow path.
template <int word_disp, int stat_disp>
SLABKIT_ALWAYS_INLINE void *rseq_pop_packed(const void *entry, std::atomic<uint32_t> *lock,
                                            unsigned cpu, size_t fp_offset,
                                            const uint64_t *secret) {
    uint64_t w, head, next, c;
    asm volatile goto(
        SLABKIT_RSEQ_BEGIN SLABKIT_RSEQ_LOAD_C
        "movq %c[wdisp](%[c]), %[tmp]\n\t"
        "movq %[tmp], %[head]\n\t"
        "shlq $16, %[head]\n\t"
        "shrq $16, %[head]\n\t"
        "jz %l[fail]\n\t" SLABKIT_RSEQ_LOAD_NEXT("head", "next") "shrq $48, %[tmp]\n\t"
                                                                 "subq $1, %[tmp]\n\t"
                                                                 "shlq $48, %[tmp]\n\t"
                                                                 "orq %[next], %[tmp]\n\t"
                                                                 "addq $1, %c[sdisp](%[c])\n\t"
                                                                 "movq %[tmp], %c[wdisp](%[c])\n\t"
                                                                 "2:\n\t"
        : [tmp] "=&r"(w), [head] "=&r"(head), [next] "=&r"(next), [c] "=&r"(c)
        : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock), [entry] "r"(entry),
          [fp] "r"(fp_offset), [wdisp] "i"(word_disp), [sdisp] "i"(stat_disp),
          [restarts] "m"(g_rseq_restarts)SLABKIT_RSEQ_SECRET(secret)
        : "memory", "cc"
        : fail);
    (void)secret;
    return reinterpret_cast<void *>(head);
fail:
    return nullptr;
}

// Pushes obj on the packed LIFO at c + word_disp (writing the old head into obj's next pointer
// first: obj is the caller's, so that store needs no undoing). Returns the new count, 0 when
// the section failed, kRseqDoubleFree when obj was the head already (nothing stored).
template <int word_disp>
SLABKIT_ALWAYS_INLINE uint32_t rseq_push_packed(const void *entry, std::atomic<uint32_t> *lock,
                                                unsigned cpu, size_t fp_offset, void *obj,
                                                uint64_t key) {
    uint64_t w, n, c;
    asm volatile goto(SLABKIT_RSEQ_BEGIN SLABKIT_RSEQ_LOAD_C
                      "movq %c[wdisp](%[c]), %[tmp]\n\t"
                      "movq %[tmp], %[n]\n\t"
                      "shlq $16, %[n]\n\t"
                      "shrq $16, %[n]\n\t" SLABKIT_RSEQ_CHECK_TWICE("n")
                          SLABKIT_RSEQ_ENCODE("n") "movq %[n], (%[obj], %[fp])\n\t"
                                                   "shrq $48, %[tmp]\n\t"
                                                   "addq $1, %[tmp]\n\t"
                                                   "movq %[tmp], %[n]\n\t"
                                                   "shlq $48, %[tmp]\n\t"
                                                   "orq %[obj], %[tmp]\n\t"
                                                   "movq %[tmp], %c[wdisp](%[c])\n\t"
                                                   "2:\n\t"
                      : [tmp] "=&r"(w), [n] "=&r"(n), [c] "=&r"(c)
                      : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock),
                        [entry] "r"(entry), [fp] "r"(fp_offset), [obj] "r"(obj),
                        [wdisp] "i"(word_disp), [restarts] "m"(g_rseq_restarts)SLABKIT_RSEQ_KEY(key)
                      : "memory", "cc"
                      : fail, twice);
    (void)key;
    return static_cast<uint32_t>(n);
fail:
    return 0;
twice:
    return kRseqDoubleFree;
}

// Pops the head of a plain LIFO whose head pointer is at c + head_disp and bumps the counter at
// c + stat_disp. nullptr when empty or when the section failed.
template <int head_disp, int stat_disp>
SLABKIT_ALWAYS_INLINE void *rseq_pop_list(const void *entry, std::atomic<uint32_t> *lock,
                                          unsigned cpu, size_t fp_offset, const uint64_t *secret) {
    uint64_t tmp, obj, c;
    asm volatile goto(
        SLABKIT_RSEQ_BEGIN SLABKIT_RSEQ_LOAD_C
        "movq %c[hdisp](%[c]), %[obj]\n\t"
        "testq %[obj], %[obj]\n\t"
        "jz %l[fail]\n\t" SLABKIT_RSEQ_LOAD_NEXT("obj", "tmp") "addq $1, %c[sdisp](%[c])\n\t"
                                                               "movq %[tmp], %c[hdisp](%[c])\n\t"
                                                               "2:\n\t"
        : [tmp] "=&r"(tmp), [obj] "=&r"(obj), [c] "=&r"(c)
        : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock), [entry] "r"(entry),
          [fp] "r"(fp_offset), [hdisp] "i"(head_disp), [sdisp] "i"(stat_disp),
          [restarts] "m"(g_rseq_restarts)SLABKIT_RSEQ_SECRET(secret)
        : "memory", "cc"
        : fail);
    (void)secret;
    return reinterpret_cast<void *>(obj);
fail:
    return nullptr;
}

// Pushes obj on a plain LIFO whose head pointer is at c + head_disp, if the word at
// c + guard_disp equals `guard` (SLUB: the object's slab is the CPU's current slab), and bumps
// the counter at c + stat_disp. 1 when pushed; 0 when the guard differs or the section failed;
// kRseqDoubleFree when obj was the head already (nothing stored).
template <int head_disp, int guard_disp, int stat_disp>
SLABKIT_ALWAYS_INLINE uint32_t rseq_push_list_if(const void *entry, std::atomic<uint32_t> *lock,
                                                 unsigned cpu, size_t fp_offset, void *obj,
                                                 const void *guard, uint64_t key) {
    uint64_t tmp, c;
    asm volatile goto(SLABKIT_RSEQ_BEGIN SLABKIT_RSEQ_LOAD_C
                      "cmpq %[guard], %c[gdisp](%[c])\n\t"
                      "jnz %l[fail]\n\t"
                      "movq %c[hdisp](%[c]), %[tmp]\n\t" SLABKIT_RSEQ_CHECK_TWICE("tmp")
                          SLABKIT_RSEQ_ENCODE("tmp") "movq %[tmp], (%[obj], %[fp])\n\t"
                                                     "addq $1, %c[sdisp](%[c])\n\t"
                                                     "movq %[obj], %c[hdisp](%[c])\n\t"
                                                     "2:\n\t"
                      : [tmp] "=&r"(tmp), [c] "=&r"(c)
                      : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock),
                        [entry] "r"(entry), [fp] "r"(fp_offset), [obj] "r"(obj), [guard] "r"(guard),
                        [hdisp] "i"(head_disp), [gdisp] "i"(guard_disp), [sdisp] "i"(stat_disp),
                        [restarts] "m"(g_rseq_restarts)SLABKIT_RSEQ_KEY(key)
                      : "memory", "cc"
                      : fail, twice);
    (void)key;
    return 1;
fail:
    return 0;
twice:
    return kRseqDoubleFree;
}

// An array stack (SLAB's array_cache) in c: a 32-bit count at offset 0, a 32-bit limit at
// limit_disp, a 32-bit `touched` flag at touched_disp, and the entries (pointers) from
// entries_disp.
//
// Pops the top entry (setting touched, bumping the counter at stat_disp); nullptr when the
// array is empty or the section failed.
template <int touched_disp, int stat_disp, int entries_disp>
SLABKIT_ALWAYS_INLINE void *rseq_pop_array(const void *entry, std::atomic<uint32_t> *lock,
                                           unsigned cpu) {
    uint64_t n, obj, c;
    asm volatile goto(SLABKIT_RSEQ_BEGIN SLABKIT_RSEQ_LOAD_C
                      "movl (%[c]), %k[tmp]\n\t"
                      "subl $1, %k[tmp]\n\t"
                      "jb %l[fail]\n\t"
                      "movq %c[edisp](%[c], %[tmp], 8), %[obj]\n\t"
                      "movl $1, %c[tdisp](%[c])\n\t"
                      "addq $1, %c[sdisp](%[c])\n\t"
                      "movl %k[tmp], (%[c])\n\t"
                      "2:\n\t"
                      : [tmp] "=&r"(n), [obj] "=&r"(obj), [c] "=&r"(c)
                      : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock),
                        [entry] "r"(entry), [tdisp] "i"(touched_disp), [sdisp] "i"(stat_disp),
                        [edisp] "i"(entries_disp), [restarts] "m"(g_rseq_restarts)
                      : "memory", "cc"
                      : fail);
    return reinterpret_cast<void *>(obj);
fail:
    return nullptr;
}

// SLAB's version of the hardening check (SLABKIT_SLAB_ARRAY_CHECK): obj is the array's top
// entry already (count in %[tmp]).
#if SLABKIT_SLAB_ARRAY_CHECK
#define SLABKIT_RSEQ_CHECK_TOP                                                                     \
    "testl %k[tmp], %k[tmp]\n\t"                                                                   \
    "jz 5f\n\t"                                                                                    \
    "cmpq %[obj], %c[edisp]-8(%[c], %[tmp], 8)\n\t"                                                \
    "je %l[twice]\n\t"                                                                             \
    "5:\n\t"
#else
#define SLABKIT_RSEQ_CHECK_TOP ""
#endif

// Pushes obj on the array if it is below its limit (bumping the counter at stat_disp): 1 when
// pushed, 0 when it is full or the section failed, kRseqDoubleFree when obj is the top entry
// already (nothing stored).
template <int limit_disp, int stat_disp, int entries_disp>
SLABKIT_ALWAYS_INLINE uint32_t rseq_push_array(const void *entry, std::atomic<uint32_t> *lock,
                                               unsigned cpu, void *obj) {
    uint64_t n, c;
    asm volatile goto(SLABKIT_RSEQ_BEGIN SLABKIT_RSEQ_LOAD_C
                      "movl (%[c]), %k[tmp]\n\t" SLABKIT_RSEQ_CHECK_TOP
                      "cmpl %c[ldisp](%[c]), %k[tmp]\n\t"
                      "jae %l[fail]\n\t"
                      "movq %[obj], %c[edisp](%[c], %[tmp], 8)\n\t"
                      "addl $1, %k[tmp]\n\t"
                      "addq $1, %c[sdisp](%[c])\n\t"
                      "movl %k[tmp], (%[c])\n\t"
                      "2:\n\t"
                      : [tmp] "=&r"(n), [c] "=&r"(c)
                      : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock),
                        [entry] "r"(entry), [ldisp] "i"(limit_disp), [sdisp] "i"(stat_disp),
                        [edisp] "i"(entries_disp), [obj] "r"(obj), [restarts] "m"(g_rseq_restarts)
                      : "memory", "cc"
                      : fail, twice);
    return 1;
fail:
    return 0;
twice:
    return kRseqDoubleFree;
}

// A sheaf (src/sheaves): c holds, at main_disp, a pointer to its main sheaf, which has a 32-bit
// size at offset 0, a 32-bit capacity at offset 4 and the entries (pointers) from entries_disp.
// The sheaf is loaded inside the section, after c: a visitor that holds the CPU's slot may swap
// or free it, and its fence aborts a section that loaded the old one.
//
// Pops the top entry of c's main sheaf (bumping the counter at c + stat_disp); nullptr when the
// sheaf is empty or the section failed.
template <int main_disp, int stat_disp, int entries_disp>
SLABKIT_ALWAYS_INLINE void *rseq_pop_sheaf(const void *entry, std::atomic<uint32_t> *lock,
                                           unsigned cpu) {
    uint64_t n, obj, c, sh;
    asm volatile goto(SLABKIT_RSEQ_BEGIN SLABKIT_RSEQ_LOAD_C
                      "movq %c[mdisp](%[c]), %[sh]\n\t"
                      "movl (%[sh]), %k[tmp]\n\t"
                      "subl $1, %k[tmp]\n\t"
                      "jb %l[fail]\n\t"
                      "movq %c[edisp](%[sh], %[tmp], 8), %[obj]\n\t"
                      "addq $1, %c[sdisp](%[c])\n\t"
                      "movl %k[tmp], (%[sh])\n\t"
                      "2:\n\t"
                      : [tmp] "=&r"(n), [obj] "=&r"(obj), [c] "=&r"(c), [sh] "=&r"(sh)
                      : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock),
                        [entry] "r"(entry), [mdisp] "i"(main_disp), [sdisp] "i"(stat_disp),
                        [edisp] "i"(entries_disp), [restarts] "m"(g_rseq_restarts)
                      : "memory", "cc"
                      : fail);
    return reinterpret_cast<void *>(obj);
fail:
    return nullptr;
}

// The array check (SLABKIT_SLAB_ARRAY_CHECK) on a sheaf: obj is its top entry already.
#if SLABKIT_SLAB_ARRAY_CHECK
#define SLABKIT_RSEQ_CHECK_SHEAF_TOP                                                               \
    "testl %k[tmp], %k[tmp]\n\t"                                                                   \
    "jz 5f\n\t"                                                                                    \
    "cmpq %[obj], %c[edisp]-8(%[sh], %[tmp], 8)\n\t"                                               \
    "je %l[twice]\n\t"                                                                             \
    "5:\n\t"
#else
#define SLABKIT_RSEQ_CHECK_SHEAF_TOP ""
#endif

// Pushes obj on c's main sheaf if it is below its capacity (bumping the counter at
// c + stat_disp): 1 when pushed, 0 when it is full or the section failed, kRseqDoubleFree when
// obj is the top entry already (nothing stored).
template <int main_disp, int stat_disp, int entries_disp>
SLABKIT_ALWAYS_INLINE uint32_t rseq_push_sheaf(const void *entry, std::atomic<uint32_t> *lock,
                                               unsigned cpu, void *obj) {
    uint64_t n, c, sh;
    asm volatile goto(SLABKIT_RSEQ_BEGIN SLABKIT_RSEQ_LOAD_C
                      "movq %c[mdisp](%[c]), %[sh]\n\t"
                      "movl (%[sh]), %k[tmp]\n\t" SLABKIT_RSEQ_CHECK_SHEAF_TOP
                      "cmpl 4(%[sh]), %k[tmp]\n\t"
                      "jae %l[fail]\n\t"
                      "movq %[obj], %c[edisp](%[sh], %[tmp], 8)\n\t"
                      "addl $1, %k[tmp]\n\t"
                      "addq $1, %c[sdisp](%[c])\n\t"
                      "movl %k[tmp], (%[sh])\n\t"
                      "2:\n\t"
                      : [tmp] "=&r"(n), [c] "=&r"(c), [sh] "=&r"(sh)
                      : [off] "r"(detail::g_rseq_offset), [cpu] "r"(cpu), [lock] "r"(lock),
                        [entry] "r"(entry), [mdisp] "i"(main_disp), [sdisp] "i"(stat_disp),
                        [edisp] "i"(entries_disp), [obj] "r"(obj), [restarts] "m"(g_rseq_restarts)
                      : "memory", "cc"
                      : fail, twice);
    return 1;
fail:
    return 0;
twice:
    return kRseqDoubleFree;
}

#endif // SLABKIT_HAVE_RSEQ

} // namespace slabkit::platform
