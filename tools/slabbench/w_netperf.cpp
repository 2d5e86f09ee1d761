// w_netperf.cpp - netperf over loopback: a stream and a request/response sweep over message
// sizes between two pinned threads, and a stream of 32 pairs.
//
// Seed 000 (Zhang Yanmin) bound netperf's client and server to different CPUs over loopback:
// UDP stream of 4 KiB messages 20% faster with SLQB than SLUB, 1 KiB 2%, UDP request/response of
// 1 and 512 bytes 2-3%. Seed 001 (Mel Gorman, via David Rientjes) swept TCP stream over 13 sizes
// from 64 to 16384 bytes for SLUB and SLAB, each at order 0 and with high-order slabs, with
// differences up to 20% either way. Seed 004 (Nick Piggin) ran 64 netperf threads over
// loopback on 8 cores: SLAB 1.87M, SLQB 1.86M, SLUB 1.77M. What the allocator sees in all of
// them: the sender's CPU allocates an skb head and a data block sized by the message, the
// receiver's CPU frees both.
//
// Here the client and server are threads pinned to CPUs 0 and 1 and a socket is an rx_queue
// (messages.hpp) with a socket buffer's limit. stream/<size>: the sender makes, fills and queues
// messages for `case_ms`, the receiver reads, checks and frees them (MB/s of payload);
// rr/<size>: a request of <size> one way, a reply of <size> back, each side making its message
// and the other freeing it (transactions/s); stream64/<size>: `pairs` sender/receiver pairs at
// once, every pair split over two CPUs (aggregate MB/s).
#include "messages.hpp"
#include "workload.hpp"

#include "common.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace slabbench {

namespace {

struct netperf_setup {
    uint64_t budget_ns; // traffic time per case
    size_t window;      // socket buffer, in truesize bytes
    unsigned spin;      // polls before a single pair's receiver sleeps
};

struct case_outcome {
    double seconds = 0;
    msg::tally total;
};

// `pairs` streams at once. The sender of pair i is on CPU i and its receiver on CPU i + 1
// (pin_to_cpu wraps), so every message is freed on a CPU other than the one that made it, and
// with many pairs each CPU both allocates and frees remotely, as loopback with many netperfs.
case_outcome run_stream(msg::factory &f, const netperf_setup &s, size_t size, unsigned pairs,
                        unsigned spin) {
    std::vector<msg::tally> tallies(2 * size_t(pairs) + 1);
    msg::switchboard board;
    msg::crew crew;
    for (unsigned p = 0; p < pairs; ++p) board.add(s.window, spin);
    for (unsigned p = 0; p < pairs; ++p) {
        crew.add(
            [&f, &board, &s, size, p, mine = &tallies[2 * size_t(p)]] {
                // The last message is flagged, so the receiver knows when the stream ends
                // without either side sharing a clock or a count.
                const uint64_t until = now_ns() + s.budget_ns;
                for (uint64_t seq = 0;; ++seq) {
                    const bool last = now_ns() >= until;
                    msg::head *m = f.make(*mine, p, seq, size, last ? msg::flag_last : 0);
                    if (!board[p].push(m)) {
                        f.consume(*mine, m);
                        return;
                    }
                    if (last) return;
                }
            },
            static_cast<int>(p));
        crew.add(
            [&f, &board, pairs, p, mine = &tallies[2 * size_t(p) + 1]] {
                msg::order_check order(pairs);
                for (;;) {
                    msg::head *m = board[p].pop();
                    if (!m) return;
                    const msg::delivery d = f.consume(*mine, m);
                    order.accept(*mine, d);
                    if (d.flags & msg::flag_last) return;
                }
            },
            static_cast<int>(p + 1));
    }
    case_outcome o;
    o.seconds = double(board.run(crew, f, tallies.back())) / 1e9;
    o.total = msg::sum(tallies);
    return o;
}

// One request/response pair: the client on CPU 0, the server on CPU 1.
case_outcome run_rr(msg::factory &f, const netperf_setup &s, size_t size) {
    std::vector<msg::tally> tallies(3);
    msg::switchboard board;
    msg::crew crew;
    msg::rx_queue &to_server = board.add(s.window, s.spin);
    msg::rx_queue &to_client = board.add(s.window, s.spin);
    crew.add(
        [&, mine = &tallies[0]] {
            msg::order_check order(2);
            const uint64_t until = now_ns() + s.budget_ns;
            for (uint64_t seq = 0;; ++seq) {
                const bool last = now_ns() >= until;
                msg::head *m = f.make(*mine, 0, seq, size, last ? msg::flag_last : 0);
                if (!to_server.push(m)) {
                    f.consume(*mine, m);
                    return;
                }
                msg::head *reply = to_client.pop();
                if (!reply) return;
                order.accept(*mine, f.consume(*mine, reply));
                if (last) return;
            }
        },
        0);
    crew.add(
        [&, mine = &tallies[1]] {
            msg::order_check order(2);
            for (;;) {
                msg::head *m = to_server.pop();
                if (!m) return;
                const msg::delivery d = f.consume(*mine, m);
                order.accept(*mine, d);
                msg::head *reply = f.make(*mine, 1, d.seq, size, d.flags);
                if (!to_client.push(reply)) {
                    f.consume(*mine, reply);
                    return;
                }
                if (d.flags & msg::flag_last) return;
            }
        },
        1);
    case_outcome o;
    o.seconds = double(board.run(crew, f, tallies.back())) / 1e9;
    o.total = msg::sum(tallies);
    return o;
}

std::vector<size_t> sizes_of(const run_context &ctx, const char *param) {
    std::vector<size_t> out;
    for (long long v : ctx.get_ints(param)) {
        if (v < 1 || v > (1 << 24))
            throw std::runtime_error(fmt::format("netperf: {} has a size out of 1..16M", param));
        out.push_back(static_cast<size_t>(v));
    }
    return out;
}

} // namespace

workload netperf_workload() {
    workload w;
    w.name = "netperf";
    w.seed = "seeds 000, 001, 004: netperf over loopback (UDP/TCP stream and RR, 64 threads)";
    w.maps_to =
        "netperf between a client and a server pinned to different CPUs over loopback: every "
        "message an skb-like head from skbuff_head_cache plus a kmalloc'd data block of the "
        "message's size (as __alloc_skb sizes it), made on one CPU and freed on the other. "
        "stream/<size> (MB/s) and rr/<size> (transactions/s) over seed 001's 13 sizes, which "
        "seed 001 compared for SLUB and SLAB at order 0 and high order; stream64/<size>: 32 "
        "pairs at once (seed 004's 64 threads), aggregate MB/s.";
    w.cannot = "No TCP/UDP stack, no loopback device, no system calls or copies to user space: a "
               "socket is an in-process queue with a buffer limit, so the allocator's share of the "
               "time is larger than in the kernel and the differences larger. TCP's segmentation, "
               "acks and UDP's datagram limits are not modelled. 64 threads share 2 CPUs here.";
    w.families = fam_cache | fam_order | fam_slots | fam_malloc | fam_peers;
    w.baseline = "slub";
    w.shape = layout::matrix;
    w.params = {
        {"sizes", "64,4096,16384",
         "64,128,256,1024,2048,3312,4096,6144,8192,10240,12288,14336,16384",
         "64,128,256,1024,2048,3312,4096,6144,8192,10240,12288,14336,16384",
         "message sizes of the stream and rr cases (seed 001's 13)"},
        {"sizes64", "64,4096", "64,1024,4096,16384", "64,256,1024,4096,8192,16384",
         "message sizes of the stream64 cases"},
        {"pairs", "2", "32", "32", "sender/receiver pairs of stream64 (seed 004: 64 threads)"},
        {"case_ms", "3", "20", "100", "milliseconds of traffic per case"},
        {"window", "262144", "262144", "262144",
         "bytes a queue holds before the sender waits (a socket's buffer, truesize)"},
        {"spin", "2000", "20000", "20000",
         "polls (and lock tries) before a pinned pair's waiting side sleeps; 0 with fewer than "
         "2 CPUs and for stream64, whose threads outnumber the CPUs"},
    };
    w.run = [](const run_context &ctx, result &out) {
        msg::guarded(out, [&] {
            netperf_setup s{};
            const double ms = ctx.get_double("case_ms");
            if (!(ms > 0)) throw std::runtime_error("netperf: case_ms must be > 0");
            s.budget_ns = static_cast<uint64_t>(ms * 1e6);
            s.window = static_cast<size_t>(ctx.get_int("window"));
            const long long spin = ctx.get_int("spin");
            // Polling only helps while each side has a CPU to itself.
            s.spin = ctx.cpus >= 2 && spin > 0 ? static_cast<unsigned>(spin) : 0;
            long long pairs = ctx.get_int("pairs");
            if (ctx.threads > 0) pairs = ctx.threads / 2;
            if (pairs < 1) throw std::runtime_error("netperf: pairs must be >= 1");
            const auto sizes = sizes_of(ctx, "sizes");
            const auto sizes64 = sizes_of(ctx, "sizes64");

            msg::factory f(*ctx.heap);
            msg::ledger book;
            auto record = [&](const std::string &name, const case_outcome &o, bool per_trans) {
                book.add(name, o.total.made, o.total);
                if (per_trans)
                    // A transaction is a request and its reply: two messages delivered.
                    out.add(name, "rate", "trans/s", better::higher,
                            double(o.total.delivered) / 2 / o.seconds);
                else
                    out.add(name, "throughput", "MB/s", better::higher,
                            double(o.total.bytes) / 1e6 / o.seconds);
            };
            {
                // Untimed, at the largest size (the most memory), so that the first case does
                // not pay for the heap's first growth and page faults alone.
                size_t largest = 1;
                for (size_t size : sizes) largest = size > largest ? size : largest;
                const case_outcome o = run_stream(f, s, largest, 1, s.spin);
                book.add("warm-up", o.total.made, o.total);
            }
            for (size_t size : sizes)
                record(fmt::format("stream/{}", size), run_stream(f, s, size, 1, s.spin), false);
            for (size_t size : sizes) record(fmt::format("rr/{}", size), run_rr(f, s, size), true);
            for (size_t size : sizes64)
                record(fmt::format("stream64/{}", size),
                       run_stream(f, s, size, static_cast<unsigned>(pairs), 0), false);
            book.finish(out, f);
        });
    };
    return w;
}

} // namespace slabbench
