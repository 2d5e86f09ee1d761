#!/usr/bin/python3
"""footprint.py - the start footprint of one design's malloc replacement: what preloading
libslabkit-malloc.so adds to the peak RSS of small programs, against footprint.json, as the
instruction budget guards the fast paths. A figure above its budget fails (memory that every
preloaded process pays grew); one below its budget by more than `slack` passes with a line that
asks for the budget to be lowered.

Each figure is the program's own peak RSS (VmHWM at its exit, read by bench/start_probe) under
the preload, less the same program's without it (glibc), the least of `runs` runs of each:
resident memory is counted in whole pages, and what varies between runs (address-space
layout) only adds.

  footprint.py --design slqb --probe <start_probe> --small-mallocs <small_mallocs>
               --malloc-lib <libslabkit-malloc.so> [--budgets footprint.json]
  footprint.py ... --print    figures only, as a footprint.json fragment (to set new budgets)
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def clean_env(preload, design):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLABKIT_") and k != "LD_PRELOAD"}
    env["PYTHONHASHSEED"] = "0"
    if preload:
        env["LD_PRELOAD"] = preload
        env["SLABKIT_ALLOCATOR"] = design
    return env


def hwm_kib(probe, argv, env):
    r = subprocess.run([probe] + argv, env=env, capture_output=True, text=True, timeout=120)
    fields = dict(f.split("=", 1) for f in r.stdout.split() if "=" in f)
    if r.returncode != 0 or "hwm_kib" not in fields:
        sys.exit(f"footprint: {probe} {' '.join(argv)} failed ({r.returncode}): {r.stderr[-1000:]}")
    if fields["status"] != "0":
        sys.exit(f"footprint: {' '.join(argv)} exited with status {fields['status']} "
                 f"({'under ' + env['LD_PRELOAD'] if 'LD_PRELOAD' in env else 'glibc'})")
    return int(fields["hwm_kib"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--design", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--small-mallocs", required=True)
    ap.add_argument("--malloc-lib", required=True)
    ap.add_argument("--budgets", default=os.path.join(HERE, "footprint.json"))
    ap.add_argument("--print", action="store_true")
    args = ap.parse_args()
    with open(args.budgets) as f:
        spec = json.load(f)
    programs = {
        "true": ["/bin/true"],
        "sh": ["/bin/sh", "-c", "echo footprint > /dev/null"],
        "python3": ["/usr/bin/python3", "-c", "pass"],
        "small_mallocs": [args.small_mallocs],
    }
    # The preload must take: the library reports its design's statistics at exit.
    check = subprocess.run(["/bin/true"], env={**clean_env(args.malloc_lib, args.design),
                                               "SLABKIT_STATS": "exit"},
                           capture_output=True, text=True, timeout=60)
    if check.returncode != 0 or "slabinfo - version" not in check.stderr:
        sys.exit(f"footprint: the preload of {args.malloc_lib} did not take "
                 f"(status {check.returncode}): {check.stderr[-500:]}")

    figures = {}
    for name, argv in programs.items():
        base = min(hwm_kib(args.probe, argv, clean_env(None, None)) for _ in range(spec["runs"]))
        ours = min(hwm_kib(args.probe, argv, clean_env(args.malloc_lib, args.design))
                   for _ in range(spec["runs"]))
        figures[name] = (base, ours, ours - base)
    if args.print:
        print(json.dumps({args.design: {n: f[2] for n, f in figures.items()}}, indent=2))
        return 0
    budgets = spec["budgets"].get(args.design)
    if budgets is None:
        sys.exit(f"footprint: no budgets for design {args.design!r} in {args.budgets}")
    failed = False
    for name, (base, ours, over) in figures.items():
        budget = budgets[name]
        verdict = "ok"
        if over > budget:
            verdict = "OVER BUDGET"
            failed = True
        elif over < budget - spec["slack"]:
            verdict = f"ok; {budget - over} KiB under budget: lower it in footprint.json"
        print(f"{args.design} {name}: {ours} KiB preloaded, {base} KiB on glibc: +{over} KiB "
              f"(budget +{budget} KiB) {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
