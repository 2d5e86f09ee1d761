// messages.cpp - heads, receive queues, the start gate and the counts of the message workloads
// (messages.hpp).
#include "messages.hpp"

#include "common.hpp"

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <thread>

namespace slabbench::msg {

namespace {

// The byte a message's payload is filled with: differs between neighbouring messages of a
// sender and between senders, so a block handed out twice or a message delivered to the wrong
// receiver shows.
unsigned char pattern(uint32_t src, uint64_t seq) {
    return static_cast<unsigned char>((src * 131u) ^ (seq * 29u) ^ 0x5au);
}

// Written where skb_shared_info starts (the kernel initialises it there on every allocation);
// checking it back catches a block shorter than what was asked for.
struct stamp {
    uint64_t seq;
    uint32_t src;
    uint32_t len;
};
static_assert(sizeof(stamp) <= shared_info_bytes);

} // namespace

tally sum(const std::vector<tally> &all) {
    tally s;
    for (const tally &t : all) {
        s.made += t.made;
        s.consumed += t.consumed;
        s.delivered += t.delivered;
        s.bytes += t.bytes;
        s.corrupt += t.corrupt;
        s.disorder += t.disorder;
    }
    return s;
}

factory::factory(heap &h)
    : heap_(h), cache_(h.make_cache("skbuff_head_cache", head_bytes, 0, SLABKIT_HWCACHE_ALIGN)) {}

head *factory::make(tally &t, uint32_t src, uint64_t seq, size_t len, uint32_t flags) {
    auto *m = static_cast<head *>(heap_.alloc(cache_));
    if (!m) throw std::bad_alloc();
    const size_t aligned = data_block_bytes(len) - shared_info_bytes;
    auto *data = static_cast<unsigned char *>(heap_.kmalloc(data_block_bytes(len)));
    if (!data) {
        heap_.free(cache_, m);
        throw std::bad_alloc();
    }
    // __alloc_skb clears the head before it fills it in.
    std::memset(m, 0, sizeof *m);
    m->data = data;
    m->len = static_cast<uint32_t>(len);
    m->src = src;
    m->seq = seq;
    m->flags = flags;
    m->truesize = static_cast<uint32_t>(truesize(len));
    std::memset(data, pattern(src, seq), len);
    const stamp st{seq, src, static_cast<uint32_t>(len)};
    std::memcpy(data + aligned, &st, sizeof st);
    ++t.made;
    return m;
}

delivery factory::consume(tally &t, head *m) {
    delivery d;
    d.src = m->src;
    d.seq = m->seq;
    d.len = m->len;
    d.flags = m->flags;
    const unsigned char want = pattern(m->src, m->seq);
    const unsigned char *p = m->data;
    // Reads every byte, as the copy to the receiver's buffer does; no early exit, so that the
    // loop vectorises and costs the same for a good message and a bad one.
    // (The length is read once: the bytes could alias the head, which keeps the compiler
    // from vectorising a loop that rereads it.)
    const uint32_t len = m->len;
    unsigned char diff = 0;
    for (uint32_t i = 0; i < len; ++i) diff |= static_cast<unsigned char>(p[i] ^ want);
    stamp st{};
    std::memcpy(&st, p + (data_block_bytes(m->len) - shared_info_bytes), sizeof st);
    d.intact = diff == 0 && st.seq == m->seq && st.src == m->src && st.len == m->len &&
               m->truesize == truesize(m->len);
    heap_.kfree(m->data);
    heap_.free(cache_, m);
    ++t.consumed;
    return d;
}

void order_check::accept(tally &t, const delivery &d) {
    if (!d.intact) ++t.corrupt;
    if (d.src < next_.size() && d.seq == next_[d.src]) {
        ++next_[d.src];
        ++t.delivered;
        t.bytes += d.len;
    } else {
        ++t.disorder;
    }
}

std::unique_lock<std::mutex> rx_queue::lock() {
    for (unsigned i = 0; i < spin_; ++i) {
        if (mu_.try_lock()) return std::unique_lock<std::mutex>(mu_, std::adopt_lock);
        cpu_relax();
    }
    return std::unique_lock<std::mutex>(mu_);
}

bool rx_queue::push(head *m) {
    // The polls only shorten the waits; the lock below decides.
    if (limit_)
        for (unsigned i = 0; i < spin_; ++i) {
            const size_t queued = polled_bytes_.load(std::memory_order_acquire);
            if (queued == 0 || queued + m->truesize <= limit_) break;
            cpu_relax();
        }
    bool wake = false;
    {
        std::unique_lock<std::mutex> lk = lock();
        // A socket takes one message however big, once it is empty (else a message larger
        // than the buffer could never be sent).
        while (!closed_ && limit_ && first_ && bytes_ + m->truesize > limit_) {
            ++writers_;
            ++writer_sleeps_;
            writable_.wait(lk);
            --writers_;
        }
        if (closed_) return false;
        m->next = nullptr;
        if (last_)
            last_->next = m;
        else
            first_ = m;
        last_ = m;
        bytes_ += m->truesize;
        polled_bytes_.store(bytes_, std::memory_order_release);
        wake = readers_ != 0;
    }
    if (wake) readable_.notify_one();
    return true;
}

head *rx_queue::pop() {
    for (unsigned i = 0; i < spin_ && polled_bytes_.load(std::memory_order_acquire) == 0; ++i)
        cpu_relax();
    head *m = nullptr;
    bool wake = false;
    {
        std::unique_lock<std::mutex> lk = lock();
        while (!closed_ && !first_) {
            ++readers_;
            ++reader_sleeps_;
            readable_.wait(lk);
            --readers_;
        }
        if (closed_) return nullptr;
        m = first_;
        first_ = m->next;
        if (!first_) last_ = nullptr;
        bytes_ -= m->truesize;
        polled_bytes_.store(bytes_, std::memory_order_release);
        // As sock_def_write_space: writers are woken once half the buffer is free, not at
        // every message taken, so that a full socket costs a wake-up per half buffer.
        wake = writers_ != 0 && (bytes_ <= limit_ / 2 || !first_);
    }
    if (wake) writable_.notify_all();
    m->next = nullptr;
    return m;
}

void rx_queue::close() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        closed_ = true;
    }
    readable_.notify_all();
    writable_.notify_all();
}

void rx_queue::drain(factory &f, tally &t) {
    head *list = nullptr;
    {
        std::lock_guard<std::mutex> lk(mu_);
        list = first_;
        first_ = last_ = nullptr;
        bytes_ = 0;
        polled_bytes_.store(0, std::memory_order_relaxed);
    }
    while (list) {
        head *next = list->next;
        f.consume(t, list);
        list = next;
    }
}

void crew::add(std::function<void()> body, int cpu) {
    bodies_.push_back({std::move(body), cpu});
}

uint64_t crew::run(const std::function<void()> &on_error) {
    const size_t n = bodies_.size();
    std::mutex mu;
    std::condition_variable cv;
    size_t arrived = 0;
    bool open = false, abandoned = false;
    std::string error;
    std::vector<uint64_t> ended(n, 0);
    std::vector<std::thread> threads;
    threads.reserve(n);

    auto fail = [&](const std::string &why) {
        {
            std::lock_guard<std::mutex> lk(mu);
            if (error.empty()) error = why;
        }
        on_error();
    };
    auto body = [&](size_t i) {
        if (bodies_[i].cpu >= 0) pin_to_cpu(static_cast<unsigned>(bodies_[i].cpu));
        {
            std::unique_lock<std::mutex> lk(mu);
            if (++arrived == n) cv.notify_all();
            cv.wait(lk, [&] { return open; });
            if (abandoned) return;
        }
        try {
            bodies_[i].body();
        } catch (const std::bad_alloc &) {
            fail("out of memory (an allocation returned null)");
        } catch (const std::exception &e) {
            fail(e.what());
        } catch (...) {
            fail("unknown exception");
        }
        ended[i] = now_ns();
    };

    try {
        for (size_t i = 0; i < n; ++i) threads.emplace_back(body, i);
    } catch (...) {
        // Threads already started wait at the gate: let them go without running their bodies.
        {
            std::lock_guard<std::mutex> lk(mu);
            open = abandoned = true;
        }
        cv.notify_all();
        for (auto &t : threads) t.join();
        throw;
    }
    uint64_t start = 0;
    {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return arrived == n; });
        start = now_ns();
        open = true;
    }
    cv.notify_all();
    for (auto &t : threads) t.join();
    if (!error.empty()) throw std::runtime_error(error);
    uint64_t end = start;
    for (uint64_t e : ended) end = e > end ? e : end;
    return end - start;
}

rx_queue &switchboard::add(size_t limit, unsigned spin) {
    queues_.push_back(std::make_unique<rx_queue>(limit, spin));
    return *queues_.back();
}

uint64_t switchboard::run(crew &c, factory &f, tally &leftover) {
    auto close_all = [this] {
        for (auto &q : queues_) q->close();
    };
    uint64_t ns = 0;
    try {
        ns = c.run(close_all);
    } catch (...) {
        for (auto &q : queues_) q->drain(f, leftover);
        throw;
    }
    for (auto &q : queues_) q->drain(f, leftover);
    return ns;
}

void guarded(result &out, const std::function<void()> &body) {
    try {
        body();
    } catch (const std::bad_alloc &) {
        out.fail("out of memory (an allocation returned null)");
    } catch (const std::exception &e) {
        out.fail(e.what());
    } catch (...) {
        out.fail("unknown exception");
    }
}

void ledger::add(const std::string &name, uint64_t expected, const tally &t) {
    expected_ += expected;
    delivered_ += t.delivered;
    corrupt_ += t.corrupt;
    disorder_ += t.disorder;
    made_ += t.made;
    consumed_ += t.consumed;
    if (t.delivered != expected && first_short_.empty())
        first_short_ = fmt::format(" (first short: {}, {} of {})", name, t.delivered, expected);
}

void ledger::finish(result &out, factory &f) const {
    const heap &h = f.source();
    out.check("delivered", delivered_ == expected_ && disorder_ == 0,
              count_detail(delivered_, expected_, "messages delivered once and in order") +
                  (disorder_ ? fmt::format(", {} out of order", disorder_) : "") + first_short_);
    out.check("intact", corrupt_ == 0, fmt::format("{} messages damaged", corrupt_));
    out.check("freed", made_ == consumed_ && made_ > 0,
              count_detail(consumed_, made_, "messages made were freed"));
    const long long live = h.live_objects();
    if (live >= 0)
        out.check("no leak", live == 0, fmt::format("{} objects live in the heap's caches", live));
    out.note("peak_rss_kib", static_cast<double>(peak_rss_kib()));
    out.note("messages", static_cast<double>(made_));
}

} // namespace slabbench::msg
