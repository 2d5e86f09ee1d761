#!/usr/bin/python3
"""End to end: `slabinfo -p` reads a live process (tests/tools/live_publisher) while its threads
allocate and free, and at quiescent points the numbers it reads are the process's own snapshot,
exactly, field by field. Then every view and request against the running process, a snapshot
saved with -o and read back, and the errors once the process is gone.

Usage: live_e2e.py SLABINFO PUBLISHER   (the process's design from SLABKIT_ALLOCATOR)
Exit status 0 when every check passed; each failed check prints a line.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


# The requests (-v, -s, --report, --failslab) wait for the process's helper thread to answer; under a loaded
# CI machine that can take longer than slabinfo's default 5 s, and this test is about what the
# answers say, not how fast they come.
REQUESTS = ("-v", "-s", "--report", "--failslab")


def slabinfo(tool, *args, timeout=60):
    extra = ["--timeout", "30"] if any(a in REQUESTS for a in args) else []
    r = subprocess.run([tool, *args, *extra], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


class publisher:
    def __init__(self, path):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)
        first = self.p.stdout.readline().split()
        if len(first) != 2 or first[0] != "ready":
            sys.exit(f"live_e2e: the publisher said {first!r}")
        self.pid = int(first[1])

    def say(self, line, answer):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        snapshot = None
        while True:
            got = self.p.stdout.readline()
            if not got:
                sys.exit(f"live_e2e: the publisher ended after {line!r}")
            if got.startswith("snapshot "):
                snapshot = json.loads(got[len("snapshot "):])
            elif got.strip() == answer:
                return snapshot

    def quit(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        return self.p.wait(timeout=60)


# Fields that are the same in two snapshots of a quiescent process (the time and the
# publication count move; everything else may not).
CACHE_FIELDS = ("design", "object_size", "slot_size", "align", "order", "objects_per_slab",
                "flags", "slabs", "active_slabs", "objects", "active_objects", "queued_objects",
                "shared_avail", "slabinfo_tunables", "tunables", "counters", "activity")


def compare(own, read, phase):
    mine = {c["name"]: c for c in own["caches"]}
    theirs = {c["name"]: c for c in read["caches"]}
    check(list(mine) == list(theirs), f"{phase}: the caches differ: {list(mine)} vs {list(theirs)}")
    for name, c in mine.items():
        t = theirs.get(name)
        if t is None:
            continue
        for f in CACHE_FIELDS:
            check(c[f] == t[f], f"{phase}: {name}.{f}: the process has {c[f]}, slabinfo read {t[f]}")
    for section in ("heap", "pages", "slots"):
        check(own[section] == read[section],
              f"{phase}: {section} differs: {own[section]} vs {read[section]}")
    for f in ("pid", "program", "design", "designs", "page_size", "format", "version"):
        check(own[f] == read[f], f"{phase}: {f}: {own[f]} vs {read[f]}")


def main():
    tool, publisher_path = sys.argv[1], sys.argv[2]
    design = os.environ.get("SLABKIT_ALLOCATOR", "slqb")
    p = publisher(publisher_path)
    pid = str(p.pid)

    # While the threads run: every view reads the process, whole.
    for args in ([], ["-D"], ["-A"], ["-T"], ["-b"], ["-e"], ["-S"], ["-r", "^e2e-1$"],
                 ["--report"], ["--json"]):
        rc, out, err = slabinfo(tool, "-p", pid, *args)
        check(rc == 0 and out and not err, f"slabinfo -p {pid} {' '.join(args)}: status {rc}, {err!r}")
    rc, out, _ = slabinfo(tool, "-p", pid, "--json")
    if rc == 0:
        j = json.loads(out)
        check(j["pid"] == p.pid, "--json: another pid")
        check(all(c["design"] for c in j["caches"]), "--json: a cache without a design")
    rc, out, _ = slabinfo(tool, "-p", pid)
    check(rc == 0 and "e2e-0" in out and "e2e-2" in out, f"the list names the caches:\n{out}")
    rc, out, err = slabinfo(tool, "-p", pid, "-s", "^e2e-")
    check(rc == 0, f"-s while running: {rc} {err!r}")
    rc, out, err = slabinfo(tool, "-p", pid, "--watch", "0.1", "--count", "3")
    check(rc == 0 and out.count("e2e-0") >= 3, f"--watch 0.1 --count 3: {rc} {err!r}")

    # Quiescent points: what slabinfo reads is the process's own snapshot.
    for phase in ("first pause", "second pause"):
        own = p.say("pause", "paused")
        check(own is not None, f"{phase}: no snapshot from the process")
        rc, out, err = slabinfo(tool, "-p", pid, "--json", "-e")
        check(rc == 0, f"{phase}: slabinfo --json: {rc} {err!r}")
        if rc == 0 and own is not None:
            compare(own, json.loads(out), phase)
        # The validate request, while the process is paused: nothing wrong.
        rc, out, err = slabinfo(tool, "-p", pid, "-v")
        check(rc == 0 and "0 problems" in out, f"{phase}: -v: {rc}\n{out}{err}")
        p.say("resume", "resumed")
        time.sleep(0.2)

    # A snapshot saved while it runs reads back as the same snapshot.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "snap.json")
        rc, _, err = slabinfo(tool, "-p", pid, "-o", path)
        check(rc == 0 and os.path.exists(path), f"-o: {rc} {err!r}")
        if os.path.exists(path):
            saved = json.load(open(path))
            rc, out, err = slabinfo(tool, path, "--json", "-e")
            check(rc == 0, f"slabinfo FILE --json: {rc} {err!r}")
            if rc == 0:
                back = json.loads(out)
                check(back["caches"] == saved["caches"], "the saved snapshot's caches changed on reading")
                check(back["heap"] == saved["heap"], "the saved snapshot's heap changed on reading")
            rc, out, err = slabinfo(tool, path, "-D")
            check(rc == 0 and "e2e-1" in out, f"slabinfo FILE -D: {rc} {err!r}")

    # Fault injection set, read and turned off from outside (failing nothing: probability 0).
    rc, out, err = slabinfo(tool, "-p", pid, "--failslab", "0:3:5;e2e-1")
    want = "armed: probability 0%, interval 3, times 5, space 0, caches e2e-1"
    check(rc == 0 and want in out, f"--failslab 0:3:5;e2e-1: {rc} {out!r} {err!r}")
    rc, out, err = slabinfo(tool, "-p", pid, "--failslab", "show")
    check(rc == 0 and want in out and "failed so far: 0 allocations" in out,
          f"--failslab show: {rc} {out!r} {err!r}")
    rc, out, err = slabinfo(tool, "-p", pid, "--failslab", "5:0")
    check(rc == 1 and "refused the failslab request: the interval" in err and
          err.count("\n") == 1, f"--failslab 5:0: {rc} {err!r}")
    rc, out, err = slabinfo(tool, "-p", pid, "--failslab", "off")
    check(rc == 0 and "fault injection is not armed" in out, f"--failslab off: {rc} {out!r}")

    check(p.quit() == 0, "the publisher failed")
    # Gone: a clear error, not a hang.
    rc, out, err = slabinfo(tool, "-p", pid)
    check(rc == 1 and err.count("\n") == 1 and pid in err, f"after exit: {rc} {err!r}")
    if failures:
        print(f"live_e2e ({design}): {len(failures)} checks failed")
        return 1
    print(f"live_e2e ({design}): every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
