#!/usr/bin/python3
"""The kmem_cache alloc+free pair as a program that links libslabkit.so gets it, against the
fastest malloc/free pair of glibc, jemalloc, tcmalloc and mimalloc, in the same processes.

Runs build/release/bench/linked_pair (built from the public header alone and linked with the
shared libslabkit.so) once per peer, preloading that peer's malloc (glibc: no preload), and once
per slabkit design (SLABKIT_ALLOCATOR; no preload), in interleaved rounds. Each process measures:

  cache pair (inline)  slabkit_cache_alloc + slabkit_cache_free as include/slabkit/inline.h
                       gives them (SLQB's queue, SLUB's freelist and SLAB's array paths inlined
                       into the program; SLOB's calls the library)
  cache pair (call)    the same through the library's exported functions (what users got
                       before the inline paths, and what SLABKIT_NO_INLINE gives)
  malloc pair          the process's malloc + free
  floor                a bare LIFO free list in thread-local memory, popped and pushed inline
                       with nothing else, with and without a count beside its head: the least
                       any allocator whose per-thread list lives in memory pays per pair

The cache figures come from the design runs; each peer's malloc pair from its own run. Prints a
markdown table with the ratios to the fastest peer, a PASS/MISS line for the target "SLQB's
cache pair as linked at most 0.8x the fastest peer's malloc pair", and one per design for "the
cache pair as linked at most 0.6x glibc's malloc pair" (issue 31).

Usage: /usr/bin/python3 bench/linked_ratios.py [--rounds N] [--min-time S] [--designs LIST]
                                               [--peers LIST] [--binary PATH] [--stat best|median]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import peers as peerlib

REPO = peerlib.REPO
DEFAULT_BINARY = os.path.join(REPO, "build", "release", "bench", "linked_pair")
SIZES = (32, 64, 256, 1024)
TARGET = 0.8
GLIBC_TARGET = 0.6


def run(binary, env_extra, preload, min_time, bench_filter=None):
    """linked_pair's context and {(benchmark, size): CPU ns per pair} from one process with
    env_extra set and preload preloaded (bench/build_flags.py uses it too)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(env_extra)
    if preload:
        env["LD_PRELOAD"] = preload
    cmd = [binary, "--benchmark_format=json", f"--benchmark_min_time={min_time}"]
    if bench_filter:
        cmd.append(f"--benchmark_filter={bench_filter}")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {' '.join(cmd)} failed ({out.returncode}): "
                 f"{out.stderr[-2000:]}")
    data = json.loads(out.stdout)
    times = {}
    for b in data["benchmarks"]:
        name, size = b["name"].split("/")[:2]
        times[(name, int(size))] = b["cpu_time"]  # ns (the benchmark's default unit)
    return data["context"], times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--designs", default="slqb,slub,slab")
    ap.add_argument("--peers", default=",".join(peerlib.PEERS))
    ap.add_argument("--binary", default=DEFAULT_BINARY)
    ap.add_argument("--stat", choices=("best", "median"), default="best")
    args = ap.parse_args()
    if not os.path.exists(args.binary):
        sys.exit(f"linked_ratios: {args.binary} is missing: build the release preset first")
    designs = [d for d in args.designs.split(",") if d]
    found, missing = peerlib.locate_peers([p for p in args.peers.split(",") if p])
    for peer, why in missing.items():
        peerlib.log(f"linked_ratios: {peer} left out: {why}")

    runs = [("design", d, {"SLABKIT_ALLOCATOR": d}, None) for d in designs]
    runs += [("peer", p, {}, path) for p, path in found]
    samples = {}  # (kind, who, bench, size) -> [ns]
    for r in range(args.rounds):
        order = runs if r % 2 == 0 else list(reversed(runs))
        for kind, who, env, preload in order:
            peerlib.log(f"round {r + 1}/{args.rounds}: {who}")
            context, times = run(args.binary, env, preload, args.min_time)
            if kind == "design" and context.get("slabkit_design") != who:
                sys.exit(f"linked_ratios: asked for {who}, the process ran {context.get('slabkit_design')}")
            if kind == "peer":
                lib = os.path.basename(preload) if preload else "libc.so.6"
                if lib not in context.get("malloc_from", ""):
                    sys.exit(f"linked_ratios: {who}'s preload did not take: malloc from "
                             f"{context.get('malloc_from')}")
            for (bench, size), ns in times.items():
                samples.setdefault((kind, who, bench, size), []).append(ns)
            inline = context.get("inline_paths")

    pick = min if args.stat == "best" else statistics.median
    fig = {k: pick(v) for k, v in samples.items()}
    peer_names = [p for p, _ in found]
    print(f"kmem_cache pair as linked (libslabkit.so, public header; inline paths: {inline}) "
          f"against each peer's malloc pair, ns per pair ({args.stat} of {args.rounds} rounds, "
          f"CPU time):\n")
    head = ["size"]
    head += [f"{d} cache (inline)" for d in designs] + [f"{d} cache (call)" for d in designs]
    head += [f"{p} malloc" for p in peer_names] + ["fastest peer"]
    head += ["floor", "floor, counted"]
    head += [f"{designs[0]} inline / fastest", f"{designs[0]} call / fastest",
             "floor / fastest", "floor, counted / fastest"]
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join(["---"] + ["---:"] * (len(head) - 2) + ["---:"]) + " |")
    verdicts = []
    floor_ratios = []
    for size in SIZES:
        row = [f"{size} B"]
        first = designs[0]
        inl = fig.get(("design", first, "BM_cache_pair", size))
        for d in designs:
            row.append(f"{fig[('design', d, 'BM_cache_pair', size)]:.2f}")
        for d in designs:
            row.append(f"{fig[('design', d, 'BM_cache_pair_call', size)]:.2f}")
        peer_times = {p: fig[("peer", p, "BM_malloc_pair", size)] for p in peer_names}
        for p in peer_names:
            row.append(f"{peer_times[p]:.2f}")
        fastest = min(peer_times, key=peer_times.get)
        best = peer_times[fastest]
        row.append(fastest)
        call = fig[("design", first, "BM_cache_pair_call", size)]
        # The floor is the same code in every process: its figure pools them all.
        floors = {}
        for bench in ("BM_floor_pair", "BM_floor_counted"):
            pooled = [ns for (k, w, b, s_), v in samples.items() if b == bench and s_ == size
                      for ns in v]
            floors[bench] = pick(pooled)
        row += [f"{floors['BM_floor_pair']:.2f}", f"{floors['BM_floor_counted']:.2f}"]
        row += [f"{inl / best:.2f}x", f"{call / best:.2f}x"]
        row += [f"{floors['BM_floor_pair'] / best:.2f}x",
                f"{floors['BM_floor_counted'] / best:.2f}x"]
        verdicts.append((size, inl / best, fastest))
        floor_ratios.append(floors["BM_floor_pair"] / best)
        print("| " + " | ".join(row) + " |")
    ok = all(r <= TARGET for _, r, _ in verdicts)
    detail = "; ".join(f"{s} B {r:.2f}x ({p})" for s, r, p in verdicts)
    print(f"\nTarget: {designs[0]} cache pair as linked <= {TARGET}x the fastest peer's malloc "
          f"pair: {'PASS' if ok else 'MISS'} -- {detail}")
    if "glibc" in peer_names:
        for d in designs:
            per = [(s, fig[("design", d, "BM_cache_pair", s)] / fig[("peer", "glibc", "BM_malloc_pair", s)])
                   for s in SIZES]
            ok = all(r <= GLIBC_TARGET for _, r in per)
            print(f"Target: {d} cache pair as linked <= {GLIBC_TARGET}x glibc's malloc pair: "
                  f"{'PASS' if ok else 'MISS'} -- " + "; ".join(f"{s} B {r:.2f}x" for s, r in per))
    reach = all(r <= TARGET for r in floor_ratios)
    print(f"The floor (a bare list, no checks, no counters) is {min(floor_ratios):.2f}x to "
          f"{max(floor_ratios):.2f}x the fastest peer's pair: the target is "
          f"{'within' if reach else 'below'} what a free list in memory costs on this machine.")
    print(f"Command: `/usr/bin/python3 bench/linked_ratios.py --rounds {args.rounds} "
          f"--min-time {args.min_time} --stat {args.stat}`; load average "
          f"{os.getloadavg()[0]:.2f} after.")


if __name__ == "__main__":
    main()
