#!/usr/bin/python3
"""The shipped libraries' compiler flags, measured (docs/building.md, "The libraries' flags").

Builds libslabkit.so, libslabkit-malloc.so and bench/linked_pair under each set of flags into
build/flags/<variant> (a plain CMake build of this tree, no tests or tools), then measures, in
interleaved rounds so that every variant meets the same machine:

  pairs   linked_pair per variant, SLABKIT_ALLOCATOR=<design>: the kmem_cache pair as a linked
          program gets it (inline header path and exported call), and glibc's malloc pair in
          the same process; and linked_pair with the variant's libslabkit-malloc.so preloaded:
          its malloc pair. Each figure is printed as the ratio to glibc's malloc pair of the
          same round (best of N rounds), so variants compare without trusting the clock across
          processes.
  kbuild  slabbench's kbuild workload (g++ compiling this project's sources under each malloc)
          for slqb-malloc from the reference build (--reference, default build/release) and
          from each variant (--compare), one slabbench run per variant: its table says
          whether the difference is beyond noise (Welch's t-test).

Usage: /usr/bin/python3 bench/build_flags.py [--variants a,b] [--rounds N] [--designs LIST]
                                             [--kbuild-runs N] [--no-kbuild] [--no-build]
"""

import argparse
import os
import subprocess
import sys

import peers as peerlib
from linked_ratios import run as run_pair

REPO = peerlib.REPO
# name -> (CMAKE_BUILD_TYPE, extra C/C++ flags, extra CMake arguments)
VARIANTS = {
    "o2": ("RelWithDebInfo", "", []),
    "o3": ("Release", "", []),
    "o2-fp": ("RelWithDebInfo", "-fno-omit-frame-pointer", []),
    "o2-noplt": ("RelWithDebInfo", "-fno-plt", []),
    "o2-lto": ("RelWithDebInfo", "", ["-DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON"]),
    "o2-nosemi": ("RelWithDebInfo", "-fno-semantic-interposition", []),
}
SIZES = (32, 64, 256)


def build(name, where):
    build_type, flags, extra = VARIANTS[name]
    cmd = ["cmake", "-S", REPO, "-B", where, "-G", "Ninja", f"-DCMAKE_BUILD_TYPE={build_type}",
           f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}", "-DSLABKIT_BUILD_TESTS=OFF",
           "-DSLABKIT_BUILD_TOOLS=OFF", "-DSLABKIT_BUILD_BENCH=ON"] + extra
    peerlib.log(f"build_flags: building {name} in {peerlib.shown(where)}")
    for c in (cmd, ["cmake", "--build", where, "--target", "slabkit", "slabkit_malloc",
                    "linked_pair"]):
        out = subprocess.run(c, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"build_flags: {' '.join(c)} failed:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    # slabbench --compare looks for <build>/tools/slabbench/slabbench: only the malloc
    # configuration is compared, whose worker merely starts the compilers, so the reference
    # build's binary stands in.
    return where


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--designs", default="slqb,slub")
    ap.add_argument("--kbuild-runs", type=int, default=5)
    ap.add_argument("--no-kbuild", action="store_true")
    ap.add_argument("--no-build", action="store_true", help="use the variants built before")
    ap.add_argument("--reference", default=os.path.join(REPO, "build", "release"),
                    help="the build whose slabbench runs kbuild (its slqb-malloc is the base)")
    args = ap.parse_args()
    names = [v for v in args.variants.split(",") if v]
    for v in names:
        if v not in VARIANTS:
            sys.exit(f"build_flags: unknown variant '{v}' (known: {', '.join(VARIANTS)})")
    designs = [d for d in args.designs.split(",") if d]
    dirs = {v: os.path.join(REPO, "build", "flags", v) for v in names}
    if not args.no_build:
        for v in names:
            build(v, dirs[v])

    filt = "BM_(cache_pair|cache_pair_call|malloc_pair)/(" + "|".join(map(str, SIZES)) + ")$"
    samples = {}  # (variant, what, size) -> [ratio to glibc's malloc pair of the same run]
    for r in range(args.rounds):
        order = names if r % 2 == 0 else list(reversed(names))
        for v in order:
            binary = os.path.join(dirs[v], "bench", "linked_pair")
            peerlib.log(f"round {r + 1}/{args.rounds}: {v}")
            glibc = {}
            for d in designs:
                ctx, t = run_pair(binary, {"SLABKIT_ALLOCATOR": d}, None, args.min_time, filt)
                if ctx.get("slabkit_design") != d:
                    sys.exit(f"build_flags: asked for {d}, ran {ctx.get('slabkit_design')}")
                for size in SIZES:
                    glibc.setdefault(size, []).append(t[("BM_malloc_pair", size)])
                    base = t[("BM_malloc_pair", size)]
                    if d == designs[0]:
                        samples.setdefault((v, f"{d} cache inline", size), []).append(
                            t[("BM_cache_pair", size)] / base)
                    samples.setdefault((v, f"{d} cache call", size), []).append(
                        t[("BM_cache_pair_call", size)] / base)
            lib = os.path.join(dirs[v], "libslabkit-malloc.so")
            ctx, t = run_pair(binary, {"SLABKIT_ALLOCATOR": designs[0]}, lib, args.min_time,
                              "BM_malloc_pair/")
            if "libslabkit-malloc" not in ctx.get("malloc_from", ""):
                sys.exit(f"build_flags: the preload of {lib} did not take")
            for size in SIZES:
                base = min(glibc[size])
                samples.setdefault((v, f"{designs[0]} malloc", size), []).append(
                    t[("BM_malloc_pair", size)] / base)

    whats = sorted({w for (_, w, _) in samples}, key=lambda w: (w.split()[0], w))
    print(f"Pairs as ratios to glibc's malloc pair of the same round (best of {args.rounds} "
          f"rounds; lower is faster):\n")
    print("| variant | flags | " + " | ".join(f"{w} {s} B" for w in whats for s in SIZES) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in whats for _ in SIZES) + " |")
    for v in names:
        bt, flags, extra = VARIANTS[v]
        desc = " ".join([bt] + ([flags] if flags else []) + extra)
        cells = [f"{min(samples[(v, w, s)]):.3f}" for w in whats for s in SIZES]
        print(f"| {v} | {desc} | " + " | ".join(cells) + " |")
    print()
    for v in names:
        size_kib = os.path.getsize(os.path.join(dirs[v], "libslabkit-malloc.so")) // 1024
        print(f"{v}: libslabkit-malloc.so {size_kib} KiB")
    sys.stdout.flush()

    if args.no_kbuild:
        return
    slabbench = os.path.join(args.reference, "tools", "slabbench", "slabbench")
    if not os.path.exists(slabbench):
        sys.exit(f"build_flags: {slabbench} is missing: build the reference first")
    for v in names:
        link = os.path.join(dirs[v], "tools", "slabbench", "slabbench")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(slabbench, link)
        print(f"\n## kbuild: slqb-malloc from {peerlib.shown(args.reference)} against "
              f"slqb-malloc@base from {v}\n", flush=True)
        out = subprocess.run([slabbench, "kbuild", "--allocators", "slqb-malloc",
                              "--baseline", "slqb-malloc@base", "--compare", dirs[v],
                              "--runs", str(args.kbuild_runs), "--no-progress"])
        if out.returncode != 0:
            sys.exit(f"build_flags: slabbench kbuild failed for {v}")


if __name__ == "__main__":
    main()
