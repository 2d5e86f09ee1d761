// thread_churn.hpp - a multi-thread churn for a design's unit tests: in each phase, 6 threads
// allocate and free at random (a third of the steps allocate), then free half of what they hold
// and hand the other half to one more thread, which frees it; `check` runs after the threads of
// a phase and again after the hand-off (the invariant checker, quiescent then).
#pragma once

#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace slabkit::testsupport {

template <class Alloc, class Free, class Check>
void thread_churn(Alloc alloc, Free free_obj, Check check, int phases = 4) {
    std::mutex mu;
    std::vector<void *> handed;
    for (int phase = 0; phase < phases; ++phase) {
        std::vector<std::thread> threads;
        for (int t = 0; t < 6; ++t) {
            threads.emplace_back([&, t] {
                std::mt19937 rng(static_cast<unsigned>(phase * 10 + t));
                std::vector<void *> mine;
                for (int i = 0; i < 3000; ++i) {
                    if (rng() % 3 && !mine.empty()) {
                        size_t k = rng() % mine.size();
                        free_obj(mine[k]);
                        mine[k] = mine.back();
                        mine.pop_back();
                    } else {
                        mine.push_back(alloc());
                    }
                }
                std::lock_guard<std::mutex> lock(mu);
                // Half for another thread to free, the rest freed here.
                for (size_t i = 0; i < mine.size(); ++i) {
                    if (i % 2)
                        handed.push_back(mine[i]);
                    else
                        free_obj(mine[i]);
                }
            });
        }
        for (auto &th : threads) th.join();
        check(phase);
        std::thread([&] {
            for (void *p : handed) free_obj(p);
        }).join();
        handed.clear();
        check(phase);
    }
}

} // namespace slabkit::testsupport
