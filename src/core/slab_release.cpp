// slab_release.cpp - release chains and deferred-release scopes (see slab_release.hpp).
#include "core/slab_release.hpp"

#include "core/cache.hpp"
#include "core/slot_array.hpp"
#include "page/page_allocator.hpp"

namespace slabkit {

namespace {
constinit thread_local bool tls_defer SLABKIT_TLS = false;
constinit thread_local page *tls_deferred SLABKIT_TLS = nullptr;
} // namespace

deferred_release::deferred_release() : outer_(tls_defer) {
    tls_defer = true;
}

deferred_release::~deferred_release() {
    if (outer_) return;
    tls_defer = false;
    release_chain chain;
    chain.first = tls_deferred;
    tls_deferred = nullptr;
    release_slabs(chain);
}

void release_slabs(release_chain &chain) {
    if (SLABKIT_UNLIKELY(tls_defer)) {
        while (page *pg = chain.first) {
            chain.first = pg->next;
            pg->next = tls_deferred;
            tls_deferred = pg;
        }
        return;
    }
    page_allocator &pa = page_allocator::global();
    while (page *pg = chain.first) {
        chain.first = pg->next;
        unsigned order = pg->order();
        clear_slab(pg);
        pa.free(page_to_virt(pg), order);
    }
}

void *alloc_slot_array_block() {
    return page_allocator::global().alloc(kSlotArrayOrder, kAnyNode, kZero);
}

void free_slot_array(void *array) {
    page_allocator::global().free(array, kSlotArrayOrder);
}

} // namespace slabkit
