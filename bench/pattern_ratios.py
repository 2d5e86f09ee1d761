#!/usr/bin/python3
"""Allocation patterns of real programs, each in a process of its own (bench/pattern_bench),
under slabkit's malloc replacement (LD_PRELOAD=libslabkit-malloc.so, one run per design picked
with SLABKIT_ALLOCATOR: by default every design the library has) and under each of glibc malloc
(no preload), jemalloc, tcmalloc and mimalloc, snmalloc and mimalloc 3 when
../shared/peers/build.sh built them into build/peers, and any --peer NAME=LIB: prints the time and the peak RSS of every pattern
as markdown tables, with the ratios of each design to the fastest (leanest) peer and to glibc,
and a PASS/MISS line per target.

Usage: /usr/bin/python3 bench/pattern_ratios.py [--quick] [--rounds N] [--scale F] [--seed N]
                                                [--patterns LIST] [--designs LIST]
                                                [--peers LIST] [--peer NAME=LIB ...]
                                                [--no-strong-peers] [--binary PATH]
                                                [--library PATH] [--timeout S]
                                                [--json PATH] [--verbose]

The patterns (pattern_bench --list; its header comment has the counts): xthread-mixed (4
threads replacing blocks of 16 B..16 KiB in working sets of 4096, half of the frees done by
the next thread of a ring), bursts (16 threads, each allocating bursts of 500 blocks that the
next thread frees, 1 ms asleep between bursts), large-fixed (an 8 MiB block, every page
written, freed; again and again), large-2m (the same with 2 MiB), large-random (up to 4 live
blocks of 1..32 MiB), store (a key-value store of 1040 B values: filled, then random
updates), server (a new thread per batch of 64 requests from the main thread, which frees the
responses; 100 us pauses), small-mt (4 threads each filling, half replacing and freeing
arrays of 1000 blocks of 8..128 B) and pc-16, pc-64, pc-256, pc-1024 and pc-4096 (a producer
and a consumer pinned to two CPUs, every block of that size malloc'd on one and freed on the
other). Every block is written and read back before it is freed, and every run reports a
checksum of what it read that depends only on the pattern, --scale and --seed. The patterns
threads and threads-live (many live threads) are bench/thread_scaling.py's: they run here only
when --patterns names them.

How it runs: one process per pattern and allocator (pattern_bench --pattern P --scale F --seed
N --json, which prints one JSON line). The allocators run in rounds (--rounds): in each round
every pattern runs once under every allocator, the allocators of a pattern back to back, their
order rotating from round to round (and from pattern to pattern), so that a change in the
machine's load hits every allocator alike. The tables show each figure's median over the
rounds.

What is measured, in the process, around the pattern only (not the process's start): wall
time, CPU time (user+system of the whole process, getrusage), and the process's peak RSS
(VmHWM, which includes what the allocator touched at start: the RSS before the pattern is
shown too, and the RSS left after every block was freed). The time figure, the one the ratios
and targets use, is the wall time, except for bursts and server: their CPU time (the sleeps
are not the allocator's, and with 16 threads on a few CPUs bursts' wall time is mostly sleeping
and waiting);
the other of the two is in a table of its own, for reference.

Before the rounds each allocator's preload is checked (pattern_bench --which-malloc, in that
allocator's environment): the shared object that defines the malloc the process calls (dladdr
of dlsym(RTLD_DEFAULT, "malloc")) must be the preloaded library, and for slabkit the design it
reports (slabkit_allocator()) must be the one asked for; glibc's malloc must come from libc.so.
Every run's JSON carries the same fields and is checked again. A peer whose library is missing
or whose preload does not take is reported missing, never measured as glibc. These are errors
(exit status 1; the rest is still measured and shown, and each error gives a command that
reproduces it): slabkit's library missing or failing its check, a run that exits with a non-zero
status or is killed by a signal (a crash), a run still going after --timeout seconds (killed, as
hung), and a checksum that differs from glibc's for the same pattern (or, without glibc, from
the one most runs got). A MISS is information, not an error.

The designs (--designs) default to every design of --library: the slabkit_designs() that
pattern_bench --which-malloc reports with the library preloaded (slqb,slub if it cannot).

The tables go to stdout; progress to stderr.
"""

import argparse
import collections
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

from peers import PEERS, add_peer_option, extra_peers, locate_peers, log, ratio, shown

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join(REPO, "build", "release", "bench", "pattern_bench")
DEFAULT_LIBRARY = os.path.join(REPO, "build", "release", "libslabkit-malloc.so")
DEFAULT_DESIGNS = ["slqb", "slub"]  # when the library cannot be asked for its designs
QUICK_SCALE = 0.25

# Peers: the library each is preloaded from (None: glibc, no preload), and its Debian package.
# The time figure of a pattern, when it is not the wall time.
FIGURE = {"bursts": "cpu_s", "server": "cpu_s"}
TIME_BOUND = 1.0  # each design's time <= the fastest peer's
RSS_BOUND_GLIBC = 1.0  # each design's peak RSS <= glibc's
RSS_BOUND_LEANEST = 1.05  # each design's peak RSS <= 1.05x the leanest peer's
# Patterns of pattern_bench that bench/thread_scaling.py runs, at the thread counts they are
# about: not run here unless --patterns names them.
ELSEWHERE = ("threads", "threads-live")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"1 round at --scale {QUICK_SCALE:g}: about 5 s on 2 CPUs (default: "
                         "3 rounds at scale 1, about 45 s)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds; each runs every pattern once under every allocator "
                         "(default 3; 1 with --quick)")
    ap.add_argument("--scale", type=float, default=None,
                    help=f"passed to pattern_bench: multiplies its operation counts (default 1; "
                         f"{QUICK_SCALE:g} with --quick)")
    ap.add_argument("--seed", type=int, default=2026,
                    help="passed to pattern_bench (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=None,
                    help="passed to pattern_bench: the threads of xthread-mixed and bursts "
                         "(default: theirs, 4 and 16)")
    ap.add_argument("--patterns", default=None,
                    help="patterns to run, comma-separated (default: every pattern of --binary, "
                         f"as its --list prints them, but {' and '.join(ELSEWHERE)}: "
                         "bench/thread_scaling.py runs those)")
    ap.add_argument("--designs", default=None,
                    help="slabkit designs to preload, each run with SLABKIT_ALLOCATOR=<design>; "
                         "'' for none (default: every design of --library, as its "
                         "slabkit_designs() lists them)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="the peers, comma-separated (default: %(default)s)")
    add_peer_option(ap)
    ap.add_argument("--binary", default=DEFAULT_BINARY,
                    help="the pattern_bench executable (default: %(default)s)")
    ap.add_argument("--baseline", default=None, metavar="LIBRARY",
                    help="another build of libslabkit-malloc.so (an earlier commit's) to run "
                         "beside --library: a column '<design>-before' per design, in the same "
                         "rounds, for before/after comparisons (no target lines)")
    ap.add_argument("--library", default=DEFAULT_LIBRARY,
                    help="slabkit's malloc replacement (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds after which a run is killed and reported as hung "
                         "(default: %(default)s)")
    ap.add_argument("--json", default=None, help="save every run's figures here")
    ap.add_argument("--verbose", action="store_true", help="the command of every run on stderr")
    args = ap.parse_args()
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.scale is None:
        args.scale = QUICK_SCALE if args.quick else 1.0
    if args.rounds < 1 or args.scale <= 0 or args.timeout <= 0:
        ap.error("--rounds must be at least 1, --scale and --timeout positive")
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be at least 1")
    args.binary = os.path.abspath(args.binary)
    args.library = os.path.abspath(args.library)
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"pattern_ratios: {args.binary} is not there (build the pattern_bench target: "
                 "cmake --build --preset release --target pattern_bench)")
    known = list_patterns(args.binary)
    if args.patterns is None:
        args.patterns = [p for p in known if p not in ELSEWHERE]
    else:
        args.patterns = [p for p in args.patterns.split(",") if p]
        unknown = [p for p in args.patterns if p not in known]
        if unknown:
            ap.error(f"unknown pattern {', '.join(unknown)} (known: {', '.join(known)})")
        if not args.patterns:
            ap.error("--patterns names no pattern")
    args.peers = [p for p in args.peers.split(",") if p]
    for p in args.peers:
        if p not in PEERS:
            ap.error(f"unknown peer {p!r} (known: {', '.join(PEERS)})")
    # snmalloc and mimalloc 3 from build/peers, and each --peer NAME=LIB, after Debian's.
    args.extra_peers = dict(extra_peers(args))
    args.peers += [p for p in args.extra_peers if p not in args.peers]
    if args.designs is None:
        args.designs = library_designs(args.binary, args.library)
    else:
        args.designs = [d for d in args.designs.split(",") if d]
        if len(set(args.designs)) != len(args.designs):
            ap.error("--designs names a design twice")
    if not args.peers and not args.designs:
        ap.error("nothing to measure")
    return args



def base_env():
    env = dict(os.environ)
    # Each process gets exactly the preload and the design it is meant to measure.
    env.pop("LD_PRELOAD", None)
    env.pop("SLABKIT_ALLOCATOR", None)
    env["LC_ALL"] = "C"
    return env


def list_patterns(binary):
    done = subprocess.run([binary, "--list"], env=base_env(), capture_output=True, text=True,
                          timeout=60, check=False)
    names = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not names:
        sys.exit(f"pattern_ratios: {binary} --list failed: {done.stderr.strip()}")
    return names


def which_malloc(binary, env):
    """pattern_bench --which-malloc's JSON in this environment, or (None, why)."""
    try:
        done = subprocess.run([binary, "--which-malloc"], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, str(err)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        return None, (exit_words(done.returncode)
                      + (": " + " | ".join(tail) if tail else ""))
    try:
        return json.loads(done.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, f"no JSON from --which-malloc: {done.stdout.strip()[:200]!r}"


def library_designs(binary, library):
    """The designs slabkit's malloc replacement has; slqb,slub when it cannot say (then a
    design it lacks fails its preload check, an error)."""
    if not os.path.exists(library):
        return list(DEFAULT_DESIGNS)
    env = base_env()
    env["LD_PRELOAD"] = library
    got, why = which_malloc(binary, env)
    designs = (got or {}).get("slabkit_designs", "").split()
    if not designs:
        log(f"pattern_ratios: {library} does not list its designs "
            f"({why or 'no slabkit_designs'}): measuring {','.join(DEFAULT_DESIGNS)}")
        return list(DEFAULT_DESIGNS)
    return designs



def exit_words(code):
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


class Allocator:
    def __init__(self, name, preload, env, design=None):
        self.name = name          # column: slqb, slub, glibc, jemalloc, ...
        self.preload = preload    # library path, or None for glibc
        self.env = env
        self.design = design      # slabkit design, or None for a peer
        self.runs = {}            # pattern -> [run JSON (with "round")]
        self.failed = {}          # pattern -> why it stopped being measured

    def setting(self):
        """The environment this allocator adds, as shell words."""
        words = []
        if self.design:
            words.append(f"SLABKIT_ALLOCATOR={self.design}")
        if self.preload:
            words.append(f"LD_PRELOAD={self.preload}")
        return words

    def check(self, got):
        """None if a --which-malloc or --json output shows the malloc it should, else why
        not."""
        source = got.get("malloc_from", "?")
        if self.preload:
            if os.path.realpath(source) != os.path.realpath(self.preload):
                return f"LD_PRELOAD={self.preload} did not take: malloc comes from {source}"
        elif "/libc.so" not in source:
            return f"malloc comes from {source}, not glibc's libc.so"
        if self.design and got.get("slabkit_design") != self.design:
            return (f"SLABKIT_ALLOCATOR={self.design} did not take: the design is "
                    f"{got.get('slabkit_design')!r} (the library's designs: "
                    f"{got.get('slabkit_designs')!r})")
        return None


def plan(args):
    """The allocators to measure, {name: why it is missing} for peers that cannot be, and the
    errors (slabkit's preload failing)."""
    allocs, missing, errors = [], {}, []
    builds = [(d, args.library, d) for d in args.designs]
    if args.baseline:
        builds += [(f"{d}-before", args.baseline, d) for d in args.designs]
    for name, library, design in builds:
        env = base_env()
        env["LD_PRELOAD"] = library
        env["SLABKIT_ALLOCATOR"] = design
        admit_slabkit(Allocator(name, library, env, design), args.binary, allocs, missing,
                      errors)
    admit_peers(args.peers, args.binary, Allocator, allocs, missing, args.extra_peers)
    return allocs, missing, errors


def preload_problem(alloc, binary):
    """Why alloc's preload does not take (its library missing, or the malloc the process calls
    not the one it should be), or None."""
    if alloc.preload and not os.path.exists(alloc.preload):
        return f"{alloc.preload} is not there (build the slabkit_malloc target)"
    got, why = which_malloc(binary, alloc.env)
    return alloc.check(got) if got is not None else why


def admit_slabkit(alloc, binary, allocs, missing, errors):
    """Adds a slabkit allocator to allocs if its preload takes; else an error that says how to
    reproduce it."""
    why = preload_problem(alloc, binary)
    if why:
        missing[alloc.name] = why
        errors.append(f"{alloc.name}: {why}; reproduce: "
                      f"{shlex.join(alloc.setting() + [binary, '--which-malloc'])}")
    else:
        allocs.append(alloc)


def admit_peers(names, binary, make, allocs, missing, extra=None):
    """Adds each installed peer whose preload takes (make(name, library, env) builds it);
    the others go to missing with the reason. extra: {name: library} of the peers that are not
    Debian's."""
    found, not_installed = locate_peers(names, extra)
    missing.update(not_installed)
    for peer, path in found:
        env = base_env()
        if path:
            env["LD_PRELOAD"] = path
        alloc = make(peer, path, env)
        why = preload_problem(alloc, binary)
        if why:
            missing[peer] = why
        else:
            allocs.append(alloc)


def command(args, pattern):
    cmd = [args.binary, "--pattern", pattern, "--scale", f"{args.scale:g}", "--seed",
           str(args.seed), "--json"]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    return cmd


def reproduce(args, alloc, pattern):
    cmd = [shown(args.binary)] + command(args, pattern)[1:]
    return f"cd {REPO} && " + shlex.join(alloc.setting() + cmd)


def run_one(args, alloc, pattern):
    """(run JSON, None) or (None, why it failed)."""
    return run_process(args, alloc, command(args, pattern), pattern)


def run_process(args, alloc, cmd, pattern):
    """Runs pattern_bench command cmd under alloc: (its JSON line, None), or (None, why it
    failed: a timeout, a crash, no JSON, another malloc than alloc's, another pattern)."""
    if args.verbose:
        log(f"  $ {shlex.join(alloc.setting() + cmd)}")
    try:
        done = subprocess.run(cmd, env=alloc.env, capture_output=True, text=True,
                              timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, f"still running after {args.timeout:g} s: hung? (killed)"
    except OSError as err:
        return None, f"cannot run {args.binary}: {err}"
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        return None, exit_words(done.returncode) + (": " + " | ".join(tail) if tail else "")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    try:
        got = json.loads(lines[-1])
    except (ValueError, IndexError):
        return None, f"no JSON line in its output: {done.stdout.strip()[:200]!r}"
    why = alloc.check(got)
    if why:
        return None, why
    if got.get("pattern") != pattern:
        return None, f"it ran pattern {got.get('pattern')!r}, not {pattern!r}"
    return got, None


def check_checksums(args, allocs, errors):
    """A run whose checksum differs from glibc's (else from the most common one) for the same
    pattern is an error, and its allocator's figures for that pattern are dropped."""
    for pattern in args.patterns:
        sums = {a.name: {r["checksum"] for r in a.runs.get(pattern, [])} for a in allocs}
        glibc = sums.get("glibc")
        if glibc and len(glibc) == 1:
            want, source = next(iter(glibc)), "glibc's"
        else:
            every = collections.Counter(r["checksum"] for a in allocs
                                        for r in a.runs.get(pattern, []))
            if not every:
                continue
            want, source = every.most_common(1)[0][0], "the most common"
        for a in allocs:
            bad = sorted(s for s in sums.get(a.name, ()) if s != want)
            if bad:
                a.failed[pattern] = f"checksum {bad[0]}, not {want} ({source})"
                a.runs.pop(pattern, None)
                errors.append(f"{a.name}: {pattern}: checksum {bad[0]} differs from {source} "
                              f"{want} (a block's contents changed?); reproduce: "
                              f"{reproduce(args, a, pattern)}")


def median(values):
    return statistics.median(values) if values else None


def spread(values):
    """(max - min) / median of the rounds, or None with fewer than two."""
    if len(values) < 2:
        return None
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else None


def fmt_time(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}" if v >= 0.01 else f"{v:.4f}"


def fmt_mib(v):
    return "-" if v is None else f"{v:.1f}"


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}x"



def figure_of(pattern):
    return FIGURE.get(pattern, "wall_s")


def other_of(pattern):
    return "wall_s" if figure_of(pattern) == "cpu_s" else "cpu_s"


LABEL = {"wall_s": "wall s", "cpu_s": "CPU s"}


def print_tables(args, allocs, missing):
    """Prints the tables and the target lines; returns the medians, for --json."""
    names = [a.name for a in allocs]
    designs = [a.name for a in allocs if a.design]
    peers = [a.name for a in allocs if not a.design]
    by_name = {a.name: a for a in allocs}
    columns = [a.name for a in allocs if a.design] + [p for p in args.peers]

    def med(name, pattern, field, scale=1.0):
        a = by_name.get(name)
        if a is None or pattern in a.failed:
            return None
        values = [r[field] * scale for r in a.runs.get(pattern, [])]
        return median(values)

    def cell(name, pattern, value, fmt):
        a = by_name.get(name)
        if a is not None and pattern in a.failed:
            return "err"
        return fmt(value)

    figures = {p: {n: {"wall_s": med(n, p, "wall_s"), "cpu_s": med(n, p, "cpu_s"),
                       "peak_rss_mib": med(n, p, "peak_rss_kib", 1 / 1024),
                       "start_rss_mib": med(n, p, "start_rss_kib", 1 / 1024),
                       "end_rss_mib": med(n, p, "end_rss_kib", 1 / 1024)} for n in names}
               for p in args.patterns}

    def best(pattern, field):
        got = [(figures[pattern][p][field], p) for p in peers
               if figures[pattern][p][field] is not None]
        return min(got) if got else (None, None)

    head = " | ".join(columns)
    align = " | ".join("---:" for _ in columns)
    verdicts = {d: {"time": [], "glibc": [], "leanest": []} for d in designs}

    print(f"Time per pattern, seconds (median of {args.rounds} round(s)): wall time, except "
          "bursts and server: CPU time (user+system; their threads sleep between bursts and "
          "batches); lower is better.")
    print()
    print(f"| pattern | figure | {head} | fastest peer"
          + "".join(f" | {d} / fastest peer" for d in designs) + " |")
    print(f"| --- | --- | {align} | ---" + " | ---:" * len(designs) + " |")
    for p in args.patterns:
        field = figure_of(p)
        fastest_v, fastest = best(p, field)
        cells = " | ".join(cell(n, p, figures[p].get(n, {}).get(field), fmt_time)
                           for n in columns)
        ratios = ""
        for d in designs:
            r = ratio(figures[p][d][field], fastest_v)
            ratios += f" | {fmt_ratio(r)}"
            verdicts[d]["time"].append((p, figures[p][d][field], fastest, fastest_v, r,
                                        LABEL[field]))
        print(f"| {p} | {LABEL[field]} | {cells} | {fastest or '-'}{ratios} |")
    print()
    print("The other time, for reference (not judged): CPU time (user+system), except bursts "
          "and server: wall time; seconds, medians.")
    print()
    print(f"| pattern | figure | {head} |")
    print(f"| --- | --- | {align} |")
    for p in args.patterns:
        field = other_of(p)
        cells = " | ".join(cell(n, p, figures[p].get(n, {}).get(field), fmt_time)
                           for n in columns)
        print(f"| {p} | {LABEL[field]} | {cells} |")
    print()

    print("Peak RSS of the process, MiB (VmHWM, medians; it includes the RSS before the "
          "pattern, below); lower is better.")
    print()
    print(f"| pattern | {head} | leanest peer"
          + "".join(f" | {d} / glibc" for d in designs)
          + "".join(f" | {d} / leanest peer" for d in designs) + " |")
    print(f"| --- | {align} | ---" + " | ---:" * (2 * len(designs)) + " |")
    for p in args.patterns:
        leanest_v, leanest = best(p, "peak_rss_mib")
        glibc_v = figures[p].get("glibc", {}).get("peak_rss_mib")
        cells = " | ".join(cell(n, p, figures[p].get(n, {}).get("peak_rss_mib"), fmt_mib)
                           for n in columns)
        to_glibc, to_leanest = "", ""
        for d in designs:
            mine = figures[p][d]["peak_rss_mib"]
            r = ratio(mine, glibc_v)
            to_glibc += f" | {fmt_ratio(r)}"
            verdicts[d]["glibc"].append((p, mine, "glibc" if glibc_v else None, glibc_v, r,
                                         "MiB"))
            r = ratio(mine, leanest_v)
            to_leanest += f" | {fmt_ratio(r)}"
            verdicts[d]["leanest"].append((p, mine, leanest, leanest_v, r, "MiB"))
        print(f"| {p} | {cells} | {leanest or '-'}{to_glibc}{to_leanest} |")
    print()

    print("RSS after the pattern, every block freed, MiB (medians): what the allocator kept.")
    print()
    print(f"| pattern | {head} |")
    print(f"| --- | {align} |")
    for p in args.patterns:
        cells = " | ".join(cell(n, p, figures[p].get(n, {}).get("end_rss_mib"), fmt_mib)
                           for n in columns)
        print(f"| {p} | {cells} |")
    print()
    starts = []
    for n in columns:
        values = [r["start_rss_kib"] / 1024 for a in allocs if a.name == n
                  for runs in a.runs.values() for r in runs]
        if values:
            starts.append(f"{n} {median(values):.1f}")
    if starts:
        print("RSS before the pattern (the process started, the allocator initialised), MiB, "
              "median over every run: " + ", ".join(starts) + ".")
        print()

    for d in designs:
        if d.endswith("-before"):
            continue
        up = d.upper()
        print_target(f"{up} time <= fastest peer's, every pattern", verdicts[d]["time"],
                     TIME_BOUND, fmt_time)
        print_target(f"{up} peak RSS <= glibc's, every pattern", verdicts[d]["glibc"],
                     RSS_BOUND_GLIBC, fmt_mib)
        print_target(f"{up} peak RSS <= {RSS_BOUND_LEANEST:.2f}x the leanest peer's, every "
                     "pattern", verdicts[d]["leanest"], RSS_BOUND_LEANEST, fmt_mib)
    if missing:
        print("Missing, so not in the tables (a missing peer: the targets are judged against "
              "the others): " + "; ".join(f"{p}: {why}" for p, why in missing.items()))
    return figures


def print_target(title, rows, bound, fmt):
    measured = [r for r in rows if r[4] is not None]
    if not measured:
        print(f"Target: {title}: NOT MEASURED (no slabkit or no peer figures in this run)")
        return
    verdict = "PASS" if all(r[4] <= bound for r in measured) else "MISS"
    parts = [f"{p}: {fmt(mine)} vs {fmt(theirs)} {unit} ({other}) = {fmt_ratio(r)} "
             f"{'ok' if r <= bound else 'miss'}"
             for p, mine, other, theirs, r, unit in measured]
    unmeasured = [r[0] for r in rows if r[4] is None]
    print(f"Target: {title}: {verdict} -- " + "; ".join(parts)
          + (f"; not measured: {', '.join(unmeasured)}" if unmeasured else ""))


def cpu_mhz():
    """The average current clock of the CPUs (/proc/cpuinfo), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            mhz = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
        return statistics.fmean(mhz) if mhz else None
    except (OSError, ValueError, IndexError):
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def thp_setting():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="utf-8") as f:
            words = f.read().split()
        return next((w.strip("[]") for w in words if w.startswith("[")), "?")
    except OSError:
        return "?"


def library_stamp(path):
    """(size, mtime) of a file, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime



def main():
    args = parse_args()
    os.chdir(REPO)
    cmdline = "/usr/bin/python3 " + shlex.join(["bench/pattern_ratios.py"] + sys.argv[1:])
    loads = [os.getloadavg()[0]]
    mhz = cpu_mhz()
    stamp = library_stamp(args.library)
    allocs, missing, errors = plan(args)
    for name, why in missing.items():
        log(f"pattern_ratios: {name} is missing: {why}")
    if not allocs:
        for e in errors:
            print(f"ERROR {e}")
        sys.exit("pattern_ratios: no allocator could be measured")
    started = time.monotonic()
    for rnd in range(args.rounds):
        log(f"pattern_ratios: round {rnd + 1} of {args.rounds}, scale {args.scale:g}")
        for i, pattern in enumerate(args.patterns):
            live = [a for a in allocs if pattern not in a.failed]
            if not live:
                continue
            shift = (rnd + i) % len(live)
            for a in live[shift:] + live[:shift]:
                got, why = run_one(args, a, pattern)
                if got is None:
                    a.failed[pattern] = why
                    a.runs.pop(pattern, None)
                    errors.append(f"{a.name}: {pattern}: {why}; reproduce: "
                                  f"{reproduce(args, a, pattern)}")
                    log(f"  {pattern} {a.name}: FAILED: {why}")
                    continue
                got["round"] = rnd
                a.runs.setdefault(pattern, []).append(got)
                log(f"  {pattern} {a.name}: {got['wall_s']:.3f} s wall, {got['cpu_s']:.3f} s "
                    f"CPU, peak {got['peak_rss_kib'] / 1024:.1f} MiB")
    elapsed = time.monotonic() - started
    loads.append(os.getloadavg()[0])
    check_checksums(args, allocs, errors)

    print(f"Allocation patterns (pattern_bench): slabkit ({', '.join(args.designs) or 'no design'}"
          f") against {', '.join(args.peers) or 'no peer'}; scale {args.scale:g}, seed "
          f"{args.seed}, {args.rounds} round(s), allocators interleaved"
          + (" (a quick run: read it as rough)" if args.quick else ""))
    print()
    figures = print_tables(args, allocs, missing)
    spreads = []
    for a in allocs:
        for pattern, runs in a.runs.items():
            s = spread([r[figure_of(pattern)] for r in runs])
            if s is not None:
                spreads.append((s, f"{pattern} {a.name}"))
    print()
    if spreads:
        s, where = max(spreads)
        print(f"Largest spread of a time figure between rounds: {s:.0%} of its median "
              f"({where}).")
    print(f"Conditions: {os.cpu_count()} CPUs ({cpu_model()}"
          + (f", {mhz:.0f} MHz" if mhz else "") + f"); transparent huge pages: {thp_setting()}; "
          f"{args.rounds} round(s), the order of the allocators rotating each round and "
          f"pattern; load average {loads[0]:.2f} before, {loads[1]:.2f} after; {elapsed:.0f} s "
          "in all. A load average near or above the number of CPUs means other work competed: "
          "read the times as rough.")
    print("Columns: <design> = "
          f"LD_PRELOAD={shown(args.library)} with SLABKIT_ALLOCATOR=<design>; the peers are "
          "glibc (no preload) and Debian's jemalloc, tcmalloc (minimal) and mimalloc, preloaded; "
          "each run's malloc checked by dladdr (malloc_from). Times are taken around the pattern "
          "only; peak RSS is the process's VmHWM. Each ratio divides a design's median by the "
          "fastest (leanest) peer's median, or glibc's; the fastest peer is the least of several "
          "noisy figures, so a ratio near 1 is a tie. Every run's checksum of the bytes it read "
          "back is checked against glibc's.")
    if args.designs and stamp:
        print(f"slabkit's library: {shown(args.library)}, {stamp[0]} bytes, modified "
              f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(stamp[1]))}.")
        if library_stamp(args.library) != stamp:
            print("WARNING: the library was rebuilt while the benchmark ran: the slabkit "
                  "columns may mix two builds; run it again.")
    print(f"Command: `{cmdline}`")
    for e in errors:
        print(f"ERROR {e}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"command": cmdline, "scale": args.scale, "seed": args.seed,
                       "rounds": args.rounds, "threads": args.threads,
                       "patterns": args.patterns, "designs": args.designs,
                       "peers": args.peers, "binary": args.binary, "library": args.library,
                       "missing": missing, "errors": errors, "loadavg": loads,
                       "cpu_mhz": mhz, "figures": figures,
                       "allocators": [{"name": a.name, "preload": a.preload,
                                       "design": a.design, "failed": a.failed,
                                       "runs": a.runs} for a in allocs]}, f, indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
