// page_allocator.hpp - the buddy page allocator: slabkit's equivalent of the kernel's zones.
//
// Structures (per allocator instance):
//   zone[node]   one per NUMA node: buddy free lists for orders 0..kMaxOrder, split in two per
//                order - `dirty` (blocks with pages that may still be resident; newest first) and
//                `clean` (blocks wholly given back to the OS) - plus the node's chunks and
//                counters, all under zone::lock.
//   pcp[slot]    one per slot: lists of free blocks of orders 0..kPcpMaxOrder (5) that only its
//                owner touches (no lock), refilled and flushed `batch` pages at a time under the
//                zone lock, flushed when they hold more than `high` pages (the kernel's per-CPU
//                page lists, which cover the same orders since Linux 5.13).
//   arena_lock   serialises growth (reserving a new chunk for a node).
//
// Lock order: slot registry -> arena_lock -> zone::purge_lock -> zone::lock (one zone at a
// time) -> instance list.
//
// Giving memory back (see docs/page-allocator.md): every page handed out is marked dirty in its
// chunk's bitmap. Freed blocks join the front of their order's dirty list with the time. After a
// free, if the node's free-but-resident pages pass `retain_pages`, the oldest dirty blocks (across
// all orders) are decommitted (MADV_DONTNEED) until the node is back under 3/4 of it; and every
// decay_ms/4 a slow path decommits the dirty blocks that have been free for longer than
// `decay_ms`. The blocks are chosen and set aside under the zone lock; the system call runs after
// it is released. Allocation prefers dirty (warm) blocks to clean ones.
#pragma once

#include "page/page.hpp"
#include "page/page_list.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"
#include "slot/slot.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit {

// Why an allocation returned nullptr.
struct alloc_failure {
    enum code_t : uint8_t { none, bad_order, bad_node, limit, os } code = none;
    platform::os_status os_error{};
    // One readable line: "the arena limit of 1073741824 bytes is reached", ...
    const char *describe(char *buf, size_t size) const;
    uint64_t limit_bytes = 0;
    unsigned order = 0;
    int node = 0;
};

// Orders served by the per-slot lists: 0..5. The kernel's lists stop at PAGE_ALLOC_COSTLY_ORDER
// (3); the malloc family asks often for blocks of 32 to 128 KiB (orders 4 and 5), which would
// otherwise take the zone lock each time, and the lists' bound counts pages, not blocks, so the
// larger orders park no more memory.
inline constexpr unsigned kPcpMaxOrder = 5;
inline constexpr unsigned kPcpOrders = kPcpMaxOrder + 1;
// The smallest order page_allocator_config::protect_freed write-protects when freed: above the
// per-slot lists' orders, so that no protected block is ever parked on them.
inline constexpr unsigned kProtectMinOrder = kPcpMaxOrder + 1;
// page_allocator_config::protect_freed (SLABKIT_PROTECT_FREED).
inline constexpr uint8_t kProtectOff = 0;
inline constexpr uint8_t kProtectUntilReuse = 1;
inline constexpr uint8_t kProtectAlways = 2;

enum alloc_flags : unsigned {
    kThisNode = 1u << 0, // only the requested node (the caller's, with kAnyNode), no fallback
    kZero = 1u << 1,     // the block comes back zeroed
};

struct page_allocator_config {
    uint64_t max_bytes = 0;         // arena reservation limit; 0 = only the address space
    unsigned pcp_batch = 32;        // pages moved between a per-slot list and its zone at once
    unsigned pcp_high = 192;        // a per-slot list above this flushes `pcp_batch` pages
    uint64_t retain_pages = 4096;   // per node: free pages that may stay resident (16 MiB)
    unsigned decay_ms = 1000;       // free dirty blocks older than this are decommitted
    bool continue_on_error = false; // report bad frees and go on instead of aborting
    unsigned nodes = 0;             // 0: the platform topology's node count
    // A slot's lists may hold up to this many pages when they cycle more than pcp_high: a list
    // that had to flush and then had to refill raises its own bound by pcp_batch (the kernel's
    // per-CPU page list auto-tuning, Linux 6.7); the bound falls back to pcp_high when it has
    // not grown for decay_ms, and when the slot's lists are drained. 0: fixed at pcp_high.
    unsigned pcp_high_max = 0;
    // Once a node has this many pages out, the never-used rest of each of its chunks asks for
    // transparent huge pages (MADV_HUGEPAGE), so that a heap that keeps growing takes one fault
    // and one TLB entry per 2 MiB instead of 512. Below it pages stay 4 KiB: a small program's
    // every touched page would otherwise cost 2 MiB. 0: never.
    uint64_t huge_after_pages = 0;
    // 0: each chunk reserves its whole 1 GiB of address space at once (cheap without a limit).
    // Else chunks are partial: a new one maps its metadata and grow_bytes of pages, and grows in
    // place (doubling, while the address space after it is free) before another is made, so
    // that a process under an address-space limit (RLIMIT_AS) reserves little more than it
    // uses. A multiple of 4 MiB (a max-order block).
    uint64_t grow_bytes = 0;
    // Write-protect freed blocks above 128 KiB (order kProtectMinOrder and up) while they are
    // free: mprotect(PROT_READ) at the free, writable again when a block that covers any of
    // their pages is taken (readonly_bitmap.hpp). A write after free to such a block - the
    // malloc family's 128 KiB to 1 MiB blocks, kmalloc's page blocks - then faults where it
    // would have corrupted the next user of the pages; reads still see the old bytes. Each
    // protection change is a system call, a TLB flush and a split or merge of the mapping (3 us
    // on this project's VM whatever the size), so a program that cycles such blocks would pay
    // two a reuse: kProtectUntilReuse (the process's default) protects blocks of an order until
    // a protected block of that order is taken again, then stops protecting that order and those
    // below it, as glibc stops unmapping blocks of a size it saw freed and wanted again (its
    // mmap threshold rises). kProtectAlways protects every one.
    uint8_t protect_freed = kProtectOff;

    // Defaults, overridden by SLABKIT_ARENA_MAX_MB, SLABKIT_PCP_BATCH, SLABKIT_PCP_HIGH,
    // SLABKIT_PCP_HIGH_MAX (default for the process's allocator: 4 x pcp_high),
    // SLABKIT_RETAIN_KB, SLABKIT_DECAY_MS, SLABKIT_HUGE_PAGES_AFTER_MB (default for the process's
    // allocator: 32; 0: never), SLABKIT_ARENA_GROW_MB (default: 4 under an address-space
    // limit, else 0), SLABKIT_PROTECT_FREED (0, 1 or 2; default for the process's allocator:
    // 1, kProtectUntilReuse) and
    // SLABKIT_CONTINUE_ON_ERROR (0/1).
    static page_allocator_config from_env();
    // The address space the first chunk takes: kChunkSize, or with grow_bytes its metadata and
    // grow_bytes.
    uint64_t smallest_chunk() const {
        return grow_bytes ? kMetaPages * kPageSize + grow_bytes : kChunkSize;
    }
    // A readable reason why a configuration is invalid, or nullptr when it is fine.
    const char *invalid() const;
};

struct page_stats {
    struct node_stats {
        uint64_t free_blocks[kNrOrders]; // like /proc/buddyinfo
        uint64_t free_pages;             // in the buddy lists
        uint64_t free_resident;          // of those, pages that may still be resident
        uint64_t in_use;                 // handed out to callers
        uint64_t in_pcp;                 // on per-slot lists
        uint64_t usable_pages;           // in the node's chunks, metadata excluded
        uint64_t chunks;
        uint64_t returned;  // pages decommitted since start (cumulative)
        uint64_t decommits; // madvise calls made
        uint64_t readonly;  // free pages write-protected (protect_freed)
    };
    unsigned nodes = 0;
    node_stats node[platform::kMaxNodes] = {};
    // Totals over the nodes.
    uint64_t in_use = 0, in_pcp = 0, free_pages = 0, free_resident = 0, returned = 0;
    uint64_t readonly = 0;       // free pages write-protected (protect_freed)
    uint64_t resident = 0;       // in_use + in_pcp + free_resident: an upper bound of our RSS
    uint64_t reserved_bytes = 0; // address space of all chunks (metadata included)
    uint64_t chunks = 0;
    uint64_t errors = 0; // bad frees reported
    // Allocations refused because the arena could not grow (the limit, the OS): one per block
    // asked for, so a slab that then falls back to a smaller order counts its first refusal.
    uint64_t refusals = 0;
    uint64_t pcp_allocs = 0, pcp_frees = 0, pcp_refills = 0, pcp_flushes = 0;
};

class page_allocator {
  public:
    using config = page_allocator_config;

    // A new allocator with its own arena, placed in memory from the OS. nullptr when the config
    // is invalid (*why names the field) or the OS refuses the memory.
    static page_allocator *create(const config &cfg, const char **why = nullptr);
    // Releases the allocator and every chunk of its arena (all its pages must be free).
    static void destroy(page_allocator *pa);
    // The process's allocator, configured from the environment on first use.
    static page_allocator &global();

    // Allocates 2^order contiguous pages aligned to their size, on `node` (or the calling
    // thread's node for kAnyNode, falling back to others unless kThisNode). nullptr on failure,
    // with the reason in *why; the allocator stays usable.
    void *alloc(unsigned order, int node = kAnyNode, unsigned flags = 0,
                alloc_failure *why = nullptr);
    // Frees a block (nullptr: nothing, as the kernel's free_pages(0, order)). A bad address, a
    // block that is not allocated, or the wrong order is reported on stderr with the address and
    // what was wrong, then aborts (or, with continue_on_error, is counted and ignored: nothing is
    // freed).
    void free(void *addr, unsigned order);
    // Frees a block with the order it was allocated with.
    void free(void *addr);
    // The order of the allocated block starting at addr; -1 (and nothing reported) if none.
    int block_order(const void *addr) const;

    // Returns the calling thread's per-slot pages and those of idle slots to the buddy lists.
    void drain();
    // drain(), then decommits every free page that may be resident. Returns pages decommitted.
    uint64_t purge();

    // Calls fn(head, arg) for the head page of every allocated block (PG_head), node by node
    // under each zone's lock, walking the page descriptors of the chunks as far as they were
    // ever carved. Blocks that per-slot lists hand out or take back meanwhile may be missed or
    // seen: a caller walks for blocks it knows are stable (a slab design's leak report).
    void for_each_allocated(void (*fn)(page *head, void *arg), void *arg);

    void snapshot(page_stats *out) const;
    // Pages handed out (to callers and per-slot lists) and free pages that may be resident: an
    // upper bound of this allocator's RSS, metadata aside. Cheaper than snapshot(): one zone
    // lock at a time.
    uint64_t resident_pages() const;
    // /proc/buddyinfo-style text ("Node 0, zone   Normal  n0 n1 ... n10\n" per node), plus a
    // summary line. Returns the length written (truncated to fit, always NUL-terminated).
    size_t format_buddyinfo(char *buf, size_t size) const;
    // Checks every free list, block and counter (pcp lists of idle slots and the caller's too).
    // Returns the number of problems; the first are described in report (if given).
    unsigned validate(char *report = nullptr, size_t size = 0) const;

    unsigned nodes() const { return nodes_; }
    const config &settings() const { return cfg_; }
    uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
    // Moves each time a node passes its retain bound and gives back its oldest free blocks: the
    // program is freeing more than it reuses. Tiers above that keep memory of their own for
    // reuse (kmalloc's large blocks) read it as "let go of yours too".
    uint64_t over_retain_events() const { return over_retain_.load(std::memory_order_relaxed); }
    // The smallest order a freed block must have to be write-protected now (protect_freed):
    // kProtectMinOrder, raised past each order a protected block of was taken again under
    // kProtectUntilReuse; kNrOrders when nothing is protected.
    unsigned protect_order() const {
        if (cfg_.protect_freed == kProtectOff) return kNrOrders;
        const unsigned raised = protect_order_.load(std::memory_order_relaxed);
        return raised ? raised : kProtectMinOrder;
    }

    page_allocator(const config &cfg, unsigned nodes);
    // The process's allocator before global() starts it: constant-initialized, every byte zero,
    // so that it sits in .bss and costs no memory until its parts are touched (the per-slot
    // lists of 1024 slots and the zones of 64 nodes are 240 KB; constructing them at run time
    // wrote, and so made resident, all of it).
    struct static_tag {};
    constexpr explicit page_allocator(static_tag) noexcept
        : cfg_{0, 0, 0, 0, 0, false, 0, 0, 0}, nodes_(0), retain_pages_(0) {}
    ~page_allocator();
    page_allocator(const page_allocator &) = delete;
    page_allocator &operator=(const page_allocator &) = delete;

    // Internal pieces, public for the fork hooks and the unit tests of this layer.
    struct alignas(kCacheLine) zone {
        platform::mutex lock;
        page_list dirty[kNrOrders];
        page_list clean[kNrOrders];
        uint64_t free_pages = 0;
        uint64_t free_resident = 0;
        uint64_t out = 0; // pages handed to callers or to per-slot lists
        uint64_t usable_pages = 0;
        uint64_t returned = 0;
        uint64_t decommits = 0;
        uint64_t readonly_pages = 0; // free pages write-protected (protect_freed)
        uint64_t next_decay_ms = 0;
        // Free blocks being decommitted outside the lock (still counted in free_pages and, until
        // done, in free_resident); kept on a list so that a fork child can take them back.
        page_list purging;
        uint64_t purging_pages = 0;
        uint64_t purging_resident = 0;
        // Held while blocks are decommitted (taken before `lock`, never while holding it):
        // grow() waits on it instead of reserving memory the node is about to get back.
        platform::mutex purge_lock;
        unsigned nr_chunks = 0;
        chunk *chunks = nullptr;
        // Max-order blocks of the zone's chunks never handed out yet: each chunk carves them
        // from its `fresh_pfn` on demand (zone_take), so that a new chunk touches one
        // descriptor page, not one per block (252 pages, 1 MiB of RSS). Counted in free_pages.
        uint64_t fresh_blocks = 0;
    };
    // Blocks chosen under the zone lock to be decommitted after it is released.
    struct purge_batch {
        static constexpr unsigned kMax = 32;
        page *blocks[kMax];
        unsigned count = 0;
        bool full() const { return count == kMax; }
    };
    struct alignas(kCacheLine) pcp_list {
        page_list lists[kPcpOrders];    // free blocks by order; only the owning slot touches them
        uint64_t pages = 0;             // pages on all the lists
        std::atomic<uint64_t> count{0}; // mirror of `pages` for stats readers
        // Node of the pages on the list. Owner-written like the counters below; atomic (relaxed)
        // because snapshot() reads it from other threads.
        std::atomic<unsigned> node{0};
        // Owner-written counters (plain load+store, no read-modify-write): stats read them racily.
        std::atomic<uint64_t> allocs{0}, frees{0}, refills{0}, flushes{0};
        // The lists' bound now (0: pcp_high), whether they flushed since their last refill, and
        // when the bound last grew (page_allocator_config::pcp_high_max). Owner only.
        uint64_t high = 0;
        bool flushed = false;
        uint64_t high_grown_ms = 0;
    };
    void lock_all();
    void unlock_all();
    void after_fork_child();
    page_allocator *next_instance = nullptr;

  private:
    // Registers an allocator among the instances (fork hooks, bad-free diagnosis).
    void link_instance();
    void *alloc_from_zones(unsigned order, int node, unsigned flags, alloc_failure *why);
    page *carve_fresh(zone &z);
    // *os_error (when given) says why a block was found but could not be made writable again.
    page *zone_take(zone &z, unsigned order, uint64_t now, platform::os_status *os_error = nullptr);
    void zone_put(zone &z, page *pg, unsigned order, uint64_t now);
    void zone_free(page *pg, unsigned order);
    bool grow(unsigned node, unsigned order, alloc_failure *why);
    bool extend_chunk(zone &z, unsigned node, uint64_t reserved);
    void *pcp_alloc(unsigned slot, unsigned order, int node, unsigned flags, alloc_failure *why);
    void pcp_free(unsigned slot, page *pg, unsigned order);
    unsigned pcp_refill(pcp_list &pcp, unsigned order, unsigned node);
    void pcp_flush(pcp_list &pcp, uint64_t pages, unsigned first_order);
    // The slot's bound on the pages its lists hold now (see pcp_high_max).
    uint64_t pcp_high_of(pcp_list &pcp, uint64_t now);
    static void drain_slot_cb(unsigned slot, void *arg);
    void drain_idle_slots(uint64_t now);
    void merge_and_link(zone &z, page *pg, unsigned order, uint64_t now, bool known_dirty);
    void select_over_retain(zone &z, purge_batch &batch);
    void select_decayed(zone &z, uint64_t now, purge_batch &batch);
    void set_aside(zone &z, page *pg, unsigned order, purge_batch &batch);
    uint64_t decommit_batch(zone &z, purge_batch &batch);
    // After a batch that filled up (decayed blocks first, then blocks over retain_pages): keeps
    // decommitting until the node is back under its retain bound.
    void enforce_retain(zone &z);
    page *check_free(void *addr, unsigned order, bool order_known);
    void mark_allocated(page *pg, unsigned order);
    unsigned preferred_node(unsigned slot) const;

    config cfg_;
    unsigned nodes_;
    uint64_t retain_pages_;
    std::atomic<uint64_t> errors_{0};
    std::atomic<uint64_t> over_retain_{0};
    // protect_order() once raised; 0 (kProtectMinOrder) before, so that the process's allocator
    // stays all zero bytes, in .bss (a non-zero member moved its 320 KiB into .data: +130 KiB
    // of RSS in every process).
    std::atomic<unsigned> protect_order_{0};
    std::atomic<uint64_t> reserved_bytes_{0};
    std::atomic<uint64_t> refusals_{0}; // allocations refused: the arena could not grow
    std::atomic<uint64_t> next_idle_drain_ms_{0};
    platform::mutex arena_lock_;
    zone zones_[platform::kMaxNodes];
    pcp_list pcp_[kMaxSlots];
};

} // namespace slabkit
