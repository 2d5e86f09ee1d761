// page_allocator.cpp - configuration, instances, the alloc/free entry points and the checks that
// turn bad frees into clear reports.
#include "page/page_allocator.hpp"

#include "page/dirty_bitmap.hpp"
#include "page/readonly_bitmap.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

namespace slabkit {

// ---------------------------------------------------------------------------------------------
// Configuration and failure reasons
// ---------------------------------------------------------------------------------------------

// The process's allocator asks for huge pages once a node has 32 MiB out (huge_after_pages):
// above every small program's heap (a shell, python3 -c pass, compilers' small runs stay under 8),
// and early enough that a heap of a few hundred MiB takes most of its pages 2 MiB at a time.
constexpr uint64_t kHugeAfterMiB = 32;

// Under an address-space limit a chunk starts with 4 MiB for use (one max-order block) and grows
// in place: a small program's heap then costs its metadata's 16 MiB of address space and not
// much more than it uses.
constexpr uint64_t kLimitedGrowMiB = 4;

page_allocator_config page_allocator_config::from_env() {
    page_allocator_config cfg;
    const uint64_t grow_mib = platform::address_space_limit() ? kLimitedGrowMiB : 0;
    cfg.grow_bytes = platform::env_uint("SLABKIT_ARENA_GROW_MB", grow_mib, 0, kUsablePages >> 8)
                     << 20;
    if (cfg.grow_bytes % (kPageSize << kMaxOrder) != 0) {
        const uint64_t up =
            (cfg.grow_bytes + (kPageSize << kMaxOrder) - 1) & ~((kPageSize << kMaxOrder) - 1);
        platform::print_error("slabkit: SLABKIT_ARENA_GROW_MB=%llu is not a multiple of 4; "
                              "using %llu\n",
                              static_cast<unsigned long long>(cfg.grow_bytes >> 20),
                              static_cast<unsigned long long>(up >> 20));
        cfg.grow_bytes = up;
    }
    cfg.max_bytes = platform::env_uint("SLABKIT_ARENA_MAX_MB", 0, 0, uint64_t{1} << 27) << 20;
    if (cfg.max_bytes && cfg.max_bytes < cfg.smallest_chunk()) {
        platform::print_error("slabkit: SLABKIT_ARENA_MAX_MB=%llu is below one arena chunk (%llu "
                              "MiB); using %llu\n",
                              static_cast<unsigned long long>(cfg.max_bytes >> 20),
                              static_cast<unsigned long long>(cfg.smallest_chunk() >> 20),
                              static_cast<unsigned long long>(cfg.smallest_chunk() >> 20));
        cfg.max_bytes = cfg.smallest_chunk();
    }
    cfg.pcp_batch =
        static_cast<unsigned>(platform::env_uint("SLABKIT_PCP_BATCH", cfg.pcp_batch, 1, 4096));
    cfg.pcp_high =
        static_cast<unsigned>(platform::env_uint("SLABKIT_PCP_HIGH", cfg.pcp_high, 0, 1u << 20));
    if (cfg.pcp_high < cfg.pcp_batch && cfg.pcp_high != 0) {
        platform::print_error("slabkit: SLABKIT_PCP_HIGH=%u is below SLABKIT_PCP_BATCH=%u; "
                              "using %u\n",
                              cfg.pcp_high, cfg.pcp_batch, cfg.pcp_batch);
        cfg.pcp_high = cfg.pcp_batch;
    }
    cfg.pcp_high_max = static_cast<unsigned>(
        platform::env_uint("SLABKIT_PCP_HIGH_MAX", uint64_t{4} * cfg.pcp_high, 0, 1u << 20));
    if (cfg.pcp_high_max != 0 && cfg.pcp_high_max < cfg.pcp_high) {
        platform::print_error("slabkit: SLABKIT_PCP_HIGH_MAX=%u is below SLABKIT_PCP_HIGH=%u; "
                              "using %u\n",
                              cfg.pcp_high_max, cfg.pcp_high, cfg.pcp_high);
        cfg.pcp_high_max = cfg.pcp_high;
    }
    cfg.retain_pages =
        platform::env_uint("SLABKIT_RETAIN_KB", cfg.retain_pages * (kPageSize / 1024), 0,
                           uint64_t{1} << 40) /
        (kPageSize / 1024);
    cfg.decay_ms = static_cast<unsigned>(
        platform::env_uint("SLABKIT_DECAY_MS", cfg.decay_ms, 0, 3600u * 1000u));
    cfg.huge_after_pages =
        platform::env_uint("SLABKIT_HUGE_PAGES_AFTER_MB", kHugeAfterMiB, 0, uint64_t{1} << 27)
        << (20 - kPageShift);
    cfg.continue_on_error = platform::env_uint("SLABKIT_CONTINUE_ON_ERROR", 0, 0, 1) != 0;
    cfg.protect_freed = static_cast<uint8_t>(
        platform::env_uint("SLABKIT_PROTECT_FREED", kProtectUntilReuse, 0, kProtectAlways));
    return cfg;
}

const char *page_allocator_config::invalid() const {
    if (grow_bytes % (kPageSize << kMaxOrder) != 0 || grow_bytes > kUsablePages * kPageSize)
        return "grow_bytes must be a multiple of 4 MiB, at most a chunk's pages (1008 MiB)";
    if (max_bytes != 0 && max_bytes < smallest_chunk())
        return grow_bytes ? "max_bytes must be 0 (no limit) or at least one partial chunk "
                            "(16 MiB of metadata and grow_bytes)"
                          : "max_bytes must be 0 (no limit) or at least one chunk (1 GiB)";
    if (pcp_batch == 0 || pcp_batch > 4096) return "pcp_batch must be in 1..4096";
    if (pcp_high != 0 && pcp_high < pcp_batch)
        return "pcp_high must be 0 (no per-slot lists) or at least pcp_batch";
    if (pcp_high > (1u << 20)) return "pcp_high must be at most 1048576";
    if (pcp_high_max != 0 && (pcp_high_max < pcp_high || pcp_high_max > (1u << 20)))
        return "pcp_high_max must be 0 (fixed at pcp_high) or in pcp_high..1048576";
    if (nodes > platform::kMaxNodes) return "nodes must be at most 64";
    if (decay_ms > 3600u * 1000u) return "decay_ms must be at most one hour";
    if (protect_freed > kProtectAlways)
        return "protect_freed must be 0 (off), 1 (until a block of the size is reused) or 2 "
               "(always)";
    return nullptr;
}

const char *alloc_failure::describe(char *buf, size_t size) const {
    char os_text[160];
    switch (code) {
    case none:
        snprintf(buf, size, "no failure");
        break;
    case bad_order:
        snprintf(buf, size, "order %u is above the largest order %u", order, kMaxOrder);
        break;
    case bad_node:
        snprintf(buf, size, "node %d does not exist in this allocator", node);
        break;
    case limit:
        snprintf(buf, size,
                 "the arena limit of %llu bytes (max_bytes, SLABKIT_ARENA_MAX_MB) is "
                 "reached",
                 static_cast<unsigned long long>(limit_bytes));
        break;
    case os:
        snprintf(buf, size, "the OS refused memory: %s",
                 platform::describe(os_error, os_text, sizeof os_text));
        break;
    }
    return buf;
}

// ---------------------------------------------------------------------------------------------
// Instances: the list the fork hooks walk, creation, the global one
// ---------------------------------------------------------------------------------------------

namespace {

platform::mutex g_instances_lock;
page_allocator *g_instances = nullptr;

void fork_prepare() {
    g_instances_lock.lock();
    for (page_allocator *pa = g_instances; pa; pa = pa->next_instance) pa->lock_all();
}
void fork_parent() {
    for (page_allocator *pa = g_instances; pa; pa = pa->next_instance) pa->unlock_all();
    g_instances_lock.unlock();
}
void fork_child() {
    for (page_allocator *pa = g_instances; pa; pa = pa->next_instance) pa->after_fork_child();
    g_instances_lock.reset_after_fork();
}

// At load time, before any thread can hold a slabkit lock (see slot.cpp's install_hooks).
__attribute__((constructor)) void install_fork_hooks() {
    if (!platform::add_fork_hooks(
            {platform::kForkRankPages, fork_prepare, fork_parent, fork_child}))
        platform::fatal("slabkit: cannot register the page allocator's fork hooks\n");
}

// The process's allocator: constant-initialized (all zero: .bss), started by global(). In a
// union so that no destructor runs at exit, while other threads may still allocate.
union global_holder {
    page_allocator pa;
    constexpr global_holder() : pa(page_allocator::static_tag{}) {}
    ~global_holder() {}
};
constinit global_holder g_global_holder;
std::atomic<page_allocator *> g_global{nullptr};
platform::mutex g_global_lock;

} // namespace

page_allocator::page_allocator(const config &cfg, unsigned nodes)
    : cfg_(cfg), nodes_(nodes), retain_pages_(cfg.retain_pages) {
    link_instance();
}

void page_allocator::link_instance() {
    platform::lock_guard guard(g_instances_lock);
    next_instance = g_instances;
    g_instances = this;
}

page_allocator::~page_allocator() {
    platform::lock_guard guard(g_instances_lock);
    for (page_allocator **at = &g_instances; *at; at = &(*at)->next_instance)
        if (*at == this) {
            *at = next_instance;
            break;
        }
}

page_allocator *page_allocator::create(const config &cfg, const char **why) {
    if (const char *bad = cfg.invalid()) {
        if (why) *why = bad;
        return nullptr;
    }
    unsigned nodes = cfg.nodes ? cfg.nodes : platform::numa().nodes;
    size_t bytes = (sizeof(page_allocator) + kPageSize - 1) & ~(kPageSize - 1);
    platform::os_status status;
    void *mem = platform::reserve(bytes, kPageSize, &status);
    if (mem) status = platform::commit(mem, bytes);
    if (!mem || !status.ok()) {
        if (why) *why = "the OS refused memory for the allocator's own structures";
        if (mem) platform::release(mem, bytes);
        return nullptr;
    }
    return new (mem) page_allocator(cfg, nodes);
}

page_allocator &page_allocator::global() {
    page_allocator *pa = g_global.load(std::memory_order_acquire);
    if (SLABKIT_LIKELY(pa != nullptr)) return *pa;
    platform::lock_guard guard(g_global_lock);
    pa = g_global.load(std::memory_order_relaxed);
    if (!pa) {
        config cfg = config::from_env();
        if (const char *bad = cfg.invalid()) {
            platform::print_error("slabkit: page allocator settings: %s; using defaults\n", bad);
            cfg = config{};
        }
        pa = &g_global_holder.pa;
        pa->cfg_ = cfg;
        pa->nodes_ = platform::numa().nodes;
        pa->retain_pages_ = cfg.retain_pages;
        pa->link_instance();
        g_global.store(pa, std::memory_order_release);
    }
    return *pa;
}

void page_allocator::lock_all() {
    arena_lock_.lock();
    for (unsigned n = 0; n < nodes_; ++n) {
        zones_[n].purge_lock.lock();
        zones_[n].lock.lock();
    }
}

void page_allocator::unlock_all() {
    for (unsigned n = nodes_; n-- > 0;) {
        zones_[n].lock.unlock();
        zones_[n].purge_lock.unlock();
    }
    arena_lock_.unlock();
}

void page_allocator::after_fork_child() {
    const uint64_t now = platform::now_coarse_ms();
    for (unsigned n = 0; n < nodes_; ++n) {
        zone &z = zones_[n];
        z.lock.reset_after_fork();
        z.purge_lock.reset_after_fork();
        // Blocks chosen for decommitting whose decommit had not begun at fork (prepare waits
        // for those in progress): the thread that chose them is gone, so put them back as they
        // are (their dirty bits still say they may be resident).
        while (page *pg = z.purging.pop_front()) {
            unsigned order = pg->flags() & PG_order_mask;
            z.purging_pages -= size_t{1} << order;
            merge_and_link(z, pg, order, now, false);
        }
        z.purging_resident = 0;
    }
    arena_lock_.reset_after_fork();
    // Other threads' per-slot lists take no lock, so fork may have caught one half-linked: those
    // of the slots owned or held at fork. The child abandons them: their blocks stay counted as
    // in use (at most pcp_high pages per such slot, in the child only), and the lists start
    // empty for whichever thread takes those slots next. (This hook runs before the slot
    // registry's, which frees those slots.)
    const unsigned mine = slots::current_if_any();
    for (unsigned s = 0; s < kMaxSlots; ++s) {
        if (s == mine || !slots::owned(s)) continue;
        pcp_list &pcp = pcp_[s];
        for (page_list &list : pcp.lists) list = page_list{};
        pcp.pages = 0;
        pcp.count.store(0, std::memory_order_relaxed);
    }
}

// ---------------------------------------------------------------------------------------------
// Allocation
// ---------------------------------------------------------------------------------------------

unsigned page_allocator::preferred_node(unsigned slot) const {
    unsigned node =
        slot != kNoSlot ? slots::node_of(slot) : platform::numa().cpu_node[platform::current_cpu()];
    return node % nodes_;
}

void *page_allocator::alloc(unsigned order, int node, unsigned flags, alloc_failure *why) {
    if (SLABKIT_UNLIKELY(order > kMaxOrder)) {
        if (why) {
            why->code = alloc_failure::bad_order;
            why->order = order;
        }
        return nullptr;
    }
    if (SLABKIT_UNLIKELY(node != kAnyNode && (node < 0 || static_cast<unsigned>(node) >= nodes_))) {
        if (why) {
            why->code = alloc_failure::bad_node;
            why->node = node;
        }
        return nullptr;
    }
    if (SLABKIT_UNLIKELY((flags & kThisNode) && node == kAnyNode))
        node = static_cast<int>(preferred_node(slots::current_if_any())); // "my node, only"
    if (order <= kPcpMaxOrder && cfg_.pcp_high != 0) {
        slots::hold slot;
        if (SLABKIT_LIKELY(slot.slot() != kNoSlot))
            return pcp_alloc(slot.slot(), order, node, flags, why);
    }
    return alloc_from_zones(order, node, flags, why);
}

// Sets up an allocated block: tail pages point at the head (the head's state was set under the
// zone lock; tails are ours alone now, and no merge ever looks at a tail).
void page_allocator::mark_allocated(page *pg, unsigned order) {
    for (size_t i = 1; i < (size_t{1} << order); ++i) {
        pg[i].head = pg;
        pg[i].set_state(PG_tail);
    }
}

void *page_allocator::alloc_from_zones(unsigned order, int node, unsigned flags,
                                       alloc_failure *why) {
    drain_idle_slots(platform::now_coarse_ms());
    const unsigned preferred =
        node == kAnyNode ? preferred_node(slots::current_if_any()) : static_cast<unsigned>(node);
    const unsigned tries = (flags & kThisNode) ? 1 : nodes_;
    // A freshly grown node can be emptied by other threads before we get to it; try again.
    for (int attempt = 0; attempt < 8; ++attempt) {
        alloc_failure grow_why;
        bool grown = false;
        for (unsigned i = 0; i < tries; ++i) {
            zone &z = zones_[(preferred + i) % nodes_];
            page *pg;
            uint64_t now = platform::now_coarse_ms();
            purge_batch decayed;
            platform::os_status unprotect;
            {
                platform::lock_guard guard(z.lock);
                // Decay first: taking (splitting) an old free block re-stamps its halves as
                // just freed, so decaying after the take would never decommit them.
                select_decayed(z, now, decayed);
                pg = zone_take(z, order, now, &unprotect);
            }
            if (decayed.count) decommit_batch(z, decayed);
            if (SLABKIT_UNLIKELY(!unprotect.ok())) {
                // The memory is there but the OS would not make it writable (its limit on
                // mappings): growing would not help.
                refusals_.fetch_add(1, std::memory_order_relaxed);
                if (why) {
                    why->code = alloc_failure::os;
                    why->os_error = unprotect;
                }
                return nullptr;
            }
            if (!pg) {
                // The preferred node grows before we fall back to other nodes, so that memory
                // stays local while the node can grow (as pcp_refill does for order 0); other
                // nodes only when it cannot (the arena limit, the OS).
                if (i == 0 && grow(preferred, order, &grow_why)) {
                    grown = true;
                    break;
                }
                continue;
            }
            mark_allocated(pg, order);
            void *addr = page_to_virt(pg);
            if (flags & kZero) memset(addr, 0, kPageSize << order);
            return addr;
        }
        if (!grown) {
            refusals_.fetch_add(1, std::memory_order_relaxed);
            if (why) *why = grow_why;
            return nullptr;
        }
    }
    if (why) {
        why->code = alloc_failure::os;
        why->os_error = {"grow (the new memory was taken by other threads each time)", ENOMEM};
    }
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Free, and the checks behind it
// ---------------------------------------------------------------------------------------------

namespace {
SLABKIT_COLD void report_bad_free(const void *addr, unsigned order, bool order_known,
                                  const char *what) {
    if (order_known)
        platform::print_error("slabkit: page allocator: free of %p (order %u): %s\n", addr, order,
                              what);
    else
        platform::print_error("slabkit: page allocator: free of %p: %s\n", addr, what);
}
} // namespace

page *page_allocator::check_free(void *addr, unsigned order, bool order_known) {
    char what[192];
    page *pg = nullptr;
    if (!in_arena(addr)) {
        snprintf(what, sizeof what, "the address is not in slabkit's page arena");
    } else if (chunk_of(addr)->owner != this) {
        snprintf(what, sizeof what, "the address belongs to another page allocator instance");
    } else if (reinterpret_cast<uintptr_t>(addr) & (kPageSize - 1)) {
        snprintf(what, sizeof what, "the address is not page-aligned");
    } else if (chunk_pfn(addr) < kMetaPages) {
        snprintf(what, sizeof what, "the address is page allocator metadata, never handed out");
    } else {
        pg = virt_to_page(addr);
        uint32_t st = pg->flags();
        if (st & PG_tail) {
            // Blocks on per-slot lists keep their tail pages marked, so the head says which.
            page *head = pg->head;
            bool free_block = (head->flags() & PG_head) == 0;
            snprintf(what, sizeof what,
                     "the address is inside the %s block at %p (order %u), not at its start",
                     free_block ? "free" : "allocated", page_to_virt(head), head->order());
            pg = nullptr;
        } else if (!(st & PG_head)) {
            snprintf(what, sizeof what,
                     "the block is not allocated: already freed (double free) or never handed "
                     "out");
            pg = nullptr;
        } else if (order_known && (st & PG_order_mask) != order) {
            snprintf(what, sizeof what, "the block was allocated with order %u, not %u",
                     st & PG_order_mask, order);
            pg = nullptr;
        } else {
            return pg;
        }
    }
    report_bad_free(addr, order, order_known, what);
    errors_.fetch_add(1, std::memory_order_relaxed);
    if (!cfg_.continue_on_error) platform::fatal("slabkit: aborting on a bad page free\n");
    return nullptr;
}

void page_allocator::free(void *addr, unsigned order) {
    if (SLABKIT_UNLIKELY(addr == nullptr)) return; // as the kernel's free_pages(0, order)
    page *pg = check_free(addr, order, true);
    if (SLABKIT_UNLIKELY(!pg)) return;
    if (order <= kPcpMaxOrder && cfg_.pcp_high != 0) {
        slots::hold slot;
        if (SLABKIT_LIKELY(slot.slot() != kNoSlot)) return pcp_free(slot.slot(), pg, order);
    }
    zone_free(pg, order);
}

void page_allocator::free(void *addr) {
    if (SLABKIT_UNLIKELY(addr == nullptr)) return;
    page *pg = check_free(addr, 0, false);
    if (SLABKIT_UNLIKELY(!pg)) return;
    unsigned order = pg->order();
    if (order <= kPcpMaxOrder && cfg_.pcp_high != 0) {
        slots::hold slot;
        if (SLABKIT_LIKELY(slot.slot() != kNoSlot)) return pcp_free(slot.slot(), pg, order);
    }
    zone_free(pg, order);
}

int page_allocator::block_order(const void *addr) const {
    if (!in_arena(addr) || chunk_of(addr)->owner != this) return -1;
    if (reinterpret_cast<uintptr_t>(addr) & (kPageSize - 1)) return -1;
    page *pg = virt_to_page(addr);
    if (!pg || !(pg->flags() & PG_head)) return -1;
    return static_cast<int>(pg->order());
}

void page_allocator::zone_free(page *pg, unsigned order) {
    for (size_t i = 1; i < (size_t{1} << order); ++i) {
        pg[i].set_state(0);
        pg[i].head = nullptr;
    }
    // Protected before the block reaches the free lists, where another thread may take it. When
    // the OS refuses (its limit on mappings), the block goes back writable, as without the option.
    const bool readonly = order >= protect_order() &&
                          platform::protect_read(page_to_virt(pg), kPageSize << order).ok();
    zone &z = zones_[page_to_nid(pg)];
    uint64_t now = platform::now_coarse_ms();
    purge_batch batch;
    {
        platform::lock_guard guard(z.lock);
        // Decay before the put: merging re-stamps the buddies as just freed (see
        // alloc_from_zones).
        select_decayed(z, now, batch);
        if (readonly) {
            readonly_bitmap::fill(chunk_of(pg), page_pfn(pg), order, true);
            z.readonly_pages += size_t{1} << order;
        }
        zone_put(z, pg, order, now);
        select_over_retain(z, batch);
    }
    if (batch.count) {
        bool full = batch.full();
        decommit_batch(z, batch);
        if (full) enforce_retain(z); // one batch may not have been enough for the bound
    }
    drain_idle_slots(now);
}

} // namespace slabkit
