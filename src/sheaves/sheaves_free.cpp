// sheaves_free.cpp - the sheaves' free slow path (replacing a full main sheaf: an empty sheaf
// from the barn, the spare, the barn's trade, a flush) and the CPU's rseq push.
#include "sheaves/sheaves_internal.hpp"

namespace slabkit::sheaves {

namespace {

// __pcs_replace_full_main: main is full (or the bootstrap sheaf: the slot has no main yet);
// afterwards it has room. The kernel drops its local lock to allocate or flush and then handles
// a changed main (__pcs_install_empty_sheaf); the slot is held throughout here. False only for a
// slot without a main whose first sheaf cannot be had (memory short): the object then goes to
// its slab.
bool replace_full_main(sheaves_cache *s, sheaves_cpu *pcs) {
    node_barn *barn = barn_of(s, pcs);
    bool put_fail = false;
    sheaf *empty = nullptr;
    if (pcs->main == &g_bootstrap_sheaf) {
        // The slot's first sheaf (or its first since a trim took it back).
        empty = barn_get_empty(barn);
        if (!empty) empty = alloc_empty_sheaf(s, pcs);
        if (!empty) return false;
        pcs->main = empty;
        return true;
    }
    if (!pcs->spare) {
        empty = barn_get_empty(barn);
        if (empty) {
            pcs->spare = pcs->main;
            pcs->main = empty;
            return true;
        }
    } else if (pcs->spare->size < s->sheaf_capacity) {
        sheaf *t = pcs->main;
        pcs->main = pcs->spare;
        pcs->spare = t;
        return true;
    } else {
        bool too_many;
        // Its size read first: once in the barn, the sheaf is any slot's to take.
        const int64_t handed = pcs->main->size;
        empty = barn_replace_full(barn, pcs->main, &too_many);
        if (empty) { // now main
            count(s, pcs, BARN_PUT);
            moved(pcs, -handed);
            return true;
        }
        if (too_many) {
            // The barn holds enough full sheaves: the full spare goes back to slabs and becomes
            // the empty main, main the spare.
            count(s, pcs, BARN_PUT_FAIL);
            sheaf *to_flush = pcs->spare;
            sheaf_flush(s, pcs, to_flush);
            pcs->spare = pcs->main;
            pcs->main = to_flush;
            return true;
        }
        // The barn had no empty sheaf to trade: a new one, and full main to the barn.
        put_fail = true;
    }
    empty = alloc_empty_sheaf(s, pcs);
    if (empty) {
        if (!pcs->spare) {
            pcs->spare = pcs->main;
            pcs->main = empty;
        } else {
            // Spare and main both full, and the barn had room: main goes there.
            moved(pcs, -static_cast<int64_t>(pcs->main->size));
            barn_put_full(barn, pcs->main, empty);
            count(s, pcs, BARN_PUT);
        }
        return true;
    }
    if (put_fail) count(s, pcs, BARN_PUT_FAIL);
    sheaf_flush_main(s, pcs);
    return true;
}

} // namespace

void free_slow(sheaves_cache *s, page *pg, void *obj) {
    // A debug cache's objects all go to slub::slab_free, which hands them to the debug layer.
    if (SLABKIT_UNLIKELY(s->debug)) return slub::slab_free(s, pg, obj);
    {
        slots::hold held; // until the end of the push
        unsigned slot = held.slot();
        sheaves_cpu *pcs = slot == kNoSlot ? nullptr : get_pcs(s, slot);
        if (pcs && s->sheaf_capacity && (!s->numa || page_to_nid(pg) % s->nr_nodes == pcs->node)) {
            uint64_t gen = s->shrink_gen.load(std::memory_order_relaxed);
            if (SLABKIT_UNLIKELY(gen != pcs->shrink_seen)) {
                pcs->shrink_seen = gen;
                pcs_flush(s, pcs, false);
            }
            sheaf *main = pcs->main;
            if (main->size == main->capacity) {
                if (!replace_full_main(s, pcs)) goto to_slab;
                main = pcs->main;
            }
            uint32_t n = main->size;
            if (kSlabArrayCheck && SLABKIT_UNLIKELY(n && main->objects()[n - 1] == obj))
                return report_double_free(s, obj);
            main->objects()[n] = obj;
            main->size = n + 1;
            count(s, pcs, FREE_FASTPATH);
            return;
        }
    }
to_slab:
    // Another node's object (or no sheaves to take it): straight to its slab, with SLUB's
    // compare-and-swap (FREE_SLOWPATH).
    slub::slab_free_object(s, pg, obj);
}

void free_checked(sheaves_cache *s, void *obj) {
    if (page *pg = checked_slab_page(s, obj)) free_to_slab(s, pg, obj);
}

void free_to_cpu_sheaf(sheaves_cache *s, page *pg, void *obj) {
#if SLABKIT_HAVE_RSEQ
    unsigned cpu = platform::rseq_cpu_start();
    // The CPU's node, as its structure has it (get_pcs), without loading the structure.
    if (!s->numa || page_to_nid(pg) % s->nr_nodes == slots::node_of(cpu) % s->nr_nodes) {
        uint32_t pushed = platform::rseq_push_sheaf<kMainDisp, kFreeFastpathDisp, kEntriesDisp>(
            &s->cpu_sheaves[cpu], slots::lock_word(cpu), cpu, obj);
        if (SLABKIT_UNLIKELY(pushed == platform::kRseqDoubleFree))
            return report_double_free(s, obj);
        if (SLABKIT_LIKELY(pushed != 0)) return;
    }
#endif
    return free_slow(s, pg, obj);
}

} // namespace slabkit::sheaves
