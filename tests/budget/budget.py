#!/usr/bin/python3
"""budget.py - the instruction budget of one design's fast paths: counts, under callgrind, the
instructions of one alloc+free pair through each interface of budgets.json and fails when a
count is above its budget (a fast path that grew), as tcmalloc keeps golden counts.

A pair's count is (I(n2) - I(n1)) / (n2 - n1): the instructions of a run of n2 pairs less those
of a run of n1 pairs, so that start-up, the first slabs and exit cancel out and only the steady
pair remains, loop included (pair_loop.c: a compare, a one-byte store and the loop's jump).
Callgrind counts the same instructions on every run of the same binaries, so the budgets are
exact for the compiler they were measured with (the release preset's g++); a count below its
budget by more than `slack` passes with a line that asks for the budget to be lowered.

  budget.py --design slqb --libc-loop <pair_loop_libc> --slabkit-loop <pair_loop_slabkit>
            --malloc-lib <libslabkit-malloc.so> [--budgets budgets.json] [--valgrind valgrind]
  budget.py ... --print    counts only, as a budgets.json fragment (to set new budgets)
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PRELOADED = ("malloc", "calloc")  # through the preloaded malloc replacement


def clean_env(design):
    """The caller's environment without SLABKIT_* settings (a stray one would change what is
    counted), with the design chosen."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLABKIT_") and k != "LD_PRELOAD"}
    env["SLABKIT_ALLOCATOR"] = design
    return env


def run_checked(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"budget: {' '.join(cmd)} exited with {r.returncode}:\n{r.stderr[-2000:]}")
    return r


def instructions(valgrind, cmd, env):
    """Instructions callgrind counted for the whole run of cmd."""
    r = run_checked([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd, env)
    m = re.search(r"Collected\s*:\s*(\d+)", r.stderr)
    if not m:
        sys.exit(f"budget: no 'Collected' line from callgrind for {' '.join(cmd)}:\n"
                 f"{r.stderr[-2000:]}")
    return int(m.group(1))


def check_target(args, env_preload, env_linked):
    """Fails unless the pairs go where they should: the preloaded library's malloc, and the
    design asked for in the linked program."""
    where = run_checked([args.libc_loop, "which", "0", "1"], env_preload).stdout.strip()
    if os.path.realpath(where) != os.path.realpath(args.malloc_lib):
        sys.exit(f"budget: malloc comes from '{where}', not from {args.malloc_lib}: "
                 "the preload did not take")
    design = run_checked([args.slabkit_loop, "which", "0", "1"], env_linked).stdout.strip()
    if design != args.design:
        sys.exit(f"budget: the linked program runs design '{design}', not '{args.design}'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--design", required=True)
    ap.add_argument("--libc-loop", required=True)
    ap.add_argument("--slabkit-loop", required=True)
    ap.add_argument("--malloc-lib", required=True)
    ap.add_argument("--budgets", default=os.path.join(HERE, "budgets.json"))
    ap.add_argument("--valgrind", default="valgrind")
    ap.add_argument("--print", action="store_true", help="print the counts as budgets, check none")
    args = ap.parse_args()
    args.malloc_lib = os.path.abspath(args.malloc_lib)  # LD_PRELOAD needs a path, not a name

    with open(args.budgets) as f:
        spec = json.load(f)
    budgets = spec["budgets"].get(args.design)
    if budgets is None:
        sys.exit(f"budget: no budgets for design '{args.design}' in {args.budgets}")
    n1, n2 = spec["pairs"]
    size = str(spec["size"])
    slack = spec["slack"]

    env_linked = clean_env(args.design)
    env_preload = dict(env_linked, LD_PRELOAD=args.malloc_lib)
    check_target(args, env_preload, env_linked)

    counts = {}
    for interface in budgets:
        preloaded = interface in PRELOADED
        loop = args.libc_loop if preloaded else args.slabkit_loop
        env = env_preload if preloaded else env_linked
        i1 = instructions(args.valgrind, [loop, interface, str(n1), size], env)
        i2 = instructions(args.valgrind, [loop, interface, str(n2), size], env)
        counts[interface] = round((i2 - i1) / (n2 - n1), 1)

    if args.print:
        print(json.dumps({args.design: {k: round(v) for k, v in counts.items()}}))
        return 0
    failed = False
    print(f"instructions per {size}-byte alloc+free pair, design {args.design} "
          f"(callgrind, {n2} pairs less {n1}):")
    for interface, count in counts.items():
        budget = budgets[interface]
        if count > budget + 0.5:
            verdict = f"OVER BUDGET by {count - budget:.1f}: the fast path grew"
            failed = True
        elif count < budget - slack:
            verdict = (f"under budget by {budget - count:.1f}: lower its budget in "
                       f"{os.path.basename(args.budgets)}")
        else:
            verdict = "within budget"
        print(f"  {interface:<10} {count:7.1f}  budget {budget:4}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
