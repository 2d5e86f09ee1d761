// lock.hpp - slabkit's mutex: a futex lock, constant-initialised, no allocation, fork-resettable.
//
// Uncontended lock and unlock are one atomic each, inline; a contended lock sleeps in the kernel
// (platform.cpp). Every lock in slabkit is one of these, so that fork hooks can take and reset
// them, and so that no layer above needs <pthread.h>.
#pragma once

#include <atomic>
#include <cstdint>

namespace slabkit::platform {

void futex_lock_slow(std::atomic<uint32_t> *word);
void futex_wake_one(std::atomic<uint32_t> *word);

class mutex {
  public:
    constexpr mutex() = default;
    mutex(const mutex &) = delete;
    mutex &operator=(const mutex &) = delete;

    void lock() {
        uint32_t expected = 0;
        // 0 = free, 1 = held, 2 = held and someone may sleep on it.
        if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                            std::memory_order_relaxed))
            futex_lock_slow(&state_);
    }
    bool try_lock() {
        uint32_t expected = 0;
        return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }
    void unlock() {
        if (state_.exchange(0, std::memory_order_release) == 2) futex_wake_one(&state_);
    }
    bool is_locked() const { return state_.load(std::memory_order_relaxed) != 0; }
    // In a fork child only one thread exists: whatever held the lock is gone.
    void reset_after_fork() { state_.store(0, std::memory_order_relaxed); }

  private:
    std::atomic<uint32_t> state_{0};
};

class lock_guard {
  public:
    explicit lock_guard(mutex &m) : m_(m) { m_.lock(); }
    ~lock_guard() { m_.unlock(); }
    lock_guard(const lock_guard &) = delete;
    lock_guard &operator=(const lock_guard &) = delete;

  private:
    mutex &m_;
};

} // namespace slabkit::platform
