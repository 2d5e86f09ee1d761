#!/usr/bin/python3
"""Many live threads on a few CPUs (the per-CPU slots issue): runs bench/pattern_bench's
`threads` pattern for several numbers of live threads and its `threads-live` pattern for few and
many threads, under slabkit's malloc replacement (LD_PRELOAD=libslabkit-malloc.so, one run per
design and slot mode: SLABKIT_ALLOCATOR=<design>, SLABKIT_SLOTS=<mode>) and under each of glibc
malloc (no preload), tcmalloc, mimalloc and jemalloc; prints the time per malloc/free pair and
the peak RSS as markdown tables, and a PASS/MISS line per slabkit variant for "memory with 256
threads within 1.2x of memory with 2 threads for the same live data".

Usage: /usr/bin/python3 bench/thread_scaling.py [--quick] [--rounds N] [--scale F]
                                                [--threads-list LIST] [--live-threads A,B]
                                                [--live-scale F] [--seed N] [--designs LIST]
                                                [--slot-modes LIST] [--peers LIST]
                                                [--binary PATH] [--library PATH] [--timeout S]
                                                [--json PATH] [--verbose]

The patterns (pattern_bench.cpp's header comment has the counts):
  threads       N live threads (--threads-list, default 2,200,1000,1500,3000), all started and
                held at a barrier, then each does rounds of: malloc 64 blocks of 32..511 B, check
                and free them (in allocation order); about 20 million mallocs in all at scale 1,
                split across the threads. The figure is ns/op: the wall time from the barrier's
                release to the last thread's end, divided by the mallocs of all threads (per op
                over all threads, not per thread); and the process's peak RSS.
  threads-live  2 and 256 threads (--live-threads) holding together the same live data (247,000
                blocks of 32..511 B, about 64 MiB at --live-scale 1), then 1 million random
                replacements; the figures are the RSS once every share is allocated (live RSS)
                and the peak RSS, and their ratio many/few threads (the target: <= 1.2x).

How it runs: one process per pattern, thread count and allocator (pattern_bench --pattern P
--threads N --scale F --seed S --json). The allocators run in rounds (--rounds): in each round
every thread count of both patterns runs once under every allocator, the allocators of a
thread count back to back, their order rotating from round to round and from one thread count
to the next, so that a change in the machine's load hits every allocator alike. The tables show
each figure's median over the rounds.

The slabkit variants: each design of --designs (default slqb) with each slot mode of
--slot-modes (default thread,cpu), a column "<design>/<mode>" run with SLABKIT_ALLOCATOR=<design>
and SLABKIT_SLOTS=<mode>; --slot-modes '' runs each design once without SLABKIT_SLOTS (column
"<design>"). A library that never mentions SLABKIT_SLOTS (the text is not in the file) ignores
it: the script says so, since its slot-mode columns then measure the same thing. The slot mode
a run got cannot be checked from outside (pattern_bench --which-malloc reports the design only).

Before the rounds each allocator's preload is checked (pattern_bench --which-malloc, in that
allocator's environment), as bench/pattern_ratios.py does: the shared object that defines the
malloc the process calls must be the preloaded library, and for slabkit the design it reports
must be the one asked for; glibc's malloc must come from libc.so. Every run's JSON is checked
again. A peer whose library is missing or whose preload does not take is reported missing,
never measured as glibc. These are errors (exit status 1; the rest is still measured and
shown, and each error gives a command that reproduces it): slabkit's library missing or failing
its check, a run that exits with a non-zero status or is killed by a signal (a crash), a run
still going after --timeout seconds (killed, as hung), and a checksum that differs from glibc's
for the same pattern and thread count (or, without glibc, from the one most runs got). A MISS
is information, not an error.

The tables go to stdout; progress to stderr.
"""

import argparse
import collections
import json
import os
import shlex
import sys
import time

from pattern_ratios import (DEFAULT_BINARY, DEFAULT_LIBRARY, Allocator, admit_peers,
                            admit_slabkit, cpu_mhz, cpu_model, fmt_mib, fmt_ratio,
                            library_stamp, list_patterns, median, run_process, spread,
                            thp_setting)
from peers import PEERS, log, ratio, shown

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERN = "threads"
LIVE_PATTERN = "threads-live"
DEFAULT_THREADS = "2,200,1000,1500,3000"
DEFAULT_LIVE_THREADS = "2,256"
DEFAULT_PEERS = "glibc,tcmalloc,mimalloc,jemalloc"
QUICK_SCALE = 0.25
MAX_THREADS = 16384  # pattern_bench's --threads range
LIVE_BOUND = 1.2  # memory with many threads <= 1.2x memory with few, the same live data


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"threads at --scale {QUICK_SCALE:g} (threads-live keeps --live-scale "
                         "1): about 10 s on 2 CPUs (default: scale 1, about 20 s)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds; each runs every thread count once under every allocator "
                         "(default: %(default)s)")
    ap.add_argument("--scale", type=float, default=None,
                    help="pattern_bench --scale of `threads`: 1 is about 20 million mallocs per "
                         f"run (default 1; {QUICK_SCALE:g} with --quick)")
    ap.add_argument("--live-scale", type=float, default=1.0,
                    help="pattern_bench --scale of `threads-live`: 1 is about 64 MiB of live "
                         "blocks, 1 million replacements (default: %(default)s, --quick too)")
    ap.add_argument("--threads-list", default=DEFAULT_THREADS,
                    help="live threads of `threads`, comma-separated (default: %(default)s)")
    ap.add_argument("--live-threads", default=DEFAULT_LIVE_THREADS,
                    help="the two thread counts of `threads-live`, few then many "
                         "(default: %(default)s)")
    ap.add_argument("--seed", type=int, default=2026,
                    help="passed to pattern_bench (default: %(default)s)")
    ap.add_argument("--designs", default="slqb",
                    help="slabkit designs to preload, each run with SLABKIT_ALLOCATOR=<design>; "
                         "'' for none (default: %(default)s)")
    ap.add_argument("--slot-modes", default="thread,cpu",
                    help="slot modes, each run with SLABKIT_SLOTS=<mode>; '' runs each design "
                         "once without SLABKIT_SLOTS (default: %(default)s)")
    ap.add_argument("--peers", default=DEFAULT_PEERS,
                    help="the peers, comma-separated (default: %(default)s)")
    ap.add_argument("--binary", default=DEFAULT_BINARY,
                    help="the pattern_bench executable (default: %(default)s)")
    ap.add_argument("--library", default=DEFAULT_LIBRARY,
                    help="slabkit's malloc replacement (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds after which a run is killed and reported as hung "
                         "(default: %(default)s)")
    ap.add_argument("--json", default=None, help="save every run's figures here")
    ap.add_argument("--verbose", action="store_true", help="the command of every run on stderr")
    args = ap.parse_args()
    if args.scale is None:
        args.scale = QUICK_SCALE if args.quick else 1.0
    if args.rounds < 1 or args.scale <= 0 or args.live_scale <= 0 or args.timeout <= 0:
        ap.error("--rounds must be at least 1, --scale, --live-scale and --timeout positive")

    def counts(option, text):
        try:
            got = [int(n) for n in text.split(",") if n.strip()]
        except ValueError:
            ap.error(f"{option} takes thread counts separated by commas, not {text!r}")
        bad = [n for n in got if not 1 <= n <= MAX_THREADS]
        if bad:
            ap.error(f"{option}: {bad[0]} threads is out of 1..{MAX_THREADS}")
        if len(set(got)) != len(got):
            ap.error(f"{option} names a thread count twice")
        return got

    args.threads_list = counts("--threads-list", args.threads_list)
    args.live_threads = counts("--live-threads", args.live_threads)
    if args.live_threads and len(args.live_threads) != 2:
        ap.error("--live-threads takes two thread counts (few, many) or '' for none")
    if not args.threads_list and not args.live_threads:
        ap.error("--threads-list and --live-threads are both empty: nothing to run")
    args.binary = os.path.abspath(args.binary)
    args.library = os.path.abspath(args.library)
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"thread_scaling: {args.binary} is not there (build the pattern_bench target: "
                 "cmake --build --preset release --target pattern_bench)")
    known = list_patterns(args.binary)
    lacking = [p for p in (PATTERN, LIVE_PATTERN) if p not in known]
    if lacking:
        sys.exit(f"thread_scaling: {args.binary} has no pattern {', '.join(lacking)} "
                 "(rebuild the pattern_bench target)")
    args.peers = [p for p in args.peers.split(",") if p]
    for p in args.peers:
        if p not in PEERS:
            ap.error(f"unknown peer {p!r} (known: {', '.join(PEERS)})")
    args.designs = [d for d in args.designs.split(",") if d]
    args.slot_modes = [m for m in args.slot_modes.split(",") if m]
    if len(set(args.designs)) != len(args.designs):
        ap.error("--designs names a design twice")
    if len(set(args.slot_modes)) != len(args.slot_modes):
        ap.error("--slot-modes names a mode twice")
    if not args.peers and not args.designs:
        ap.error("nothing to measure")
    return args


def base_env():
    env = dict(os.environ)
    # Each process gets exactly the preload, the design and the slot mode it is meant to measure.
    for name in ("LD_PRELOAD", "SLABKIT_ALLOCATOR", "SLABKIT_SLOTS"):
        env.pop(name, None)
    env["LC_ALL"] = "C"
    return env


class Variant(Allocator):
    """An allocator of pattern_ratios.py, with slabkit's slot mode (None: not set)."""

    def __init__(self, name, preload, env, design=None, slots=None):
        super().__init__(name, preload, env, design)
        self.slots = slots

    def setting(self):
        words = super().setting()
        if self.slots:
            words.insert(1, f"SLABKIT_SLOTS={self.slots}")
        return words


def knows_slots(library):
    """Whether the library's file mentions SLABKIT_SLOTS (else it cannot read it); None if it
    cannot be read."""
    try:
        with open(library, "rb") as f:
            return b"SLABKIT_SLOTS" in f.read()
    except OSError:
        return None


def plan(args):
    """The allocators to measure, {name: why it is missing} for peers that cannot be, and the
    errors (slabkit's preload failing)."""
    allocs, missing, errors = [], {}, []
    modes = args.slot_modes or [None]
    for design in args.designs:
        for mode in modes:
            env = base_env()
            env["LD_PRELOAD"] = args.library
            env["SLABKIT_ALLOCATOR"] = design
            if mode:
                env["SLABKIT_SLOTS"] = mode
            alloc = Variant(f"{design}/{mode}" if mode else design, args.library, env, design,
                            mode)
            admit_slabkit(alloc, args.binary, allocs, missing, errors)
    admit_peers(args.peers, args.binary, Variant, allocs, missing)
    return allocs, missing, errors


def key(pattern, threads):
    """A run's key in Allocator.runs and in the JSON: pattern@threads."""
    return f"{pattern}@{threads}"


def command(args, pattern, threads):
    scale = args.live_scale if pattern == LIVE_PATTERN else args.scale
    return [args.binary, "--pattern", pattern, "--threads", str(threads), "--scale", f"{scale:g}",
            "--seed", str(args.seed), "--json"]


def reproduce(args, alloc, pattern, threads):
    cmd = [shown(args.binary)] + command(args, pattern, threads)[1:]
    return f"cd {REPO} && " + shlex.join(alloc.setting() + cmd)


def run_one(args, alloc, pattern, threads):
    """(run JSON, None) or (None, why it failed)."""
    got, why = run_process(args, alloc, command(args, pattern, threads), pattern)
    if why:
        return None, why
    if got.get("threads") != threads:
        return None, (f"it ran pattern {got.get('pattern')!r} with {got.get('threads')} "
                      f"threads, not {pattern!r} with {threads}")
    if "ns_per_op" not in got:
        return None, "its JSON has no ns_per_op (an old pattern_bench? rebuild it)"
    return got, None


def jobs(args):
    """(pattern, threads) of every run of a round, in order."""
    return ([(PATTERN, n) for n in args.threads_list]
            + [(LIVE_PATTERN, n) for n in args.live_threads])


def check_checksums(args, allocs, errors):
    """A run whose checksum differs from glibc's (else from the most common one) for the same
    pattern and thread count is an error, and its allocator's figures for it are dropped."""
    for pattern, threads in jobs(args):
        k = key(pattern, threads)
        sums = {a.name: {r["checksum"] for r in a.runs.get(k, [])} for a in allocs}
        glibc = sums.get("glibc")
        if glibc and len(glibc) == 1:
            want, source = next(iter(glibc)), "glibc's"
        else:
            every = collections.Counter(r["checksum"] for a in allocs for r in a.runs.get(k, []))
            if not every:
                continue
            want, source = every.most_common(1)[0][0], "the most common"
        for a in allocs:
            bad = sorted(s for s in sums.get(a.name, ()) if s != want)
            if bad:
                a.failed[k] = f"checksum {bad[0]}, not {want} ({source})"
                a.runs.pop(k, None)
                errors.append(f"{a.name}: {pattern}, {threads} threads: checksum {bad[0]} "
                              f"differs from {source} {want} (a block's contents changed?); "
                              f"reproduce: {reproduce(args, a, pattern, threads)}")


def fmt_ns(v):
    if v is None:
        return "-"
    return f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def print_tables(args, allocs, missing):
    """Prints the tables and the target lines; returns the medians, for --json."""
    by_name = {a.name: a for a in allocs}
    variants = [a.name for a in allocs if a.design]
    peers = [a.name for a in allocs if not a.design]
    columns = peers + variants

    def med(name, k, field, scale=1.0):
        a = by_name.get(name)
        if a is None or k in a.failed:
            return None
        values = [r[field] * scale for r in a.runs.get(k, []) if r.get(field) is not None]
        return median(values)

    def cell(name, k, value, fmt):
        a = by_name.get(name)
        if a is not None and k in a.failed:
            return "err"
        return fmt(value)

    figures = {}
    for pattern, threads in jobs(args):
        k = key(pattern, threads)
        figures[k] = {n: {"ns_per_op": med(n, k, "ns_per_op"),
                          "timed_s": med(n, k, "timed_s"), "wall_s": med(n, k, "wall_s"),
                          "cpu_s": med(n, k, "cpu_s"),
                          "peak_rss_mib": med(n, k, "peak_rss_kib", 1 / 1024),
                          "live_rss_mib": med(n, k, "live_rss_kib", 1 / 1024),
                          "start_rss_mib": med(n, k, "start_rss_kib", 1 / 1024)}
                      for n in columns}

    if args.threads_list:
        print(f"Time per malloc/free pair, ns/op over all threads (the wall time from the "
              f"barrier's release to the last thread's end, divided by the mallocs of all "
              f"threads), and peak RSS of each slabkit variant vs glibc; medians of "
              f"{args.rounds} round(s); lower is better.")
        print()
        head = " | ".join(f"{n} ns/op" if i == 0 else n for i, n in enumerate(columns))
        rss_head = "".join(f" | {v} peak RSS vs glibc" for v in variants)
        print(f"| live threads | {head}{rss_head} |")
        print("| ---: |" + " ---: |" * (len(columns) + len(variants)))
        for n in args.threads_list:
            k = key(PATTERN, n)
            f = figures[k]
            cells = " | ".join(cell(c, k, f[c]["ns_per_op"], fmt_ns) for c in columns)
            glibc = f.get("glibc", {}).get("peak_rss_mib")
            rss = "".join(f" | {fmt_ratio(ratio(f[v]['peak_rss_mib'], glibc))}"
                          for v in variants)
            print(f"| {n} | {cells}{rss} |")
        print()
        print("Peak RSS of the process, MiB (VmHWM, medians; it includes the threads' stacks "
              "and what the allocator touched at start):")
        print()
        print(f"| live threads | {' | '.join(columns)} |")
        print("| ---: |" + " ---: |" * len(columns))
        for n in args.threads_list:
            k = key(PATTERN, n)
            cells = " | ".join(cell(c, k, figures[k][c]["peak_rss_mib"], fmt_mib)
                               for c in columns)
            print(f"| {n} | {cells} |")
        print()

    verdicts = {}
    if args.live_threads:
        few, many = args.live_threads
        kf, km = key(LIVE_PATTERN, few), key(LIVE_PATTERN, many)
        print(f"The same live data held by {few} and by {many} threads (threads-live, "
              f"--scale {args.live_scale:g}): RSS once every share is allocated (live) and "
              f"peak RSS, MiB, medians; the ratio {many}/{few}; the target for slabkit: "
              f"<= {LIVE_BOUND:g}x, both.")
        print()
        print(f"| allocator | live RSS @{few} | live RSS @{many} | live {many}/{few} "
              f"| peak RSS @{few} | peak RSS @{many} | peak {many}/{few} | verdict |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for c in columns:
            failed = kf in by_name[c].failed or km in by_name[c].failed
            lf, lm = figures[kf][c]["live_rss_mib"], figures[km][c]["live_rss_mib"]
            pf, pm = figures[kf][c]["peak_rss_mib"], figures[km][c]["peak_rss_mib"]
            live_r, peak_r = ratio(lm, lf), ratio(pm, pf)
            verdict = ""
            if by_name[c].design:
                if failed or live_r is None or peak_r is None:
                    verdict = "NOT MEASURED"
                else:
                    verdict = "PASS" if max(live_r, peak_r) <= LIVE_BOUND else "MISS"
                verdicts[c] = (verdict, lf, lm, live_r, pf, pm, peak_r)
            print(f"| {c} | {cell(c, kf, lf, fmt_mib)} | {cell(c, km, lm, fmt_mib)} | "
                  f"{fmt_ratio(live_r)} | {cell(c, kf, pf, fmt_mib)} | "
                  f"{cell(c, km, pm, fmt_mib)} | {fmt_ratio(peak_r)} | {verdict} |")
        print()
        for v, (verdict, lf, lm, live_r, pf, pm, peak_r) in verdicts.items():
            if verdict == "NOT MEASURED":
                print(f"Target: {v} memory with {many} threads <= {LIVE_BOUND:g}x memory with "
                      f"{few} threads, the same live data: NOT MEASURED (a run failed)")
                continue
            parts = [f"{what} RSS {fmt_mib(b)} vs {fmt_mib(a)} MiB = {fmt_ratio(r)} "
                     f"{'ok' if r <= LIVE_BOUND else 'miss'}"
                     for what, a, b, r in (("live", lf, lm, live_r), ("peak", pf, pm, peak_r))]
            print(f"Target: {v} memory with {many} threads <= {LIVE_BOUND:g}x memory with "
                  f"{few} threads, the same live data: {verdict} -- " + "; ".join(parts))
    if missing:
        print("Missing, so not in the tables: "
              + "; ".join(f"{p}: {why}" for p, why in missing.items()))
    return figures


def main():
    args = parse_args()
    os.chdir(REPO)
    cmdline = "/usr/bin/python3 " + shlex.join(["bench/thread_scaling.py"] + sys.argv[1:])
    loads = [os.getloadavg()[0]]
    mhz = cpu_mhz()
    stamp = library_stamp(args.library)
    slots_known = knows_slots(args.library) if args.designs and args.slot_modes else None
    if slots_known is False:
        log(f"thread_scaling: {shown(args.library)} never mentions SLABKIT_SLOTS: it ignores "
            "the variable, and its slot-mode columns measure the same thing")
    allocs, missing, errors = plan(args)
    for name, why in missing.items():
        log(f"thread_scaling: {name} is missing: {why}")
    if not allocs:
        for e in errors:
            print(f"ERROR {e}")
        sys.exit("thread_scaling: no allocator could be measured")
    started = time.monotonic()
    for rnd in range(args.rounds):
        log(f"thread_scaling: round {rnd + 1} of {args.rounds}, scale {args.scale:g} "
            f"(threads-live {args.live_scale:g})")
        for i, (pattern, threads) in enumerate(jobs(args)):
            k = key(pattern, threads)
            live = [a for a in allocs if k not in a.failed]
            if not live:
                continue
            shift = (rnd + i) % len(live)
            for a in live[shift:] + live[:shift]:
                got, why = run_one(args, a, pattern, threads)
                if got is None:
                    a.failed[k] = why
                    a.runs.pop(k, None)
                    errors.append(f"{a.name}: {pattern}, {threads} threads: {why}; reproduce: "
                                  f"{reproduce(args, a, pattern, threads)}")
                    log(f"  {pattern} {threads} {a.name}: FAILED: {why}")
                    continue
                got["round"] = rnd
                a.runs.setdefault(k, []).append(got)
                live_rss = got.get("live_rss_kib")
                log(f"  {pattern} {threads} {a.name}: {got['ns_per_op']:.1f} ns/op, "
                    f"{got['wall_s']:.3f} s wall, peak {got['peak_rss_kib'] / 1024:.1f} MiB"
                    + (f", live {live_rss / 1024:.1f} MiB" if live_rss is not None else ""))
    elapsed = time.monotonic() - started
    loads.append(os.getloadavg()[0])
    check_checksums(args, allocs, errors)

    variants = [a.name for a in allocs if a.design]
    print(f"Many live threads (pattern_bench threads, threads-live): slabkit "
          f"({', '.join(variants) or 'no variant'}) against {', '.join(args.peers) or 'no peer'}; "
          f"scale {args.scale:g} (threads-live {args.live_scale:g}), seed {args.seed}, "
          f"{args.rounds} round(s), allocators interleaved"
          + (" (a quick run: read it as rough)" if args.quick else ""))
    print()
    figures = print_tables(args, allocs, missing)
    spreads = []
    for a in allocs:
        for k, runs in a.runs.items():
            s = spread([r["ns_per_op"] for r in runs])
            if s is not None:
                spreads.append((s, f"{k} {a.name}"))
    print()
    if spreads:
        s, where = max(spreads)
        print(f"Largest spread of ns/op between rounds: {s:.0%} of its median ({where}).")
    print(f"Conditions: {os.cpu_count()} CPUs ({cpu_model()}"
          + (f", {mhz:.0f} MHz" if mhz else "") + f"); transparent huge pages: {thp_setting()}; "
          f"{args.rounds} round(s), the order of the allocators rotating each round and thread "
          f"count; load average {loads[0]:.2f} before, {loads[1]:.2f} after; {elapsed:.0f} s in "
          "all. The load average counts this benchmark's own runnable threads (up to "
          f"{max(args.threads_list + args.live_threads)} at once), so a high one is expected "
          "here; other work competing shows as a spread between rounds.")
    print("Columns: <design>/<mode> = "
          f"LD_PRELOAD={shown(args.library)} with SLABKIT_ALLOCATOR=<design> and "
          "SLABKIT_SLOTS=<mode>; the peers are glibc (no preload) and Debian's tcmalloc "
          "(minimal), mimalloc and jemalloc, preloaded; each run's malloc checked by dladdr "
          "(malloc_from; the slot mode cannot be checked). ns/op is per malloc/free pair over "
          "all threads: with N threads on C CPUs, a thread's own pair took about N/C times "
          "that. Thread starts and joins are outside it; peak RSS is the process's VmHWM. "
          "Every run's checksum of the bytes it read back is checked against glibc's.")
    if slots_known is False:
        print(f"NOTE: {shown(args.library)} never mentions SLABKIT_SLOTS: it ignores the "
              "variable, so its slot-mode columns measure the same library behaviour.")
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
            json.dump({"command": cmdline, "scale": args.scale, "live_scale": args.live_scale,
                       "seed": args.seed, "rounds": args.rounds,
                       "threads_list": args.threads_list, "live_threads": args.live_threads,
                       "designs": args.designs, "slot_modes": args.slot_modes,
                       "library_knows_slots": slots_known, "peers": args.peers,
                       "binary": args.binary, "library": args.library, "missing": missing,
                       "errors": errors, "loadavg": loads, "cpu_mhz": mhz,
                       "figures": figures,
                       "allocators": [{"name": a.name, "preload": a.preload,
                                       "design": a.design, "slots": a.slots,
                                       "failed": a.failed, "runs": a.runs} for a in allocs]},
                      f, indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
