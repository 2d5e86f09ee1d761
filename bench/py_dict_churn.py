# py_dict_churn.py - a small Python workload for allocator searches: a dict of up to 100,000
# entries, 300,000 random inserts and deletes of short strings and lists. Run it with every
# object through malloc to see an allocator's search counters, e.g. for SLOB:
#   SLABKIT_ALLOCATOR=slob SLABKIT_STATS=exit PYTHONMALLOC=malloc \
#     LD_PRELOAD=build/release/libslabkit-malloc.so /usr/bin/python3 bench/py_dict_churn.py
import random

random.seed(1)
d = {}
for i in range(300000):
    k = random.randrange(100000)
    if k in d:
        del d[k]
    else:
        d[k] = ("x" * random.randrange(1, 120), [i, i + 1])
print(len(d))
