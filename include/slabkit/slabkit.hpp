// slabkit.hpp - C++ adaptors over slabkit's C API (header-only, C++17 or later).
//
//   slabkit::cache<T>           a typed object cache that owns a slabkit_cache: create() builds a
//                               T in an object of the cache, destroy() runs ~T and frees it. In
//                               the process's design, or in a design named by a tag
//                               (slabkit::slqb_design, slub_design, slab_design) so that one
//                               program can hold caches of every design.
//   slabkit::allocator<T>       a standard allocator over kmalloc (containers: vector, map, ...).
//   slabkit::memory_resource    a std::pmr::memory_resource over kmalloc;
//   slabkit::kmalloc_resource() the process-wide instance.
//
// Failure: allocation failure throws std::bad_alloc (std::bad_array_new_length when n * sizeof(T)
// overflows), and a cache that cannot be created throws std::runtime_error. Built without
// exceptions (-fno-exceptions), each of these calls std::abort() instead.
//
// Alignment: kmalloc blocks are 8-aligned (the kernel's minimum; every design but SLOB gives 16
// from 16 bytes up, SLOB 8 as the kernel's did), and power-of-two sizes up to
// SLABKIT_KMALLOC_MAX_CACHE_SIZE are naturally aligned (slabkit.h). A request aligned above 8 is
// therefore rounded up to a power of two of at least the alignment while that stays within
// SLABKIT_KMALLOC_MAX_CACHE_SIZE (kmalloc's classes are mostly powers of two already: a
// 16-aligned 100-byte request takes the 128-byte block it would anyway); beyond it, the block is
// over-allocated by the alignment and the start of the kmalloc block is kept in the word just
// below the address handed out. Deallocation takes the same size and alignment as allocation (as
// std::allocator and std::pmr require), so it finds the block again either way. Any power-of-two
// alignment works.
//
// Bad input (freeing what was not allocated here, destroying a cache with live objects) is
// reported as slabkit.h describes.
#ifndef SLABKIT_SLABKIT_HPP
#define SLABKIT_SLABKIT_HPP

#include "slabkit.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <memory_resource>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define SLABKIT_HPP_EXCEPTIONS 1
#else
#define SLABKIT_HPP_EXCEPTIONS 0
#endif

namespace slabkit {

// ---- designs -----------------------------------------------------------------------------------

// Names a design for cache<T>: slabkit::slqb_design, slub_design, slab_design, slob_design,
// sheaves_design, or
// design_tag{"name"} for a name read at run time (slabkit_designs() lists this build's).
struct design_tag {
    const char *name;
};
inline constexpr design_tag slqb_design{"slqb"};
inline constexpr design_tag slub_design{"slub"};
inline constexpr design_tag slab_design{"slab"};
inline constexpr design_tag slob_design{"slob"};
inline constexpr design_tag sheaves_design{"sheaves"};

namespace detail {

[[noreturn]] inline void throw_bad_alloc() {
#if SLABKIT_HPP_EXCEPTIONS
    throw std::bad_alloc();
#else
    std::abort();
#endif
}

[[noreturn]] inline void throw_bad_array_new_length() {
#if SLABKIT_HPP_EXCEPTIONS
    throw std::bad_array_new_length();
#else
    std::abort();
#endif
}

[[noreturn]] inline void throw_cache_error(const char *name) {
#if SLABKIT_HPP_EXCEPTIONS
    throw std::runtime_error(std::string("slabkit: cannot create cache '") +
                             (name ? name : "(null)") + "' (the reason is on stderr)");
#else
    (void)name;
    std::abort();
#endif
}

// How a request of `bytes` aligned to `align` (a power of two) is served from kmalloc: the size
// to ask for, and whether the block is over-allocated with its start stored below the address
// handed out. size == 0 means the request cannot be served (overflow).
struct kmalloc_plan {
    std::size_t size;
    bool stashed;
};

constexpr std::size_t kmalloc_natural_limit = SLABKIT_KMALLOC_MAX_CACHE_SIZE;

constexpr kmalloc_plan plan_kmalloc(std::size_t bytes, std::size_t align) noexcept {
    if (bytes == 0) bytes = 1; // a distinct block, not SLABKIT_ZERO_SIZE_PTR
    if (align <= 8) return {bytes, false};
    std::size_t need = bytes < align ? align : bytes;
    if (need <= kmalloc_natural_limit) {
        std::size_t size = 1;
        while (size < need) size <<= 1;
        return {size, false};
    }
    if (bytes > std::numeric_limits<std::size_t>::max() - align) return {0, true};
    return {bytes + align, true};
}

// Returns nullptr on failure.
inline void *kmalloc_aligned(std::size_t bytes, std::size_t align) noexcept {
    const kmalloc_plan plan = plan_kmalloc(bytes, align);
    if (plan.size == 0) return nullptr;
    void *block = slabkit_kmalloc(plan.size, 0);
    if (block == nullptr || !plan.stashed) return block;
    // The block is larger than SLABKIT_KMALLOC_MAX_CACHE_SIZE, so page-aligned: the first
    // multiple of align past its first word lies at most align bytes in, and bytes fit after it.
    const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(block);
    const std::uintptr_t user = (start + sizeof(void *) + align - 1) & ~(std::uintptr_t{align} - 1);
    std::memcpy(reinterpret_cast<void *>(user - sizeof(void *)), &block, sizeof(void *));
    return reinterpret_cast<void *>(user);
}

inline void kfree_aligned(void *p, std::size_t bytes, std::size_t align) noexcept {
    if (p == nullptr) return;
    if (plan_kmalloc(bytes, align).stashed) {
        void *block;
        std::memcpy(&block, static_cast<char *>(p) - sizeof(void *), sizeof(void *));
        p = block;
    }
    slabkit_kfree(p);
}

} // namespace detail

// ---- cache<T> ----------------------------------------------------------------------------------

// A cache of T objects (sizeof(T) bytes, aligned to alignof(T)), owned: the destructor destroys
// the cache. Objects still alive then are reported and their memory kept (slabkit.h). Move-only;
// a moved-from cache owns nothing and may only be destroyed or assigned to.
template <class T>
class cache {
    static_assert(std::is_object_v<T> && !std::is_array_v<T> && !std::is_const_v<T>,
                  "slabkit::cache<T> needs a non-const, non-array object type");

  public:
    using value_type = T;

    // Frees through the cache: the deleter of unique_ptr below.
    struct deleter {
        slabkit_cache *owner = nullptr;
        void operator()(T *p) const noexcept {
            if (p == nullptr) return;
            p->~T();
            slabkit_cache_free(owner, p);
        }
    };
    using unique_ptr = std::unique_ptr<T, deleter>;

    // `name`: unique among live caches, 1..31 printable characters without spaces. `flags`:
    // SLABKIT_HWCACHE_ALIGN and the other cache flags of slabkit.h. Throws std::runtime_error
    // when the cache cannot be created (bad or taken name, no memory; the reason is on stderr).
    explicit cache(const char *name, unsigned flags = 0)
        : cache_(slabkit_cache_create(name, sizeof(T), alignof(T), flags, nullptr)) {
        if (cache_ == nullptr) detail::throw_cache_error(name);
    }
    // The same in design `d` (slabkit::slqb_design, slabkit::slub_design, ...); an unknown design
    // throws like any other failure to create the cache.
    cache(design_tag d, const char *name, unsigned flags = 0)
        : cache_(slabkit_cache_create_in(d.name, name, sizeof(T), alignof(T), flags, nullptr)) {
        if (cache_ == nullptr) detail::throw_cache_error(name);
    }
    // The same with the kernel's sheaf_capacity (kmem_cache_args): the sheaves design keeps at
    // least that many objects per sheaf, so that prefill(n) up to it takes the fast way.
    cache(design_tag d, const char *name, unsigned flags, unsigned sheaf_capacity)
        : cache_(create_args(d, name, flags, sheaf_capacity)) {
        if (cache_ == nullptr) detail::throw_cache_error(name);
    }
    ~cache() { slabkit_cache_destroy(cache_); }

    // A prefilled sheaf (kmem_cache_prefill_sheaf): objects taken ahead, so that create() from
    // it cannot run out of memory while size() > 0 - for code that must not fail later (under
    // a lock, in a commit step). Move-only; gives its objects and itself back to the cache when
    // destroyed (kmem_cache_return_sheaf), so the cache must outlive it.
    class sheaf {
      public:
        sheaf(sheaf &&other) noexcept
            : owner_(other.owner_), sheaf_(std::exchange(other.sheaf_, nullptr)) {}
        sheaf &operator=(sheaf &&other) noexcept {
            if (this != &other) {
                slabkit_cache_return_sheaf(owner_, 0, sheaf_);
                owner_ = other.owner_;
                sheaf_ = std::exchange(other.sheaf_, nullptr);
            }
            return *this;
        }
        sheaf(const sheaf &) = delete;
        sheaf &operator=(const sheaf &) = delete;
        ~sheaf() { slabkit_cache_return_sheaf(owner_, 0, sheaf_); }

        // Objects left.
        std::size_t size() const noexcept { return slabkit_sheaf_size(sheaf_); }
        // A new T(args...) in the sheaf's next object. An empty sheaf is a caller's mistake:
        // throws std::bad_alloc (aborts without exceptions). If T's constructor throws, the
        // object goes back to the cache and the exception is passed on.
        template <class... Args>
        [[nodiscard]] T *create(Args &&...args) {
            void *obj = slabkit_cache_alloc_from_sheaf(owner_, 0, sheaf_);
            if (obj == nullptr) detail::throw_bad_alloc();
#if SLABKIT_HPP_EXCEPTIONS
            try {
                return ::new (obj) T(std::forward<Args>(args)...);
            } catch (...) {
                slabkit_cache_free(owner_, obj);
                throw;
            }
#else
            return ::new (obj) T(std::forward<Args>(args)...);
#endif
        }
        // Tops the sheaf up to at least n objects (kmem_cache_refill_sheaf); false when memory
        // is short (the sheaf keeps what it had).
        [[nodiscard]] bool refill(std::size_t n) noexcept {
            if (n > UINT32_MAX) return false;
            return slabkit_cache_refill_sheaf(owner_, 0, &sheaf_, static_cast<unsigned>(n)) == 0;
        }

      private:
        friend class cache;
        sheaf(slabkit_cache *owner, slabkit_sheaf *sh) noexcept : owner_(owner), sheaf_(sh) {}
        slabkit_cache *owner_;
        slabkit_sheaf *sheaf_;
    };

    // A sheaf of at least n objects. Throws std::bad_alloc when memory is short (or n is 0).
    [[nodiscard]] sheaf prefill(std::size_t n) {
        slabkit_sheaf *sh = n > UINT32_MAX
                                ? nullptr
                                : slabkit_cache_prefill_sheaf(cache_, 0, static_cast<unsigned>(n));
        if (sh == nullptr) detail::throw_bad_alloc();
        return sheaf(cache_, sh);
    }

    cache(cache &&other) noexcept : cache_(std::exchange(other.cache_, nullptr)) {}
    cache &operator=(cache &&other) noexcept {
        if (this != &other) {
            slabkit_cache_destroy(cache_);
            cache_ = std::exchange(other.cache_, nullptr);
        }
        return *this;
    }
    cache(const cache &) = delete;
    cache &operator=(const cache &) = delete;

    // A new T(args...) in an object of the cache. Throws std::bad_alloc when memory is short;
    // if T's constructor throws, the object is freed and the exception passed on.
    template <class... Args>
    [[nodiscard]] T *create(Args &&...args) {
        void *obj = slabkit_cache_alloc(cache_, 0);
        if (obj == nullptr) detail::throw_bad_alloc();
#if SLABKIT_HPP_EXCEPTIONS
        try {
            return ::new (obj) T(std::forward<Args>(args)...);
        } catch (...) {
            slabkit_cache_free(cache_, obj);
            throw;
        }
#else
        return ::new (obj) T(std::forward<Args>(args)...);
#endif
    }

    // Runs ~T and frees the object (nullptr: nothing). p must come from create() of this cache.
    void destroy(T *p) noexcept {
        deleter{cache_}(p);
    }

    // create() wrapped in a unique_ptr that destroys through this cache (which must outlive it).
    template <class... Args>
    [[nodiscard]] unique_ptr make_unique(Args &&...args) {
        return unique_ptr(create(std::forward<Args>(args)...), deleter{cache_});
    }

    // The C handle (for slabkit_cache_stats and the like); nullptr once moved from.
    slabkit_cache *get() const noexcept {
        return cache_;
    }
    explicit operator bool() const noexcept {
        return cache_ != nullptr;
    }
    const char *name() const noexcept {
        return slabkit_cache_name(cache_);
    }
    // The cache's design ("slqb", "slub", ...).
    std::string design_name() const {
        slabkit_cache_stats st;
        slabkit_get_cache_stats(cache_, &st);
        return st.design;
    }
    // Gives free memory back; returns the pages the cache still holds (slabkit_cache_shrink).
    std::size_t shrink() noexcept {
        return slabkit_cache_shrink(cache_);
    }

  private:
    static slabkit_cache *create_args(design_tag d, const char *name, unsigned flags,
                                      unsigned sheaf_capacity) {
        slabkit_cache_args args{alignof(T), nullptr, sheaf_capacity};
        return slabkit_cache_create_args(d.name, name, sizeof(T), &args, flags);
    }
    slabkit_cache *cache_;
};

// ---- allocator<T> ------------------------------------------------------------------------------

// A stateless standard allocator over kmalloc: every instance can free what any other allocated.
template <class T>
class allocator {
  public:
    using value_type = T;
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    using propagate_on_container_move_assignment = std::true_type;
    using is_always_equal = std::true_type;

    allocator() noexcept = default;
    template <class U>
    allocator(const allocator<U> &) noexcept {}

    // Room for n objects. Throws std::bad_array_new_length when n * sizeof(T) overflows and
    // std::bad_alloc when memory is short.
    [[nodiscard]] T *allocate(std::size_t n) {
        if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
            detail::throw_bad_array_new_length();
        void *p = detail::kmalloc_aligned(n * sizeof(T), alignof(T));
        if (p == nullptr) detail::throw_bad_alloc();
        return static_cast<T *>(p);
    }

    void deallocate(T *p, std::size_t n) noexcept {
        detail::kfree_aligned(p, n * sizeof(T), alignof(T));
    }
};

template <class T, class U>
constexpr bool operator==(const allocator<T> &, const allocator<U> &) noexcept {
    return true;
}
template <class T, class U>
constexpr bool operator!=(const allocator<T> &, const allocator<U> &) noexcept {
    return false;
}

// ---- memory_resource ---------------------------------------------------------------------------

// A std::pmr::memory_resource over kmalloc. Stateless: any two instances compare equal (each can
// free what the other allocated).
class memory_resource final : public std::pmr::memory_resource {
  protected:
    void *do_allocate(std::size_t bytes, std::size_t alignment) override {
        void *p = detail::kmalloc_aligned(bytes, alignment);
        if (p == nullptr) detail::throw_bad_alloc();
        return p;
    }

    void do_deallocate(void *p, std::size_t bytes, std::size_t alignment) override {
        detail::kfree_aligned(p, bytes, alignment);
    }

    bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
        if (this == &other) return true;
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
        return dynamic_cast<const memory_resource *>(&other) != nullptr;
#else
        return false;
#endif
    }
};

// The process-wide kmalloc resource. Never destroyed, so containers with static storage may
// still free through it during exit.
inline memory_resource *kmalloc_resource() noexcept {
    alignas(memory_resource) static unsigned char storage[sizeof(memory_resource)];
    static memory_resource *const instance = ::new (static_cast<void *>(storage)) memory_resource();
    return instance;
}

// ---- statistics as a value ------------------------------------------------------------------

// One cache's statistics (slabkit_cache_stats) as a value: names as strings, the design's
// counters and tunables as (name, value) lists in the design's order.
struct cache_statistics {
    std::string name, design, flags;
    std::size_t object_size = 0, slot_size = 0, align = 0;
    unsigned order = 0, objects_per_slab = 0;
    std::uint64_t slabs = 0, active_slabs = 0, objects = 0, active_objects = 0;
    std::uint64_t queued_objects = 0, shared_avail = 0;
    std::uint64_t slabinfo_tunables[3] = {};
    std::vector<std::pair<std::string, std::uint64_t>> tunables, counters;
    std::uint64_t allocs = 0, alloc_slow = 0, frees = 0, free_slow = 0;

    static cache_statistics from(const slabkit_cache_stats &st) {
        cache_statistics c;
        c.name = st.name;
        c.design = st.design;
        c.flags = st.flags;
        c.object_size = st.object_size;
        c.slot_size = st.slot_size;
        c.align = st.align;
        c.order = st.order;
        c.objects_per_slab = st.objects_per_slab;
        c.slabs = st.slabs;
        c.active_slabs = st.active_slabs;
        c.objects = st.objects;
        c.active_objects = st.active_objects;
        c.queued_objects = st.queued_objects;
        c.shared_avail = st.shared_avail;
        for (int i = 0; i < 3; ++i) c.slabinfo_tunables[i] = st.slabinfo_tunables[i];
        for (unsigned i = 0; i < st.nr_tunables; ++i)
            c.tunables.emplace_back(st.tunable_names[i], st.tunables[i]);
        for (unsigned i = 0; i < st.nr_counters; ++i)
            c.counters.emplace_back(st.counter_names[i], st.counters[i]);
        c.allocs = st.allocs;
        c.alloc_slow = st.alloc_slow;
        c.frees = st.frees;
        c.free_slow = st.free_slow;
        return c;
    }
    // The design's counter of that name; std::out_of_range names it when the design has none.
    std::uint64_t counter(const std::string &which) const {
        for (const auto &c : counters)
            if (c.first == which) return c.second;
        throw std::out_of_range("slabkit: cache " + name + " (" + design + ") has no counter " +
                                which);
    }
};

// Every statistic of the process at one moment (the C API's structures, as values).
struct statistics {
    std::vector<cache_statistics> caches; // in creation order
    slabkit_heap_stats heap{};
    std::vector<slabkit_node_stats> nodes; // the page allocator per NUMA node
    slabkit_slot_stats slots{};

    // The cache of that name, or nullptr.
    const cache_statistics *find(const std::string &name) const {
        for (const auto &c : caches)
            if (c.name == name) return &c;
        return nullptr;
    }
};

// Takes the snapshot (caches that come and go meanwhile are taken or not, never half).
inline statistics snapshot() {
    statistics s;
    std::vector<slabkit_cache_stats> raw;
    for (;;) {
        raw.resize(slabkit_cache_count() + 8);
        const std::size_t n = slabkit_stats(raw.data(), raw.size());
        if (n <= raw.size()) {
            raw.resize(n);
            break;
        }
    }
    s.caches.reserve(raw.size());
    for (const auto &st : raw) s.caches.push_back(cache_statistics::from(st));
    slabkit_get_heap_stats(&s.heap);
    s.nodes.resize(slabkit_get_node_stats(nullptr, 0));
    s.nodes.resize(slabkit_get_node_stats(s.nodes.data(), s.nodes.size()));
    slabkit_get_slot_stats(&s.slots);
    return s;
}

// The same statistics as one JSON text (slabkit_stats_json; docs/slabinfo.md has the schema).
inline std::string stats_json() {
    std::string text(64 * 1024, '\0');
    for (;;) {
        const std::size_t n = slabkit_stats_json(text.data(), text.size());
        if (n < text.size()) {
            text.resize(n);
            return text;
        }
        text.resize(n + 4096);
    }
}

} // namespace slabkit

#endif // SLABKIT_SLABKIT_HPP
