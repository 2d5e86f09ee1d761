// slab_cache.cpp - SLAB cache management: boot settings and sizing (order, index-array place,
// limit, batchcount, shared), the static bootstrap and SLAB's own metadata allocator, create,
// destroy, flushing slots, shrink, the reaper's pass, tunables, statistics and fork.
#include "base/bits.hpp"
#include "core/report.hpp"
#include "core/slot_array.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slab/slab_internal.hpp"

#include <cstring>
#include <new>

namespace slabkit::slab {

const char *const kStatNames[NR_STATS] = {
    "ALLOCHIT",  "ALLOCMISS",     "FREEHIT",      "FREEMISS",    "ALLOCS",
    "FREES",     "GROWN",         "REAPED",       "ERRORS",      "NODEALLOCS",
    "NODEFREES", "ALIENOVERFLOW", "SHARED_ALLOC", "SHARED_FREE", "FREE_SLAB",
};
static_assert(NR_STATS <= design_stats::kMaxCounters);

// ---- sizing ----------------------------------------------------------------------------------

uint32_t default_limit(size_t size) {
    if (size > 131072) return 1;
    if (size > kPageSize) return 8;
    if (size > 1024) return 24;
    if (size > 256) return 54;
    return 120;
}

size_t meta_size_for(size_t bytes) {
    size_t size = kMetaMinSize;
    while (size < bytes) size <<= 1;
    return size <= kMetaMaxSize ? size : 0;
}

size_t freelist_block_size(size_t bytes) {
    // kmalloc_slab's caches under CONFIG_SLAB: the smallest is kmalloc-32 (KMALLOC_SHIFT_LOW 5);
    // kmalloc-96 and kmalloc-192 are made with SLAB_HWCACHE_ALIGN, which rounds kmalloc-96's
    // objects up to 128 bytes.
    if (bytes <= 32) return 32;
    if (bytes <= 64) return 64;
    if (bytes <= 128) return 128;
    if (bytes <= 192) return 192;
    size_t block = 256;
    while (block < bytes) block <<= 1;
    return block;
}

bool calculate_slab_order(size_t size, size_t object_size, freelist_place place, unsigned max_order,
                          slab_geometry *out) {
    bool found = false;
    for (unsigned order = 0; order <= kMaxOrder; ++order) {
        size_t slab = kPageSize << order;
        // cache_estimate: an on-slab array takes one index per object from the slab.
        size_t per_object = size + (place == freelist_place::on_slab ? sizeof(freelist_idx) : 0);
        size_t num = slab / per_object;
        size_t left = slab % per_object;
        if (num == 0) continue;
        if (num > kMaxObjectsPerSlab) break;
        // Off the slab only where the array's block is at most half an object (the kernel
        // compares with the size the cache was asked for, before alignment): otherwise keeping
        // it on the slab costs less.
        if (place == freelist_place::off_slab &&
            freelist_block_size(num * sizeof(freelist_idx)) > object_size / 2)
            continue;
        out->order = order;
        out->objects = static_cast<uint32_t>(num);
        out->left_over = left;
        found = true;
        if (order >= max_order) break;
        if (left * 8 <= slab) break; // at most 1/8 wasted
    }
    return found;
}

namespace {

settings g_settings;

unsigned cpus_of_node(unsigned node, unsigned nr_nodes) {
    const platform::topology &topo = platform::numa();
    if (nr_nodes <= 1) return topo.cpus;
    return node < platform::kMaxNodes ? topo.node_cpus[node] : 0;
}

} // namespace

bool lay_out(slab_kmem_cache *s, bool allow_off_slab) {
    compute_object_layout(s, freeptr_place::none);
    // ALIGN(SLAB_OBJ_MIN_SIZE, align): a page's slab of smaller objects would hold more than
    // a one-byte index counts.
    if (s->size < kObjMinSize) set_slot_size(s, align_up(kObjMinSize, size_t{s->align}));
    const unsigned max_order = g_settings.max_order;
    const size_t size = s->size, object_size = s->object_size;
    slab_geometry g;
    // Inside a free object (set_objfreelist_slab_cache): not with a constructor (the array
    // would overwrite constructed state), debugging, or init on free (slab_want_init_on_free:
    // the array's bytes would be left in an object handed out); and only if the array fits in
    // the object.
    const bool objfreelist = !s->ctor && !s->debug && !(s->init.load() & hardening::kInitOnFree);
    if (objfreelist &&
        calculate_slab_order(size, object_size, freelist_place::objfreelist, max_order, &g) &&
        uint64_t{g.objects} * sizeof(freelist_idx) <= object_size) {
        s->place = freelist_place::objfreelist;
    } else if (allow_off_slab &&
               calculate_slab_order(size, object_size, freelist_place::off_slab, max_order, &g) &&
               g.left_over < uint64_t{g.objects} * sizeof(freelist_idx)) {
        // Off the slab (set_off_slab_cache) only when the leftover could not hold the array.
        s->place = freelist_place::off_slab;
    } else if (calculate_slab_order(size, object_size, freelist_place::on_slab, max_order, &g)) {
        s->place = freelist_place::on_slab;
    } else {
        return false;
    }
    s->order = static_cast<uint8_t>(g.order);
    s->objects = g.objects;
    s->freelist_size = static_cast<uint32_t>(g.objects * sizeof(freelist_idx));
    s->colour_off = static_cast<uint32_t>(s->align > kCacheLine ? s->align : kCacheLine);
    s->colour_range = static_cast<uint32_t>(g.left_over);
    return true;
}

namespace {

void set_tunables(slab_kmem_cache *s, uint32_t limit, uint32_t batchcount, uint32_t shared) {
    s->limit = limit;
    s->batchcount = batchcount;
    s->shared = shared;
    s->alien_limit = limit > 1 ? 12 : 1;
}

// The kernel's enable_cpucache defaults, then the boot settings' overrides.
void default_tunables(slab_kmem_cache *s) {
    const settings &st = g_settings;
    uint32_t limit = st.limit > 0 ? static_cast<uint32_t>(st.limit) : default_limit(s->size);
    uint32_t batch = st.batchcount > 0 ? static_cast<uint32_t>(st.batchcount) : (limit + 1) / 2;
    if (batch > limit) batch = limit;
    uint32_t shared = st.shared >= 0                          ? static_cast<uint32_t>(st.shared)
                      : (s->size <= kPageSize && st.cpus > 1) ? 8
                                                              : 0;
    if (uint64_t{shared} * batch > kMaxArrayEntries) shared = kMaxArrayEntries / batch;
    set_tunables(s, limit, batch, shared);
}

bool setup_common(slab_kmem_cache *s, const cache_args &args, bool meta) {
    describe_cache(s, args, design::slab);
    s->meta = meta;
    // Bootstrap caches never go off the slab: their arrays would come from themselves.
    if (!lay_out(s, !meta)) return false;
    default_tunables(s);
    s->nr_nodes = page_allocator::global().nodes();
    s->numa = s->nr_nodes > 1;
    s->inline_abi.store(gate_tag_for(s)); // plain caches open their gate (core/cache.hpp)
    if (s->debug) {
        s->debug_alloc = debug_slot_alloc;
        s->debug_free = debug_slot_free;
    }
    return true;
}

void init_node(slab_kmem_cache *s, slab_node *n, unsigned node) {
    n->free_limit = node_free_limit(s, node);
    // The first node reap REAPTIMEOUT_NODE from now, plus the cache's address modulo it, so
    // that caches made together are not reaped together (init_cache_node).
    n->next_reap_ms.store(reap_clock_ms() + kReapNodeMs +
                              reinterpret_cast<uintptr_t>(s) % kReapNodeMs,
                          std::memory_order_relaxed);
}

} // namespace

uint64_t node_free_limit(const slab_kmem_cache *s, unsigned node) {
    if (s->meta) return s->objects; // one free slab kept
    return (1 + uint64_t{cpus_of_node(node, s->nr_nodes)}) * s->batchcount + s->objects;
}

const settings &boot_settings() {
    bootstrap();
    return g_settings;
}

// ---- the bootstrap: static caches for SLAB's own structures --------------------------------
//
// "kmem_cache" holds cache descriptors, "kmem_cache_node" per-node structures, and
// "slab-array-<bytes>" (64 B to 16 KiB) the variable-size ones: per-slot arrays, shared arrays,
// alien caches and off-slab index arrays, as the kernel's came from kmalloc. They have no
// per-slot arrays of their own: every object comes from their node lists under list_lock.

namespace {
constexpr unsigned kNrArrayCaches = 9; // 64 .. 16384
enum meta_index { kMetaCache, kMetaNode, kMetaArrays, kNrMeta = kMetaArrays + kNrArrayCaches };

slab_kmem_cache g_meta[kNrMeta];
slab_node g_meta_nodes[kNrMeta][platform::kMaxNodes];
char g_meta_names[kNrArrayCaches][24];
// Every entry null, never written: a bootstrap cache's fast paths find no slot array.
const slot_storage g_no_slots{};

std::atomic<bool> g_booted{false};
platform::mutex g_boot_lock;

slab_kmem_cache *array_cache_of(size_t size) {
    unsigned i = 0;
    for (size_t sz = kMetaMinSize; sz < size; sz <<= 1) ++i;
    return &g_meta[kMetaArrays + i];
}

} // namespace

slab_kmem_cache &cache_cache() {
    return g_meta[kMetaCache];
}
slab_kmem_cache &node_cache() {
    return g_meta[kMetaNode];
}

void bootstrap() {
    if (SLABKIT_LIKELY(g_booted.load(std::memory_order_acquire))) return;
    platform::lock_guard guard(g_boot_lock);
    if (g_booted.load(std::memory_order_relaxed)) return;
    settings &st = g_settings;
    st.max_order = static_cast<unsigned>(
        platform::env_uint("SLABKIT_SLAB_MAX_ORDER", st.max_order, 0, kMaxOrder));
    st.limit = platform::env_int("SLABKIT_SLAB_LIMIT", -1, 1, kMaxArrayEntries);
    st.batchcount = platform::env_int("SLABKIT_SLAB_BATCHCOUNT", -1, 1, kMaxArrayEntries);
    st.shared = platform::env_int("SLABKIT_SLAB_SHARED", -1, 0, kMaxArrayEntries);
    st.use_alien = platform::env_uint("SLABKIT_SLAB_NO_ALIEN", 0, 0, 1) == 0;
    st.cpus = platform::numa().cpus;
    for (unsigned m = 0; m < kNrMeta; ++m) {
        slab_kmem_cache *s = &g_meta[m];
        size_t size;
        const char *base;
        if (m == kMetaCache) {
            size = sizeof(slab_kmem_cache);
            base = "kmem_cache";
        } else if (m == kMetaNode) {
            size = sizeof(slab_node);
            base = "kmem_cache_node";
        } else {
            size = kMetaMinSize << (m - kMetaArrays);
            snprintf(g_meta_names[m - kMetaArrays], sizeof g_meta_names[0], "slab-array-%zu", size);
            base = g_meta_names[m - kMetaArrays];
        }
        char name[kNameMax];
        internal_cache_name(design::slab, base, name, sizeof name);
        if (!setup_common(s, cache_args{name, size, kCacheLine, 0, nullptr}, true))
            platform::fatal("slabkit: SLAB's bootstrap cache %s cannot be laid out\n", name);
        set_tunables(s, 0, 0, 0);
        s->cpu_cache = const_cast<std::atomic<slab_cpu *> *>(g_no_slots.data());
        for (unsigned n = 0; n < s->nr_nodes; ++n) {
            s->node_slab[n] = &g_meta_nodes[m][n];
            init_node(s, s->node_slab[n], n);
        }
        registry::add_internal(s);
    }
    g_booted.store(true, std::memory_order_release);
}

void *alloc_meta(size_t bytes, int node) {
    if (meta_size_for(bytes) == 0) return nullptr;
    slab_kmem_cache *s = array_cache_of(bytes);
    return alloc_single(s, node == kAnyNode ? kAnyNode : node % static_cast<int>(s->nr_nodes));
}

void free_meta(void *p) {
    if (!p) return;
    page *pg = virt_to_head_page(p);
    free_single(static_cast<slab_kmem_cache *>(slab_cache(pg)), pg, p);
}

size_t meta_bytes(const void *p) {
    return p ? slab_cache(virt_to_head_page(p))->size : 0;
}

shared_array *make_shared(uint32_t entries, int node) {
    void *mem = alloc_meta(sizeof(shared_array) + sizeof(void *) * entries, node);
    if (!mem) return nullptr;
    auto *sh = new (mem) shared_array();
    sh->ac.limit = entries;
    return sh;
}

alien_cache *make_alien(uint32_t capacity, uint32_t limit, int node) {
    void *mem = alloc_meta(sizeof(alien_cache) + sizeof(void *) * capacity, node);
    if (!mem) return nullptr;
    auto *alc = new (mem) alien_cache();
    alc->ac.limit = limit;
    return alc;
}

// ---- create and destroy -------------------------------------------------------------------

namespace {

// Alien caches hold up to 12 entries whatever the limit, so that a retune never reallocates
// them under a freeing thread: only their `limit` changes.
constexpr uint32_t kAlienCapacity = 12;

bool make_nodes(slab_kmem_cache *s) {
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        void *mem = alloc_single(&node_cache(), static_cast<int>(n));
        if (!mem) return false;
        slab_node *node = new (mem) slab_node();
        s->node_slab[n] = node;
        init_node(s, node, n);
        if (s->shared) {
            node->shared = make_shared(s->shared * s->batchcount, static_cast<int>(n));
            if (!node->shared) return false;
        }
        if (s->numa && g_settings.use_alien) {
            for (unsigned r = 0; r < s->nr_nodes; ++r) {
                if (r == n) continue;
                node->alien[r] = make_alien(kAlienCapacity, s->alien_limit, static_cast<int>(n));
                if (!node->alien[r]) return false;
            }
        }
    }
    return true;
}

// Node n's alien caches, into their nodes' shared arrays and slabs.
void drain_aliens(slab_kmem_cache *s, unsigned node) {
    slab_node *n = s->node_slab[node];
    if (!n) return;
    for (unsigned r = 0; r < s->nr_nodes; ++r) {
        if (alien_cache *alc = n->alien[r]) {
            release_chain chain;
            {
                platform::lock_guard guard(alc->lock);
                drain_alien(s, alc, r, chain, nullptr);
            }
            release(s, chain);
        }
    }
}

// Everything the cache's nodes hold beyond their slabs in use: every alien cache first (they
// drain into other nodes' shared arrays), then each shared array and the free slabs.
void drain_nodes(slab_kmem_cache *s) {
    for (unsigned n = 0; n < s->nr_nodes; ++n) drain_aliens(s, n);
    for (unsigned node = 0; node < s->nr_nodes; ++node) {
        slab_node *n = s->node_slab[node];
        if (!n) continue;
        release_chain chain;
        {
            platform::lock_guard guard(n->list_lock);
            if (n->shared && n->shared->ac.count()) {
                free_block(s, n, n->shared->entry(), n->shared->ac.count(), chain, nullptr);
                n->shared->ac.set_count(0);
            }
            drain_free_slabs(s, n, ~uint64_t{0}, chain);
        }
        release(s, chain);
    }
}

// Frees a cache's per-slot arrays, per-node structures and pointer array (all empty).
void free_structures(slab_kmem_cache *s, bool free_slot_array_too) {
    for (unsigned slot = 0; slot < kMaxSlots && free_slot_array_too; ++slot) {
        slab_cpu *c = s->cpu_cache[slot].load(std::memory_order_acquire);
        if (!c) continue;
        s->cpu_cache[slot].store(nullptr, std::memory_order_relaxed);
        c->~slab_cpu();
        free_meta(c);
    }
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        slab_node *node = s->node_slab[n];
        if (!node) continue;
        free_meta(node->shared);
        for (alien_cache *alc : node->alien) free_meta(alc);
        node->~slab_node();
        free_single(&node_cache(), virt_to_head_page(node), node);
        s->node_slab[n] = nullptr;
    }
    if (free_slot_array_too && s->cpu_cache) {
        free_slot_array(s->cpu_cache);
        s->cpu_cache = nullptr;
    }
}

uint64_t slabs_held(slab_kmem_cache *s) {
    uint64_t slabs = 0;
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) slabs += s->node_slab[n]->total_slabs.load(std::memory_order_relaxed);
    return slabs;
}

struct leak_count {
    slab_kmem_cache *s;
    uint64_t objects = 0;
};

// Reports the objects of slab pg that its index array does not list as free.
void report_leaks(page *pg, void *arg) {
    auto *l = static_cast<leak_count *>(arg);
    slab_kmem_cache *s = l->s;
    uint64_t free_map[(kMaxObjectsPerSlab + 64) / 64] = {};
    uint32_t active = slab_active(pg);
    const freelist_idx *fl = index_array(pg);
    for (uint32_t i = active; fl && i < s->objects; ++i)
        free_map[fl[i] / 64] |= uint64_t{1} << (fl[i] % 64);
    for (uint32_t i = 0; i < s->objects; ++i) {
        if (free_map[i / 64] >> (i % 64) & 1) continue;
        report_leaked_object(s, index_to_obj(s, pg, i));
        ++l->objects;
    }
}

} // namespace

bool open_static(slab_kmem_cache *s, slot_storage *slots, const cache_args &args,
                 const char **why) {
    bootstrap();
    if (!setup_common(s, args, false)) {
        if (why) *why = "no slab order holds an object of this size";
        return false;
    }
    s->cpu_cache = slots->data();
    if (!make_nodes(s)) {
        if (why) *why = "out of memory for the per-node structures";
        return false;
    }
    registry::add_internal(s);
    return true;
}

slab_kmem_cache *create(const cache_args &args, const char **why) {
    bootstrap();
    void *mem = alloc_single(&cache_cache(), kAnyNode);
    if (!mem) {
        if (why) *why = "out of memory for the cache descriptor";
        return nullptr;
    }
    auto *s = new (mem) slab_kmem_cache();
    auto fail = [&](const char *reason, bool slot_array) -> slab_kmem_cache * {
        if (why && reason) *why = reason;
        free_structures(s, slot_array);
        s->~slab_kmem_cache();
        free_single(&cache_cache(), virt_to_head_page(s), s);
        return nullptr;
    };
    if (!setup_common(s, args, false))
        return fail("no slab order holds an object of this size", false);
    s->cpu_cache = alloc_slot_array<slab_cpu>();
    if (!s->cpu_cache || !make_nodes(s))
        return fail("out of memory for the per-slot and per-node structures",
                    s->cpu_cache != nullptr);
    if (!registry::add(s, why)) return fail(nullptr, true);
    return s;
}

void destroy(slab_kmem_cache *s) {
    if (!s || s->dead) return;
    registry::remove(s);
    // No thread uses the cache any more (the caller's promise): every slot's array may be
    // emptied here, live threads' included.
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top; ++slot)
        if (slab_cpu *c = s->cpu_cache[slot].load(std::memory_order_acquire)) drain_cpu(s, c, true);
    drain_nodes(s);
    uint64_t slabs = slabs_held(s);
    if (slabs == 0) {
        free_structures(s, true);
        s->~slab_kmem_cache();
        free_single(&cache_cache(), virt_to_head_page(s), s);
        return;
    }
    leak_count leaks{s};
    for_each_slab_in_arena(s, report_leaks, &leaks);
    report("kmem_cache_destroy(%s): %llu object(s) still allocated in %llu slab(s); the cache's "
           "memory is kept",
           s->name, static_cast<unsigned long long>(leaks.objects),
           static_cast<unsigned long long>(slabs));
    s->dead = true;
}

// ---- slots, shrink, the reaper ----------------------------------------------------------------

void flush_slot(slab_kmem_cache *s, unsigned slot, bool release_it) {
    if (s->dead || s->meta || slot >= kMaxSlots) return;
    slab_cpu *c = s->cpu_cache[slot].load(std::memory_order_acquire);
    if (!c) return;
    drain_cpu(s, c, true);
    if (!release_it) return;
    // Nothing refers to an emptied array: free it, so that memory follows the slots in use.
    // The designs layer calls this under the cache registry lock, which statistics readers
    // hold too.
    for (unsigned i = 0; i < NR_STATS; ++i) s->shared_stats[i].add_shared(c->stats[i].get());
    s->cpu_cache[slot].store(nullptr, std::memory_order_release);
    c->~slab_cpu();
    free_meta(c);
}

size_t reclaim(slab_kmem_cache *s) {
    if (!s || s->dead) return 0;
    unsigned me = slots::current_if_any();
    if (me != kNoSlot && !s->meta) {
        if (slab_cpu *c = s->cpu_cache[me].load(std::memory_order_relaxed)) drain_cpu(s, c, true);
    }
    // Other live slots give back their arrays at their next slow path (there is no IPI).
    s->shrink_gen.fetch_add(1, std::memory_order_relaxed);
    drain_nodes(s);
    return slabs_held(s);
}

void reap_alien(slab_kmem_cache *s, slab_node *n, unsigned remote) {
    alien_cache *alc = n->alien[remote];
    if (!alc || !alc->ac.count() || !alc->lock.try_lock()) return;
    release_chain chain;
    drain_alien(s, alc, remote, chain, nullptr);
    alc->lock.unlock();
    release(s, chain);
}

bool reap_node(slab_kmem_cache *s, unsigned node, uint64_t now) {
    slab_node *n = s->node_slab[node];
    if (!n) return false;
    // One reaper wins the node's turn; the others (and everyone until next_reap) pass.
    uint64_t due = n->next_reap_ms.load(std::memory_order_relaxed);
    if (now < due ||
        !n->next_reap_ms.compare_exchange_strong(due, now + kReapNodeMs, std::memory_order_relaxed))
        return false;
    release_chain chain;
    {
        platform::lock_guard guard(n->list_lock);
        // drain_array: an empty array is left as it is, touched or not.
        shared_array *sh = n->shared;
        if (uint32_t avail = sh ? sh->ac.count() : 0) {
            if (sh->ac.touched) {
                sh->ac.touched = 0;
            } else {
                uint32_t nr = (sh->ac.limit + 4) / 5;
                if (nr > avail) nr = (avail + 1) / 2;
                free_block(s, n, sh->entry(), nr, chain, nullptr);
                memmove(sh->entry(), sh->entry() + nr, sizeof(void *) * (avail - nr));
                sh->ac.set_count(avail - nr);
            }
        }
        if (n->free_touched) {
            n->free_touched = false;
        } else {
            uint64_t per_pass =
                (n->free_limit + 5 * uint64_t{s->objects} - 1) / (5 * uint64_t{s->objects});
            uint32_t freed = drain_free_slabs(s, n, per_pass, chain);
            s->shared_stats[REAPED].add_shared(freed);
        }
    }
    release(s, chain);
    return true;
}

void trim(slab_kmem_cache *s) {
    if (s->dead) return;
    const uint64_t now = reap_clock_ms();
    for (unsigned node = 0; node < s->nr_nodes; ++node) reap_node(s, node, now);
}

// ---- tunables -------------------------------------------------------------------------------

namespace {

// Applies new tunables: the shared arrays are remade now (their objects go back to the slabs),
// the alien caches take the new limit, and each slot remakes its array at its next slow path.
bool apply_tunables(slab_kmem_cache *s, uint32_t limit, uint32_t batch, uint32_t shared,
                    const char **why) {
    // Make the new shared arrays first, so that running out of memory changes nothing.
    shared_array *fresh[platform::kMaxNodes] = {};
    for (unsigned n = 0; n < s->nr_nodes && shared; ++n) {
        fresh[n] = make_shared(shared * batch, static_cast<int>(n));
        if (!fresh[n]) {
            for (unsigned k = 0; k < n; ++k) free_meta(fresh[k]);
            *why = "out of memory for the new shared arrays";
            return false;
        }
    }
    set_tunables(s, limit, batch, shared);
    for (unsigned node = 0; node < s->nr_nodes; ++node) {
        slab_node *n = s->node_slab[node];
        for (unsigned r = 0; r < s->nr_nodes; ++r) {
            alien_cache *alc = n->alien[r];
            if (!alc) continue;
            release_chain chain;
            {
                platform::lock_guard guard(alc->lock);
                alc->ac.limit = s->alien_limit;
                if (alc->ac.count() > alc->ac.limit) drain_alien(s, alc, r, chain, nullptr);
            }
            release(s, chain);
        }
        shared_array *old;
        release_chain chain;
        {
            platform::lock_guard guard(n->list_lock);
            old = n->shared;
            if (old && old->ac.count())
                free_block(s, n, old->entry(), old->ac.count(), chain, nullptr);
            n->shared = fresh[node];
            n->free_limit = node_free_limit(s, node);
            uint64_t free_objects = n->free_objects.load(std::memory_order_relaxed);
            if (free_objects > n->free_limit)
                drain_free_slabs(s, n, (free_objects - n->free_limit + s->objects - 1) / s->objects,
                                 chain);
        }
        release(s, chain);
        free_meta(old);
    }
    s->tune_gen.fetch_add(1, std::memory_order_release);
    // The caller's own array now; idle and other live slots at their next slow path.
    unsigned me = slots::current_if_any();
    if (me != kNoSlot) {
        if (slab_cpu *c = s->cpu_cache[me].load(std::memory_order_relaxed)) maintain(s, me, c);
    }
    return true;
}

} // namespace

bool set_order(slab_kmem_cache *s, unsigned order, const char **why) {
    // set_slab_order fills in its own objects per slab and colours: put them back if the index
    // array refuses the order.
    const uint8_t old_order = s->order;
    const uint32_t old_objects = s->objects, old_colour_off = s->colour_off,
                   old_colour_range = s->colour_range;
    if (!set_slab_order(s, order, slabs_held(s), why)) return false;
    // The index array's place stays; its size follows the objects per slab.
    size_t slab = kPageSize << order;
    size_t per_object = s->size + (s->place == freelist_place::on_slab ? sizeof(freelist_idx) : 0);
    size_t num = slab / per_object;
    const char *refused = nullptr;
    if (num == 0)
        refused = "the slab's index array leaves no room for an object at that order";
    else if (num > kMaxObjectsPerSlab)
        refused = "a slab of that order would hold more than 255 objects (SLAB's one-byte index)";
    else if (s->place == freelist_place::objfreelist && num * sizeof(freelist_idx) > s->object_size)
        refused = "the slab's index array would not fit in an object at that order";
    if (refused) {
        s->order = old_order;
        s->objects = old_objects;
        s->colour_off = old_colour_off;
        s->colour_range = old_colour_range;
        *why = refused;
        return false;
    }
    s->order = static_cast<uint8_t>(order);
    s->objects = static_cast<uint32_t>(num);
    s->freelist_size = static_cast<uint32_t>(num * sizeof(freelist_idx));
    s->colour_range = static_cast<uint32_t>(slab % per_object);
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) s->node_slab[n]->free_limit = node_free_limit(s, n);
    return true;
}

bool tune(slab_kmem_cache *s, const char *name, unsigned long value, const char **why) {
    if (strcmp(name, "order") == 0)
        return set_order(s, value > UINT32_MAX ? UINT32_MAX : static_cast<unsigned>(value), why);
    bool is_limit = strcmp(name, "limit") == 0;
    bool is_batch = strcmp(name, "batchcount") == 0;
    bool is_shared = strcmp(name, "shared") == 0;
    if (!is_limit && !is_batch && !is_shared) {
        *why = "unknown tunable (SLAB has order, limit, batchcount, shared)";
        return false;
    }
    if (s->meta) {
        *why = "a bootstrap cache keeps its settings";
        return false;
    }
    if (value > kMaxArrayEntries) {
        *why = "the value is too large (at most 2000 entries)";
        return false;
    }
    uint32_t v = static_cast<uint32_t>(value);
    uint32_t limit = s->limit, batch = s->batchcount, shared = s->shared;
    if (is_limit) {
        if (v < 1) {
            *why = "limit must be at least 1";
            return false;
        }
        limit = v;
        if (batch > limit) batch = (limit + 1) / 2; // batchcount stays within the limit
    } else if (is_batch) {
        if (v < 1 || v > limit) {
            *why = "batchcount must be between 1 and the cache's limit";
            return false;
        }
        batch = v;
    } else {
        shared = v;
    }
    if (uint64_t{shared} * batch > kMaxArrayEntries) {
        *why = "shared x batchcount is too large (at most 2000 entries)";
        return false;
    }
    return apply_tunables(s, limit, batch, shared, why);
}

// ---- statistics -----------------------------------------------------------------------------

void statistics(slab_kmem_cache *s, design_stats *out) {
    for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] = s->shared_stats[i].get();
    uint64_t queued = 0;
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top && !s->meta; ++slot) {
        slab_cpu *c = s->cpu_cache[slot].load(std::memory_order_acquire);
        if (!c) continue;
        for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] += c->stats[i].get();
        queued += c->ac.count();
    }
    uint64_t free_objects = 0, free_slabs = 0, shared_avail = 0;
    for (unsigned node = 0; node < s->nr_nodes; ++node) {
        slab_node *n = s->node_slab[node];
        if (!n) continue;
        out->slabs += n->total_slabs.load(std::memory_order_relaxed);
        platform::lock_guard guard(n->list_lock);
        free_objects += n->free_objects.load(std::memory_order_relaxed);
        free_slabs += n->free_slabs.load(std::memory_order_relaxed);
        if (n->shared) shared_avail += n->shared->ac.count();
        for (alien_cache *alc : n->alien)
            if (alc) queued += alc->ac.count();
    }
    queued += shared_avail;
    out->objects = out->slabs * s->objects;
    // As the kernel's /proc/slabinfo under SLAB: objects in the arrays count as active.
    out->active_objects = out->objects > free_objects ? out->objects - free_objects : 0;
    out->queued_objects = queued < out->active_objects ? queued : out->active_objects;
    out->free_slabs = free_slabs;
    out->shared_avail = shared_avail;
    out->nr_counters = NR_STATS;
    out->counter_names = kStatNames;
    // A hit is served by the slot's array; a miss refills it (or, for a free, flushes it).
    out->alloc_slow = out->counters[ALLOCMISS];
    out->allocs = out->counters[ALLOCHIT] + out->alloc_slow;
    out->free_slow = out->counters[FREEMISS];
    out->frees = out->counters[FREEHIT] + out->free_slow;
    out->nr_tunables = 4;
    out->tunable_names[0] = "order";
    out->tunables[0] = s->order;
    out->tunable_names[1] = "limit";
    out->tunables[1] = s->limit;
    out->tunable_names[2] = "batchcount";
    out->tunables[2] = s->batchcount;
    out->tunable_names[3] = "shared";
    out->tunables[3] = s->shared;
    out->slabinfo_tunables[0] = s->limit;
    out->slabinfo_tunables[1] = s->batchcount;
    out->slabinfo_tunables[2] = s->shared;
}

void metadata(slab_kmem_cache *s, metadata_bytes *out) {
    *out = metadata_bytes{};
    unsigned top = slots::high_water();
    for (unsigned slot = 0; slot < top && !s->meta; ++slot)
        out->slot_arrays += meta_bytes(s->cpu_cache[slot].load(std::memory_order_acquire));
    for (unsigned node = 0; node < s->nr_nodes; ++node) {
        slab_node *n = s->node_slab[node];
        if (!n) continue;
        out->node_structures += node_cache().size;
        platform::lock_guard guard(n->list_lock);
        out->shared_arrays += meta_bytes(n->shared);
        for (alien_cache *alc : n->alien) {
            if (!alc) continue;
            out->alien_caches += meta_bytes(alc);
            ++out->alien_count;
        }
        if (s->place == freelist_place::off_slab)
            out->off_slab_freelists +=
                n->total_slabs.load(std::memory_order_relaxed) * meta_size_for(s->freelist_size);
    }
}

// ---- fork ---------------------------------------------------------------------------------
//
// The designs layer takes SLAB's boot lock (fork_boot, at platform::kForkRankSlabBoot) and,
// under the cache registry lock, each cache's alien locks then node list locks (fork_cache), in
// the lock order. The bootstrap caches' list locks are leaves (nothing else is taken under
// them), so taking them first, as the registry lists them, is safe.

void fork_boot(fork_op op) {
    apply_fork_op(g_boot_lock, op);
}

void fork_cache(slab_kmem_cache *s, fork_op op) {
    for (unsigned n = 0; n < s->nr_nodes; ++n) {
        slab_node *node = s->node_slab[n];
        if (!node) continue;
        for (alien_cache *alc : node->alien)
            if (alc) apply_fork_op(alc->lock, op);
    }
    for (unsigned n = 0; n < s->nr_nodes; ++n)
        if (s->node_slab[n]) apply_fork_op(s->node_slab[n]->list_lock, op);
}

} // namespace slabkit::slab
