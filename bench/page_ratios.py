#!/usr/bin/python3
"""Runs bench/page_bench and prints slabkit's page allocator against mmap/munmap and glibc
malloc/free as a markdown table: time per block for each contender and the ratios
slabkit/mmap and slabkit/malloc (below 1: slabkit is faster).

Usage: /usr/bin/python3 bench/page_ratios.py [--binary PATH] [--quick] [--min-time S]
                                             [--repetitions N] [--filter REGEX] [--json PATH]

The benchmark's own console output goes to stderr; the table goes to stdout.
"""

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join(REPO, "build", "release", "bench", "page_bench")
CONTENDERS = ("slabkit", "mmap", "malloc")
PATTERNS = ("pair", "batch")
BATCH = 64  # blocks per round of the batch pattern (kBatch in page_bench.cpp)
NAME = re.compile(r"^BM_(?P<pattern>\w+)<(?P<contender>\w+),order(?P<order>\d+)>/")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=DEFAULT_BINARY,
                    help="the page_bench executable (default: %(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="a few seconds in all: --min-time 0.05 --repetitions 1")
    ap.add_argument("--min-time", type=float, default=None,
                    help="seconds per benchmark and repetition (default 0.2; 0.05 with --quick)")
    ap.add_argument("--repetitions", type=int, default=None,
                    help="runs of each benchmark, the median is shown (default 3; 1 with --quick)")
    ap.add_argument("--filter", default=None, help="passed as --benchmark_filter")
    ap.add_argument("--json", default=None, help="keep Google Benchmark's JSON output here")
    args = ap.parse_args()
    if args.min_time is None:
        args.min_time = 0.05 if args.quick else 0.2
    if args.repetitions is None:
        args.repetitions = 1 if args.quick else 3
    if args.min_time <= 0 or args.repetitions < 1:
        ap.error("--min-time must be positive and --repetitions at least 1")
    return args


def run_benchmark(args, out_path):
    # Google Benchmark 1.7.1 takes --benchmark_min_time as a plain number of seconds.
    cmd = [args.binary, f"--benchmark_min_time={args.min_time:g}",
           f"--benchmark_repetitions={args.repetitions}",
           f"--benchmark_out={out_path}", "--benchmark_out_format=json"]
    if args.filter:
        cmd.append(f"--benchmark_filter={args.filter}")
    print("$ " + shlex.join(cmd), file=sys.stderr, flush=True)
    try:
        # Console output to stderr so that stdout holds only the table.
        done = subprocess.run(cmd, stdout=sys.stderr)
    except OSError as err:
        sys.exit(f"page_ratios: cannot run {args.binary}: {err} (build the page_bench target)")
    if done.returncode != 0:
        sys.exit(f"page_ratios: {args.binary} exited with status {done.returncode}")
    with open(out_path, encoding="utf-8") as f:
        return json.load(f)


def collect(data):
    """{(pattern, order, threads): {contender: [ns per block per thread, one per repetition]}}
    and the list of benchmarks that reported an error."""
    results, errors = {}, []
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue  # aggregates (mean, median, ...): the medians are computed below
        m = NAME.match(b["name"])
        if not m:
            continue
        if b.get("error_occurred"):
            errors.append(f"{b['name']}: {b.get('error_message', 'error')}")
            continue
        threads = int(b.get("threads", 1))
        # items_per_second counts blocks over all threads per second of wall time; each thread
        # spends threads / rate seconds per block of its own.
        ns = threads * 1e9 / b["items_per_second"]
        key = (m["pattern"], int(m["order"]), threads)
        results.setdefault(key, {}).setdefault(m["contender"], []).append(ns)
    return results, errors


def fmt_ns(v):
    return "-" if v is None else (f"{v:.1f}" if v < 100 else f"{v:,.0f}")


def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    if r >= 10:
        return f"{r:.1f}"
    return f"{r:.2f}" if r >= 0.1 else f"{r:#.2g}"


def order_label(order):
    return f"{order} ({4 << order} KiB)"


def print_table(results, errors, data, args, command):
    ctx = data.get("context", {})
    print(f"Page allocator vs mmap/munmap vs glibc malloc/free "
          f"({ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz, "
          f"{args.repetitions} repetition(s) of >= {args.min_time:g} s, medians).")
    print()
    print("| pattern | order | threads | slabkit ns/op | mmap ns/op | malloc ns/op "
          "| slabkit/mmap | slabkit/malloc |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    spread = 0.0
    for (pattern, order, threads) in sorted(
            results, key=lambda k: (PATTERNS.index(k[0]) if k[0] in PATTERNS else 99, k[1], k[2])):
        row = results[(pattern, order, threads)]
        med = {}
        for c in CONTENDERS:
            runs = row.get(c)
            med[c] = statistics.median(runs) if runs else None
            if runs and len(runs) > 1:
                spread = max(spread, (max(runs) - min(runs)) / med[c])
        print(f"| {pattern} | {order_label(order)} | {threads} | {fmt_ns(med['slabkit'])} "
              f"| {fmt_ns(med['mmap'])} | {fmt_ns(med['malloc'])} "
              f"| {fmt_ratio(med['slabkit'], med['mmap'])} "
              f"| {fmt_ratio(med['slabkit'], med['malloc'])} |")
    print()
    print("ns/op: wall-clock time per block (allocate, write its first byte, free) as one thread "
          "sees it; with 2 threads each thread runs the same loop on its own blocks, so a figure "
          "equal to the 1-thread one means perfect scaling. Ratios below 1: slabkit is faster.")
    print(f"pair: allocate and free one block at a time. batch: allocate {BATCH} blocks, then "
          "free them newest first; the time is per block.")
    print("slabkit: page_allocator::global() with its default settings (orders 0..3 go through "
          "the per-thread page lists: batch 32 pages, high 192 pages, so a batch of 64 order-3 "
          "blocks overflows them into the zone lock), drained after every run, so "
          "each run starts with all free pages merged in the buddy lists. mmap: MAP_PRIVATE|"
          "MAP_ANONYMOUS, and the write faults one page in; munmap with 2 threads also shoots "
          "down the other CPU's TLB.")
    print("malloc: glibc with default settings. 4 KiB and 32 KiB are below its mmap threshold "
          "(128 KiB), so both sizes are served from the heap, not page-aligned; the batch "
          "pattern frees more than M_TRIM_THRESHOLD (128 KiB) at the top of the heap, which "
          "glibc gives back to the OS every round and faults in again (run with "
          "GLIBC_TUNABLES=glibc.malloc.trim_threshold=1000000000 to see it without).")
    if args.repetitions > 1:
        print(f"Largest spread between repetitions of one benchmark: {spread:.0%} of its median.")
    if ctx.get("library_build_type") == "debug":
        print("Google Benchmark reports its library as a debug build (Debian's package); that "
              "does not touch the timed loop, whose per-iteration code is inline from the header.")
    print(f"Command: `{command}`")
    for e in errors:
        print(f"ERROR {e}")


def main():
    args = parse_args()
    command = "/usr/bin/python3 " + shlex.join(["bench/page_ratios.py"] + sys.argv[1:])
    if args.json:
        data = run_benchmark(args, args.json)
    else:
        with tempfile.TemporaryDirectory(prefix="page_ratios.") as tmp:
            data = run_benchmark(args, os.path.join(tmp, "page_bench.json"))
    results, errors = collect(data)
    if not results:
        sys.exit("page_ratios: the benchmark reported no page_bench results")
    print_table(results, errors, data, args, command)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
