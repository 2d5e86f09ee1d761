// live_publisher: a program that publishes its statistics (slabkit_stats_live_start) while
// threads allocate and free, driven line by line on stdin by tests/tools/live_e2e.py:
//   pause   the threads stop (joined); the program publishes and prints its own snapshot as one
//           line "snapshot <json>" (slabkit_stats_json), then "paused"
//   resume  the threads start again; "resumed"
//   quit    the threads stop, every object is freed, the caches destroyed; exit 0
// It starts by printing "ready <pid>". Its caches are e2e-<n> in the process's design
// (SLABKIT_ALLOCATOR), and it uses kmalloc too.
#include <slabkit/slabkit.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

constexpr int kThreads = 3;

struct worker {
    slabkit_cache *cache;
    std::vector<void *> objects;
    std::vector<void *> blocks;
};

void run(worker &w, const std::atomic<bool> &stop, unsigned seed) {
    unsigned x = seed;
    while (!stop.load(std::memory_order_relaxed)) {
        x = x * 1103515245u + 12345u;
        const unsigned r = x >> 16;
        if (w.objects.size() < 3000 && r % 3 != 0) {
            w.objects.push_back(slabkit_cache_alloc(w.cache, 0));
        } else if (!w.objects.empty()) {
            slabkit_cache_free(w.cache, w.objects.back());
            w.objects.pop_back();
        }
        if (r % 7 == 0 && w.blocks.size() < 500)
            w.blocks.push_back(slabkit_kmalloc(r % 700 + 1, 0));
        if (r % 11 == 0 && !w.blocks.empty()) {
            slabkit_kfree(w.blocks.back());
            w.blocks.pop_back();
        }
    }
}

} // namespace

int main() {
    const char *why = nullptr;
    if (slabkit_stats_live_start(20, &why) != 0) {
        std::fprintf(stderr, "live_publisher: %s\n", why);
        return 1;
    }
    std::vector<worker> workers(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        const std::string name = "e2e-" + std::to_string(t);
        workers[static_cast<size_t>(t)].cache =
            slabkit_cache_create(name.c_str(), 40 + 88 * static_cast<size_t>(t), 0, 0, nullptr);
        if (!workers[static_cast<size_t>(t)].cache) return 1;
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    auto start = [&] {
        stop = false;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back(run, std::ref(workers[static_cast<size_t>(t)]), std::cref(stop),
                                 1234u + static_cast<unsigned>(t));
    };
    auto halt = [&] {
        stop = true;
        for (auto &th : threads) th.join();
        threads.clear();
    };
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    start();
    std::vector<char> text(4 << 20);
    for (std::string line; std::getline(std::cin, line);) {
        if (line == "pause") {
            halt();
            slabkit_stats_publish();
            size_t n = slabkit_stats_json(text.data(), text.size());
            if (n >= text.size()) return 1;
            // One line: the JSON has no newline but its last character.
            while (n && text[n - 1] == '\n') --n;
            std::printf("snapshot %.*s\npaused\n", static_cast<int>(n), text.data());
        } else if (line == "resume") {
            start();
            std::printf("resumed\n");
        } else if (line == "quit") {
            break;
        } else {
            std::printf("unknown %s\n", line.c_str());
        }
        std::fflush(stdout);
    }
    halt();
    for (worker &w : workers) {
        for (void *p : w.objects) slabkit_cache_free(w.cache, p);
        for (void *p : w.blocks) slabkit_kfree(p);
        slabkit_cache_destroy(w.cache);
    }
    slabkit_stats_live_stop();
    return 0;
}
