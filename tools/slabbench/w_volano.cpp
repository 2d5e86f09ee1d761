// w_volano.cpp - VolanoMark: chat rooms whose every message is copied to every other member.
//
// Seed 000 (Zhang Yanmin) ran VolanoMark, a Java chat server benchmark: rooms of simulated users
// (20 each by default), every user sending messages (100 by default) that the server writes to
// each other member's connection. With the default 10 rooms SLQB and SLUB were even; with
// CPU_NUM*2 rooms SLQB was 5-12% faster. For the allocator each delivery is an skb (head and a
// kmalloc'd copy of the ~100-byte text) made by the thread that broadcasts and freed by the
// thread that reads the connection: many more threads than CPUs, objects crossing CPUs.
//
// Here a member is a connection with a writer thread (the user sending its messages to the
// room) and a reader thread (its socket's receiving side, an rx_queue with a buffer limit,
// messages.hpp). For every message the writer makes one copy per other member and queues it;
// each reader reads, checks and frees what it gets. Case rooms/<R>: messages delivered per
// second with R rooms (higher is better).
#include "messages.hpp"
#include "workload.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <stdexcept>

namespace slabbench {

namespace {

struct volano_setup {
    unsigned members;
    uint64_t messages;
    size_t text, window;
};

// One case: `rooms` rooms chatting; returns messages delivered per second of traffic.
double run_rooms(msg::factory &f, const volano_setup &s, unsigned rooms, msg::ledger &book,
                 const std::string &name) {
    const size_t connections = size_t(rooms) * s.members;
    std::vector<msg::tally> tallies(2 * connections + 1);
    msg::switchboard board;
    msg::crew crew;
    for (size_t c = 0; c < connections; ++c) board.add(s.window);
    for (size_t c = 0; c < connections; ++c) {
        const size_t room_first = c / s.members * s.members;
        const unsigned me = static_cast<unsigned>(c - room_first);
        crew.add([&f, &board, &s, room_first, me, mine = &tallies[2 * c]] {
            for (uint64_t k = 0; k < s.messages; ++k)
                for (unsigned other = 0; other < s.members; ++other) {
                    if (other == me) continue;
                    msg::head *m = f.make(*mine, me, k, s.text);
                    if (!board[room_first + other].push(m)) {
                        f.consume(*mine, m);
                        return;
                    }
                }
        });
        crew.add([&f, &board, &s, c, mine = &tallies[2 * c + 1]] {
            msg::order_check order(s.members);
            const uint64_t expected = s.messages * (s.members - 1);
            for (uint64_t n = 0; n < expected; ++n) {
                msg::head *m = board[c].pop();
                if (!m) return;
                order.accept(*mine, f.consume(*mine, m));
            }
        });
    }
    const double seconds = double(board.run(crew, f, tallies.back())) / 1e9;
    const uint64_t expected = uint64_t(connections) * (s.members - 1) * s.messages;
    const msg::tally total = msg::sum(tallies);
    book.add(name, expected, total);
    return double(total.delivered) / seconds;
}

} // namespace

workload volano_workload() {
    workload w;
    w.name = "volano";
    w.seed = "seed 000: volanoMark (Zhang Yanmin, SLQB against SLUB, 10 and CPU_NUM*2 rooms)";
    w.maps_to =
        "VolanoMark's chat rooms: each member's writer thread sends `messages` messages to its "
        "room, copied once per other member (an skb-like head from skbuff_head_cache plus a "
        "kmalloc'd copy of the ~100-byte text) and queued to that member's reader thread, which "
        "reads and frees it. Case rooms/<R>: messages delivered per second with R rooms; the "
        "seed's default was 10 rooms, its winning case CPU_NUM*2 (4 here).";
    w.cannot =
        "No Java server, JVM garbage collector or TCP connections: only the per-recipient skb "
        "traffic the kernel's sockets see, through in-process queues. Rooms are smaller than "
        "VolanoMark's 20 members at tiny and quick so that a 2-CPU machine is not swamped.";
    w.families = fam_cache | fam_slots | fam_malloc | fam_peers;
    w.baseline = "slub";
    w.shape = layout::by_config;
    w.params = {
        {"rooms", "1,2", "2,4", "2,4,10", "numbers of chat rooms, one case each"},
        {"members", "3", "5", "20", "members per room (VolanoMark: 20), two threads each"},
        {"messages", "20", "5000", "500", "messages each member sends (VolanoMark: 100)"},
        {"text", "100", "100", "100", "bytes of a message's text"},
        {"window", "65536", "65536", "65536",
         "bytes a member's queue holds before writers wait (a socket's buffer, truesize)"},
    };
    w.run = [](const run_context &ctx, result &out) {
        msg::guarded(out, [&] {
            volano_setup s{};
            s.members = static_cast<unsigned>(ctx.get_int("members"));
            if (ctx.threads) s.members = std::max(2u, ctx.threads / 2); // two threads a member
            s.messages = static_cast<uint64_t>(ctx.get_int("messages"));
            s.text = static_cast<size_t>(ctx.get_int("text"));
            s.window = static_cast<size_t>(ctx.get_int("window"));
            if (s.members < 2 || s.messages < 1)
                throw std::runtime_error("volano: members must be >= 2 and messages >= 1");
            msg::factory f(*ctx.heap);
            msg::ledger book;
            // Untimed, so that the first case does not pay for the heap's first growth and
            // page faults alone; its messages are checked like the others.
            volano_setup warm = s;
            warm.messages = s.messages / 4 + 1;
            run_rooms(f, warm, 1, book, "warm-up");
            for (long long r : ctx.get_ints("rooms")) {
                if (r < 1) throw std::runtime_error("volano: a number of rooms must be >= 1");
                const std::string name = fmt::format("rooms/{}", r);
                out.add(name, "throughput", "msg/s", better::higher,
                        run_rooms(f, s, static_cast<unsigned>(r), book, name));
            }
            book.finish(out, f);
        });
    };
    return w;
}

} // namespace slabbench
