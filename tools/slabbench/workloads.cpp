// workloads.cpp - the registry: every workload, in the order --help and a plain run list them.
#include "workload.hpp"

namespace slabbench {

const std::vector<workload> &all_workloads() {
    static const std::vector<workload> list = {
        hackbench_workload(), netperf_workload(), volano_workload(), oltp_workload(),
        kbuild_workload(),    boot_workload(),    micro_workload(),  pages_workload(),
    };
    return list;
}

const workload *find_workload(const std::string &name) {
    for (const workload &w : all_workloads())
        if (w.name == name) return &w;
    return nullptr;
}

} // namespace slabbench
