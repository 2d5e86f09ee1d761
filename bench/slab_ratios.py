#!/usr/bin/python3
"""Runs bench/slab_bench and prints slabkit's object allocators (every design of the build: its
kmem_cache API, kmalloc and its malloc replacement) side by side with glibc malloc, jemalloc,
tcmalloc and mimalloc as markdown tables, with the ratios of each design's kmem_cache and malloc
to the fastest peer, a PASS/MISS line per target of the SLQB issue and of the malloc replacement
issue, and, with --baseline, a before/after table against another build.

Usage: /usr/bin/python3 bench/slab_ratios.py [--binary PATH] [--quick] [--min-time S]
                                             [--repetitions N] [--stat median|best]
                                             [--sizes LIST] [--peers LIST] [--designs LIST]
                                             [--library PATH] [--baseline DIR]
                                             [--filter REGEX] [--json PATH] [--verbose]

How it runs: for each slabkit design (--designs, by default every design the binary has:
slab_bench --list_designs) one process runs slab_bench with SLABKIT_ALLOCATOR=<design> and no
LD_PRELOAD and measures the cache and kmalloc interfaces (the "<design> cache" and
"<design> kmalloc" columns); the first of them measures glibc's malloc too. Then, for each
design, the same binary runs with LD_PRELOAD=libslabkit-malloc.so and SLABKIT_ALLOCATOR=<design>
and measures only malloc (the "<design> malloc" column), and for each peer with
LD_PRELOAD=<the peer's shared library>. Every process checks that the malloc it calls really
comes from where it should (slab_bench --expect_malloc); a peer whose preload does not take is
reported missing, never measured as glibc again.

--baseline DIR adds another build folder of the project (DIR/bench/slab_bench and
DIR/libslabkit-malloc.so, typically built from an older commit): for every design it has, its
cache+kmalloc process and its malloc process run too, each right next to the current build's
process of the same design and kind (which of the two goes first alternates from round to
round), giving the "<design> cache @base", "<design> kmalloc @base" and "<design> malloc @base"
columns, and a before/after table of now/base per design and interface. A baseline slab_bench
older than --list_designs is taken to have the one design "slqb".

With N repetitions the processes run in N interleaved rounds (every process once, then again),
and the tables show the median of the rounds (or, --stat best, the best round).

The tables go to stdout; progress (and with --verbose, Google Benchmark's own output) to stderr.
Exit status: 0, or 1 if a benchmark or a slabkit process (of either build) reported an error. A
missing peer is not an error.
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
OLD_DESIGNS = ["slqb"]  # the designs of a slab_bench older than --list_designs
BASE = " @base"  # suffix of the baseline build's columns

# (workload in the benchmark names, label in the tables)
TIME_WORKLOADS = (("pair", "pair"), ("lifo", "batch LIFO"), ("fifo", "batch FIFO"),
                  ("random", "batch random"))
REMOTE = "remote"
INTERFACES = ("cache", "kmalloc", "malloc")
PEERS = ("glibc", "jemalloc", "tcmalloc", "mimalloc")
SLABKIT_MALLOC = "libslabkit-malloc.so"
# Debian package and library of each preloaded peer (the runtime package, which -dev pulls in).
PRELOAD = {
    "jemalloc": ("libjemalloc2", "libjemalloc.so.2"),
    "tcmalloc": ("libtcmalloc-minimal4", "libtcmalloc_minimal.so.4"),
    "mimalloc": ("libmimalloc2.0", "libmimalloc.so.2"),
}
NAME = re.compile(r"^BM_(?P<workload>\w+)<(?P<interface>\w+),(?P<size>\d+)>")
EXPECT_MISMATCH = 3  # slab_bench's exit status when --expect_malloc does not hold
DESIGN_NAME = re.compile(r"[a-z0-9_]+")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=DEFAULT_BINARY,
                    help="the slab_bench executable (default: %(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="about 30 s on 2 CPUs, 10 s more per further design: --min-time 0.1 "
                         "--repetitions 1")
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
    ap.add_argument("--designs", default=None,
                    help="slabkit designs to measure, comma-separated: for each, a process with "
                         "SLABKIT_ALLOCATOR=<design> for the cache and kmalloc interfaces and "
                         "one with the malloc replacement preloaded; '' for none (default: "
                         "every design of --binary, as its --list_designs prints them)")
    ap.add_argument("--library", default=None,
                    help=f"slabkit's malloc replacement (default: {SLABKIT_MALLOC} in the build "
                         "folder of --binary, i.e. <binary>/../../" + SLABKIT_MALLOC + ")")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="another build folder of the project (with bench/slab_bench and "
                         f"{SLABKIT_MALLOC}, e.g. built from an older commit) to measure in the "
                         "same rounds, every design it has: the '@base' columns and the "
                         "before/after table")
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
    args.binary = os.path.abspath(args.binary)
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"slab_ratios: {args.binary} is not there (build the slab_bench target)")
    args.build_designs = list_designs(args.binary)
    if args.designs is None:
        args.designs = list(args.build_designs)
    else:
        args.designs = [d for d in args.designs.split(",") if d]
        if not all(DESIGN_NAME.fullmatch(d) for d in args.designs):
            ap.error("--designs takes design names separated by commas, e.g. slqb")
        if len(set(args.designs)) != len(args.designs):
            ap.error("--designs names a design twice")
        unknown = [d for d in args.designs if d not in args.build_designs]
        if unknown:
            ap.error(f"{args.binary} has no design {', '.join(unknown)} "
                     f"(its designs: {' '.join(args.build_designs)})")
    if args.library is None:
        args.library = os.path.join(build_folder(args.binary), SLABKIT_MALLOC)
    args.library = os.path.abspath(args.library)
    args.base_binary = args.base_library = None
    args.base_designs = []
    if args.baseline is not None:
        folder = os.path.abspath(args.baseline)
        args.base_binary = os.path.join(folder, "bench", "slab_bench")
        args.base_library = os.path.join(folder, SLABKIT_MALLOC)
        if not os.access(args.base_binary, os.X_OK):
            ap.error(f"--baseline: {args.base_binary} is not there (build the slab_bench target "
                     "in that folder)")
        if os.path.realpath(args.base_binary) == os.path.realpath(args.binary):
            ap.error("--baseline is the build folder of --binary itself")
        args.base_designs = list_designs(args.base_binary)
    args.peers = [p for p in args.peers.split(",") if p]
    for p in args.peers:
        if p not in PRELOAD:
            ap.error(f"unknown peer {p!r} (known: {', '.join(PRELOAD)})")
    if not re.fullmatch(r"\d+(,\d+)*", args.sizes):
        ap.error("--sizes takes sizes in bytes separated by commas, e.g. 64,256")
    return args


def build_folder(binary):
    """The build folder of a slab_bench executable (<folder>/bench/slab_bench)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(binary)))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def list_designs(binary):
    """The designs a slab_bench binary's slabkit has (slab_bench --list_designs); a binary
    older than that option (Google Benchmark refuses the flag) has only slqb."""
    try:
        done = subprocess.run([binary, "--list_designs"], env=base_env(), capture_output=True,
                              text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        sys.exit(f"slab_ratios: cannot run {binary} --list_designs: {err}")
    designs = done.stdout.split()
    if done.returncode == 0 and designs and all(DESIGN_NAME.fullmatch(d) for d in designs):
        return designs
    log(f"slab_ratios: {binary} has no --list_designs (an older build): taking its designs to "
        f"be {' '.join(OLD_DESIGNS)}")
    return list(OLD_DESIGNS)


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
    # Each process gets exactly the preload and the design it is meant to measure.
    env.pop("LD_PRELOAD", None)
    env.pop("SLABKIT_ALLOCATOR", None)
    return env


class Process:
    """One slab_bench process of a round."""

    def __init__(self, label, binary, expect, columns, env, design=None, slabkit=False,
                 pair=None):
        self.label = label        # e.g. "slqb cache+kmalloc", "slqb malloc @base", "jemalloc"
        self.binary = binary
        self.expect = expect      # the malloc it must call (--expect_malloc)
        self.columns = columns    # {interface: column}
        self.env = env
        self.design = design      # SLABKIT_ALLOCATOR, or None
        self.slabkit = slabkit    # a failure is an error (a peer's is only "missing")
        self.pair = pair          # processes of one pair run next to each other, order alternating

    def interfaces(self):
        return ",".join(i for i in INTERFACES if i in self.columns)

    def setting(self):
        """The environment this process adds, as shell words."""
        words = []
        if self.env.get("SLABKIT_ALLOCATOR"):
            words.append(f"SLABKIT_ALLOCATOR={self.env['SLABKIT_ALLOCATOR']}")
        if self.env.get("LD_PRELOAD"):
            words.append(f"LD_PRELOAD={self.env['LD_PRELOAD']}")
        return words

    def command(self, args, out_path=None):
        cmd = [self.binary, f"--interfaces={self.interfaces()}", f"--sizes={args.sizes}",
               f"--expect_malloc={self.expect}"]
        if out_path:
            cmd += [f"--benchmark_min_time={args.min_time:g}", f"--benchmark_out={out_path}",
                    "--benchmark_out_format=json"]
        if args.filter:
            cmd.append(f"--benchmark_filter={args.filter}")
        return cmd

    def reproduce(self, args):
        return shlex.join(self.setting() + self.command(args))


def which_malloc(binary, env):
    done = subprocess.run([binary, "--which_malloc"], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return None, (done.stderr.strip() or f"exit status {done.returncode}")
    words = done.stdout.split()
    return (words[0], " ".join(words[1:])) if words else (None, "no output")


def slabkit_processes(binary, library, designs, suffix):
    """The cache+kmalloc and malloc processes of one build's designs (the first cache+kmalloc
    process measures glibc's malloc too: the "glibc" column, or for the baseline "glibc @base",
    the before/after table's control), and {label: why it is missing} for malloc libraries that
    are not there."""
    procs, missing = [], {}
    for i, design in enumerate(designs):
        env = base_env()
        env["SLABKIT_ALLOCATOR"] = design
        columns = {"cache": f"{design} cache{suffix}", "kmalloc": f"{design} kmalloc{suffix}"}
        if i == 0:
            columns["malloc"] = f"glibc{suffix}"  # next to the first design's figures
        procs.append(Process(f"{design} cache+kmalloc{suffix}", binary, "glibc", columns, env,
                             design, slabkit=True, pair=("cache", design)))
    for design in designs:
        label = f"{design} malloc{suffix}"
        if not os.path.exists(library):
            missing[label] = f"{library} not found (build the slabkit_malloc target)"
            continue
        env = base_env()
        env["LD_PRELOAD"] = library
        env["SLABKIT_ALLOCATOR"] = design
        procs.append(Process(label, binary, "slabkit", {"malloc": label}, env, design,
                             slabkit=True, pair=("malloc", design)))
    return procs, missing


def plan_processes(args):
    """[Process] in the order of a round, {label: why it is missing} and the labels of slabkit
    processes that failed their check (errors)."""
    procs, missing = slabkit_processes(args.binary, args.library, args.designs, "")
    if not args.designs:
        procs.insert(0, Process("glibc", args.binary, "glibc", {"malloc": "glibc"}, base_env()))
    if args.base_binary:
        base, base_missing = slabkit_processes(args.base_binary, args.base_library,
                                               args.base_designs, BASE)
        missing.update(base_missing)
        # Each baseline process goes right after the current build's process of its pair.
        for p in base:
            at = max((i for i, q in enumerate(procs) if q.pair == p.pair), default=None)
            if at is None:  # a design only the baseline has: after the last slabkit process
                at = max((i for i, q in enumerate(procs) if q.slabkit), default=-1)
            procs.insert(at + 1, p)
    broken = []
    checked = []
    for p in procs:
        if p.env.get("LD_PRELOAD"):
            name, source = which_malloc(p.binary, p.env)
            if name != "slabkit":
                # The library is there but does not work: an error, unlike a missing peer.
                missing[p.label] = (f"{shlex.join(p.setting())} did not take: malloc is "
                                    f"{name or 'unknown'} ({source}); reproduce: "
                                    f"{shlex.join(p.setting() + [p.binary, '--which_malloc'])}")
                broken.append(p.label)
                continue
        checked.append(p)
    procs = checked
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
        procs.append(Process(peer, args.binary, peer, {"malloc": peer}, env))
    return procs, missing, broken


def round_order(procs, rnd):
    """The processes of round rnd: on odd rounds, the two processes of each now/base pair swap,
    so that neither build always runs first."""
    order = list(procs)
    if rnd % 2:
        for i in range(len(order) - 1):
            a, b = order[i], order[i + 1]
            if a.pair is not None and a.pair == b.pair:
                order[i], order[i + 1] = b, a
    return order


def run_process(args, proc, out_path):
    cmd = proc.command(args, out_path)
    log(f"[{proc.label}] $ " + shlex.join(proc.setting() + cmd))
    try:
        # Google Benchmark's console output (stdout) and context lines (stderr) are kept out of
        # the way unless --verbose; stderr is shown when the process fails.
        done = subprocess.run(cmd, env=proc.env, text=True, stderr=subprocess.PIPE,
                              stdout=sys.stderr if args.verbose else subprocess.DEVNULL)
    except OSError as err:
        sys.exit(f"slab_ratios: cannot run {proc.binary}: {err} (build the slab_bench target)")
    if args.verbose or done.returncode != 0:
        sys.stderr.write(done.stderr)
    if done.returncode == EXPECT_MISMATCH:
        last = done.stderr.strip().splitlines()
        return None, last[-1] if last else "its malloc was not the expected one"
    if done.returncode != 0:
        return None, f"the process exited with status {done.returncode}"
    with open(out_path, encoding="utf-8") as f:
        text = f.read()
    if not text.strip():
        # --filter matched none of this process's benchmarks (its malloc was checked anyway).
        return {"context": {"malloc": proc.expect}, "benchmarks": []}, None
    data = json.loads(text)
    context = data.get("context", {})
    got = context.get("malloc")
    if got != proc.expect:
        return None, f"it reported malloc {got!r}, not {proc.expect!r}"
    # A slab_bench older than the design in the context (a baseline) does not report it.
    got = context.get("slabkit_allocator")
    if proc.design and got is not None and got != proc.design:
        return None, f"it reported design {got!r}, not {proc.design!r}"
    return data, None


def collect(runs):
    """{(workload, size): {column: {round: value}}} (ns per object, or Mobj/s for remote) and
    the benchmarks that reported an error."""
    results, errors = {}, []
    for proc, rnd, data in runs:
        for b in data.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration":
                continue
            m = NAME.match(b["name"])
            if not m:
                continue
            if b.get("error_occurred"):
                errors.append(f"{proc.label}: {b['name']}: {b.get('error_message', 'error')}")
                continue
            column = proc.columns.get(m["interface"])
            if column is None:
                continue
            rate = b["items_per_second"]
            value = rate / 1e6 if m["workload"] == REMOTE else 1e9 / rate
            key = (m["workload"], int(m["size"]))
            results.setdefault(key, {}).setdefault(column, {})[rnd] = value
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


def figure(values, lower_is_better=True):
    """The figure a column shows of its rounds: their median, or (--stat best) the best one."""
    if not values:
        return None
    if STAT == "best":
        return (min if lower_is_better else max)(values)
    return statistics.median(values)


def medians(row, columns, lower_is_better=True):
    return {c: figure(list(row.get(c, {}).values()), lower_is_better) for c in columns}


def best_peer(med, lower_is_better):
    got = [(med[p], p) for p in PEERS if med.get(p) is not None]
    if not got:
        return None, None
    value, name = (min if lower_is_better else max)(got)
    return name, value


def size_label(size):
    return f"{size} B"


def spread(values):
    """(max - min) / median of a column's rounds, or None with fewer than two."""
    if len(values) < 2:
        return None
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else None


def table_columns(args):
    """The value columns, in order: per design of the current build its cache, kmalloc and
    malloc, then the baseline's of that design; the baseline's other designs; the peers."""
    columns = []
    for design in args.designs:
        columns += [f"{design} {i}" for i in INTERFACES]
        if design in args.base_designs:
            columns += [f"{design} {i}{BASE}" for i in INTERFACES]
    for design in args.base_designs:
        if design not in args.designs:
            columns += [f"{design} {i}{BASE}" for i in INTERFACES]
    return columns + list(PEERS)


def print_tables(args, results, missing, sizes):
    columns = table_columns(args)
    head = " | ".join(columns)
    align = " | ".join("---:" for _ in columns)
    # The ratio columns: each design's kmem_cache, then each design's malloc replacement.
    ratio_of = ([f"{d} cache" for d in args.designs] + [f"{d} malloc" for d in args.designs])
    verdicts = {(c, w): [] for c in ratio_of for w in ("pair", REMOTE)}

    def ratio_cells(med, peer_v, workload, size, peer):
        cells = []
        for c in ratio_of:
            mine = med[c]
            ratio = mine / peer_v if mine is not None and peer_v else None
            if workload in ("pair", REMOTE):
                verdicts[(c, workload)].append((size, mine, peer, peer_v, ratio))
            cells.append(fmt_ratio(ratio))
        return "".join(f" | {cell}" for cell in cells)

    def ratio_head(which):
        return "".join(f" | {c} / {which}" for c in ratio_of)

    ratio_align = "".join(" | ---:" for _ in ratio_of)
    if any((workload, size) in results for workload, _ in TIME_WORKLOADS for size in sizes):
        print("Time per object, ns (allocate it, write its first byte, free it); lower is "
              "better.")
        print()
        print(f"| workload | size | {head} | fastest peer{ratio_head('fastest peer')} |")
        print(f"| --- | ---: | {align} | ---{ratio_align} |")
        for workload, label in TIME_WORKLOADS:
            for size in sizes:
                row = results.get((workload, size))
                if not row:
                    continue
                med = medians(row, columns)
                peer, peer_v = best_peer(med, lower_is_better=True)
                cells = " | ".join(fmt(med[c]) for c in columns)
                print(f"| {label} | {size_label(size)} | {cells} | {peer or '-'}"
                      f"{ratio_cells(med, peer_v, workload, size, peer)} |")
        print()

    if any((REMOTE, size) in results for size in sizes):
        print("Producer/consumer remote frees, million objects per second (one thread allocates "
              "and passes, the other frees); higher is better.")
        print()
        print(f"| workload | size | {head} | best peer{ratio_head('best peer')} |")
        print(f"| --- | ---: | {align} | ---{ratio_align} |")
        for size in sizes:
            row = results.get((REMOTE, size))
            if not row:
                continue
            med = medians(row, columns, lower_is_better=False)
            peer, peer_v = best_peer(med, lower_is_better=False)
            cells = " | ".join(fmt(med[c]) for c in columns)
            print(f"| remote | {size_label(size)} | {cells} | {peer or '-'}"
                  f"{ratio_cells(med, peer_v, REMOTE, size, peer)} |")
        print()

    print_target("SLQB kmem_cache pair <= 0.8x fastest peer's malloc/free pair",
                 verdicts.get(("slqb cache", "pair"), []), "ns", lambda r: r <= 0.8)
    print_target("SLQB remote-free throughput >= best peer's",
                 verdicts.get(("slqb cache", REMOTE), []), "Mobj/s", lambda r: r >= 1.0)
    for design in args.designs:
        c, up = f"{design} malloc", design.upper()
        print_target(f"{up} malloc pair <= fastest peer's malloc/free pair",
                     verdicts[(c, "pair")], "ns", lambda r: r <= 1.0)
        print_target(f"{up} malloc remote-free throughput >= best peer's",
                     verdicts[(c, REMOTE)], "Mobj/s", lambda r: r >= 1.0)
    if "slqb" in args.designs:
        for design in args.designs:
            if design != "slqb":
                print_against_slqb(results, sizes, design)
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


def print_against_slqb(results, sizes, design):
    """Informational lines (no target): a design's kmem_cache against SLQB's, pair and remote."""
    up = design.upper()
    mine, slqb = f"{design} cache", "slqb cache"
    for workload, title, unit, lower in (
            ("pair", f"{up} kmem_cache pair time vs SLQB's (above 1 = {up} slower)", "ns",
             True),
            (REMOTE, f"{up} remote-free throughput vs SLQB's (kmem_cache; below 1 = {up} "
                     "slower)", "Mobj/s", False)):
        parts = []
        for size in sizes:
            row = results.get((workload, size))
            if not row:
                continue
            med = medians(row, (mine, slqb), lower_is_better=lower)
            if med[mine] is not None and med[slqb]:
                parts.append(f"{fmt_ratio(med[mine] / med[slqb])} at {size_label(size)} "
                             f"({fmt(med[mine])} vs {fmt(med[slqb])} {unit})")
        print(f"Info (no target): {title}: " + ("; ".join(parts) if parts else "not measured"))


def print_before_after(args, results, sizes):
    """now/base per design present in both builds and interface, as a ratio of time per object
    (remote: base throughput / now throughput), with the range of the per-round ratios."""
    both = [d for d in args.designs if d in args.base_designs]
    pairs = [(f"{d} {i}", f"{d} {i}{BASE}") for d in both for i in INTERFACES]
    # glibc's malloc, measured in both builds' first process: the same code, so its ratio is
    # 1 but for noise.
    control = ("glibc", f"glibc{BASE}")
    if pairs and args.designs and args.base_designs:
        pairs.append(control)
    print(f"Before/after: this build against the baseline {args.baseline} (designs "
          f"{' '.join(args.base_designs)}), now / base as a ratio of time per object (remote: "
          "base throughput / now throughput, the same thing); below 1 = faster now."
          + (" In brackets: the lowest and highest ratio of the rounds, each round's process "
             "against the baseline's of the same round." if args.repetitions > 1 else "")
          + (" glibc now/base is a control: glibc's malloc measured in this build's first "
             "process and in the baseline's, the same code, so any distance from 1 is noise."
             if control in pairs else ""))
    print()
    if not pairs:
        print("No design in both builds: nothing to compare.")
        print()
        return
    print("| workload | size | "
          + " | ".join(f"{now} now/base" + (" (control)" if (now, base) == control else "")
                       for now, base in pairs) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in pairs) + " |")
    workloads = TIME_WORKLOADS + ((REMOTE, "remote"),)
    for workload, label in workloads:
        lower = workload != REMOTE
        for size in sizes:
            row = results.get((workload, size))
            if not row:
                continue
            cells = []
            for now, base in pairs:
                a, b = row.get(now, {}), row.get(base, {})
                fa, fb = figure(list(a.values()), lower), figure(list(b.values()), lower)
                if fa is None or not fb:
                    cells.append("-")
                    continue
                ratio = fa / fb if lower else fb / fa
                cell = fmt_ratio(ratio)
                per_round = [a[r] / b[r] if lower else b[r] / a[r] for r in a if r in b and
                             a[r] and b[r]]
                if len(per_round) > 1:
                    cell += f" ({min(per_round):.2f}-{max(per_round):.2f})"
                cells.append(cell)
            print(f"| {label} | {size_label(size)} | " + " | ".join(cells) + " |")
    print()
    if args.repetitions < 2:
        print("One round: no spread to judge the noise by. A difference under 10-20% in one "
              "round is within this machine's noise; run with --repetitions 5 or more (and "
              "--stat best for the single-thread rows) before reading a change into it.")
        return
    print("Spread between rounds of those columns, (max - min) / median, the largest over the "
          "rows (and where): a now/base ratio that differs from 1 by less than the spread of "
          "its two columns is noise, not a change.")
    print()
    print("| column | rounds | single-thread | remote |")
    print("| --- | ---: | ---: | ---: |")
    for column in [c for pair in pairs for c in pair]:
        worst = {"single": None, REMOTE: None}
        rounds = 0
        for (workload, size), row in results.items():
            values = list(row.get(column, {}).values())
            rounds = max(rounds, len(values))
            s = spread(values)
            kind = REMOTE if workload == REMOTE else "single"
            if s is not None and (worst[kind] is None or s > worst[kind][0]):
                worst[kind] = (s, f"{workload} {size_label(size)}")
        cells = [f"{w[0]:.0%} ({w[1]})" if w else "-" for w in (worst["single"], worst[REMOTE])]
        print(f"| {column} | {rounds} | {cells[0]} | {cells[1]} |")


def print_notes(args, context, loads, spreads, command):
    print()
    print(f"Conditions: {context.get('num_cpus', '?')} CPUs at {context.get('mhz_per_cpu', '?')} "
          f"MHz; {args.repetitions} round(s) of >= {args.min_time:g} s per benchmark, "
          f"{'best round' if STAT == 'best' else 'medians'}; "
          f"load average {loads[0]:.2f} before, {loads[1]:.2f} after. A load average near or "
          "above the number of CPUs means other work competed with the benchmark: its figures "
          "are noisy then, read them as rough.")
    for kind, (value, where) in sorted(spreads.items()):
        print(f"Largest spread between rounds, {kind} workloads: {value:.0%} of the median "
              f"({where}).")
    if context.get("library_build_type") == "debug":
        print("Google Benchmark calls its library a debug build (Debian's package); that does "
              "not touch the timed loops, whose per-iteration code is inline from the header.")
    designs = " ".join(args.designs) or "none"
    print(f"Columns (designs: {designs}): <design> cache = slabkit's kmem_cache API "
          "(slabkit_cache_create of the size, slabkit_cache_alloc/free) and <design> kmalloc = "
          "slabkit_kmalloc/kfree, both in a process of their own per design with "
          "SLABKIT_ALLOCATOR=<design> (the first also measures glibc); <design> malloc = "
          f"malloc/free of slabkit's malloc replacement ({args.library}, LD_PRELOADed with "
          "SLABKIT_ALLOCATOR=<design>, in its own process); the peers are "
          "malloc/free of glibc (no preload) and of jemalloc, tcmalloc and mimalloc, each "
          "LD_PRELOADed from Debian's package into its own process. The ratio columns divide "
          "each design's cache figure, and each design's malloc figure, by the best peer's "
          "(time: below 1 = slabkit faster; throughput: above 1 = slabkit faster).")
    if args.base_binary:
        print(f"@base columns: the same processes run from the baseline build {args.baseline} "
              f"({args.base_binary}, {args.base_library}; designs "
              f"{' '.join(args.base_designs)}), each next to this build's process of the same "
              "design and kind in every round, which of the two first alternating by round.")
    print(f"pair: one object at a time. batch: {BATCH} objects allocated, then freed newest "
          "first (LIFO), oldest first (FIFO) or in a fixed random order; time per object. "
          "Single-thread workloads are timed in thread CPU time. remote: wall-clock throughput "
          "of 2 threads, every object freed by the thread that did not allocate it, passed "
          "through a 1024-slot lock-free ring in batches of 16.")
    print(f"Command: `{command}`")


def main():
    args = parse_args()
    global STAT
    STAT = args.stat
    command = "/usr/bin/python3 " + shlex.join(["bench/slab_ratios.py"] + sys.argv[1:])
    sizes = [int(s) for s in args.sizes.split(",")]
    loads = [os.getloadavg()[0]]
    processes, missing, broken = plan_processes(args)
    for label, why in missing.items():
        log(f"slab_ratios: {label} is missing: {why}")
    runs, saved = [], []
    with tempfile.TemporaryDirectory(prefix="slab_ratios.") as tmp:
        for rnd in range(args.repetitions):
            log(f"slab_ratios: round {rnd + 1} of {args.repetitions}")
            for proc in round_order(processes, rnd):
                if proc.label in missing:
                    continue
                out = os.path.join(tmp, f"{proc.label.replace(' ', '-')}.{rnd}.json")
                data, why = run_process(args, proc, out)
                if data is None:
                    if proc.slabkit:
                        # slabkit's own processes failing is an error, not a missing peer.
                        why += "; reproduce: " + proc.reproduce(args)
                        broken.append(proc.label)
                    missing[proc.label] = why
                    log(f"slab_ratios: {proc.label} is missing: {why}")
                    continue
                runs.append((proc, rnd, data))
                context = data["context"]
                saved.append({"process": proc.label, "round": rnd, "binary": proc.binary,
                              "design": proc.design, "preload": proc.env.get("LD_PRELOAD"),
                              "malloc": context.get("malloc"),
                              "malloc_from": context.get("malloc_from"),
                              "slabkit_allocator": context.get("slabkit_allocator"),
                              "benchmark": data})
    loads.append(os.getloadavg()[0])
    # A process that failed in a later round is dropped whole, not half-measured.
    runs = [(proc, rnd, data) for proc, rnd, data in runs if proc.label not in missing]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"command": command, "designs": args.designs,
                       "baseline": args.baseline, "base_designs": args.base_designs,
                       "missing": missing, "runs": saved}, f, indent=1)
    results, errors = collect(runs)
    if not results:
        for label in broken:
            print(f"ERROR {label}: {missing[label]}")
        sys.exit("slab_ratios: the benchmark reported no results (check --filter)")
    # Largest spread between rounds, for the single-thread workloads and for remote apart (the
    # remote one is much larger on a busy machine).
    spreads = {}
    for (workload, size), row in results.items():
        kind = "remote" if workload == REMOTE else "single-thread"
        for column, values in row.items():
            s = spread(list(values.values()))
            if s is not None and s >= spreads.get(kind, (-1.0,))[0]:
                spreads[kind] = (s, f"{workload} {size_label(size)} {column}")
    designs = ", ".join(d.upper() for d in args.designs) or "no design"
    print(f"slabkit ({designs}: kmem_cache, kmalloc and the malloc replacement) against glibc, "
          "jemalloc, tcmalloc and mimalloc: sizes " + ", ".join(map(size_label, sizes))
          + (f"; baseline {args.baseline}" if args.baseline else ""))
    print()
    print_tables(args, results, missing, sizes)
    if args.base_binary:
        print()
        print_before_after(args, results, sizes)
    print_notes(args, runs[0][2].get("context", {}), loads, spreads, command)
    errors += [f"{label}: {missing[label]}" for label in broken]
    for e in errors:
        print(f"ERROR {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
