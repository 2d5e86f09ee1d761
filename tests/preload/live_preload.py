#!/usr/bin/python3
"""A real program under the malloc replacement publishes live statistics (SLABKIT_STATS=live)
and `slabinfo -p` reads it while it runs: the list, -T, -D, a validate request; once the
program is killed (SIGKILL: no exit handlers), its segment is stale and slabinfo says so.

Usage: live_preload.py SLABINFO LIBSLABKIT_MALLOC   (the design from SLABKIT_ALLOCATOR)
"""

import os
import signal
import subprocess
import sys
import time

PROGRAM = r"""
import sys, time
blocks = []
print("ready", flush=True)
deadline = time.time() + 120
while time.time() < deadline:
    blocks.append(bytearray(100 + len(blocks) % 900))
    if len(blocks) > 20000:
        del blocks[:10000]
    if sys.stdin.closed:
        break
"""


def main():
    tool, lib = sys.argv[1], sys.argv[2]
    env = dict(os.environ, LD_PRELOAD=lib, SLABKIT_STATS="live:50", PYTHONMALLOC="malloc")
    p = subprocess.Popen(["/usr/bin/python3", "-c", PROGRAM], env=env, stdout=subprocess.PIPE,
                         text=True)
    failures = []
    try:
        if p.stdout.readline().strip() != "ready":
            sys.exit("live_preload: python did not start")
        pid = str(p.pid)
        seg = f"/dev/shm/slabkit.{pid}"
        for _ in range(200):
            if os.path.exists(seg):
                break
            time.sleep(0.01)
        # SLOB serves the malloc family from its arena, whose figures are the counters of its
        # one cache, slob-pages (shown with -e: it holds no slabs of its own).
        listing = ([], "malloc-") if os.environ.get("SLABKIT_ALLOCATOR") != "slob" else (
            ["-e"], "slob-pages")
        for args, want in (listing, (["-T"], "Slabcache totals"), (["-D", "-e"], "%Fast"),
                           # (-v's line, whatever it found: "N cache(s) checked, M problem(s)".
                           # The program allocates all the time, so a copy of it may catch a
                           # list being changed; zero problems is not this test's to demand.)
                           (["-v"], " checked, "), (["-b"], "Node 0")):
            r = subprocess.run([tool, "-p", pid, *args], capture_output=True, text=True,
                               timeout=60)
            if r.returncode != 0 or want not in r.stdout:
                failures.append(f"slabinfo -p {pid} {' '.join(args)}: status {r.returncode}, "
                                f"{r.stderr.strip()!r}, expected {want!r} in:\n{r.stdout}")
        # Killed without exit handlers: the segment stays, and it is stale.
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        r = subprocess.run([tool, "-p", pid], capture_output=True, text=True, timeout=60)
        if r.returncode != 1 or "stale" not in r.stderr or r.stderr.count("\n") != 1:
            failures.append(f"after SIGKILL: status {r.returncode}, {r.stderr!r}")
        if os.path.exists(seg):
            os.unlink(seg)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for f in failures:
        print("FAIL:", f)
    print(f"live_preload: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
