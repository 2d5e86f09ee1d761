#!/usr/bin/python3
"""Runs bench/slab_bench and prints slabkit's SLQB object allocator and its malloc replacement
side by side with glibc malloc, jemalloc, tcmalloc and mimalloc as markdown tables, with the
ratios of SLQB's kmem_cache and of slabkit's malloc to the fastest peer and a PASS/MISS line per
target of the SLQB issue and of the malloc replacement issue.

Usage: /usr/bin/python3 bench/slab_ratios.py [--binary PATH] [--quick] [--min-time S]
                                             [--repetitions N] [--sizes LIST] [--peers LIST]
                                             [--designs LIST] [--library PATH]
                                             [--filter REGEX] [--json PATH] [--verbose]

How it runs: one process measures slabkit (kmem_cache and kmalloc) and glibc's malloc, with no
LD_PRELOAD; then, for each slabkit design, the same binary runs in a child process with
LD_PRELOAD=libslabkit-malloc.so and SLABKIT_ALLOCATOR=<design> and measures only malloc (the
"slqb malloc" column), and for each peer with LD_PRELOAD=<the peer's shared library>. Every
child checks that the malloc it calls really comes from the preloaded library (slab_bench
--expect_malloc) and a peer whose preload does not take is reported missing, never measured as
glibc again. With N repetitions the processes run in N interleaved rounds (slabkit+glibc, slqb
malloc, jemalloc, tcmalloc, mimalloc, then again), and the tables show the median of the rounds.

The tables go to stdout; progress (and with --verbose, Google Benchmark's own output) to stderr.
Exit status: 0, or 1 if a benchmark reported an error. A missing peer is not an error.
"""

import argparse
import glob
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join(REPO, "build", "release", "bench", "slab_bench")
BATCH = 1000  # objects per round of the batch workloads (kBatch in slab_bench.cpp)
DEFAULT_SIZES = "32,64,256,1024"

# (workload in the benchmark names, label in the tables)
TIME_WORKLOADS = (("pair", "pair"), ("lifo", "batch LIFO"), ("fifo", "batch FIFO"),
                  ("random", "batch random"))
REMOTE = "remote"
# Columns: slabkit's two interfaces, slabkit's malloc replacement (one column per design, set
# in main), then the peers' malloc/free.
SLABKIT = ("slqb cache", "slqb kmalloc")
PEERS = ("glibc", "jemalloc", "tcmalloc", "mimalloc")
COLUMNS = SLABKIT + PEERS
MALLOC_COLUMNS = ()  # "<design> malloc" for each design measured
SLABKIT_MALLOC = "libslabkit-malloc.so"
# Debian package and library of each preloaded peer (the runtime package, which -dev pulls in).
PRELOAD = {
    "jemalloc": ("libjemalloc2", "libjemalloc.so.2"),
    "tcmalloc": ("libtcmalloc-minimal4", "libtcmalloc_minimal.so.4"),
    "mimalloc": ("libmimalloc2.0", "libmimalloc.so.2"),
}
NAME = re.compile(r"^BM_(?P<workload>\w+)<(?P<interface>\w+),(?P<size>\d+)>")
EXPECT_MISMATCH = 3  # slab_bench's exit status when --expect_malloc does not hold


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=DEFAULT_BINARY,
                    help="the slab_bench executable (default: %(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="well under a minute on 2 CPUs: --min-time 0.1 --repetitions 1")
    ap.add_argument("--min-time", type=float, default=None,
                    help="seconds per benchmark and repetition (default 0.3; 0.1 with --quick)")
    ap.add_argument("--repetitions", type=int, default=None,
                    help="interleaved rounds of every process; the median is shown "
                         "(default 3; 1 with --quick)")
    ap.add_argument("--stat", choices=("median", "best"), default="median",
                    help="what the tables show of the rounds: their median, or the best round "
                         "(least time, most throughput; steadier than the median on a machine "
                         "whose load comes and goes) (default: %(default)s)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help="object sizes in bytes, comma-separated (default: %(default)s)")
    ap.add_argument("--peers", default=",".join(PRELOAD),
                    help="preloaded peers to run, comma-separated; '' for none "
                         "(default: %(default)s)")
    ap.add_argument("--designs", default="slqb",
                    help="slabkit designs whose malloc replacement to preload, each in its own "
                         "process with SLABKIT_ALLOCATOR=<design>; '' for none "
                         "(default: %(default)s)")
    ap.add_argument("--library", default=None,
                    help=f"slabkit's malloc replacement (default: {SLABKIT_MALLOC} in the build "
                         "folder of --binary, i.e. <binary>/../../" + SLABKIT_MALLOC + ")")
    ap.add_argument("--filter", default=None,
                    help="passed to every process as --benchmark_filter, e.g. 'pair|remote'")
    ap.add_argument("--json", default=None,
                    help="save every process's Google Benchmark JSON output here, in one file")
    ap.add_argument("--verbose", action="store_true",
                    help="show Google Benchmark's console output (on stderr)")
    args = ap.parse_args()
    if args.min_time is None:
        args.min_time = 0.1 if args.quick else 0.3
    if args.repetitions is None:
        args.repetitions = 1 if args.quick else 3
    if args.min_time <= 0 or args.repetitions < 1:
        ap.error("--min-time must be positive and --repetitions at least 1")
    args.designs = [d for d in args.designs.split(",") if d]
    if not all(re.fullmatch(r"[a-z0-9_]+", d) for d in args.designs):
        ap.error("--designs takes design names separated by commas, e.g. slqb")
    if args.library is None:
        args.library = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
            args.binary))), SLABKIT_MALLOC)
    args.peers = [p for p in args.peers.split(",") if p]
    for p in args.peers:
        if p not in PRELOAD:
            ap.error(f"unknown peer {p!r} (known: {', '.join(PRELOAD)})")
    if not re.fullmatch(r"\d+(,\d+)*", args.sizes):
        ap.error("--sizes takes sizes in bytes separated by commas, e.g. 64,256")
    return args


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def find_library(package, filename):
    """The path of a peer's shared library, from `dpkg -L package`, else from the usual library
    folders; None if it is not installed."""
    try:
        listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True,
                                check=False).stdout.split()
    except OSError:
        listed = []
    candidates = [p for p in listed if os.path.basename(p) == filename]
    for pattern in ("/usr/lib/*/", "/usr/lib/", "/lib/*/", "/usr/local/lib/"):
        candidates += sorted(glob.glob(pattern + filename))
    for path in candidates:
        if os.path.exists(path):
            return path
    return None


def base_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # the slabkit+glibc process must run on glibc's malloc
    return env


def which_malloc(binary, env):
    done = subprocess.run([binary, "--which_malloc"], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return None, (done.stderr.strip() or f"exit status {done.returncode}")
    words = done.stdout.split()
    return (words[0], " ".join(words[1:])) if words else (None, "no output")


def plan_processes(args):
    """[(label, expected malloc, interfaces, env, preload path)], {peer: why it is missing} and
    the slabkit malloc columns whose library is there but failed its check."""
    processes = [("slabkit+glibc", "glibc", "cache,kmalloc,malloc", base_env(), None)]
    missing, broken = {}, []
    for design in args.designs:
        label = f"{design} malloc"
        if not os.path.exists(args.library):
            missing[label] = f"{args.library} not found (build the slabkit_malloc target)"
            continue
        env = base_env()
        env["LD_PRELOAD"] = args.library
        env["SLABKIT_ALLOCATOR"] = design
        name, source = which_malloc(args.binary, env)
        if name != "slabkit":
            # The library is there but does not work: an error, unlike a missing peer.
            missing[label] = (f"SLABKIT_ALLOCATOR={design} LD_PRELOAD={args.library} did not "
                              f"take: malloc is {name or 'unknown'} ({source}); reproduce: "
                              f"SLABKIT_ALLOCATOR={design} LD_PRELOAD={args.library} "
                              f"{args.binary} --which_malloc")
            broken.append(label)
            continue
        processes.append((label, "slabkit", "malloc", env, args.library))
    for peer in args.peers:
        package, filename = PRELOAD[peer]
        path = find_library(package, filename)
        if not path:
            missing[peer] = (f"{filename} not found (install {package}: scripts/deps.sh)")
            continue
        env = base_env()
        env["LD_PRELOAD"] = path
        name, source = which_malloc(args.binary, env)
        if name != peer:
            missing[peer] = (f"LD_PRELOAD={path} did not take: malloc is "
                             f"{name or 'unknown'} ({source})")
            continue
        processes.append((peer, peer, "malloc", env, path))
    return processes, missing, broken


def run_process(args, label, expect, interfaces, env, out_path):
    cmd = [args.binary, f"--interfaces={interfaces}", f"--sizes={args.sizes}",
           f"--expect_malloc={expect}", f"--benchmark_min_time={args.min_time:g}",
           f"--benchmark_out={out_path}", "--benchmark_out_format=json"]
    if args.filter:
        cmd.append(f"--benchmark_filter={args.filter}")
    preload = env.get("LD_PRELOAD")
    design = env.get("SLABKIT_ALLOCATOR") if preload else None
    log(f"[{label}] $ " + (f"SLABKIT_ALLOCATOR={design} " if design else "")
        + (f"LD_PRELOAD={preload} " if preload else "") + shlex.join(cmd))
    try:
        # Google Benchmark's console output (stdout) and context lines (stderr) are kept out of
        # the way unless --verbose; stderr is shown when the process fails.
        done = subprocess.run(cmd, env=env, text=True, stderr=subprocess.PIPE,
                              stdout=sys.stderr if args.verbose else subprocess.DEVNULL)
    except OSError as err:
        sys.exit(f"slab_ratios: cannot run {args.binary}: {err} (build the slab_bench target)")
    if args.verbose or done.returncode != 0:
        sys.stderr.write(done.stderr)
    if done.returncode == EXPECT_MISMATCH and label != "slabkit+glibc":
        last = done.stderr.strip().splitlines()
        return None, last[-1] if last else "its malloc was not the preloaded one"
    if done.returncode != 0:
        if label == "slabkit+glibc":
            sys.exit(f"slab_ratios: {args.binary} exited with status {done.returncode}")
        return None, f"the process exited with status {done.returncode}"
    with open(out_path, encoding="utf-8") as f:
        text = f.read()
    if not text.strip():
        # --filter matched none of this process's benchmarks (its malloc was checked anyway).
        return {"context": {"malloc": expect}, "benchmarks": []}, None
    data = json.loads(text)
    got = data.get("context", {}).get("malloc")
    if got != expect:
        return None, f"it reported malloc {got!r}, not {expect!r}"
    return data, None


def collect(runs):
    """{(workload, size): {column: [value per round]}} (ns per object, or Mobj/s for remote)
    and the benchmarks that reported an error."""
    results, errors = {}, []
    for label, data in runs:
        for b in data.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration":
                continue
            m = NAME.match(b["name"])
            if not m:
                continue
            if b.get("error_occurred"):
                errors.append(f"{label}: {b['name']}: {b.get('error_message', 'error')}")
                continue
            interface = m["interface"]
            if interface == "malloc":
                column = "glibc" if label == "slabkit+glibc" else label
            else:
                column = "slqb " + interface
            rate = b["items_per_second"]
            value = rate / 1e6 if m["workload"] == REMOTE else 1e9 / rate
            key = (m["workload"], int(m["size"]))
            results.setdefault(key, {}).setdefault(column, []).append(value)
    return results, errors


def fmt(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}x"


STAT = "median"


def medians(row, lower_is_better=True):
    """The figure each column shows: the median of its rounds, or (--stat best) the best round."""
    if STAT == "best":
        pick = min if lower_is_better else max
    else:
        pick = statistics.median
    return {c: (pick(row[c]) if row.get(c) else None) for c in COLUMNS}


def best_peer(med, lower_is_better):
    got = [(med[p], p) for p in PEERS if med[p] is not None]
    if not got:
        return None, None
    value, name = (min if lower_is_better else max)(got)
    return name, value


def size_label(size):
    return f"{size} B"


def print_tables(results, missing, sizes):
    head = " | ".join(COLUMNS)
    align = " | ".join("---:" for _ in COLUMNS)
    # The ratio columns: SLQB's kmem_cache, then each design's malloc replacement.
    ratio_of = ("slqb cache",) + MALLOC_COLUMNS
    verdicts = {(c, w): [] for c in ratio_of for w in ("pair", REMOTE)}

    def ratio_cells(med, peer_v, workload, size, peer):
        cells = []
        for c in ratio_of:
            mine = med[c]
            ratio = mine / peer_v if mine is not None and peer_v else None
            if workload in ("pair", REMOTE):
                verdicts[(c, workload)].append((size, mine, peer, peer_v, ratio))
            cells.append(fmt_ratio(ratio))
        return " | ".join(cells)

    def ratio_head(which):
        return " | ".join(f"{c.replace('slqb ', '')} / {which}" for c in ratio_of)

    print("Time per object, ns (allocate it, write its first byte, free it); lower is better.")
    print()
    print(f"| workload | size | {head} | fastest peer | {ratio_head('fastest peer')} |")
    print(f"| --- | ---: | {align} | --- | {' | '.join('---:' for _ in ratio_of)} |")
    for workload, label in TIME_WORKLOADS:
        for size in sizes:
            row = results.get((workload, size))
            if not row:
                continue
            med = medians(row)
            peer, peer_v = best_peer(med, lower_is_better=True)
            cells = " | ".join(fmt(med[c]) for c in COLUMNS)
            print(f"| {label} | {size_label(size)} | {cells} | {peer or '-'} "
                  f"| {ratio_cells(med, peer_v, workload, size, peer)} |")
    print()

    if any((REMOTE, size) in results for size in sizes):
        print("Producer/consumer remote frees, million objects per second (one thread allocates "
              "and passes, the other frees); higher is better.")
        print()
        print(f"| workload | size | {head} | best peer | {ratio_head('best peer')} |")
        print(f"| --- | ---: | {align} | --- | {' | '.join('---:' for _ in ratio_of)} |")
        for size in sizes:
            row = results.get((REMOTE, size))
            if not row:
                continue
            med = medians(row, lower_is_better=False)
            peer, peer_v = best_peer(med, lower_is_better=False)
            cells = " | ".join(fmt(med[c]) for c in COLUMNS)
            print(f"| remote | {size_label(size)} | {cells} | {peer or '-'} "
                  f"| {ratio_cells(med, peer_v, REMOTE, size, peer)} |")
        print()

    print_target("SLQB kmem_cache pair <= 0.8x fastest peer's malloc/free pair",
                 verdicts[("slqb cache", "pair")], "ns", lambda r: r <= 0.8)
    print_target("SLQB remote-free throughput >= best peer's",
                 verdicts[("slqb cache", REMOTE)], "Mobj/s", lambda r: r >= 1.0)
    for c in MALLOC_COLUMNS:
        design = c.split()[0].upper()
        print_target(f"{design} malloc pair <= fastest peer's malloc/free pair",
                     verdicts[(c, "pair")], "ns", lambda r: r <= 1.0)
        print_target(f"{design} malloc remote-free throughput >= best peer's",
                     verdicts[(c, REMOTE)], "Mobj/s", lambda r: r >= 1.0)
    if missing:
        print("Missing, so not in the tables (a missing peer: the targets are judged against "
              "the others): " + "; ".join(f"{p}: {why}" for p, why in missing.items()))


def print_target(title, rows, unit, ok):
    measured = [r for r in rows if r[4] is not None]
    if not measured:
        print(f"Target: {title}: NOT MEASURED (no slabkit or no peer figures in this run)")
        return
    verdict = "PASS" if all(ok(r[4]) for r in measured) else "MISS"
    parts = [f"{size_label(size)}: {fmt(cache)} vs {fmt(peer_v)} {unit} ({peer}) = "
             f"{fmt_ratio(ratio)} {'ok' if ok(ratio) else 'miss'}"
             for size, cache, peer, peer_v, ratio in measured]
    print(f"Target: {title}: {verdict} -- " + "; ".join(parts))


def print_notes(args, context, loads, spreads, command):
    print()
    print(f"Conditions: {context.get('num_cpus', '?')} CPUs at {context.get('mhz_per_cpu', '?')} "
          f"MHz; {args.repetitions} round(s) of >= {args.min_time:g} s per benchmark, "
          f"{'best round' if STAT == 'best' else 'medians'}; "
          f"load average {loads[0]:.2f} before, {loads[1]:.2f} after. A load average near or "
          "above the number of CPUs means other work competed with the benchmark: its figures "
          "are noisy then, read them as rough.")
    for kind, (spread, where) in sorted(spreads.items()):
        print(f"Largest spread between rounds, {kind} workloads: {spread:.0%} of the median "
              f"({where}).")
    if context.get("library_build_type") == "debug":
        print("Google Benchmark calls its library a debug build (Debian's package); that does "
              "not touch the timed loops, whose per-iteration code is inline from the header.")
    print("Columns: slqb cache = slabkit's kmem_cache API (slabkit_cache_create of the size, "
          "slabkit_cache_alloc/free); slqb kmalloc = slabkit_kmalloc/kfree; <design> malloc = "
          f"malloc/free of slabkit's malloc replacement ({args.library}, LD_PRELOADed with "
          "SLABKIT_ALLOCATOR=<design>, in its own process); the peers are "
          "malloc/free of glibc (no preload) and of jemalloc, tcmalloc and mimalloc, each "
          "LD_PRELOADed from Debian's package into its own process. The ratio columns divide the "
          "slqb cache figure, and each slabkit malloc figure, by the best peer's (time: below "
          "1 = slabkit faster; throughput: above 1 = slabkit faster).")
    print(f"pair: one object at a time. batch: {BATCH} objects allocated, then freed newest "
          "first (LIFO), oldest first (FIFO) or in a fixed random order; time per object. "
          "Single-thread workloads are timed in thread CPU time. remote: wall-clock throughput "
          "of 2 threads, every object freed by the thread that did not allocate it, passed "
          "through a 1024-slot lock-free ring in batches of 16.")
    print(f"Command: `{command}`")


def main():
    args = parse_args()
    global STAT, COLUMNS, MALLOC_COLUMNS
    STAT = args.stat
    MALLOC_COLUMNS = tuple(f"{d} malloc" for d in args.designs)
    COLUMNS = SLABKIT + MALLOC_COLUMNS + PEERS
    command = "/usr/bin/python3 " + shlex.join(["bench/slab_ratios.py"] + sys.argv[1:])
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"slab_ratios: {args.binary} is not there (build the slab_bench target)")
    sizes = [int(s) for s in args.sizes.split(",")]
    loads = [os.getloadavg()[0]]
    processes, missing, broken = plan_processes(args)
    for peer, why in missing.items():
        log(f"slab_ratios: {peer} is missing: {why}")
    runs, saved = [], []
    with tempfile.TemporaryDirectory(prefix="slab_ratios.") as tmp:
        for rnd in range(args.repetitions):
            log(f"slab_ratios: round {rnd + 1} of {args.repetitions}")
            for label, expect, interfaces, env, preload in processes:
                if label in missing:
                    continue
                out = os.path.join(tmp, f"{label.replace(' ', '-')}.{rnd}.json")
                data, why = run_process(args, label, expect, interfaces, env, out)
                if data is None:
                    if label in MALLOC_COLUMNS:
                        # slabkit's own malloc failing is an error, not a missing peer.
                        why += ("; reproduce: " + f"SLABKIT_ALLOCATOR={env['SLABKIT_ALLOCATOR']} "
                                f"LD_PRELOAD={preload} {args.binary} --interfaces=malloc "
                                f"--sizes={args.sizes} --expect_malloc=slabkit")
                        broken.append(label)
                    missing[label] = why
                    log(f"slab_ratios: {label} is missing: {why}")
                    continue
                runs.append((label, data))
                saved.append({"process": label, "round": rnd, "preload": preload,
                              "malloc": data["context"].get("malloc"),
                              "malloc_from": data["context"].get("malloc_from"),
                              "benchmark": data})
    loads.append(os.getloadavg()[0])
    # A peer that failed in a later round is dropped whole, not half-measured.
    runs = [(label, data) for label, data in runs if label not in missing]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"command": command, "missing": missing, "runs": saved}, f, indent=1)
    results, errors = collect(runs)
    if not results:
        sys.exit("slab_ratios: the benchmark reported no results (check --filter)")
    # Largest spread between rounds, for the single-thread workloads and for remote apart (the
    # remote one is much larger on a busy machine).
    spreads = {}
    if args.repetitions > 1:
        for (workload, size), row in results.items():
            kind = "remote" if workload == REMOTE else "single-thread"
            for column, values in row.items():
                if len(values) > 1:
                    med = statistics.median(values)
                    spread = (max(values) - min(values)) / med
                    if spread >= spreads.get(kind, (-1.0,))[0]:
                        spreads[kind] = (spread, f"{workload} {size_label(size)} {column}")
    print("slabkit (SLQB" + (", and the malloc replacement" if MALLOC_COLUMNS else "")
          + ") against glibc, jemalloc, tcmalloc and mimalloc: sizes "
          + ", ".join(map(size_label, sizes)))
    print()
    print_tables(results, missing, sizes)
    print_notes(args, runs[0][1].get("context", {}), loads, spreads, command)
    errors += [f"{label}: {missing[label]}" for label in broken]
    for e in errors:
        print(f"ERROR {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
