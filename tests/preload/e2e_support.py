"""What the end-to-end drivers of slabinfo's requests share (traces_e2e.py, leaks_e2e.py): the
checks and their failures, and a program started under the preload that says "ready <pid>" and
waits for a line on stdin before it ends."""

import os
import subprocess
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


def start(program, lib, **env):
    """The program with LIB preloaded into it only, and env added; returns (process, pid)."""
    p = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, LD_PRELOAD=lib, **env))
    first = p.stdout.readline().split()
    if len(first) != 2 or first[0] != "ready":
        sys.exit(f"{os.path.basename(sys.argv[0])}: the program said {first!r}")
    return p, first[1]


def finish(p, name):
    """Lets the program end; the exit status of the driver."""
    p.stdin.write("done\n")
    p.stdin.flush()
    check(p.wait(timeout=60) == 0, "the program failed")
    if failures:
        print(f"{name}: {len(failures)} checks failed")
        return 1
    print(f"{name}: every check passed")
    return 0
