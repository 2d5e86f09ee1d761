// spsc_ring.hpp - a bounded single-producer single-consumer ring of pointers, for the remote
// free benchmarks (slabbench's micro workload, bench/slab_bench.cpp): every object the
// producer allocates is freed by the consumer on another CPU.
#pragma once

#include "common.hpp"

#include <atomic>
#include <cstddef>
#include <thread>

namespace slabbench {

// Waits a little; every 64th call gives the CPU away, so that on a machine with fewer free CPUs
// than threads the thread being waited for gets to run.
inline void backoff(unsigned &spins) {
    if (++spins % 64 == 0) {
        std::this_thread::yield();
    } else {
        cpu_relax();
    }
}

// A bounded single-producer single-consumer ring of pointers, which each side publishes in
// batches: the producer makes its objects visible every kPublish objects, the consumer its
// progress every kPublish objects, so the two threads exchange the cache lines of the indices
// once a batch rather than once an object. Each side keeps a cached copy of the other's index
// and rereads it only when the ring looks full (producer) or empty (consumer); before waiting, a
// side publishes what it has, so neither can wait for the other's unpublished work.
template <size_t kRing>
class spsc_ring {
  public:
    void push(void *obj) {
        if (head_ - tail_cache_ == kRing) {
            tail_cache_ = tail_pub_.load(std::memory_order_acquire);
            if (head_ - tail_cache_ == kRing) {
                flush();
                unsigned spins = 0;
                do {
                    backoff(spins);
                    tail_cache_ = tail_pub_.load(std::memory_order_acquire);
                } while (head_ - tail_cache_ == kRing);
            }
        }
        slots_[head_ % kRing] = obj;
        if (++head_ % kPublish == 0) flush();
    }
    // Publishes the objects pushed so far (the producer calls it after its last push).
    void flush() { head_pub_.store(head_, std::memory_order_release); }
    void *pop() {
        if (tail_ == head_cache_) {
            head_cache_ = head_pub_.load(std::memory_order_acquire);
            if (tail_ == head_cache_) {
                tail_pub_.store(tail_, std::memory_order_release);
                unsigned spins = 0;
                do {
                    backoff(spins);
                    head_cache_ = head_pub_.load(std::memory_order_acquire);
                } while (tail_ == head_cache_);
            }
        }
        void *obj = slots_[tail_ % kRing];
        if (++tail_ % kPublish == 0) tail_pub_.store(tail_, std::memory_order_release);
        return obj;
    }
    size_t pushed() const { return head_; }
    size_t popped() const { return tail_; }

  private:
    static constexpr size_t kPublish = 16;
    // Producer's own line: its index and its view of the consumer's.
    alignas(64) size_t head_ = 0;
    size_t tail_cache_ = 0;
    // Consumer's own line.
    alignas(64) size_t tail_ = 0;
    size_t head_cache_ = 0;
    // The published indices, each on a line of its own.
    alignas(64) std::atomic<size_t> head_pub_{0};
    alignas(64) std::atomic<size_t> tail_pub_{0};
    alignas(64) void *slots_[kRing] = {};
};

} // namespace slabbench
