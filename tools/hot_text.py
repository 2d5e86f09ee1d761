#!/usr/bin/python3
"""hot_text.py - writes cmake/slabkit-malloc.order: the functions of libslabkit-malloc.so that
ordinary programs run, so that the link puts them together at the start of its code.

Why: a preloaded process maps the library's code page by page as it runs it, and the kernel maps
a whole aligned 64 KiB window of a file around each page it faults in (fault-around). The code a
program runs is spread over the whole library (every design, the statistics, the debug and
validation code sit between its pieces), so every window of it became resident in every process:
228 KiB, where the functions run are about 45 KiB. Listed first, they fill one or two windows.

How: runs each program below under callgrind with the library preloaded (SLABKIT_ALLOCATOR
unset: SLQB, the default), keeps the functions of the library that ran, and adds the paths that
valgrind cannot run (the CPUs' slots need rseq, which valgrind does not emulate), matched by
name. Functions every program ran come first, then the others, each group by instructions run.
The link reads the file with lld's --symbol-ordering-file (src/CMakeLists.txt); names that no
longer exist are ignored, so a stale file costs only the footprint, which the ctest footprint_*
budgets watch. Rerun after changes to the paths a process runs at start:

    /usr/bin/python3 tools/hot_text.py --build build/release

usage: hot_text.py [--build DIR] [--output FILE] [--keep]
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Demangled names of functions valgrind cannot reach (the rseq sections of the CPUs' slots, which
# crowded processes use), added after those measured: they are what a process with more threads
# than CPUs runs on every malloc and free.
CPU_PATHS = re.compile(r"^slabkit::[a-z]+::(alloc_cpu_or|alloc_on_cpu|alloc_from_cpu_queue|"
                       r"free_to_cpu_queue|after_cpu_push|flush_cpu_queue|hold_slow|"
                       r"give_back_own_and_hold|unhold)\(")

LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+\S+?:(\S+)\s+\[(.+)\]\s*$")


def programs(build):
    bench = os.path.join(build, "bench")
    return [
        ("true", ["/bin/true"]),
        ("sh", ["/bin/sh", "-c", "x=$(echo a); for i in 1 2; do y=$x$i; done; echo $y >/dev/null"]),
        ("python3", ["/usr/bin/python3", "-c", "pass"]),
        ("small_mallocs", [os.path.join(bench, "small_mallocs")]),
        ("threads", [os.path.join(bench, "pattern_bench"), "--pattern", "xthread-mixed",
                     "--scale", "0.001"]),
    ]


def run_callgrind(lib, name, argv, workdir):
    out = os.path.join(workdir, f"callgrind.{name}")
    env = dict(os.environ)
    env.pop("SLABKIT_ALLOCATOR", None)
    cmd = ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}",
           "--trace-children=yes", "env", f"LD_PRELOAD={lib}"] + argv
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"hot_text: {name} failed under callgrind (exit {r.returncode}):\n"
                 f"{r.stderr[-2000:]}")
    # env execs the program in the same process: one output file, under the name given.
    ann = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", out],
                         capture_output=True, text=True, check=True).stdout
    ran = {}
    for line in ann.splitlines():
        m = LINE.match(line)
        if m and os.path.basename(m.group(3)) == os.path.basename(lib):
            ran[m.group(2)] = ran.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    if not ran:
        sys.exit(f"hot_text: {name} ran nothing of {lib} (was it preloaded?)")
    return ran


def library_functions(lib):
    """Mangled name -> demangled name of every function the library defines."""
    nm = subprocess.run(["nm", "--defined-only", lib], capture_output=True, text=True,
                        check=True).stdout
    names = [p.split()[2] for p in nm.splitlines() if len(p.split()) == 3 and
             p.split()[1] in "tTwW"]
    dem = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, dem))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"),
                    help="a build with libslabkit-malloc.so and the benchmarks (default: "
                    "build/release)")
    ap.add_argument("--output", default=os.path.join(ROOT, "cmake", "slabkit-malloc.order"))
    ap.add_argument("--keep", action="store_true", help="keep callgrind's files")
    args = ap.parse_args()
    lib = os.path.join(args.build, "libslabkit-malloc.so")
    if not os.path.exists(lib):
        sys.exit(f"hot_text: {lib} not found (build the release preset first)")
    defined = library_functions(lib)
    work = tempfile.mkdtemp(prefix="hot_text.")
    runs = {}
    for name, argv in programs(args.build):
        if not os.path.exists(argv[0]):
            sys.exit(f"hot_text: {argv[0]} not found")
        runs[name] = run_callgrind(lib, name, argv, work)
        print(f"hot_text: {name}: {len(runs[name])} functions of the library ran",
              file=sys.stderr)
    in_all = collections.Counter()
    total = collections.Counter()
    for ran in runs.values():
        for fn, ir in ran.items():
            in_all[fn] += 1
            total[fn] += ir
    measured = [fn for fn in total if fn in defined]
    measured.sort(key=lambda fn: (-in_all[fn], -total[fn], fn))
    extra = sorted(fn for fn, d in defined.items() if CPU_PATHS.match(d) and fn not in total)
    order = measured + extra
    with open(args.output, "w") as f:
        for fn in order:
            f.write(fn + "\n")
    print(f"hot_text: wrote {args.output}: {len(measured)} functions run by "
          f"{', '.join(runs)} ({sum(1 for fn in measured if in_all[fn] == len(runs))} by all), "
          f"{len(extra)} of the CPUs' slots; {len(order)} in all", file=sys.stderr)
    if args.keep:
        print(f"hot_text: callgrind's files are in {work}", file=sys.stderr)
    else:
        for fn in os.listdir(work):
            os.unlink(os.path.join(work, fn))
        os.rmdir(work)


if __name__ == "__main__":
    main()
