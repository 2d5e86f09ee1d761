#!/usr/bin/python3
"""tools/slabbench/report.py against synthetic results: a matrix workload (netperf, "stream/<n>"
over three sizes, three configurations and one that failed, with `--counters` notes), a
by_config workload (boot, one "memory" case, four of the five designs), a skipped workload
(oltp); then a second, partial JSON (nulls, missing keys, empty summaries, no design list) that
must still give a report.

Usage: report_test.py [REPORT_PY]   (default: tools/slabbench/report.py beside this tree)
Run with /usr/bin/python3 (Debian's matplotlib); report.py itself runs under /usr/bin/python3.
Exit status 0 when every check passed; each failed check prints a line.
"""

import json
import os
import re
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "..", "..", "tools", "slabbench", "report.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)
    return ok


def row(config, avg, lo, hi, pct, p, noise, n=3):
    return {"config": config, "n": n, "min": lo, "max": hi, "avg": avg, "sd": (hi - lo) / 3,
            "pct": pct, "p": p, "noise": noise}


def runs_for(config, cases, ok=True, error="", counters=None):
    """Three runs; `counters` ({NAME: per run}) adds `slabbench --counters` notes over 1000
    allocations a run."""
    out = []
    for i in range(3):
        out.append({"config": config, "run": i, "ok": ok, "error": error, "wall_s": 0.3 + i / 10,
                    "values": [] if not ok else [
                        {"case": c, "metric": m, "unit": u, "better": b, "value": v * (1 + i / 100)}
                        for c, m, u, b, v in cases],
                    "checks": [{"name": "delivered", "ok": ok, "detail": "1000 of 1000 messages"}],
                    "notes": {"peak_rss_kib": 5120 + i, "alloc_slow_pct": 1.5}})
        if counters:
            out[-1]["notes"]["counter:allocs"] = 1000.0
            out[-1]["notes"].update({f"counter:{k}": v for k, v in counters.items()})
    return out


def synthetic():
    sizes = [64, 1024, 4096]
    base = {64: 800.0, 1024: 4000.0, 4096: 9000.0}
    stream = []
    for s in sizes:
        b = base[s]
        stream.append({
            "case": f"stream/{s}", "metric": "throughput", "unit": "MB/s", "better": "higher",
            "baseline": "slub",
            "rows": [row("slqb", b * 1.032, b * 1.02, b * 1.04, 3.2, 0.04, False),
                     row("slub", b, b * 0.99, b * 1.01, None, None, None),
                     row("glibc", b * 0.99, b * 0.97, b * 1.01, -1.0, 0.5, True)]})
    netperf = {
        "name": "netperf", "seed": "seed 001: netperf TCP sweep over message sizes",
        "maps_to": "TCP_STREAM over a socketpair <loopback>", "cannot": "no real NIC",
        "baseline": "slub", "layout": "matrix", "params": {"sizes": "64,1024,4096"},
        "status": "ok", "why": "",
        "configs": [{"name": "slqb", "what": "SLQB through the kmem_cache API", "status": "ok",
                     "why": ""},
                    {"name": "slub", "what": "SLUB", "status": "ok", "why": ""},
                    {"name": "slab", "what": "SLAB", "status": "failed",
                     "why": "worker died: SIGSEGV <core dumped>"},
                    {"name": "glibc", "what": "glibc's malloc", "status": "ok", "why": ""}],
        "runs": (runs_for("slqb", [(f"stream/{s}", "throughput", "MB/s", "higher", base[s])
                                   for s in sizes], counters={"FREE_REMOTE": 50.0})
                 + runs_for("slub", [(f"stream/{s}", "throughput", "MB/s", "higher", base[s])
                                     for s in sizes],
                            counters={"ALLOC_SLOWPATH": 125.0, "FREE_REMOTE": 0})
                 + runs_for("slab", [], ok=False, error="worker died: SIGSEGV <core dumped>")
                 + runs_for("glibc", [(f"stream/{s}", "throughput", "MB/s", "higher", base[s])
                                      for s in sizes])),
        "summary": stream,
        "winner": [{"case": f"stream/{s}", "config": "slqb", "design": "slqb"} for s in sizes],
    }
    boot = {
        "name": "boot", "seed": "seed 003: boot footprint", "maps_to": "caches at boot",
        "cannot": "no kernel", "baseline": "slub", "layout": "by_config", "params": {},
        "status": "ok", "why": "",
        "configs": [{"name": n, "what": n.upper(), "status": "ok", "why": ""}
                    for n in ("slqb", "slub", "slob", "sheaves")],
        "runs": [r for n in ("slqb", "slub", "slob", "sheaves")
                 for r in runs_for(n, [("memory", "footprint", "kB", "lower", 2000.0)])],
        "summary": [{"case": "memory", "metric": "footprint", "unit": "kB", "better": "lower",
                     "baseline": "slub",
                     "rows": [row("slqb", 2100.0, 2090.0, 2110.0, 8.7, 0.001, False),
                              row("slub", 2300.0, 2290.0, 2310.0, None, None, None),
                              row("slob", 1876.5, 1870.0, 1880.0, 18.4, 0.0001, False),
                              row("sheaves", 2412.0, 2400.0, 2420.0, -4.9, 0.002, False)]}],
        "winner": [{"case": "memory", "config": "slob", "design": "slob"}],
    }
    oltp = {"name": "oltp", "seed": "seed 004: sysbench OLTP", "baseline": "slub",
            "layout": "by_config", "status": "skipped",
            "why": "mariadbd not found (apt-get install mariadb-server)",
            "configs": [], "runs": [], "summary": [], "winner": []}
    return {
        "slabbench": 1,
        "machine": {"cpu": "AMD EPYC 7B13", "cpus": 2, "memory_kib": 24000000,
                    "kernel": "6.1.0-test", "os": "Debian GNU/Linux 12 (bookworm)",
                    "date": "2026-12-04T20:30:00Z", "commit": "abc1234", "host": "testhost"},
        "command": "slabbench --quick --json out.json", "scale": "quick", "runs": 3,
        "designs": ["slqb", "slub", "slab", "slob", "sheaves"],
        "noise_test": "Welch's t-test, two-sided, p >= 0.05",
        "workloads": [netperf, boot, oltp],
        "targets": [{"name": "SLQB boot footprint at most SLUB's", "met": True,
                     "detail": "SLQB 2100 kB, SLUB 2300 kB"},
                    {"name": "SLQB netperf within 5% of SLUB", "met": False,
                     "detail": "stream/64 -7%"}],
    }


def partial():
    """What an interrupted run can leave: nulls, missing keys, empty lists, odd types."""
    return {
        "slabbench": 1, "machine": None, "command": "slabbench", "runs": None,
        "workloads": [
            {"name": "hackbench", "layout": "matrix", "baseline": "slub", "configs": None,
             "summary": [{"case": "groups/1", "rows": [{"config": "slqb", "avg": None}]},
                         {"case": "groups/10", "metric": "time", "unit": "s", "better": "lower",
                          "rows": [{"config": "slqb", "avg": 1.5, "min": None, "max": 2.0}]},
                         {"case": "groups/40", "metric": "time", "unit": "s", "better": "lower",
                          "rows": [{"config": "slqb", "avg": 3.5, "min": 3.0, "max": 4.0},
                                   {"config": "slub", "avg": 3.0, "min": 2.5, "max": 3.5,
                                    "pct": None, "p": None, "noise": None}]},
                         {"rows": "nonsense"}, None, 7],
             "winner": None},
            # No summary: report.py computes one from the runs.
            {"name": "micro", "layout": "by_config", "baseline": "slub",
             "runs": runs_for("slub", [("live/100", "cost", "ns/op", "lower", 20.0),
                                       ("live/100000", "cost", "ns/op", "lower", 35.0)])
             + runs_for("slqb", [("live/100", "cost", "ns/op", "lower", 18.0)]) + [None, {}]},
            {"name": "kbuild", "status": "ok", "summary": []},
            {},
            "not a workload",
        ],
        "targets": [None, {"name": "x"}],
    }


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != PNG_MAGIC or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def run_report(doc, tmp, name):
    src = os.path.join(tmp, f"{name}.json")
    out = os.path.join(tmp, name)
    with open(src, "w") as f:
        json.dump(doc, f)
    r = subprocess.run([PYTHON, REPORT, src, out], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"{name}: report.py exit status {r.returncode}: {r.stderr[-2000:]}")
    check("Traceback" not in r.stderr, f"{name}: report.py printed a traceback: {r.stderr}")
    return out


def main():
    global REPORT
    if len(sys.argv) > 1:
        REPORT = sys.argv[1]
    if not check(os.path.exists(REPORT), f"no {REPORT}"):
        return 1
    with tempfile.TemporaryDirectory(prefix="slabbench-report-") as tmp:
        # --- the full synthetic run ---
        out = run_report(synthetic(), tmp, "full")
        index = os.path.join(out, "index.html")
        if check(os.path.isfile(index), "full: no index.html"):
            text = open(index, encoding="utf-8").read()
            check(text.lstrip().startswith("<!DOCTYPE html>"), "index.html: no doctype")
            for w in ("netperf", "boot", "oltp"):
                check(f"id='w-{w}'" in text, f"index.html: no section for workload {w}")
            check("mariadbd not found (apt-get install mariadb-server)" in text,
                  "index.html: the skipped workload's reason is missing")
            check("AMD EPYC 7B13" in text and "slabbench --quick --json out.json" in text,
                  "index.html: the machine or the command is missing")
            check("Summary: who won" in text, "index.html: no winners table")
            check("SLQB boot footprint at most SLUB" in text and "not met" in text,
                  "index.html: targets missing or not marked")
            check("seed 001: netperf TCP sweep" in text, "index.html: netperf's seed missing")
            # Escaping: the failed config's why and maps_to have < >.
            check("worker died: SIGSEGV &lt;core dumped&gt;" in text,
                  "index.html: the failed config's why is missing or unescaped")
            check("<core dumped>" not in text and "<loopback>" not in text,
                  "index.html: text not escaped")
            check(re.search(r"<td>slab</td>.*?failed.*?SIGSEGV", text, re.S) is not None,
                  "index.html: the failed config slab is not shown as failed")
            # A table cell per configuration of each workload (the configs tables).
            for c in ("slqb", "slub", "slab", "glibc"):
                check(f"<td>{c}" in text, f"index.html: no table cell for netperf config {c}")
            for c in ("slqb", "slub", "slob", "sheaves"):
                check(f"<td>{c}" in text, f"index.html: no table cell for boot config {c}")
            check("<td>sheaves</td><td class='num'>3</td><td class='num'>2400</td>" in text,
                  "index.html: boot's by_config row for sheaves wrong")
            check("slabkit's designs (slqb, slub, slab, slob, sheaves and their variants)" in text,
                  "index.html: the winners' note does not name the JSON's five designs")
            # --counters: a table per 1000 allocations; the notes table leaves the counters out.
            check("Design counters" in text, "index.html: no design counters table")
            check(re.search(r"<tr><td>FREE_REMOTE</td><td class='num'>50</td>"
                            r"<td class='num'>–</td></tr>", text) is not None,
                  "index.html: counters row FREE_REMOTE wrong (slqb 50, slub none)")
            check(re.search(r"<tr><td>ALLOC_SLOWPATH</td><td class='num'>–</td>"
                            r"<td class='num'>125</td></tr>", text) is not None,
                  "index.html: counters row ALLOC_SLOWPATH wrong (slqb none, slub 125)")
            check("<th>counter:allocs</th>" not in text and "<th>counter:FREE_REMOTE</th>"
                  not in text, "index.html: counters shown among the run notes")
            # The matrix: columns per config, cells "avg (pct)" with the noise mark.
            for c in ("slqb", "slub", "slab", "glibc"):
                check(re.search(rf"<th>{c}\b", text) is not None,
                      f"index.html: netperf matrix has no column for {c}")
            check(">825.6 (+3.20%)</td>" in text, "index.html: matrix cell slqb stream/64 wrong")
            check(">792 (-1.00%) ~</td>" in text,
                  "index.html: matrix cell glibc stream/64 wrong or without noise mark")
            check(">800 (base)</td>" in text, "index.html: matrix baseline cell wrong")
            # by_config: rows config, n, min, max, avg, sd, pct.
            check(re.search(r"<td class='best'>slob</td><td class='num'>3</td>"
                            r"<td class='num'>1870</td><td class='num'>1880</td>"
                            r"<td class='num'>1876</td>", text) is not None,
                  "index.html: boot's by_config row for slob wrong")
            check("+18.4%" in text, "index.html: boot's slob % vs baseline missing")
            # Winners table names the winners.
            check(re.search(r"#w-boot'>boot</a></td><td>memory.*?<td>slob", text, re.S)
                  is not None, "index.html: winners row for boot/memory wrong")
            # Plots are linked.
            for png in ("netperf-stream.png", "boot-memory.png"):
                check(f"src='{png}'" in text, f"index.html: no <img> of {png}")
            check("<script" not in text.lower() and "http://" not in text
                  and "https://" not in text, "index.html: scripts or network resources")
        for png in ("netperf-stream.png", "boot-memory.png"):
            path = os.path.join(out, png)
            if check(os.path.isfile(path), f"full: no {png}"):
                size = png_size(path)
                check(size is not None, f"{png}: not a PNG")
                check(size is not None and 800 <= size[0] <= 1000 and 400 <= size[1] <= 600,
                      f"{png}: size {size}, want about 900x500")
        pngs = sorted(f for f in os.listdir(out) if f.endswith(".png")) if os.path.isdir(out) else []
        check(pngs == ["boot-memory.png", "netperf-stream.png"],
              f"full: unexpected plot files {pngs}")

        # --- partial data ---
        out = run_report(partial(), tmp, "partial")
        index = os.path.join(out, "index.html")
        if check(os.path.isfile(index), "partial: no index.html"):
            text = open(index, encoding="utf-8").read()
            for w in ("hackbench", "micro", "kbuild"):
                check(f"id='w-{w}'" in text, f"partial: no section for workload {w}")
            check("computed from its runs" in text, "partial: micro's summary not computed")
        for png in ("hackbench-groups.png", "micro-live.png"):
            path = os.path.join(out, png)
            check(os.path.isfile(path) and png_size(path) is not None,
                  f"partial: no valid {png}")

        # --- JSON that cannot be read: an error, and still an index.html ---
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"slabbench": 1, "workloads": [')
        r = subprocess.run([PYTHON, REPORT, bad, os.path.join(tmp, "bad")], capture_output=True,
                           text=True, timeout=120)
        check(r.returncode != 0, "bad JSON: report.py exited 0")
        check("Traceback" not in r.stderr, f"bad JSON: traceback: {r.stderr}")
        check(os.path.isfile(os.path.join(tmp, "bad", "index.html")), "bad JSON: no index.html")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("report_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
