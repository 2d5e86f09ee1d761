// sheaves_barn.cpp - sheaves and barns: making and freeing sheaves, the barn's lists, refilling
// a sheaf from slabs and flushing one back to them.
#include "core/trimmer.hpp"
#include "page/page_allocator.hpp"
#include "sheaves/sheaves_internal.hpp"

#include <cstring>

namespace slabkit::sheaves {

sheaf g_bootstrap_sheaf;

// ---- sheaf memory ---------------------------------------------------------------------------
//
// The kernel kmallocs its sheaves. Here a sheaf's block comes from one of the sheaves' bootstrap
// caches of the kernel's kmalloc sizes from 64 bytes to a page (a cache's sheaf fills one
// exactly), and from the page allocator beyond (oversize prefilled sheaves).

namespace {

constexpr size_t kSheafClassSizes[] = {64, 128, 256, 512, 1024, 2048, 4096};
constexpr unsigned kNrSheafClasses = sizeof kSheafClassSizes / sizeof kSheafClassSizes[0];

slub::slub_cache g_sheaf_caches[kNrSheafClasses];
slub::slub_node g_sheaf_nodes[kNrSheafClasses][platform::kMaxNodes];

} // namespace

void open_sheaf_caches() {
    for (unsigned i = 0; i < kNrSheafClasses; ++i) {
        char base[24];
        snprintf(base, sizeof base, "sheaf-%zu", kSheafClassSizes[i]);
        slub::open_meta_cache(&g_sheaf_caches[i], g_sheaf_nodes[i], base, kSheafClassSizes[i],
                              design::sheaves);
    }
}

size_t kmalloc_size_roundup(size_t bytes) {
    if (bytes <= 8) return 8;
    if (bytes <= 16) return 16;
    if (bytes <= 32) return 32;
    if (bytes <= 64) return 64;
    if (bytes <= 96) return 96;
    if (bytes <= 128) return 128;
    if (bytes <= 192) return 192;
    size_t size = 256;
    while (size < bytes) size <<= 1;
    return size;
}

sheaf *alloc_sheaf_block(uint32_t capacity) {
    // The prefilled sheaves of the other designs come here too, possibly before any cache of
    // this design was made: the sheaves' block caches are opened by the bootstrap (one load
    // once it has run).
    bootstrap();
    size_t bytes = sizeof(sheaf) + size_t{capacity} * sizeof(void *);
    void *mem = nullptr;
    uint32_t where = 0;
    for (; where < kNrSheafClasses; ++where) {
        if (bytes <= kSheafClassSizes[where]) {
            mem = slub::alloc_single(&g_sheaf_caches[where], kAnyNode);
            break;
        }
    }
    if (where == kNrSheafClasses) {
        unsigned order = 0;
        while ((kPageSize << order) < bytes) ++order;
        if (order > kMaxOrder) return nullptr;
        mem = page_allocator::global().alloc(order);
        where = kNrSheafClasses + order;
    }
    if (!mem) return nullptr;
    auto *sh = new (mem) sheaf();
    sh->capacity = capacity;
    sh->block_order = where;
    return sh;
}

void free_sheaf_block(sheaf *sh) {
    uint32_t where = sh->block_order;
    if (where < kNrSheafClasses) {
        slub::slub_cache *c = &g_sheaf_caches[where];
        slub::slab_free_object(c, virt_to_head_page(sh), sh);
    } else {
        page_allocator::global().free(sh, where - kNrSheafClasses);
    }
}

sheaf *alloc_empty_sheaf(sheaves_cache *s, sheaves_cpu *pcs) {
    sheaf *sh = alloc_sheaf_block(s->sheaf_capacity);
    if (!sh) return nullptr;
    sh->owner = s;
    count(s, pcs, SHEAF_ALLOC);
    return sh;
}

void free_empty_sheaf(sheaves_cache *s, sheaves_cpu *pcs, sheaf *sh) {
    count(s, pcs, SHEAF_FREE);
    free_sheaf_block(sh);
}

// ---- barns ------------------------------------------------------------------------------------

namespace {

sheaf *pop(sheaf **list, std::atomic<uint32_t> &nr) {
    sheaf *sh = *list;
    if (!sh) return nullptr;
    *list = sh->next;
    sh->next = nullptr;
    nr.store(nr.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    return sh;
}

void push(sheaf **list, std::atomic<uint32_t> &nr, sheaf *sh) {
    sh->next = *list;
    *list = sh;
    nr.store(nr.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

} // namespace

sheaf *barn_get_empty(node_barn *b) {
    // Read without the lock first: an empty list needs no lock (the kernel's data_race test).
    if (b->nr_empty.load(std::memory_order_relaxed) == 0) return nullptr;
    platform::lock_guard guard(b->lock);
    b->touched = true;
    return pop(&b->empty, b->nr_empty);
}

sheaf *barn_get_full(node_barn *b) {
    if (b->nr_full.load(std::memory_order_relaxed) == 0) return nullptr;
    platform::lock_guard guard(b->lock);
    b->touched = true;
    return pop(&b->full, b->nr_full);
}

sheaf *barn_get_full_or_empty(node_barn *b) {
    platform::lock_guard guard(b->lock);
    b->touched = true;
    if (sheaf *sh = pop(&b->full, b->nr_full)) return sh;
    return pop(&b->empty, b->nr_empty);
}

void barn_put_empty(node_barn *b, owned_word<sheaf *> &slot, sheaf *next) {
    platform::lock_guard guard(b->lock);
    b->touched = true;
    push(&b->empty, b->nr_empty, slot);
    slot = next;
}

void barn_put_full(node_barn *b, owned_word<sheaf *> &slot, sheaf *next) {
    platform::lock_guard guard(b->lock);
    b->touched = true;
    push(&b->full, b->nr_full, slot);
    slot = next;
}

void barn_put_full(node_barn *b, sheaf *sh) {
    platform::lock_guard guard(b->lock);
    b->touched = true;
    push(&b->full, b->nr_full, sh);
}

sheaf *barn_replace_empty(node_barn *b, owned_word<sheaf *> &slot) {
    if (b->nr_full.load(std::memory_order_relaxed) == 0) return nullptr;
    platform::lock_guard guard(b->lock);
    b->touched = true;
    sheaf *full = pop(&b->full, b->nr_full);
    if (full) {
        push(&b->empty, b->nr_empty, slot);
        slot = full;
    }
    return full;
}

sheaf *barn_replace_full(node_barn *b, owned_word<sheaf *> &slot, bool *too_many) {
    *too_many = false;
    platform::lock_guard guard(b->lock);
    b->touched = true;
    if (b->nr_full.load(std::memory_order_relaxed) >= kMaxFullSheaves) {
        *too_many = true;
        return nullptr;
    }
    sheaf *empty = pop(&b->empty, b->nr_empty);
    if (empty) {
        push(&b->full, b->nr_full, slot);
        slot = empty;
    }
    return empty;
}

void barn_shrink(sheaves_cache *s, node_barn *b, bool only_untouched) {
    sheaf *full, *empty;
    {
        platform::lock_guard guard(b->lock);
        if (only_untouched && b->touched) {
            b->touched = false;
            return;
        }
        full = b->full;
        empty = b->empty;
        b->full = b->empty = nullptr;
        b->nr_full.store(0, std::memory_order_relaxed);
        b->nr_empty.store(0, std::memory_order_relaxed);
    }
    // The slab work outside the barn's lock.
    while (sheaf *sh = full) {
        full = sh->next;
        sheaf_flush(s, nullptr, sh);
        free_empty_sheaf(s, nullptr, sh);
    }
    while (sheaf *sh = empty) {
        empty = sh->next;
        free_empty_sheaf(s, nullptr, sh);
    }
}

// ---- refill from slabs ---------------------------------------------------------------------

namespace {

using slub::counters;
using slub::freelist_counters;

// Up to `max` objects from node n's partial slabs (__refill_objects_node). Under the list lock,
// each slab taken leaves the list with its whole freelist (get_freelist_nofreeze: inuse becomes
// objects, the freelist null - a full slab on no list, which a free puts back on the list), so
// that a free racing with the take finds it in a state SLUB knows. The objects are copied out
// after the lock is dropped; what is left over goes back to the slab as one detached list.
uint32_t refill_from_node(sheaves_cache *s, slub::slub_node *n, void **p, uint32_t max) {
    constexpr unsigned kTake = 16;
    uint32_t got = 0;
    while (got < max && n && n->nr_partial.load(std::memory_order_relaxed) != 0) {
        page *slabs[kTake];
        void *lists[kTake];
        unsigned taken = 0;
        uint64_t avail = 0;
        {
            platform::lock_guard guard(n->list_lock);
            for (page *pg = n->partial.first, *next; pg && taken < kTake && got + avail < max;
                 pg = next) {
                next = pg->next;
                freelist_counters old;
                for (;;) {
                    old = slub::read_pair(pg);
                    counters cnt = old.cnt;
                    cnt.set_inuse(cnt.objects());
                    if (slub::update_pair(pg, old, nullptr, cnt)) break;
                    slub::count(s, nullptr, slub::CMPXCHG_DOUBLE_FAIL);
                }
                slub::remove_partial(n, pg);
                slabs[taken] = pg;
                lists[taken] = old.freelist;
                avail += old.cnt.objects() - old.cnt.inuse();
                ++taken;
            }
        }
        if (taken == 0) break;
        for (unsigned i = 0; i < taken; ++i) {
            void *obj = lists[i];
            while (obj && got < max) {
                p[got++] = obj;
                obj = get_freepointer(s, obj);
            }
            if (obj) {
                // More than asked for: the rest back onto the slab (it is full now: the free
                // puts it on its node's partial list again).
                void *head = obj, *tail = obj;
                uint32_t nr = 0;
                for (; obj; obj = get_freepointer(s, obj)) {
                    tail = obj;
                    ++nr;
                }
                slub::slab_free_list(s, slabs[i], head, tail, nr, false);
            }
        }
    }
    return got;
}

} // namespace

uint32_t refill_objects(sheaves_cache *s, unsigned node, void **p, uint32_t max) {
    uint32_t got = refill_from_node(s, s->node_slab[node], p, max);
    // Other nodes' partial slabs, where they have more than min_partial of them (the kernel's
    // __refill_objects_any, without its remote_node_defrag_ratio lottery).
    for (unsigned i = 1; i < s->nr_nodes && got < max; ++i) {
        slub::slub_node *n = s->node_slab[(node + i) % s->nr_nodes];
        if (!n || n->nr_partial.load(std::memory_order_relaxed) <= s->min_partial) continue;
        got += refill_from_node(s, n, p + got, max - got);
    }
    // New slabs. Nobody else knows one yet: its objects are taken with plain stores, and a slab
    // with objects left joins its node's partial list at the head.
    while (got < max) {
        trimmer::maybe_run();
        page *pg = slub::new_slab(s, static_cast<int>(node));
        if (!pg) break;
        slub::count(s, nullptr, slub::ALLOC_SLAB);
        void *obj = slab_freelist(pg);
        uint32_t taken = 0;
        while (obj && got < max) {
            p[got++] = obj;
            obj = get_freepointer(s, obj);
            ++taken;
        }
        set_slab_freelist(pg, obj);
        pg->priv[1] = counters::make(taken, s->objects, false).word;
        if (obj) {
            slub::slub_node *n = slub::node_of(s, pg);
            platform::lock_guard guard(n->list_lock);
            slub::add_partial(n, pg, slub::list_end::head);
        }
    }
    return got;
}

bool refill_sheaf_from_slabs(sheaves_cache *s, sheaves_cpu *pcs, sheaf *sh) {
    uint32_t want = sh->capacity - sh->size;
    unsigned node = pcs ? pcs->node : slub::caller_node(s);
    uint32_t got = refill_objects(s, node, sh->objects() + sh->size, want);
    sh->size += got;
    count(s, pcs, SHEAF_REFILL, got);
    moved(pcs, got); // the sheaf is (or is about to be) one of the slot's
    return got == want;
}

// ---- flush to slabs --------------------------------------------------------------------------

void free_to_slabs(sheaves_cache *s, void **p, uint32_t size) {
    while (size) {
        void *obj = p[--size];
        page *pg = virt_to_head_page(obj);
        void *head = obj, *tail = obj;
        uint32_t nr = 1;
        // The next few entries: those of the same slab join the detached list (and move to the
        // end of the part still to do, which the next round then skips); the search stops at
        // the third of another slab.
        uint32_t same = size;
        unsigned lookahead = 3;
        while (size) {
            void *o = p[--size];
            if (virt_to_head_page(o) == pg) {
                set_freepointer(s, o, head);
                head = o;
                ++nr;
                --same;
                if (size != same) {
                    void *t = p[size];
                    p[size] = p[same];
                    p[same] = t;
                }
                continue;
            }
            if (!--lookahead) break;
        }
        size = same;
        slub::slab_free_list(s, pg, head, tail, nr, false);
    }
}

void sheaf_flush(sheaves_cache *s, sheaves_cpu *pcs, sheaf *sh) {
    uint32_t n = sh->size;
    if (!n) return;
    sh->size = 0;
    free_to_slabs(s, sh->objects(), n);
    count(s, pcs, SHEAF_FLUSH, n);
    moved(pcs, -static_cast<int64_t>(n)); // with a slot: one of its sheaves
}

void sheaf_flush_main(sheaves_cache *s, sheaves_cpu *pcs) {
    void *batch[kBatchMax];
    sheaf *main = pcs->main;
    while (uint32_t size = main->size) {
        uint32_t n = size < kBatchMax ? size : kBatchMax;
        main->size = size - n;
        memcpy(batch, main->objects() + main->size, n * sizeof(void *));
        free_to_slabs(s, batch, n);
        count(s, pcs, SHEAF_FLUSH, n);
        moved(pcs, -static_cast<int64_t>(n));
    }
}

int64_t queued_objects(const sheaves_cpu *pcs) {
    int64_t n = pcs->slow_delta.load(std::memory_order_relaxed) +
                static_cast<int64_t>(pcs->stats[FREE_FASTPATH].get()) -
                static_cast<int64_t>(pcs->stats[ALLOC_FASTPATH].get());
    return n > 0 ? n : 0; // a racing read can undershoot
}

void anchor_empty(sheaves_cpu *pcs) {
    pcs->slow_delta.store(static_cast<int64_t>(pcs->stats[ALLOC_FASTPATH].get()) -
                              static_cast<int64_t>(pcs->stats[FREE_FASTPATH].get()),
                          std::memory_order_relaxed);
}

void pcs_flush(sheaves_cache *s, sheaves_cpu *pcs, bool drop_main) {
    sheaf *spare = pcs->spare;
    // A fork child may find a slot its dead thread left half-way through a swap, main and spare
    // the same sheaf for a moment: it is flushed and freed once, as main.
    if (spare == pcs->main) pcs->spare = spare = nullptr;
    if (spare) {
        pcs->spare = nullptr;
        sheaf_flush(s, pcs, spare);
        free_empty_sheaf(s, pcs, spare);
    }
    sheaf *main = pcs->main;
    if (main == &g_bootstrap_sheaf) return anchor_empty(pcs);
    sheaf_flush_main(s, pcs);
    anchor_empty(pcs);
    if (drop_main) {
        pcs->main = &g_bootstrap_sheaf;
        free_empty_sheaf(s, pcs, main);
    }
}

} // namespace slabkit::sheaves
