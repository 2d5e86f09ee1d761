# py_limit.py MiB - python3 under an address-space limit of MiB (ulimit -v), on the system
# allocator and under the preload (preload_limit_<design>_<MiB>): the same output from both.
import sys
limit = int(sys.argv[1]) << 20
objs = [str(i) * 3 for i in range(100000)]
d = {i: [i] * 4 for i in range(20000)}
print("small objects", len(objs), sum(len(v) for v in d.values()))
try:
    big = bytearray(2 * limit)
    print("no MemoryError for", 2 * limit)
except MemoryError:
    print("MemoryError for twice the limit")
# Filling the whole limit touches all of it: only where it is small (the 2 GiB run would spend
# most of a minute on page faults).
if limit <= 512 << 20:
    chunks = []
    try:
        while True:
            chunks.append(bytearray(1 << 20))
    except MemoryError:
        n = len(chunks)
        print("MemoryError after filling the limit:", "yes" if n * (1 << 20) < limit else "no")
    del chunks
more = [bytes(300) for _ in range(10000)]
print("after freeing, allocations work:", len(more))
