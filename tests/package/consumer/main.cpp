// A C++17 program built against the installed slabkit: the adaptors of slabkit.hpp.
#include <slabkit/slabkit.hpp>

#include <cstdio>
#include <map>
#include <memory_resource>
#include <string>
#include <vector>

namespace {

struct node {
    explicit node(int v) : value(v) {}
    int value;
};

} // namespace

int main() {
    slabkit::cache<node> nodes("consumer-nodes");
    node *n = nodes.create(7);
    if (n->value != 7) return 1;
    nodes.destroy(n);

    std::vector<int, slabkit::allocator<int>> v;
    for (int i = 0; i < 1000; ++i) v.push_back(i);
    std::map<int, int, std::less<int>, slabkit::allocator<std::pair<const int, int>>> m;
    m[1] = 2;

    std::pmr::vector<std::pmr::string> words(slabkit::kmalloc_resource());
    words.emplace_back("a string long enough to leave the small-string buffer");
    if (v[999] != 999 || m[1] != 2 || words.size() != 1) return 1;
    std::printf("consumer_cxx: ok\n");
    return 0;
}
