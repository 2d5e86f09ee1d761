#!/usr/bin/python3
"""slabinfo -p PID --leaks against a program with planted leaks (leaks_program.c) under the
preload with owner tracking: the scan finds exactly the 7 blocks whose pointers were dropped,
at their allocation site (in malloc-64, or SLOB's own blocks on slob-pages), and none of those referenced from a global, from other heap blocks,
from thread-local storage or from another thread's stack; --min-age leaves out what is younger.

Usage: leaks_e2e.py SLABINFO PROGRAM LIB   (the design from SLABKIT_ALLOCATOR; LIB is preloaded
into PROGRAM only)
"""

import re
import subprocess
import sys
import time

from e2e_support import check, finish, start


def leaks(tool, pid, *extra):
    return subprocess.run([tool, "-p", pid, "--leaks", "--timeout", "30", *extra],
                          capture_output=True, text=True, timeout=90)


def main():
    tool, program, lib = sys.argv[1], sys.argv[2], sys.argv[3]
    p, pid = start(program, lib, SLABKIT_DEBUG="U", SLABKIT_STATS="live:50")
    r = leaks(tool, pid)
    out = r.stdout
    check(r.returncode == 0, f"--leaks: status {r.returncode}, {r.stderr!r}")
    m = re.search(r"^process \d+: (\d+) of (\d+) objects of \d+ debug caches referenced by "
                  r"nothing \((\d+) bytes\)", out, re.M)
    check(m and m.group(1) == "7" and m.group(3) == str(7 * 64), f"7 leaked, 448 bytes:\n{out}")
    check(re.search(r"^\s+7 objects\s+448 bytes  (malloc-64|slob-pages)  leak_site\+0x[0-9a-f]+ "
                    r"\(\S*leaks_program\) age=\d+-\d+ms$", out, re.M), f"the leak's site:\n{out}")
    for kept in ("kept_global", "kept_chain", "kept_tls", "kept_by_thread"):
        check(kept not in out, f"{kept}'s blocks are referenced, not leaks:\n{out}")
    # Objects younger than an hour: none reported.
    time.sleep(0.1)
    r = leaks(tool, pid, "--min-age", "3600000")
    check(r.returncode == 0 and re.search(r": 0 of \d+ objects", r.stdout),
          f"--min-age 3600000: {r.returncode} {r.stdout!r} {r.stderr!r}")
    return finish(p, "leaks_e2e")


if __name__ == "__main__":
    sys.exit(main())
