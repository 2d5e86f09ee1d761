#!/usr/bin/python3
"""slabinfo -p PID --leaks against a program with planted leaks (leaks_program.c) under the
preload with owner tracking: the scan finds exactly the 7 blocks whose pointers were dropped,
at their allocation site, and none of those referenced from a global, from other heap blocks,
from thread-local storage or from another thread's stack; --min-age leaves out what is younger.

Usage: leaks_e2e.py SLABINFO PROGRAM LIB   (the design from SLABKIT_ALLOCATOR; LIB is preloaded
into PROGRAM only)
"""

import os
import re
import subprocess
import sys
import time

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


def leaks(tool, pid, *extra):
    return subprocess.run([tool, "-p", pid, "--leaks", "--timeout", "30", *extra],
                          capture_output=True, text=True, timeout=90)


def main():
    tool, program, lib = sys.argv[1], sys.argv[2], sys.argv[3]
    env = dict(os.environ, LD_PRELOAD=lib, SLABKIT_DEBUG="U", SLABKIT_STATS="live:50")
    p = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    first = p.stdout.readline().split()
    if len(first) != 2 or first[0] != "ready":
        sys.exit(f"leaks_e2e: the program said {first!r}")
    pid = first[1]
    r = leaks(tool, pid)
    out = r.stdout
    check(r.returncode == 0, f"--leaks: status {r.returncode}, {r.stderr!r}")
    m = re.search(r"^process \d+: (\d+) of (\d+) objects of \d+ debug caches referenced by "
                  r"nothing \((\d+) bytes\)", out, re.M)
    check(m and m.group(1) == "7" and m.group(3) == str(7 * 64), f"7 leaked, 448 bytes:\n{out}")
    check(re.search(r"^\s+7 objects\s+448 bytes  malloc-64  leak_site\+0x[0-9a-f]+ "
                    r"\(\S*leaks_program\) age=\d+-\d+ms$", out, re.M), f"the leak's site:\n{out}")
    for kept in ("kept_global", "kept_chain", "kept_tls", "kept_by_thread"):
        check(kept not in out, f"{kept}'s blocks are referenced, not leaks:\n{out}")
    # Objects younger than an hour: none reported.
    time.sleep(0.1)
    r = leaks(tool, pid, "--min-age", "3600000")
    check(r.returncode == 0 and re.search(r": 0 of \d+ objects", r.stdout),
          f"--min-age 3600000: {r.returncode} {r.stdout!r} {r.stderr!r}")
    p.stdin.write("done\n")
    p.stdin.flush()
    check(p.wait(timeout=60) == 0, "the program failed")
    if failures:
        print(f"leaks_e2e: {len(failures)} checks failed")
        return 1
    print("leaks_e2e: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
