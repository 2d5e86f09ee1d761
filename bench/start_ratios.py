#!/usr/bin/python3
"""What a preloaded malloc costs every process at start: time and resident memory of small
programs under slabkit's malloc replacement (one run per design) and under each peer.

  start time   --count runs of /bin/true, one after the other, each started with the
               allocator preloaded (posix_spawn + waitpid from this script, which is not
               preloaded): the loop's wall time, and its ratio to the same loop without a
               preload (glibc) in the same round. The best of --rounds rounds, the allocators
               interleaved and their order rotated from round to round.
  start RSS    the peak RSS of /bin/true, of `sh -c 'echo'`, of `python3 -c pass` and of
               bench/small_mallocs (a C loop of small mallocs, about 1.3 MiB live) under
               each allocator, the program's own (VmHWM read as it exits, by bench/start_probe:
               wait4's ru_maxrss would include this script's memory, inherited through the
               exec): the least of the rounds, and the difference to glibc's (MiB).

The peers are glibc (no preload), jemalloc, tcmalloc and mimalloc (Debian's packages, where
installed), snmalloc and mimalloc 3 where ../shared/peers/build.sh built them into build/peers,
and any --peer NAME=LIBRARY (an older libslabkit-malloc.so, for a before/after in one run). A
program that exits with a non-zero status under an allocator is an error.

Usage: /usr/bin/python3 bench/start_ratios.py [--rounds N] [--count N] [--designs LIST]
                                              [--library PATH] [--peers LIST]
                                              [--peer NAME=LIB ...] [--no-strong-peers]
                                              [--json PATH]
"""

import argparse
import json
import os
import subprocess
import sys
import time

import peers as peerlib

REPO = peerlib.REPO
DEFAULT_LIBRARY = os.path.join(REPO, "build", "release", "libslabkit-malloc.so")
DEFAULT_PROBE = os.path.join(REPO, "build", "release", "bench", "start_probe")
PROGRAMS = {
    "true": ["/bin/true"],
    "sh": ["/bin/sh", "-c", "echo start > /dev/null"],
    "python3": ["/usr/bin/python3", "-c", "pass"],
    # bench/small_mallocs.c: 10,000 blocks of 16 to 256 B live, 20 rounds (path set in main)
    "small-mallocs": None,
}


def spawn_wait(argv, env):
    """(wall seconds, exit status) of one run of argv."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env)
    _, status = os.waitpid(pid, 0)
    return time.perf_counter() - t0, os.waitstatus_to_exitcode(status)


def probe_hwm(probe, argv, env):
    """(the program's own peak RSS in KiB, its exit status), by start_probe."""
    out = subprocess.run([probe] + argv, env=env, capture_output=True, text=True, timeout=120)
    fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
    if out.returncode != 0 or "hwm_kib" not in fields:
        sys.exit(f"start_ratios: {probe} {' '.join(argv)} failed: {out.stderr.strip()}")
    return int(fields["hwm_kib"]), int(fields["status"])


def environment(preload, extra):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("SLABKIT_")}
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(extra)
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=200, help="runs of /bin/true in one loop")
    ap.add_argument("--designs", default="slqb,slub,slab,slob")
    ap.add_argument("--library", default=DEFAULT_LIBRARY)
    ap.add_argument("--peers", default=",".join(peerlib.PEERS))
    peerlib.add_peer_option(ap)
    ap.add_argument("--probe", default=DEFAULT_PROBE, help="bench/start_probe's binary")
    ap.add_argument("--json", help="write every figure as JSON")
    args = ap.parse_args()
    if not os.path.exists(args.library):
        sys.exit(f"start_ratios: {args.library} is missing: build the release preset first")
    small = os.path.join(os.path.dirname(args.probe), "small_mallocs")
    for path in (args.probe, small):
        if not os.path.exists(path):
            sys.exit(f"start_ratios: {path} is missing: build the release preset first")
    PROGRAMS["small-mallocs"] = [small]
    found, missing = peerlib.locate_peers([p for p in args.peers.split(",") if p])
    for peer, why in missing.items():
        peerlib.log(f"start_ratios: {peer} left out: {why}")
    if ("glibc", None) not in found:
        found.insert(0, ("glibc", None))
    allocators = [(name, environment(path, {})) for name, path in found]
    for name, path in peerlib.extra_peers(args):
        allocators.append((name, environment(path, {})))
    for d in [d for d in args.designs.split(",") if d]:
        allocators.append((f"{d}-malloc",
                           environment(os.path.abspath(args.library), {"SLABKIT_ALLOCATOR": d})))

    loop = {}  # name -> [(seconds, ratio to glibc of the round)]
    rss = {}  # (name, program) -> [KiB]
    errors = []
    for r in range(args.rounds):
        order = allocators[r % len(allocators):] + allocators[:r % len(allocators)]
        if r % 2:
            order.reverse()
        peerlib.log(f"round {r + 1}/{args.rounds}")
        times = {}
        for name, env in order:
            total = 0.0
            for _ in range(args.count):
                secs, code = spawn_wait(PROGRAMS["true"], env)
                if code != 0:
                    errors.append(f"{name}: /bin/true exited with {code}")
                    break
                total += secs
            times[name] = total
            for prog, argv in PROGRAMS.items():
                kib, code = probe_hwm(args.probe, argv, env)
                if code != 0:
                    errors.append(f"{name}: {' '.join(argv)} exited with {code}")
                rss.setdefault((name, prog), []).append(kib)
        for name in times:
            loop.setdefault(name, []).append((times[name], times[name] / times["glibc"]))

    names = [n for n, _ in allocators]
    print(f"Process start under each malloc: {args.count} runs of /bin/true (best of "
          f"{args.rounds} rounds), and peak RSS of small programs (least of the rounds)\n")
    head = ["allocator", f"{args.count} x /bin/true (ms)", "against glibc"]
    head += [f"{p} RSS (MiB)" for p in PROGRAMS] + [f"{p} RSS - glibc (MiB)" for p in PROGRAMS]
    print("| " + " | ".join(head) + " |")
    print("| --- | " + " | ".join("---:" for _ in head[1:]) + " |")
    out = {}
    for n in names:
        best = min(loop[n], key=lambda x: x[1])
        cells = [n, f"{min(t for t, _ in loop[n]) * 1000:.0f}", f"{best[1]:.2f}x"]
        mib = {p: min(rss[(n, p)]) / 1024 for p in PROGRAMS}
        cells += [f"{mib[p]:.2f}" for p in PROGRAMS]
        cells += [f"{mib[p] - min(rss[('glibc', p)]) / 1024:+.2f}" for p in PROGRAMS]
        print("| " + " | ".join(cells) + " |")
        out[n] = {"loop_s": [t for t, _ in loop[n]], "loop_ratio": [x for _, x in loop[n]],
                  "rss_kib": {p: rss[(n, p)] for p in PROGRAMS}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"count": args.count, "rounds": args.rounds, "allocators": out}, f, indent=1)
    for e in sorted(set(errors)):
        print(f"ERROR: {e}")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
