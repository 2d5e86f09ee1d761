#!/usr/bin/python3
"""kbuild-like benchmark: compiles a set of this project's own translation units with g++, once
under slabkit's malloc replacement (LD_PRELOAD=libslabkit-malloc.so, one run per design picked
with SLABKIT_ALLOCATOR: by default every design the library has) and once under each of glibc malloc (no preload), jemalloc, tcmalloc and
mimalloc, and prints the wall time of the whole set and the peak RSS of the compiler processes
as markdown tables, with the ratios to glibc and to the best peer and a PASS/MISS line per
target of the malloc replacement issue.

Usage: /usr/bin/python3 bench/kbuild.py [--quick] [--runs N] [--jobs N] [--allocators LIST]
                                        [--designs LIST] [--library PATH] [--stat avg|median|min]
                                        [--cxx PATH] [--json PATH] [--verbose]

How it runs: the set is compiled (g++ -std=c++20 -O2 -c, each object file into a temporary
folder) with a fixed number of compilers running at once (--jobs, default 2: `make -j2`). The
preload is inherited by the g++ driver and the programs it runs (cc1plus, as), so the compiler
proper allocates through the allocator under test. One untimed compile of the set under glibc
comes first: it warms the page cache, records the object files every later run must reproduce
byte for byte, and orders the set longest first (by its CPU time) for the timed runs. Then the
allocators run in rounds (--runs), each round every allocator once, the order rotating from
round to round, so that a change in the machine's load hits every allocator alike.

The sources (src/, include/, tests/, bench/) are copied once to a temporary folder and every
run compiles that snapshot, so that an edit made during the benchmark changes no run.

Per run: wall time from the first compiler started to the last one reaped; the user+system CPU
time of every compiler and its children; and the peak RSS, the largest ru_maxrss over the g++
processes of the set (os.wait4 per g++: its ru_maxrss is the largest of g++ and of the children
it waited for, such as cc1plus).

Before each run the preload is checked: the library file must exist and, in a tiny Python
process with the same environment, the first object in the dynamic linker's lookup order that
defines malloc must be that library (the link map, dlsym and dladdr) and the library must be
mapped (/proc/self/maps); glibc's run must get its malloc from libc. A peer whose
library is missing or whose preload does not take is reported missing, never measured as
glibc. slabkit's library missing or failing its check, a failed compile, or an object file that
differs from glibc's is an error: the allocator, the file and a command that reproduces it are
printed, and the exit status is 1 (the other allocators are still measured). So is a run that
takes more than 10 times the warm-up (at least 120 s): its compilers are killed, as hung.

The designs (--designs) default to every design of --library: what its slabkit_designs()
returns, asked in a tiny Python process with the library preloaded (a library older than that
function has the one design slqb).

The tables go to stdout; progress to stderr.
"""

import argparse
import glob
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from peers import PEERS, locate_peers, log, ratio, shown

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LIBRARY = os.path.join(REPO, "build", "release", "libslabkit-malloc.so")
SOURCE_FOLDERS = ("src", "include", "tests", "bench")  # copied to a snapshot, compiled there
FLAGS = ["-std=c++20", "-O2", "-Isrc", "-Iinclude", "-Itests"]

# The quick set: one GoogleTest translation unit (large: templates, iostreams) and a handful of
# the library's own (small), about 8 s of CPU, 4 to 5 s of wall time with 2 jobs.
QUICK_SET = [
    "tests/api/kmalloc_test.cpp",
    "src/slqb/slqb_cache.cpp",
    "src/slqb/slqb_free.cpp",
    "src/page/page_allocator.cpp",
    "src/api/c_api.cpp",
    "src/kmalloc/kmalloc.cpp",
    "src/core/cache.cpp",
    "src/slot/slot.cpp",
]
# The full set: every .cpp under src/ (globbed), both benchmark programs and three GoogleTest
# translation units: about 25 s of CPU, 12 to 15 s of wall time with 2 jobs.
FULL_EXTRA = [
    "tests/api/kmalloc_test.cpp",
    "tests/api/model_test.cpp",
    "tests/api/stats_test.cpp",
    "bench/slab_bench.cpp",
    "bench/page_bench.cpp",
]

# Peers: the library each is preloaded from (None: glibc, no preload), and its Debian package.
TIME_TOLERANCE = 0.03  # SLQB's time may be up to 3% over the fastest peer's

# Run in a tiny Python process with the environment of a run: prints the shared object whose
# malloc the process calls (the first one in the global lookup order, preloads first, that
# defines malloc: what the dynamic linker binds g++'s and cc1plus's calls to), then every file
# mapped into the process.
CHECK = r"""
import ctypes
class Info(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
class LinkMap(ctypes.Structure):
    pass
LinkMap._fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p),
                    ("l_ld", ctypes.c_void_p), ("l_next", ctypes.POINTER(LinkMap)),
                    ("l_prev", ctypes.POINTER(LinkMap))]
libc = ctypes.CDLL(None)
libc.dlopen.restype = ctypes.c_void_p
libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.dlsym.restype = ctypes.c_void_p
libc.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(Info)]
libc.dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
lm = ctypes.POINTER(LinkMap)()
libc.dlinfo(libc.dlopen(None, 1), 2, ctypes.byref(lm))  # RTLD_LAZY, RTLD_DI_LINKMAP
found = "?"
while lm:
    name = lm.contents.l_name
    if name:
        h = libc.dlopen(name, 1 | 4)  # RTLD_LAZY | RTLD_NOLOAD
        addr = h and libc.dlsym(h, b"malloc")
        info = Info()
        if addr and libc.dladdr(addr, ctypes.byref(info)) and info.fname == name:
            found = name.decode()
            break
    lm = lm.contents.l_next
print(found)
with open("/proc/self/maps") as f:
    print("\n".join(sorted({l.split()[-1] for l in f if len(l.split()) >= 6})))
"""


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help=f"the quick set ({len(QUICK_SET)} translation units) and 3 runs: "
                         "1 to 2 minutes on 2 CPUs (default: the full set and 5 runs)")
    ap.add_argument("--runs", type=int, default=None,
                    help="rounds; each compiles the set once per allocator (default 5; 3 with "
                         "--quick)")
    ap.add_argument("--jobs", type=int, default=2,
                    help="compilers running at once, as make -jN (default: %(default)s)")
    ap.add_argument("--allocators", default=",".join(PEERS),
                    help="the peers, comma-separated (default: %(default)s)")
    ap.add_argument("--designs", default=None,
                    help="slabkit designs to preload, each run with SLABKIT_ALLOCATOR=<design>; "
                         "'' for none (default: every design of --library, as its "
                         "slabkit_designs() lists them)")
    ap.add_argument("--library", default=DEFAULT_LIBRARY,
                    help="slabkit's malloc replacement (default: %(default)s)")
    ap.add_argument("--stat", choices=("avg", "median", "min"), default="avg",
                    help="the figure the ratios and targets use: the average of the runs, their "
                         "median, or the best run (least time, least RSS: steadier when other "
                         "work comes and goes on the machine) (default: %(default)s)")
    ap.add_argument("--cxx", default=shutil.which("g++") or "g++",
                    help="the compiler (default: %(default)s)")
    ap.add_argument("--json", default=None, help="save every run's figures here")
    ap.add_argument("--verbose", action="store_true", help="one line per compile on stderr")
    args = ap.parse_args()
    if args.runs is None:
        args.runs = 3 if args.quick else 5
    if args.runs < 1 or args.jobs < 1:
        ap.error("--runs and --jobs must be at least 1")
    args.allocators = [a for a in args.allocators.split(",") if a]
    for a in args.allocators:
        if a not in PEERS:
            ap.error(f"unknown allocator {a!r} (known: {', '.join(PEERS)})")
    args.library = os.path.abspath(args.library)
    if args.designs is None:
        args.designs = library_designs(args.library)
    else:
        args.designs = [d for d in args.designs.split(",") if d]
        if len(set(args.designs)) != len(args.designs):
            ap.error("--designs names a design twice")
    if not args.allocators and not args.designs:
        ap.error("nothing to measure")
    return args


# Run in a tiny Python process with the library preloaded: prints its slabkit_designs().
DESIGNS = r"""
import ctypes
designs = ctypes.CDLL(None).slabkit_designs
designs.restype = ctypes.c_char_p
print(designs().decode())
"""
OLD_DESIGNS = ["slqb"]  # the designs of a library older than slabkit_designs()


def library_designs(library):
    """The designs slabkit's malloc replacement has. When the library is not there (or does not
    load), slqb: its run then reports the library as an error."""
    if not os.path.exists(library):
        return list(OLD_DESIGNS)
    env = base_env()
    env["LD_PRELOAD"] = library
    try:
        done = subprocess.run(["/usr/bin/python3", "-c", DESIGNS], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        log(f"kbuild: cannot ask {library} for its designs ({err}): measuring slqb")
        return list(OLD_DESIGNS)
    designs = done.stdout.split()
    if done.returncode != 0 or not designs:
        log(f"kbuild: {library} does not list its designs (an older build?): measuring slqb")
        return list(OLD_DESIGNS)
    return designs



def translation_units(quick):
    if quick:
        units = list(QUICK_SET)
    else:
        units = sorted(os.path.relpath(p, REPO)
                       for p in glob.glob(os.path.join(REPO, "src", "**", "*.cpp"),
                                          recursive=True))
        units += FULL_EXTRA
    missing = [u for u in units if not os.path.exists(os.path.join(REPO, u))]
    if missing:
        sys.exit("kbuild: translation units not found: " + ", ".join(missing))
    return units



class Allocator:
    def __init__(self, name, preload, env, design=None):
        self.name = name          # column: glibc, jemalloc, ..., "slqb malloc"
        self.preload = preload    # library path, or None for glibc
        self.env = env
        self.design = design      # slabkit design, or None for a peer
        self.runs = []            # per run: {"wall", "cpu", "rss_kb", "units": {...}}
        self.failed = None        # why it stopped being measured

    def setting(self):
        """The environment this allocator adds, as shell words."""
        words = []
        if self.design:
            words.append(f"SLABKIT_ALLOCATOR={self.design}")
        if self.preload:
            words.append(f"LD_PRELOAD={self.preload}")
        return words


def base_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("SLABKIT_ALLOCATOR", None)
    env["LC_ALL"] = "C"  # the same messages and collation in every run
    return env


def check_preload(alloc):
    """None if the process's malloc comes from where it should, else why not."""
    if alloc.preload and not os.path.exists(alloc.preload):
        return f"{alloc.preload} is not there"
    try:
        done = subprocess.run(["/usr/bin/python3", "-c", CHECK], env=alloc.env,
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"the preload check could not run: {err}"
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        return (f"the preload check exited with status {done.returncode}"
                + (": " + " | ".join(tail) if tail else ""))
    lines = done.stdout.split("\n")
    malloc_from, maps = lines[0], set(lines[1:])
    if alloc.preload:
        want = os.path.realpath(alloc.preload)
        if os.path.realpath(malloc_from) != want:
            return f"LD_PRELOAD={alloc.preload} did not take: malloc comes from {malloc_from}"
        if not any(os.path.realpath(m) == want for m in maps if m.startswith("/")):
            return f"{alloc.preload} is not in /proc/self/maps"
    elif "/libc.so" not in malloc_from:
        return f"malloc comes from {malloc_from}, not glibc's libc.so"
    return None


def plan(args):
    """The allocators to measure, and {name: why it is missing} for the peers that cannot be."""
    allocs, missing, errors, absent = [], {}, [], {}
    for design in args.designs:
        env = base_env()
        env["SLABKIT_ALLOCATOR"] = design
        env["LD_PRELOAD"] = args.library
        alloc = Allocator(f"{design} malloc", args.library, env, design)
        why = check_preload(alloc)
        if why:
            absent[alloc.name] = why
            errors.append(f"{alloc.name}: {why} (build the slabkit_malloc target; "
                          f"check: {shlex.join(alloc.setting())} /usr/bin/python3 -c "
                          "'print(open(\"/proc/self/maps\").read())')")
            continue
        allocs.append(alloc)
    found, not_installed = locate_peers(args.allocators)
    missing.update(not_installed)
    for peer, path in found:
        env = base_env()
        if path:
            env["LD_PRELOAD"] = path
        alloc = Allocator(peer, path, env)
        why = check_preload(alloc)
        if why:
            missing[peer] = why
            continue
        allocs.append(alloc)
    return allocs, missing, errors, absent


def object_name(unit):
    return unit.replace("/", "__") + ".o"


def compile_command(args, unit, out_dir):
    return [args.cxx, *FLAGS, "-c", unit, "-o", os.path.join(out_dir, object_name(unit))]


class Hung(Exception):
    pass


def on_alarm(signum, frame):
    raise Hung()


def compile_set(args, units, env, out_dir, label, limit=None):
    """Compiles every unit with args.jobs compilers at once; returns (wall s, CPU s, peak RSS KB,
    {unit: {"rss_kb", "cpu"}}, [(unit, why, stderr tail)] of the failed ones). After limit
    seconds the compilers still running are killed and reported as hung."""
    os.makedirs(out_dir, exist_ok=True)
    for unit in units:
        try:
            os.unlink(os.path.join(out_dir, object_name(unit)))
        except FileNotFoundError:
            pass
    pending = list(units)
    running = {}  # pid -> (unit, stderr path)
    per_unit, failures = {}, []
    cpu = 0.0
    if limit:
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.monotonic()
    try:
        wait_all(args, env, out_dir, label, pending, running, per_unit, failures)
    except Hung:
        for pid, (unit, _) in running.items():
            os.killpg(pid, signal.SIGKILL)  # g++ and the cc1plus or as it runs
            os.waitpid(pid, 0)
            failures.append((unit, f"still running after {limit:g} s: hung? (killed)", []))
        pending.clear()
    finally:
        if limit:
            signal.setitimer(signal.ITIMER_REAL, 0)
    wall = time.monotonic() - start
    cpu = sum(u["cpu"] for u in per_unit.values())
    peak = max((u["rss_kb"] for u in per_unit.values()), default=0)
    return wall, cpu, peak, per_unit, failures


def wait_all(args, env, out_dir, label, pending, running, per_unit, failures):
    while pending or running:
        while pending and len(running) < args.jobs:
            unit = pending.pop(0)
            err_path = os.path.join(out_dir, object_name(unit) + ".err")
            err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                # A process group of its own, so that a hung compile can be killed whole.
                pid = os.posix_spawn(args.cxx, compile_command(args, unit, out_dir), env,
                                     file_actions=[(os.POSIX_SPAWN_DUP2, err_fd, 2),
                                                   (os.POSIX_SPAWN_DUP2, err_fd, 1)],
                                     setpgroup=0)
            finally:
                os.close(err_fd)
            running[pid] = (unit, err_path)
        pid, status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        unit, err_path = running.pop(pid)
        unit_cpu = usage.ru_utime + usage.ru_stime
        per_unit[unit] = {"rss_kb": usage.ru_maxrss, "cpu": unit_cpu}
        code = os.waitstatus_to_exitcode(status)
        if args.verbose:
            log(f"  [{label}] {unit}: {unit_cpu:.2f} s CPU, {usage.ru_maxrss / 1024:.0f} MiB")
        if code != 0:
            why = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            with open(err_path, encoding="utf-8", errors="replace") as f:
                tail = f.read().strip().splitlines()[-5:]
            failures.append((unit, why, tail))


def hashes(units, out_dir):
    out = {}
    for unit in units:
        path = os.path.join(out_dir, object_name(unit))
        try:
            with open(path, "rb") as f:
                out[unit] = hashlib.sha256(f.read()).hexdigest()
        except FileNotFoundError:
            out[unit] = None
    return out


def stats(values):
    if not values:
        return None
    return {"min": min(values), "max": max(values), "avg": statistics.fmean(values),
            "median": statistics.median(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def fmt_ratio(r):
    return "-" if r is None else f"{r:.3f}x"



def print_tables(args, allocs, missing, units, stat):
    measured = [a for a in allocs if a.runs and not a.failed]
    figures = {}
    for a in measured:
        figures[a.name] = {
            "wall": stats([r["wall"] for r in a.runs]),
            "cpu": stats([r["cpu"] for r in a.runs]),
            "rss": stats([r["rss_kb"] / 1024 for r in a.runs]),
        }

    def pick(name, what):
        s = figures.get(name, {}).get(what)
        return s[stat] if s else None

    peers = [a.name for a in measured if a.design is None]
    fastest = min(peers, key=lambda p: pick(p, "wall"), default=None)
    leanest = min(peers, key=lambda p: pick(p, "rss"), default=None)
    glibc = "glibc" if "glibc" in figures else None
    word = {"avg": "average", "median": "median", "min": "best run"}[stat]

    print(f"Wall time to compile the set, seconds ({len(units)} translation units, {args.jobs} "
          f"at a time); lower is better. Ratios use the {word}.")
    print()
    print("| allocator | runs | min | max | avg | sd | median | CPU s (avg) | / glibc "
          "| / fastest peer |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for a in measured:
        w, c = figures[a.name]["wall"], figures[a.name]["cpu"]
        print(f"| {a.name} | {len(a.runs)} | {fmt(w['min'])} | {fmt(w['max'])} | "
              f"{fmt(w['avg'])} | {fmt(w['sd'])} | {fmt(w['median'])} | {fmt(c['avg'])} | "
              f"{fmt_ratio(ratio(pick(a.name, 'wall'), pick(glibc, 'wall')))} | "
              f"{fmt_ratio(ratio(pick(a.name, 'wall'), pick(fastest, 'wall')))} |")
    for name in missing:
        print(f"| {name} | 0 | - | - | - | - | - | - | - | - |")
    print()
    print(f"Fastest peer: {fastest or '-'}.")
    print()
    print("Peak RSS of a compiler process (the largest over the set), MiB; lower is better.")
    print()
    print("| allocator | min | max | avg | sd | / glibc | / leanest peer |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for a in measured:
        r = figures[a.name]["rss"]
        print(f"| {a.name} | {fmt(r['min'], 1)} | {fmt(r['max'], 1)} | {fmt(r['avg'], 1)} | "
              f"{fmt(r['sd'], 1)} | {fmt_ratio(ratio(pick(a.name, 'rss'), pick(glibc, 'rss')))} | "
              f"{fmt_ratio(ratio(pick(a.name, 'rss'), pick(leanest, 'rss')))} |")
    for name in missing:
        print(f"| {name} | - | - | - | - | - | - |")
    print()
    print(f"Leanest peer: {leanest or '-'}.")
    print()

    for design in args.designs:
        name, up = f"{design} malloc", design.upper()
        targets = [
            (f"{up} kbuild time <= glibc's", "wall", glibc, 1.0, "s", 2),
            (f"{up} kbuild time within {TIME_TOLERANCE:.0%} of the fastest peer's", "wall",
             fastest, 1.0 + TIME_TOLERANCE, "s", 2),
            (f"{up} peak RSS <= glibc's", "rss", glibc, 1.0, "MiB", 1),
        ]
        for title, what, other, bound, unit, digits in targets:
            mine, theirs = pick(name, what), pick(other, what)
            if mine is None or theirs is None:
                print(f"Target: {title}: NOT MEASURED (no {name if mine is None else 'peer'} "
                      "figures in this run)")
                continue
            r = mine / theirs
            verdict = "PASS" if r <= bound else "MISS"
            print(f"Target: {title}: {verdict} -- {fmt(mine, digits)} vs "
                  f"{fmt(theirs, digits)} {unit} ({other}, {word}) = {fmt_ratio(r)}")
    if missing:
        print("Missing (a missing peer: the targets are judged against the others): "
              + "; ".join(f"{p}: {why}" for p, why in missing.items()))
    return figures



def main():
    args = parse_args()
    os.chdir(REPO)
    command = "/usr/bin/python3 " + shlex.join(["bench/kbuild.py"] + sys.argv[1:])
    if not shutil.which(args.cxx):
        sys.exit(f"kbuild: no compiler {args.cxx}")
    units = translation_units(args.quick)
    loads = [os.getloadavg()[0]]
    allocs, missing, errors, absent = plan(args)
    for peer, why in missing.items():
        log(f"kbuild: {peer} is missing: {why}")
    for e in errors:
        log(f"kbuild: ERROR {e}")
    if not allocs:
        for e in errors:
            print(f"ERROR {e}")
        sys.exit("kbuild: no allocator could be measured")
    version = subprocess.run([args.cxx, "-dumpfullversion"], capture_output=True, text=True,
                             check=False).stdout.strip()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kbuild.") as tmp:
        # Every run compiles the same snapshot of the sources, whatever is edited meanwhile.
        tree = os.path.join(tmp, "tree")
        for folder in SOURCE_FOLDERS:
            shutil.copytree(os.path.join(REPO, folder), os.path.join(tree, folder),
                            ignore=shutil.ignore_patterns(".*"))
        os.chdir(tree)
        # Untimed: warms the page cache and records glibc's object files.
        log(f"kbuild: {len(units)} translation units, {args.jobs} jobs; warm-up under glibc")
        warm_wall, _, _, warm, failures = compile_set(args, units, base_env(),
                                                      os.path.join(tmp, "ref"), "warm-up")
        if failures:
            for unit, why, tail in failures:
                print(f"ERROR warm-up (glibc): {unit}: {why}: " + " | ".join(tail))
            sys.exit("kbuild: the set does not compile under glibc")
        reference = hashes(units, os.path.join(tmp, "ref"))
        # The timed runs start the longest units first (by the warm-up's CPU time), so that
        # the last compiler to finish is a short one, as make's order would roughly give.
        units.sort(key=lambda u: -warm[u]["cpu"])
        limit = max(120.0, 10 * warm_wall)
        for rnd in range(args.runs):
            live = [a for a in allocs if not a.failed]
            if not live:
                break
            shift = rnd % len(live)
            order = live[shift:] + live[:shift]
            log(f"kbuild: round {rnd + 1} of {args.runs}: " + ", ".join(a.name for a in order))
            for a in order:
                why = check_preload(a)
                if why:
                    a.failed = why
                    if a.design:
                        errors.append(f"{a.name}: {why}")
                    else:
                        missing[a.name] = why
                    log(f"kbuild: {a.name}: {why}")
                    continue
                out_dir = os.path.join(tmp, a.name.replace(" ", "_"))
                wall, cpu, peak, per_unit, failures = compile_set(args, units, a.env, out_dir,
                                                                  a.name, limit)
                for unit, why, tail in failures:
                    cmd = shlex.join(a.setting() + compile_command(args, unit, "/tmp"))
                    errors.append(f"{a.name}: compiling {unit} failed ({why}); reproduce: "
                                  f"cd {REPO} && {cmd}"
                                  + (" -- its output ends: " + " | ".join(tail) if tail else ""))
                if not failures:
                    got = hashes(units, out_dir)
                    for unit in units:
                        if got[unit] != reference[unit]:
                            cmd = shlex.join(a.setting() + compile_command(args, unit, "/tmp"))
                            errors.append(f"{a.name}: the object file of {unit} differs from "
                                          f"glibc's; reproduce: cd {REPO} && {cmd} && cmp "
                                          "against the same command without the preload")
                            failures.append((unit, "differs", []))
                if failures:
                    a.failed = "failed (see the errors)"
                    continue
                log(f"  {a.name}: {wall:.2f} s wall, {cpu:.2f} s CPU, "
                    f"peak {peak / 1024:.0f} MiB")
                a.runs.append({"round": rnd, "wall": wall, "cpu": cpu, "rss_kb": peak,
                               "units": per_unit})
    os.chdir(REPO)
    elapsed = time.monotonic() - started
    loads.append(os.getloadavg()[0])

    print(f"kbuild-like: g++ {version} {' '.join(FLAGS)} -c, "
          f"{'quick' if args.quick else 'full'} set, {args.runs} round(s), allocators "
          "interleaved")
    print()
    absent.update({a.name: a.failed for a in allocs if a.failed and a.design})
    figures = print_tables(args, allocs, {**absent, **missing}, units, args.stat)
    print()
    print(f"Conditions: {os.cpu_count()} CPUs ({platform.machine()}); {args.jobs} jobs; "
          f"{args.runs} round(s), the order of the allocators rotating each round; load average "
          f"{loads[0]:.2f} before, {loads[1]:.2f} after; {elapsed:.0f} s in all. A load average "
          "near or above the number of CPUs means other work competed: read the times as rough.")
    print("Translation units: " + ", ".join(units) + ".")
    print("Columns: wall = from the first compiler started to the last reaped; CPU = user+system "
          "time of the compilers and their children, summed; peak RSS = the largest ru_maxrss "
          "of a g++ process (and the cc1plus/as it ran) over the set. <design> malloc = "
          f"LD_PRELOAD={shown(args.library)} with SLABKIT_ALLOCATOR=<design>; the peers are "
          "glibc (no preload) and Debian's jemalloc, tcmalloc (minimal) and mimalloc, preloaded. "
          "Every run's object files are checked against glibc's, byte for byte.")
    print(f"Command: `{command}`")
    for e in errors:
        print(f"ERROR {e}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"command": command, "compiler": f"{args.cxx} {version}", "flags": FLAGS,
                       "jobs": args.jobs, "units": units, "missing": missing, "errors": errors,
                       "loadavg": loads, "figures": figures,
                       "allocators": [{"name": a.name, "preload": a.preload, "design": a.design,
                                       "failed": a.failed, "runs": a.runs} for a in allocs]},
                      f, indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
