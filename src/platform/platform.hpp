// platform.hpp - the only door from slabkit to the operating system.
//
// Every system call slabkit makes goes through the functions declared here; nothing above this
// layer includes <sys/mman.h>, <unistd.h>, <pthread.h> or reads /sys. The contract:
//
//  * No function here allocates through malloc (the malloc override sits on top of this layer).
//    Buffers are the caller's or static.
//  * Errors from the OS come back as values: an `os_status` naming the call and carrying errno,
//    which `describe()` turns into one readable line. Nothing here aborts on an OS error except
//    `fatal()`, whose job that is.
//  * Address space has three states: reserved (PROT_NONE, no memory behind it), committed
//    (readable and writable; the kernel backs pages on first touch), decommitted (still
//    accessible, contents dropped, RSS given back: MADV_DONTNEED, pages read as zero next time).
//  * Topology (CPUs and NUMA nodes) is read once, on first use, from sysfs.
//    SLABKIT_FAKE_NUMA=N splits the CPUs into N nodes so node code is tested on one-node machines.
//  * Thread-exit and fork hooks are registered into static tables here; one pthread key and one
//    pthread_atfork registration serve all of slabkit.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit::platform {

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

// The outcome of one OS call: `call` is the name of the call that failed (nullptr on success),
// `err` its errno.
struct os_status {
    const char *call = nullptr;
    int err = 0;
    constexpr bool ok() const { return call == nullptr; }
};

// Formats "call: strerror (errno N)" into buf and returns buf ("ok" for success).
const char *describe(os_status status, char *buf, size_t size);

// ---------------------------------------------------------------------------------------------
// Address space
// ---------------------------------------------------------------------------------------------

size_t page_size();

// Reserves `size` bytes of address space aligned to `align` (a power of two, at least the page
// size), with no access and no memory behind it. Returns nullptr and sets *status on failure.
void *reserve(size_t size, size_t align, os_status *status);
// Makes [addr, addr+size) readable and writable. addr and size are page multiples.
os_status commit(void *addr, size_t size);
// Gives the memory behind [addr, addr+size) back to the OS; the range stays accessible and
// reads as zeros afterwards.
os_status decommit(void *addr, size_t size);
// Makes [addr, addr+size) inaccessible again (guard pages); the memory is dropped too.
os_status protect_none(void *addr, size_t size);
// Makes [addr, addr+size) read-only, its memory kept (a freed block: a write after free
// faults); commit makes it writable again.
os_status protect_read(void *addr, size_t size);
// Asks the OS not to back [addr, addr+size) with transparent huge pages (MADV_NOHUGEPAGE): with
// THP set to "always", touching one 4 KiB page could otherwise make 2 MiB resident, and giving
// back 4 KiB would split a huge page.
os_status no_huge_pages(void *addr, size_t size);
// Asks the OS to back [addr, addr+size) with transparent huge pages where it can
// (MADV_HUGEPAGE): with THP set to "madvise" (Debian's default), only such ranges get them.
os_status huge_pages(void *addr, size_t size);
// Unmaps a reservation (or part of one).
os_status release(void *addr, size_t size);
// Resizes a committed mapping of old_size bytes to new_size (both page multiples), moving it if
// it must (mremap): the contents move with it, without a copy through user space. Returns the
// new address, or nullptr with *status set and the old mapping intact.
void *remap(void *addr, size_t old_size, size_t new_size, os_status *status);
// Moves the committed pages of [addr, addr+size) to `target` (mremap with MREMAP_FIXED), which
// must be `size` bytes of this process's own reservation: whatever was mapped there is replaced,
// the pages keep their contents and stay resident (no fault on their next touch), and the old
// range is unmapped. size is a page multiple; addr may be the start of part of a mapping.
os_status move_pages(void *addr, size_t size, void *target);
// Maps fresh, readable and writable address space over [addr, addr+size) (mmap MAP_FIXED),
// whatever was mapped there before (a range a move left unmapped, inside the caller's own
// reservation).
os_status map_fresh(void *addr, size_t size);
// Maps `size` bytes, readable and writable, at an `align`-aligned address without reserving the
// alignment's worth of address space beside them (reserve does, which a process under an
// address-space limit may not afford): it asks where the kernel would put `size` bytes and tries
// the aligned addresses at and below that, then above it, each only where nothing is mapped.
// nullptr with *status set when none is free or the OS refuses.
void *map_aligned_exact(size_t size, size_t align, os_status *status);
// Maps fresh, readable and writable address space over [addr, addr+size) only if nothing is
// mapped there (MAP_FIXED_NOREPLACE); {"mmap", EEXIST} when something is.
os_status map_at(void *addr, size_t size);
// The process's address-space limit (RLIMIT_AS, soft) in bytes; 0 when there is none.
uint64_t address_space_limit();
// Number of pages of [addr, addr+size) that are resident in RAM now (mincore); for tests and
// statistics. Returns 0 and sets *status on failure.
size_t resident_pages(const void *addr, size_t size, os_status *status);
// Asks that [addr, addr+size) be backed by memory of `node` (mbind, MPOL_PREFERRED). On a
// machine with one real node, or with fake NUMA, it does nothing and succeeds.
os_status bind_to_node(void *addr, size_t size, unsigned node);

// ---------------------------------------------------------------------------------------------
// CPUs and NUMA topology
// ---------------------------------------------------------------------------------------------

inline constexpr unsigned kMaxCpus = 1024;
inline constexpr unsigned kMaxNodes = 64;

struct topology {
    unsigned cpus = 1;               // CPU ids are 0 .. cpus-1 (possible CPUs)
    unsigned nodes = 1;              // node ids are 0 .. nodes-1
    unsigned real_nodes = 1;         // nodes the OS reported, before any fake split
    bool fake = false;               // true when SLABKIT_FAKE_NUMA split the CPUs
    uint8_t cpu_node[kMaxCpus]{};    // node of each CPU
    uint16_t node_cpus[kMaxNodes]{}; // how many CPUs each node has
};

// The process's topology, read on first use (thread-safe).
const topology &numa();
unsigned cpu_count();
// The CPU the calling thread runs on now (it may move right after); 0 if the OS cannot say.
unsigned current_cpu();

// A set of CPU ids, for parsing sysfs lists.
struct cpu_set {
    uint64_t bits[kMaxCpus / 64]{};
    void add(unsigned cpu) { bits[cpu / 64] |= uint64_t{1} << (cpu % 64); }
    bool has(unsigned cpu) const { return cpu < kMaxCpus && (bits[cpu / 64] >> (cpu % 64)) & 1; }
    unsigned count() const;
    unsigned highest_plus_one() const;
};

// Parses a sysfs CPU list such as "0-3,8,10-11\n" into *out. Returns false (and leaves a reason
// in *why) for text that is not such a list or names a CPU >= kMaxCpus.
bool parse_cpu_list(const char *text, cpu_set *out, const char **why);

// Builds a topology from what sysfs says (node CPU lists; `node_lists[i]` may be nullptr for a
// missing node) and an optional fake node count (0 = none). Pure: used by numa() and by tests.
// A fake count above the number of CPUs leaves the extra nodes without CPUs (memory-only nodes).
void build_topology(topology *out, unsigned possible_cpus, const cpu_set *node_cpus,
                    unsigned real_nodes, unsigned fake_nodes);

// ---------------------------------------------------------------------------------------------
// Environment, output, time
// ---------------------------------------------------------------------------------------------

// getenv without allocation; nullptr when unset.
const char *env(const char *name);
// Parses environment variable `name` as an unsigned integer in [min, max]. Unset: returns
// `fallback`. Set but not such a number: prints a clear warning naming the variable, the value
// and the accepted range, and returns `fallback`.
uint64_t env_uint(const char *name, uint64_t fallback, uint64_t min, uint64_t max);
// A setting with a "not given" state: `unset` when the variable is not set, else env_uint's
// reading of it in [min, max] (0 when it is not such a number, after the warning).
int env_int(const char *name, int unset, unsigned min, unsigned max);
// The next definition of a symbol after the calling library's (dlsym RTLD_NEXT), or nullptr.
// May allocate: never call it from inside an allocator lock.
void *next_symbol(const char *name);
// Writes all of buf to standard error (retrying short writes); never allocates; keeps errno.
void write_stderr(const char *buf, size_t len);
// The same to any file descriptor.
void write_fd(int fd, const char *buf, size_t len);
inline constexpr int kStderrFd = 2;
// printf-style message to standard error, formatted in a stack buffer.
void print_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints the message and aborts the process (SIGABRT).
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Prints like print_error and ends the process at once with `status` (a configuration error
// found at start: no core dump, no exit handlers).
[[noreturn]] void exit_with_error(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// The calling thread's kernel id (gettid).
unsigned thread_id();
// Up to `max` return addresses of the calling thread's stack, innermost first, skipping `skip`
// frames above the caller; 0 while the calling thread is already capturing (the unwinder's first
// use loads a library, which allocates: that allocation gets no stack rather than recursing).
// Never call it under an allocator lock.
unsigned capture_stack(uintptr_t *out, unsigned max, unsigned skip);
// "function+0xoff (module)" for a code address, as far as the dynamic loader can say, into buf.
void describe_address(uintptr_t addr, char *buf, size_t size);
// Whether a return address lies in the module (library or program) slabkit is built into: the
// frames a caller's site is found after. Asks the dynamic loader: not for fast paths.
bool in_own_module(uintptr_t addr);

// Monotonic clock in nanoseconds (CLOCK_MONOTONIC).
uint64_t now_ns();
// 64 random bits from the kernel (getrandom); where that fails, a mix of the clock, the process
// id and an address, which is unpredictable enough for the hardening secrets it seeds.
uint64_t random_u64();
// Coarse monotonic clock in milliseconds (CLOCK_MONOTONIC_COARSE): cheap, a few ms resolution.
uint64_t now_coarse_ms();
// Whether the clocks above read the kernel's vDSO directly (clock.cpp); false: the system call.
bool clock_from_vdso();

// ---------------------------------------------------------------------------------------------
// Threads and fork
// ---------------------------------------------------------------------------------------------

// Registers a function to run when any thread that called `arm_thread_exit()` exits. At most
// kMaxThreadExitHooks hooks; returns false when the table is full.
inline constexpr unsigned kMaxThreadExitHooks = 8;
bool add_thread_exit_hook(void (*hook)());
// Makes the calling thread run the thread-exit hooks when it exits. Cheap after the first call.
void arm_thread_exit();
// True while the calling thread is running its exit hooks (so callers can avoid re-arming).
bool thread_exiting();
// Gives the CPU to another thread (sched_yield).
void yield_cpu();

// Fork hooks: `prepare` runs before fork in ascending rank; `parent` and `child` run after it
// in descending rank (locks are taken in rank order and given back in reverse).
//
// The ranks are the global lock order: a prepare hook may wait only for locks that are never
// held by a thread waiting for a lower-ranked one. The slot registry's lock is held by visitors
// of idle slots, which take cache and page locks under it; nothing waits for it while holding
// another slabkit lock (taking a slot is lock-free, and slow paths only try it), and the locks
// under which pages are allocated rank before it all the same.
enum fork_rank : unsigned {
    // The CPUs' slots: a slow path's hold of one (taken without waiting, so that no holder ever
    // waits for the prepare hooks' locks while keeping it) is waited out first, so that the
    // child never inherits a CPU's structures half-changed by a thread it does not have.
    kForkRankCpuSlots = 2,
    kForkRankClassOpen = 5,   // kmalloc: opening a size class (allocates the cache's structures)
    kForkRankSlabBoot = 8,    // a design's bootstrap (allocates its meta caches' slabs)
    kForkRankSlots = 10,      // the slot registry; idle-slot drains take the locks below under it
    kForkRankCaches = 15,     // a design's cache registry and per-cache list locks
    kForkRankPages = 20,      // the page allocators
    kForkRankLarge = 30,      // kmalloc's large-block table (a leaf)
    kForkRankQuarantine = 35, // the debug layer's specification and quarantine (leaves)
    kForkRankLive = 40,       // the live statistics (a child drops its parent's segment)
};
inline constexpr unsigned kMaxForkHooks = 16;
struct fork_hooks {
    unsigned rank;
    void (*prepare)();
    void (*parent)();
    void (*child)();
};
bool add_fork_hooks(const fork_hooks &hooks);

// ---------------------------------------------------------------------------------------------
// Helper threads, processes and shared memory (the live statistics, api/live.cpp)
// ---------------------------------------------------------------------------------------------

// A thread of slabkit's own that runs fn(arg) with every signal blocked (the program's handlers
// never run on it). Its stack and descriptor come from pthread_create (glibc maps the stack;
// its thread-local blocks may come from malloc, which is then the process's). Returns false,
// with *status set, when it cannot be made.
struct thread_handle {
    unsigned long id = 0;
};
bool start_thread(void (*fn)(void *), void *arg, thread_handle *out, os_status *status);
// Waits for a thread started above to return.
void join_thread(thread_handle t);
// Lets it go: nobody will join it (its resources go when it returns).
void detach_thread(thread_handle t);

// A futex on a word other processes may map too (no FUTEX_PRIVATE_FLAG): waits while *word ==
// expected, at most timeout_ns; wakes every waiter.
void futex_wait_shared(std::atomic<uint32_t> *word, uint32_t expected, uint64_t timeout_ns);
void futex_wake_shared(std::atomic<uint32_t> *word);

// Sleeps the calling thread for ms milliseconds.
void sleep_ms(unsigned ms);
// CLOCK_REALTIME in nanoseconds (wall time, for a reader in another process).
uint64_t realtime_ns();

// Reads a small file (sysfs, /proc) into buf, NUL-terminated; false if it cannot be read or is
// empty.
bool read_small_file(const char *path, char *buf, size_t size);

// The process's id, its start time (field 22 of /proc/self/stat, in clock ticks since boot:
// with the pid, it names this process and no later one that reuses the pid) and its program
// name (/proc/self/comm; "?" when unreadable) into buf.
int process_id();
uint64_t process_start_ticks();
void program_name(char *buf, size_t size);

// A POSIX shared-memory object of `size` bytes (sparse), created afresh (an object of the same
// name left by a process that died is replaced), mode 0600, mapped shared and writable.
// nullptr with *status set on failure.
void *shared_memory_create(const char *name, size_t size, os_status *status);
// Unmaps what shared_memory_create mapped; `remove` also unlinks its name.
void shared_memory_close(const char *name, void *addr, size_t size, bool remove);

// A copy of the process (a clone without CLONE_VM and without an exit signal, which runs no
// pthread_atfork handler of the program's and sends it no SIGCHLD), made with slabkit's own fork
// hooks around it as for fork(): their prepare hooks take slabkit's locks first, so the copy sees
// every list whole. The copy runs the hooks' child side, sends its standard error to /dev/null,
// calls fn(arg, out, out_size) and writes the first *bytes it leaves in out back to the caller
// through a pipe, then exits. The caller waits at most timeout_ms. Returns the copy's text length,
// or -1 with *status set (also when the copy died, by a signal or timed out: status->call names
// what happened).
long run_in_copy(size_t (*fn)(void *arg, char *out, size_t out_size), void *arg, char *out,
                 size_t out_size, unsigned timeout_ms, os_status *status);

// Calls fn(start, end, arg) for every private mapping of the process that is readable and
// writable (/proc/self/maps' "rw-p": data and bss, stacks, anonymous memory), in address order;
// false when the list cannot be read. Allocates nothing (the leak scan runs it in a copy).
bool for_each_writable_mapping(void (*fn)(uintptr_t start, uintptr_t end, void *arg), void *arg);

// An anonymous in-memory file (memfd) to write a text to; -1 on failure. read_back reads up to
// size bytes of it from the start; close_fd closes it.
int temp_fd();
size_t read_back(int fd, char *buf, size_t size);
void close_fd(int fd);

} // namespace slabkit::platform
