// topology.cpp - CPUs and NUMA nodes from sysfs, and the SLABKIT_FAKE_NUMA split.
#include "platform/platform.hpp"

#include <cerrno>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

namespace slabkit::platform {

unsigned cpu_set::count() const {
    unsigned n = 0;
    for (uint64_t word : bits) n += static_cast<unsigned>(__builtin_popcountll(word));
    return n;
}

unsigned cpu_set::highest_plus_one() const {
    for (unsigned i = kMaxCpus / 64; i-- > 0;)
        if (bits[i]) return i * 64 + 64 - static_cast<unsigned>(__builtin_clzll(bits[i]));
    return 0;
}

bool read_small_file(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t n = read(fd, buf + got, size - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    close(fd);
    buf[got] = '\0';
    return got > 0;
}

namespace {

bool parse_number(const char *&p, unsigned *out) {
    if (*p < '0' || *p > '9') return false;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + static_cast<unsigned>(*p++ - '0');
        if (v >= kMaxCpus) return false;
    }
    *out = static_cast<unsigned>(v);
    return true;
}

// "/sys/devices/system/node/nodeN/cpulist", built by hand: node < kMaxNodes (two digits).
void node_cpulist_path(unsigned node, char *path) {
    size_t at = 0;
    for (const char *s = "/sys/devices/system/node/node"; *s;) path[at++] = *s++;
    if (node >= 10) path[at++] = static_cast<char>('0' + node / 10);
    path[at++] = static_cast<char>('0' + node % 10);
    for (const char *s = "/cpulist"; *s;) path[at++] = *s++;
    path[at] = '\0';
}

topology g_topology;
pthread_once_t g_topology_once = PTHREAD_ONCE_INIT;

void discover() {
    char buf[4096];
    const char *why = nullptr;
    cpu_set possible;
    unsigned cpus = 0;
    if (read_small_file("/sys/devices/system/cpu/possible", buf, sizeof buf) &&
        parse_cpu_list(buf, &possible, &why))
        cpus = possible.highest_plus_one();
    if (cpus == 0) {
        long n = sysconf(_SC_NPROCESSORS_CONF);
        cpus = n > 0 ? static_cast<unsigned>(n) : 1;
    }
    if (cpus > kMaxCpus) cpus = kMaxCpus;

    static cpu_set node_cpus[kMaxNodes];
    unsigned real_nodes = 0;
    for (unsigned node = 0; node < kMaxNodes; ++node) {
        char path[64];
        node_cpulist_path(node, path);
        if (!read_small_file(path, buf, sizeof buf)) {
            // Node ids are dense on every machine we know; a gap ends the list.
            if (node == 0) continue;
            break;
        }
        if (!parse_cpu_list(buf, &node_cpus[node], &why)) node_cpus[node] = cpu_set{};
        real_nodes = node + 1;
    }
    if (real_nodes == 0) {
        // No NUMA information: one node holding every CPU.
        for (unsigned c = 0; c < cpus; ++c) node_cpus[0].add(c);
        real_nodes = 1;
    }
    unsigned fake = static_cast<unsigned>(env_uint("SLABKIT_FAKE_NUMA", 0, 1, kMaxNodes));
    build_topology(&g_topology, cpus, node_cpus, real_nodes, fake);
}

} // namespace

bool parse_cpu_list(const char *text, cpu_set *out, const char **why) {
    *out = cpu_set{};
    const char *p = text;
    while (*p == ' ' || *p == '\n') ++p;
    if (*p == '\0') return true; // an empty list: a node without CPUs
    for (;;) {
        unsigned first = 0, last = 0;
        if (!parse_number(p, &first)) {
            *why = "expected a CPU number below the supported maximum";
            return false;
        }
        last = first;
        if (*p == '-') {
            ++p;
            if (!parse_number(p, &last) || last < first) {
                *why = "bad CPU range";
                return false;
            }
        }
        for (unsigned c = first; c <= last; ++c) out->add(c);
        if (*p == ',') {
            ++p;
            continue;
        }
        while (*p == ' ' || *p == '\n') ++p;
        if (*p != '\0') {
            *why = "unexpected character in CPU list";
            return false;
        }
        return true;
    }
}

void build_topology(topology *out, unsigned possible_cpus, const cpu_set *node_cpus,
                    unsigned real_nodes, unsigned fake_nodes) {
    *out = topology{};
    out->cpus = possible_cpus == 0 ? 1 : (possible_cpus > kMaxCpus ? kMaxCpus : possible_cpus);
    out->real_nodes = real_nodes == 0 ? 1 : real_nodes;
    if (fake_nodes > kMaxNodes) fake_nodes = kMaxNodes;
    if (fake_nodes > 0) {
        // CPUs in contiguous blocks: CPU c goes to node c * N / cpus.
        out->fake = true;
        out->nodes = fake_nodes;
        for (unsigned c = 0; c < out->cpus; ++c) {
            unsigned node = static_cast<unsigned>(uint64_t{c} * fake_nodes / out->cpus);
            out->cpu_node[c] = static_cast<uint8_t>(node);
            out->node_cpus[node]++;
        }
        return;
    }
    out->nodes = out->real_nodes;
    for (unsigned c = 0; c < out->cpus; ++c) {
        unsigned node = 0;
        for (unsigned n = 0; n < out->real_nodes; ++n)
            if (node_cpus[n].has(c)) {
                node = n;
                break;
            }
        out->cpu_node[c] = static_cast<uint8_t>(node);
        out->node_cpus[node]++;
    }
}

const topology &numa() {
    pthread_once(&g_topology_once, discover);
    return g_topology;
}

namespace {
// Read at load, before the program can start a thread: a fork while another thread is inside
// the once-call would leave a child waiting for it for ever where pthread_once does not restart
// in fork children (ThreadSanitizer's does not). Calls before this (a preloaded malloc used by
// an earlier constructor) just do the work first.
__attribute__((constructor)) void discover_at_load() {
    (void)numa();
}
} // namespace

unsigned cpu_count() {
    return numa().cpus;
}

unsigned current_cpu() {
    int cpu = sched_getcpu();
    if (cpu < 0) return 0;
    unsigned c = static_cast<unsigned>(cpu);
    return c < kMaxCpus ? c : c % kMaxCpus;
}

} // namespace slabkit::platform
