// w_hackbench.cpp - hackbench: groups of senders and receivers passing small messages.
//
// Seed 000 (Zhang Yanmin testing SLQB against SLUB) ran `hackbench 100 process 2000`: 100 groups
// of 20 sender and 20 receiver processes, each sender writing 2000 messages of 100 bytes to each
// receiver of its group over a socket, timed from start to the last receiver's exit (SLUB 24.6 s
// against SLQB 23 s on a 16-core machine). In the kernel each write allocates an skb head from
// skbuff_head_cache and a kmalloc'd data block on the sender's CPU, and the receiver frees both,
// usually on another CPU: a remote-free workload with far more tasks than CPUs.
//
// Here a group is threads instead of processes and a receiver's socket is an rx_queue with the
// socket buffer's limit; each message is a head plus its kmalloc'd block (messages.hpp), written
// by the sender and read, checked and freed by the receiver. Case groups/<G> is the time for G
// groups to pass all their messages, in seconds (lower is better), as hackbench prints.
#include "messages.hpp"
#include "workload.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace slabbench {

namespace {

struct hackbench_setup {
    unsigned senders, receivers;
    uint64_t loops;
    size_t bytes, window;
};

// One case: `groups` groups passing their messages; returns the traffic's seconds.
double run_groups(msg::factory &f, const hackbench_setup &s, unsigned groups, msg::ledger &book,
                  const std::string &name) {
    const unsigned per_group = s.senders + s.receivers;
    std::vector<msg::tally> tallies(static_cast<size_t>(groups) * per_group + 1);
    msg::switchboard board;
    msg::crew crew;
    for (unsigned g = 0; g < groups; ++g)
        for (unsigned r = 0; r < s.receivers; ++r) board.add(s.window);
    for (unsigned g = 0; g < groups; ++g) {
        const size_t first_queue = static_cast<size_t>(g) * s.receivers;
        msg::tally *t = &tallies[static_cast<size_t>(g) * per_group];
        for (unsigned i = 0; i < s.senders; ++i)
            crew.add([&f, &board, &s, first_queue, i, mine = t + i] {
                // As hackbench's sender: a round of one message to every receiver, `loops` times.
                for (uint64_t l = 0; l < s.loops; ++l)
                    for (unsigned r = 0; r < s.receivers; ++r) {
                        msg::head *m = f.make(*mine, i, l, s.bytes);
                        if (!board[first_queue + r].push(m)) {
                            f.consume(*mine, m);
                            return;
                        }
                    }
            });
        for (unsigned r = 0; r < s.receivers; ++r)
            crew.add([&f, &board, &s, q = first_queue + r, mine = t + s.senders + r] {
                msg::order_check order(s.senders);
                const uint64_t expected = s.loops * s.senders;
                for (uint64_t n = 0; n < expected; ++n) {
                    msg::head *m = board[q].pop();
                    if (!m) return;
                    order.accept(*mine, f.consume(*mine, m));
                }
            });
    }
    const uint64_t ns = board.run(crew, f, tallies.back());
    const uint64_t expected = uint64_t(groups) * s.senders * s.receivers * s.loops;
    book.add(name, expected, msg::sum(tallies));
    return double(ns) / 1e9;
}

} // namespace

workload hackbench_workload() {
    workload w;
    w.name = "hackbench";
    w.seed = "seed 000: hackbench (Zhang Yanmin, SLQB against SLUB)";
    w.maps_to =
        "hackbench's process mode: groups of senders and receivers, each sender passing `loops` "
        "messages of 100 bytes to each receiver of its group. Each message is an skb-like head "
        "from skbuff_head_cache plus a kmalloc'd data block sized as __alloc_skb sizes it, "
        "allocated by the sender and freed by the receiver (remote frees, more threads than "
        "CPUs). Case groups/<G>: seconds for G groups to pass every message, as hackbench prints.";
    w.cannot =
        "Threads and in-process queues, not processes and AF_UNIX sockets: no system calls, no "
        "copy to user space, no scheduler wake-up of a task on another CPU by the kernel. Group "
        "sizes are smaller at tiny and quick so that a 2-CPU machine is not swamped; the seed "
        "ran 100 groups of 20+20 processes on 8 and 16 cores.";
    w.families = fam_cache | fam_slots | fam_malloc | fam_peers;
    w.baseline = "slub";
    w.shape = layout::by_config;
    w.params = {
        {"groups", "1,2", "1,4", "1,2,4,8,16", "numbers of groups, one case each"},
        {"senders", "3", "5", "20", "sender threads per group (hackbench: 20)"},
        {"receivers", "3", "5", "20", "receiver threads per group (hackbench: 20)"},
        {"loops", "20", "6000", "500", "messages each sender sends to each receiver"},
        {"bytes", "100", "100", "100", "payload bytes per message (hackbench: 100)"},
        {"window", "212992", "212992", "212992",
         "bytes a receiver's queue holds before senders wait (a socket's buffer, truesize)"},
    };
    w.run = [](const run_context &ctx, result &out) {
        msg::guarded(out, [&] {
            hackbench_setup s{};
            s.senders = static_cast<unsigned>(ctx.get_int("senders"));
            s.receivers = static_cast<unsigned>(ctx.get_int("receivers"));
            if (ctx.threads) s.senders = s.receivers = std::max(1u, ctx.threads / 2); // --threads
            s.loops = static_cast<uint64_t>(ctx.get_int("loops"));
            s.bytes = static_cast<size_t>(ctx.get_int("bytes"));
            s.window = static_cast<size_t>(ctx.get_int("window"));
            if (s.senders < 1 || s.receivers < 1 || s.loops < 1)
                throw std::runtime_error("hackbench: senders, receivers and loops must be >= 1");
            msg::factory f(*ctx.heap);
            msg::ledger book;
            // Untimed, so that the first case does not pay for the heap's first growth and
            // page faults alone; its messages are checked like the others.
            hackbench_setup warm = s;
            warm.loops = s.loops / 4 + 1;
            run_groups(f, warm, 1, book, "warm-up");
            for (long long g : ctx.get_ints("groups")) {
                if (g < 1) throw std::runtime_error("hackbench: a number of groups must be >= 1");
                const std::string name = fmt::format("groups/{}", g);
                const double s_taken = run_groups(f, s, static_cast<unsigned>(g), book, name);
                out.add(name, "time", "s", better::lower, s_taken);
            }
            book.finish(out, f);
        });
    };
    return w;
}

} // namespace slabbench
