// sheaves_alloc.cpp - the sheaves' allocation slow path (replacing an empty main sheaf: the
// spare, the barn, a refill from slabs), the slot's structure, the CPU's rseq pop, and the
// prefilled sheaves.
#include "core/debug.hpp"
#include "sheaves/sheaves_internal.hpp"

#include <cstring>
#include <new>

namespace slabkit::sheaves {

sheaves_cpu *get_pcs(sheaves_cache *s, unsigned slot) {
    sheaves_cpu *pcs = s->cpu_sheaves[slot].load(std::memory_order_acquire);
    if (SLABKIT_LIKELY(pcs)) return pcs;
    void *mem = slub::alloc_single(&cpu_cache(), kAnyNode);
    if (!mem) return nullptr;
    // main is the bootstrap sheaf until the slot's first slow path installs one of the cache's
    // (and again after a trim gave it back): a slot that never allocates holds no sheaf.
    pcs = new (mem) sheaves_cpu();
    pcs->node = s->numa ? slots::node_of(slot) % s->nr_nodes : 0;
    pcs->shrink_seen = s->shrink_gen.load(std::memory_order_relaxed);
    s->cpu_sheaves[slot].store(pcs, std::memory_order_release);
    return pcs;
}

namespace {

// A refilled sheaf, or nullptr when no slab object could be had: `empty` (an empty sheaf, or
// nullptr: a new one is made) refilled from slabs.
sheaf *refill_or_free(sheaves_cache *s, sheaves_cpu *pcs, sheaf *empty) {
    if (!empty) empty = alloc_empty_sheaf(s, pcs); // alloc_full_sheaf
    if (!empty) return nullptr;
    refill_sheaf_from_slabs(s, pcs, empty);
    if (empty->size) return empty;
    // Very low on memory: no use keeping the sheaf.
    free_empty_sheaf(s, pcs, empty);
    return nullptr;
}

// __pcs_replace_empty_main: main is empty (or the bootstrap sheaf: the slot has no main yet);
// false when no sheaf with objects could be had. The kernel drops its local lock around the
// refill and then handles a changed main (an interrupt, a migration); the slot is held
// throughout here, so main is still the empty one.
bool replace_empty_main(sheaves_cache *s, sheaves_cpu *pcs) {
    const bool boot = pcs->main == &g_bootstrap_sheaf;
    if (pcs->spare && pcs->spare->size > 0) {
        sheaf *t = pcs->main;
        pcs->main = pcs->spare;
        pcs->spare = boot ? nullptr : t;
        return true;
    }
    // Main and spare hold nothing: their count reads 0 from here.
    anchor_empty(pcs);
    node_barn *barn = barn_of(s, pcs);
    sheaf *full = boot ? barn_get_full(barn) : barn_replace_empty(barn, pcs->main);
    if (full) {
        count(s, pcs, BARN_GET);
        moved(pcs, full->size);
        pcs->main = full; // (barn_replace_empty has put it there already)
        return true;
    }
    count(s, pcs, BARN_GET_FAIL);
    sheaf *empty;
    if (pcs->spare) {
        empty = pcs->spare;
        pcs->spare = nullptr;
    } else {
        empty = barn_get_empty(barn);
    }
    full = refill_or_free(s, pcs, empty);
    if (!full) return false;
    // The empty main becomes the spare, or goes to the barn when there is one.
    if (boot) {
        pcs->main = full;
    } else if (!pcs->spare) {
        pcs->spare = pcs->main;
        pcs->main = full;
    } else {
        barn_put_empty(barn, pcs->main, full);
    }
    return true;
}

} // namespace

void *alloc_slow(sheaves_cache *s, unsigned slot, int node, bool zero) {
    if (node != kAnyNode && (node < 0 || static_cast<unsigned>(node) >= s->nr_nodes))
        return nullptr; // no such node
    // A debug cache has no sheaves (capacity 0) and no per-slot structures, as in the kernel:
    // one object at a time under the list lock, checked by the debug layer.
    if (SLABKIT_UNLIKELY(s->debug)) return debug::alloc(s, node, zero);
    slots::hold held; // for the caller's slot (kNoSlot), until the end
    if (slot == kNoSlot) slot = held.slot();
    sheaves_cpu *pcs = slot == kNoSlot ? nullptr : get_pcs(s, slot);
    void *obj = nullptr;
    if (pcs && s->sheaf_capacity) {
        uint64_t gen = s->shrink_gen.load(std::memory_order_relaxed);
        if (SLABKIT_UNLIKELY(gen != pcs->shrink_seen)) {
            // A shrink asked every slot to give back its sheaves (the kernel's flush_all).
            pcs->shrink_seen = gen;
            pcs_flush(s, pcs, false);
        }
        if (node != kAnyNode && static_cast<unsigned>(node) != pcs->node) {
            // Sheaves do not keep track of nodes: an object of a node asked for comes from
            // that node's slabs.
            count(s, pcs, ALLOC_NODE_MISMATCH);
        } else if (pcs->main->size != 0 || replace_empty_main(s, pcs)) {
            sheaf *main = pcs->main;
            uint32_t n = main->size - 1;
            main->size = n;
            count(s, pcs, ALLOC_FASTPATH);
            obj = main->objects()[n];
        }
    }
    // No sheaf could serve: one object from the node lists (___slab_alloc, ALLOC_SLOWPATH).
    if (!obj) obj = slub::alloc_single(s, node);
    if (obj && zero) memset(obj, 0, s->object_size);
    return obj;
}

void *alloc_from_cpu_sheaf(const std::atomic<sheaves_cpu *> *cpu_sheaves) {
#if SLABKIT_HAVE_RSEQ
    unsigned cpu = platform::rseq_cpu_start(); // the section fails if the thread moved since
    return platform::rseq_pop_sheaf<kMainDisp, kAllocFastpathDisp, kEntriesDisp>(
        &cpu_sheaves[cpu], slots::lock_word(cpu), cpu);
#else
    (void)cpu_sheaves;
    return nullptr;
#endif
}

void *alloc_on_cpu(sheaves_cache *s, bool zero) {
    if (!zero) {
        if (void *obj = alloc_from_cpu_sheaf(s->cpu_sheaves)) return obj;
    }
    return alloc_slow(s, kNoSlot, kAnyNode, zero);
}

// ---- prefilled sheaves ------------------------------------------------------------------------

sheaf *prefill_sheaf(sheaves_cache *s, unsigned size) {
    if (size == 0) return nullptr;
    if (size > s->sheaf_capacity) {
        // Oversize (and every prefill of a cache without sheaves): a one-off sheaf of exactly
        // `size`, filled from slabs, all or nothing.
        sheaf *sh = alloc_sheaf_block(size);
        if (!sh) return nullptr;
        sh->owner = s;
        sh->flags = kOversize;
        count(s, nullptr, SHEAF_PREFILL_OVERSIZE);
        if (s->debug) {
            // A debug cache's objects come one at a time through the debug layer, which
            // tracks them as allocated.
            while (sh->size < size) {
                void *obj = debug::alloc(s, kAnyNode, false);
                if (!obj) break;
                sh->objects()[sh->size++] = obj;
            }
        } else {
            sh->size = refill_objects(s, slub::caller_node(s), sh->objects(), size);
        }
        if (sh->size < size) {
            return_sheaf(s, sh); // flushed and freed
            return nullptr;
        }
        return sh;
    }
    sheaf *sh = nullptr;
    sheaves_cpu *pcs = nullptr;
    {
        slots::hold held;
        unsigned slot = held.slot();
        pcs = slot == kNoSlot ? nullptr : get_pcs(s, slot);
        if (pcs && pcs->spare) {
            sh = pcs->spare;
            pcs->spare = nullptr;
            moved(pcs, -static_cast<int64_t>(sh->size));
            count(s, pcs, SHEAF_PREFILL_FAST);
        } else {
            count(s, pcs, SHEAF_PREFILL_SLOW);
            sh = barn_get_full_or_empty(s->barn[pcs ? pcs->node : slub::caller_node(s)]);
            count(s, pcs, sh && sh->size ? BARN_GET : BARN_GET_FAIL);
        }
    }
    if (!sh) sh = alloc_empty_sheaf(s, nullptr);
    if (!sh) return nullptr;
    if (sh->size < size) {
        refill_sheaf_from_slabs(s, nullptr, sh);
        if (sh->size < size) {
            sheaf_flush(s, nullptr, sh);
            free_empty_sheaf(s, nullptr, sh);
            return nullptr;
        }
    }
    return sh;
}

void return_sheaf(sheaves_cache *s, sheaf *sh) {
    if (sh->flags & kOversize) {
        if (s->debug) {
            for (uint32_t i = 0; i < sh->size; ++i)
                debug::free(s, sh->objects()[i], "kmem_cache_return_sheaf");
            sh->size = 0;
        } else {
            sheaf_flush(s, nullptr, sh);
        }
        free_empty_sheaf(s, nullptr, sh);
        return;
    }
    node_barn *barn;
    {
        slots::hold held;
        unsigned slot = held.slot();
        sheaves_cpu *pcs = slot == kNoSlot ? nullptr : get_pcs(s, slot);
        if (pcs && !pcs->spare) {
            pcs->spare = sh;
            moved(pcs, sh->size);
            count(s, pcs, SHEAF_RETURN_FAST);
            return;
        }
        barn = s->barn[pcs ? pcs->node : slub::caller_node(s)];
    }
    count(s, nullptr, SHEAF_RETURN_SLOW);
    // To the barn, topped up to full, when it has room for a full sheaf; else flushed and freed.
    if (barn->nr_full.load(std::memory_order_relaxed) >= kMaxFullSheaves ||
        !refill_sheaf_from_slabs(s, nullptr, sh)) {
        sheaf_flush(s, nullptr, sh);
        free_empty_sheaf(s, nullptr, sh);
        return;
    }
    barn_put_full(barn, sh);
    count(s, nullptr, BARN_PUT);
}

bool refill_sheaf(sheaves_cache *s, sheaf **sheafp, unsigned size) {
    sheaf *sh = *sheafp;
    if (sh->size >= size) return true;
    if (size <= sh->capacity) {
        if (!(sh->flags & kOversize)) {
            // As the kernel: always to the sheaf's capacity.
            refill_sheaf_from_slabs(s, nullptr, sh);
            return sh->size >= size;
        }
        uint32_t want = sh->capacity - sh->size;
        uint32_t got = 0;
        if (s->debug) {
            while (got < want) {
                void *obj = debug::alloc(s, kAnyNode, false);
                if (!obj) break;
                sh->objects()[sh->size + got++] = obj;
            }
        } else {
            got = refill_objects(s, slub::caller_node(s), sh->objects() + sh->size, want);
        }
        sh->size += got;
        return sh->size >= size;
    }
    // A bigger sheaf than this one holds: a new one, and this one given back.
    sheaf *bigger = prefill_sheaf(s, size);
    if (!bigger) return false;
    return_sheaf(s, sh);
    *sheafp = bigger;
    return true;
}

void *alloc_from_sheaf(sheaves_cache *s, sheaf *sh, bool zero) {
    if (sh->size == 0) return nullptr;
    void *obj = sh->objects()[--sh->size];
    if (zero) memset(obj, 0, s->object_size);
    return obj;
}

} // namespace slabkit::sheaves
