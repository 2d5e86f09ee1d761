// messages.hpp - the kernel's message passing, in miniature, for the message workloads
// (hackbench, netperf, volano).
//
// What the seeds' benchmarks stress in the slab allocator is the socket layer's sk_buff: every
// message is a head from skbuff_head_cache plus a kmalloc'd data block, allocated by the sending
// task and freed by the receiving one, usually on another CPU. Here:
//   - a `head` is that head (232 bytes, about a 2.6-era x86-64 sk_buff), from a cache
//     named skbuff_head_cache; its data block is kmalloc'd with the room the kernel adds
//     (SKB_DATA_ALIGN of the length plus skb_shared_info), so a message lands in the kmalloc
//     size class the kernel's would;
//   - an `rx_queue` is a socket's receive queue: a mutex, condition variables and an intrusive
//     list of heads, with the socket buffer's limit on the bytes queued (the sender waits while
//     it is full, as a blocking send does);
//   - a `crew` runs a case's threads behind a start gate, so that only the traffic is timed;
//   - `tally`, `order_check` and `ledger` count what was made, delivered and freed, and turn it
//     into the run's checks.
// Counting is per thread (no shared atomics on the message path), so that the counting does not
// add cache-line traffic of its own to what the allocators are compared on.
#pragma once

#include "heap.hpp"
#include "workload.hpp"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace slabbench::msg {

// The head's size: about 2.6.28's struct sk_buff on x86-64, what the seeds' skbuff_head_cache
// held.
inline constexpr size_t head_bytes = 232;
// What __alloc_skb adds to the length: SKB_DATA_ALIGN (a cache line) and the skb_shared_info
// at the end of the block (about 320 bytes with that era's MAX_SKB_FRAGS).
inline constexpr size_t data_align = 64;
inline constexpr size_t shared_info_bytes = 320;

// The size of the data block a message of `len` bytes gets (what is kmalloc'd).
constexpr size_t data_block_bytes(size_t len) {
    return ((len + data_align - 1) & ~(data_align - 1)) + shared_info_bytes;
}
// What a message charges to a queue's limit (the kernel's truesize: head plus data block).
constexpr size_t truesize(size_t len) {
    return head_bytes + data_block_bytes(len);
}

// head::flags: the sender's last message of the case (netperf's timed runs).
inline constexpr uint32_t flag_last = 1u << 0;

struct head {
    head *next;          // the queue's link (sk_buff's next)
    unsigned char *data; // the kmalloc'd block
    uint32_t len;        // bytes of payload at data
    uint32_t src;        // who sent it (the sender's index in its case)
    uint64_t seq;        // the sender's sequence number towards this receiver
    uint32_t flags;
    uint32_t truesize;
    unsigned char rest[head_bytes - 40]; // the fields the kernel's head has besides
};
static_assert(sizeof(head) == head_bytes);

// One thread's counts. Each thread has its own, read by the main thread after the join.
struct alignas(64) tally {
    uint64_t made = 0;      // messages allocated (head and block)
    uint64_t consumed = 0;  // messages freed
    uint64_t delivered = 0; // messages received in order (see order_check)
    uint64_t bytes = 0;     // payload bytes received
    uint64_t corrupt = 0;   // received with a payload or stamp that does not match
    uint64_t disorder = 0;  // received out of the sender's order: lost or duplicated
};

// Sums the tallies of a case's threads.
tally sum(const std::vector<tally> &all);

// What a receiver learns from a message before it frees it.
struct delivery {
    uint32_t src = 0;
    uint64_t seq = 0;
    uint32_t len = 0;
    uint32_t flags = 0;
    bool intact = false;
};

// Makes and frees messages over a heap: the workloads' skbuff_head_cache and kmalloc.
class factory {
  public:
    // Creates the skbuff_head_cache (throws when slabkit refuses it).
    explicit factory(heap &h);

    // A message of `len` payload bytes from `src`, numbered `seq`, its payload written with the
    // pattern of (src, seq). Throws std::bad_alloc when the heap has no memory.
    head *make(tally &t, uint32_t src, uint64_t seq, size_t len, uint32_t flags = 0);
    // Reads a message (checks its payload against the pattern), then frees its block and head.
    delivery consume(tally &t, head *m);

    heap &source() { return heap_; }

  private:
    heap &heap_;
    heap::cache *cache_;
};

// Checks that every sender's messages arrive exactly once and in order (each queue is FIFO and
// each sender numbers its messages to each receiver from 0), per receiver.
class order_check {
  public:
    explicit order_check(size_t senders) : next_(senders, 0) {}
    // Counts the delivery into `t`: delivered and its bytes, or disorder; corrupt if not intact.
    void accept(tally &t, const delivery &d);
    // The next sequence number expected from `src` (= how many arrived in order).
    uint64_t next(uint32_t src) const { return src < next_.size() ? next_[src] : 0; }

  private:
    std::vector<uint64_t> next_;
};

// A socket's receive queue. push() waits while the bytes queued (truesize) are over `limit`
// (0: no limit), as a blocking send on a full socket buffer does, and is woken once half of it
// is free (sock_def_write_space's rule); pop() waits for a message. Both poll `spin` times
// before they sleep: for a pair of threads pinned to CPUs of their own, where a wake-up (tens of
// microseconds when the other CPU idles, far more in a virtual machine) would cost more than
// the allocator work being measured. close() ends every
// wait: push() then returns false (the caller still owns the message) and pop() returns null.
class rx_queue {
  public:
    explicit rx_queue(size_t limit = 0, unsigned spin = 0) : limit_(limit), spin_(spin) {}
    rx_queue(const rx_queue &) = delete;
    rx_queue &operator=(const rx_queue &) = delete;

    bool push(head *m);
    head *pop();
    void close();
    // Frees what is still queued (after a failed case), counting it in `t`.
    void drain(factory &f, tally &t);
    // How often a reader and a writer went to sleep on the queue (after the case).
    uint64_t reader_sleeps() const { return reader_sleeps_; }
    uint64_t writer_sleeps() const { return writer_sleeps_; }

  private:
    // The lock, tried `spin` times before blocking: the kernel's queue lock is a spinlock, and
    // a futex sleep on a lock held for a few instructions would cost more than the message.
    std::unique_lock<std::mutex> lock();

    std::mutex mu_;
    std::condition_variable readable_, writable_;
    head *first_ = nullptr, *last_ = nullptr;
    size_t bytes_ = 0;
    unsigned readers_ = 0, writers_ = 0; // threads waiting, so that a push or pop that nobody
                                         // waits for skips the wake-up call
    bool closed_ = false;
    uint64_t reader_sleeps_ = 0, writer_sleeps_ = 0;
    std::atomic<size_t> polled_bytes_{0}; // bytes_, for the polls before the lock
    const size_t limit_;
    const unsigned spin_;
};

// A case's threads. Each added body runs on a thread of its own (pinned when cpu >= 0); run()
// starts them all, waits until every one stands at the start gate, takes the start time, opens
// the gate and joins them. A body that throws stops the case: its message is kept and `on_error`
// runs (it closes the case's queues, so no partner waits for ever).
class crew {
  public:
    void add(std::function<void()> body, int cpu = -1);
    // Nanoseconds from the gate's opening to the last body's end. Throws std::runtime_error with
    // the first body's error when one failed (after every thread is joined), and what
    // std::thread throws when a thread cannot be started.
    uint64_t run(const std::function<void()> &on_error);
    size_t size() const { return bodies_.size(); }

  private:
    struct member {
        std::function<void()> body;
        int cpu;
    };
    std::vector<member> bodies_;
};

// A case's queues, closed together when a thread of the case fails and emptied after it.
class switchboard {
  public:
    rx_queue &add(size_t limit, unsigned spin = 0);
    rx_queue &operator[](size_t i) { return *queues_[i]; }
    size_t size() const { return queues_.size(); }
    // Runs the crew (crew::run) with every queue closed on a failure; whatever is left queued
    // afterwards is freed into `leftover` (so a failed case leaks nothing either). Returns the
    // crew's traffic time, or rethrows its error.
    uint64_t run(crew &c, factory &f, tally &leftover);

  private:
    std::vector<std::unique_ptr<rx_queue>> queues_;
};

// Runs a workload's body, turning any exception into out.fail (a worker never crashes on one).
void guarded(result &out, const std::function<void()> &body);

// A run's counts over its cases, turned into its checks at the end.
class ledger {
  public:
    // One case's outcome: `expected` messages should have been delivered.
    void add(const std::string &name, uint64_t expected, const tally &t);
    // Adds the checks "delivered" (every message once, in order), "intact" (no payload
    // damaged), "freed" (every message made was freed) and "no leak" (the heap's live objects,
    // where it can tell), and the notes: peak RSS and messages made.
    void finish(result &out, factory &f) const;

  private:
    uint64_t expected_ = 0, delivered_ = 0, corrupt_ = 0, disorder_ = 0;
    uint64_t made_ = 0, consumed_ = 0;
    std::string first_short_; // the first case that delivered less than expected
};

} // namespace slabbench::msg
