"""Allocation-heavy Python work for the preload tests: big and small dicts, lists, strings
(some over 8 MiB), bytes, bytearrays grown in place, json, zlib, regular expressions, hashing,
across several threads that pass objects to each other. Prints deterministic results only
(no addresses, ids, timings, or set/dict orders that depend on hashing), so the output is the
same on any allocator.

Run with PYTHONMALLOC=malloc to send every object through malloc, or with the default pymalloc
(small objects in pymalloc's own mmap arenas, everything over 512 bytes through malloc).
"""

import hashlib
import json
import queue
import random
import re
import sys
import threading
import zlib

MiB = 1 << 20


def digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else repr(p).encode())
    return h.hexdigest()[:16]


class Node:
    __slots__ = ('key', 'value', 'next')

    def __init__(self, key, value, nxt):
        self.key = key
        self.value = value
        self.next = nxt


def big_dicts(rng, n):
    d = {}
    for i in range(n):
        d['k%07d' % rng.randrange(10 * n)] = (i, str(i) * (i % 7), [i] * (i % 5))
    # Rebuild it a few times (resizes), delete half, then build a dict of dicts.
    for _ in range(3):
        d = {k: v for k, v in d.items() if v[0] % 3}
        d.update(('x%d' % i, (i, '', [])) for i in range(n // 4))
    for k in sorted(d)[::2]:
        del d[k]
    nested = {i: {j: 'v%d.%d' % (i, j) for j in range(i % 50)} for i in range(n // 20)}
    total = sum(len(v) for v in nested.values())
    return digest(sorted(d.items()), total)


def lists_and_sorting(rng, n):
    xs = [rng.random() for _ in range(n)]
    ys = sorted(xs)
    ints = [rng.randrange(1 << 40) for _ in range(n)]
    ints.sort(key=lambda v: (v % 1000, v))
    grow = []
    for i in range(n):
        grow.append((i, i * i))
        if i % 1000 == 999:
            del grow[::3]
    linked = None
    for i in range(n // 2):
        linked = Node(i, 'n%d' % i, linked)
    count = 0
    while linked is not None:
        count += linked.key
        linked = linked.next
    return digest(ys[:: max(1, n // 100)], ints[:: max(1, n // 100)], len(grow), grow[-5:],
                  count)


def big_strings(rng, mb):
    # Strings and bytes well over 8 MiB: repetition, join, replace, encode/decode, slicing.
    s = 'ab' * (mb * MiB // 2)
    t = s.replace('ab', 'xyz')  # 1.5x larger
    u = ''.join('line %d %s\n' % (i, 'é' * (i % 13)) for i in range(mb * 40000))
    enc = u.encode('utf-8')
    dec = enc.decode('utf-8')
    assert dec == u
    b = bytes(range(256)) * (mb * MiB // 256)
    ba = bytearray()
    chunk = bytes(rng.randrange(256) for _ in range(4096))
    while len(ba) < (mb + 1) * MiB:  # grows by reallocation
        ba += chunk
    ba[::4096] = bytes(len(ba[::4096]))
    up = t.upper()
    parts = u.split('\n')
    return digest(len(s), len(t), t[-30:], hashlib.sha256(enc).hexdigest(),
                  hashlib.sha256(b).hexdigest(), hashlib.sha256(ba).hexdigest(), len(up),
                  len(parts), parts[12345 % len(parts)])


def json_zlib_re(rng, n):
    doc = {'items': [{'id': i, 'name': 'item-%d' % i, 'tags': ['t%d' % (i % 17)] * (i % 4),
                      'score': (i * 7919) % 1000 / 10.0} for i in range(n)]}
    text = json.dumps(doc, sort_keys=True)
    back = json.loads(text)
    comp = zlib.compress(text.encode(), 6)
    plain = zlib.decompress(comp).decode()
    assert plain == text and back == doc
    found = re.findall(r'"name": "item-(\d*7)"', text)
    subbed = re.sub(r'\d+', lambda m: str(len(m.group(0))), text[: 2 * MiB])
    return digest(len(text), hashlib.sha256(comp).hexdigest(), len(found), found[-3:],
                  hashlib.sha256(subbed.encode()).hexdigest())


def many_small(rng, n):
    objs = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            objs.append((i, i + 1))
        elif kind == 1:
            objs.append([i] * (i % 9))
        elif kind == 2:
            objs.append({'a': i, 'b': str(i)})
        elif kind == 3:
            objs.append('s%d' % i * (1 + i % 4))
        else:
            objs.append(bytes(i % 300))
    rng.shuffle(objs)
    del objs[::2]  # frees in random order
    objs.extend(frozenset(range(i % 20)) for i in range(n // 4))
    return digest(len(objs), sum(len(o) if hasattr(o, '__len__') else 1 for o in objs))


TASKS = [
    ('dicts', big_dicts, 60000),
    ('lists', lists_and_sorting, 120000),
    ('strings', big_strings, 9),
    ('json', json_zlib_re, 30000),
    ('small', many_small, 200000),
]


def worker(wid, rounds, out, handoff_out, handoff_in):
    rng = random.Random(1000 + wid)
    for r in range(rounds):
        name, fn, arg = TASKS[(wid + r) % len(TASKS)]
        out[(wid, r)] = '%s(%d)=%s' % (name, arg, fn(rng, arg))
        # Hand a freshly built structure to the next worker, which checks and drops it
        # (the memory is freed by a thread other than the one that allocated it).
        payload = [('w%d-r%d-%d' % (wid, r, i)) * (1 + i % 3) for i in range(20000)]
        payload.append(b'z' * (r + 1) * MiB)
        handoff_out.put((wid, r, payload, digest(payload)))
        pwid, pr, got, want = handoff_in.get()
        if digest(got) != want:
            out[('handoff', wid, r)] = 'corrupt handoff from worker %d round %d' % (pwid, pr)
        del got


def main():
    nworkers = 4
    rounds = 2
    queues = [queue.Queue() for _ in range(nworkers)]
    out = {}
    threads = [threading.Thread(target=worker,
                                args=(w, rounds, out, queues[(w + 1) % nworkers], queues[w]))
               for w in range(nworkers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for key in sorted(k for k in out if k[0] != 'handoff'):
        print('worker %d round %d: %s' % (key[0], key[1], out[key]))
    bad = [v for k, v in out.items() if k[0] == 'handoff']
    for v in sorted(bad):
        print('ERROR', v)
    # Single-threaded tail: one big dict and one 10 MiB string, freed at exit.
    keep = {i: str(i) for i in range(100000)}
    big = 'q' * (10 * MiB)
    print('tail:', digest(len(keep), keep[99999], len(big)))
    print('done: %d results, %d errors' % (len(out) - len(bad), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
