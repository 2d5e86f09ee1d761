#!/usr/bin/python3
"""slabinfo -p PID --traces against a program with known sites (traces_program.c), under the
preload with owner tracking: the objects in use of malloc-64 grouped by their allocation sites
(20 from site_a, 12 from site_b), its free objects by their free sites (10 from free_site), each
with ages, threads and CPUs; and the errors of the request.

Usage: traces_e2e.py SLABINFO PROGRAM LIB   (the design from SLABKIT_ALLOCATOR; LIB is preloaded
into PROGRAM only)
"""

import os
import re
import subprocess
import sys
import time

from e2e_support import check, finish, start


def main():
    tool, program, lib = sys.argv[1], sys.argv[2], sys.argv[3]
    # SLOB's malloc blocks are its own, on its slob-pages: no free sites kept there.
    slob = os.environ.get("SLABKIT_ALLOCATOR") == "slob"
    name = "slob-pages" if slob else "malloc-64"
    p, pid = start(program, lib, SLABKIT_DEBUG="U" if slob else "U,malloc-64",
                   SLABKIT_STATS="live:50")
    # The first snapshot may be older than the program's allocations: wait for one that has
    # the class (published every 50 ms).
    for _ in range(100):
        r = subprocess.run([tool, "-p", pid, f"^{name}$"], capture_output=True, text=True,
                           timeout=30)
        if r.returncode == 0:
            break
        time.sleep(0.05)
    r = subprocess.run([tool, "-p", pid, "--traces", f"^{name}$", "--timeout", "30"],
                       capture_output=True, text=True, timeout=90)
    out = r.stdout
    check(r.returncode == 0, f"--traces: status {r.returncode}, {r.stderr!r}")
    row = r"^\s+{n} {fn}\+0x[0-9a-f]+ \(\S*traces_program\) age=\d+/\d+/\d+ms tid=\d+ cpus=[0-9,-]+\+?$"
    alloc, _, freed = out.partition("objects free" if not slob else "free sites")
    check(re.search(rf"^{name}: \d+ objects in use, from \d+ sites", alloc, re.M),
          f"no in-use header:\n{out}")
    check(re.search(row.format(n=20, fn="site_a"), alloc, re.M), f"20 from site_a:\n{out}")
    check(re.search(row.format(n=12, fn="site_b"), alloc, re.M), f"12 from site_b:\n{out}")
    if slob:
        check(f"{name}: free sites are not kept" in out, f"SLOB keeps no free sites:\n{out}")
    else:
        check(re.search(row.format(n=10, fn="free_site"), freed, re.M), f"10 by free_site:\n{out}")
    # A cache without tracks is not listed; a name that is no cache is refused, naming it.
    r = subprocess.run([tool, "-p", pid, "--traces", "^malloc-128$", "--timeout", "30"],
                       capture_output=True, text=True, timeout=90)
    check(r.returncode in (0, 1), f"--traces malloc-128: {r.returncode} {r.stderr!r}")
    if r.returncode == 0:
        check("no cache keeps owner tracks" in r.stdout, f"malloc-128 has no tracks: {r.stdout!r}")
    return finish(p, "traces_e2e")


if __name__ == "__main__":
    sys.exit(main())
