#!/usr/bin/python3
"""slabbench's report: PNG plots and one self-contained index.html from a run's JSON.

Usage: /usr/bin/python3 tools/slabbench/report.py RESULTS.json OUTDIR

RESULTS.json is what `slabbench --json` writes (schema version 1, docs/slabbench.md). OUTDIR
(created if missing) receives index.html and one PNG per plot, which index.html shows with
relative <img> links: no JavaScript, no network resources.

Plots, per workload: the cases named "<series>/<number>" ("stream/1024", "live/100000",
"groups/4") make one line plot per series and metric (x: the number, log scale when it spans
more than 30x; y: the average, the band from min to max; one line per configuration); every
other case ("memory", "read-only", and a series with a single point) makes a horizontal bar
chart, one bar per configuration with min..max whiskers, the baseline's bar hatched.

Data that is missing, null or of the wrong type is left out, never fatal: an interrupted run's
JSON can have empty summaries, and a workload that was skipped shows only why. Uses
Debian's python3-matplotlib (Agg backend) and python3-numpy; without matplotlib the HTML is
still written, without plots.
"""

import html
import json
import math
import os
import re
import sys
import textwrap

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    HAVE_MPL = True
except Exception:  # pragma: no cover - the wrong python3
    HAVE_MPL = False

# slabkit's designs, the prefixes of its own configurations: the JSON's "designs" (the build's
# slabkit_designs()) when it has them, else these (main sets it).
DESIGNS = ("slqb", "slub", "slab", "slob", "sheaves")
COUNTER = "counter:"  # run notes of `slabbench --counters`: a design's counter over the run
FIG_W, FIG_H, DPI = 9.0, 5.0, 100  # 900x500 px


# --- reading partial data --------------------------------------------------------------------


def as_dict(v):
    return v if isinstance(v, dict) else {}


def as_list(v):
    return v if isinstance(v, list) else []


def as_str(v, default=""):
    if v is None:
        return default
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return fmt_num(v)
    try:
        return json.dumps(v, sort_keys=True)
    except (TypeError, ValueError):
        return str(v)


def as_num(v):
    """A finite float, or None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def as_bool(v):
    """True, False, or None when not a boolean."""
    return v if isinstance(v, bool) else None


def is_design(config):
    return any(config.startswith(d) for d in DESIGNS)


# --- formatting ------------------------------------------------------------------------------


def fmt_num(v):
    """3-4 significant digits; whole numbers up to a billion as they are."""
    v = as_num(v)
    if v is None:
        return "–"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e9:
        return f"{v:.3e}"
    if a >= 1000:
        return f"{v:.0f}"
    if a >= 1e-3:
        s = f"{v:.4g}"
        return s
    return f"{v:.3e}"


def fmt_pct(v):
    v = as_num(v)
    if v is None:
        return ""
    a = abs(v)
    if a >= 100:
        return f"{v:+.0f}%"
    if a >= 10:
        return f"{v:+.1f}%"
    return f"{v:+.2f}%"


def fmt_p(v):
    v = as_num(v)
    if v is None:
        return "–"
    if v < 0.001:
        return "<0.001"
    return f"{v:.3f}"


def esc(v):
    return html.escape(as_str(v), quote=True)


def sanitize(name):
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return s[:120] or "plot"


# --- the data model --------------------------------------------------------------------------


class Entry:
    """One summary entry: a case and metric, with a row per configuration."""

    def __init__(self, raw, baseline):
        raw = as_dict(raw)
        self.case = as_str(raw.get("case"))
        self.metric = as_str(raw.get("metric"))
        self.unit = as_str(raw.get("unit"))
        better = as_str(raw.get("better"), "higher")
        self.better = better if better in ("higher", "lower") else "higher"
        self.baseline = as_str(raw.get("baseline"), baseline) or baseline
        self.rows = {}
        for r in as_list(raw.get("rows")):
            r = as_dict(r)
            name = as_str(r.get("config"))
            if not name or name in self.rows:
                continue
            self.rows[name] = {
                "n": as_num(r.get("n")),
                "min": as_num(r.get("min")),
                "max": as_num(r.get("max")),
                "avg": as_num(r.get("avg")),
                "sd": as_num(r.get("sd")),
                "pct": as_num(r.get("pct")),
                "p": as_num(r.get("p")),
                "noise": as_bool(r.get("noise")),
            }

    def label(self):
        bits = [b for b in (self.metric, self.unit) if b]
        bits.append(f"{self.better} is better")
        return ", ".join(bits)

    def best(self, only_designs=False):
        cands = [(c, r["avg"]) for c, r in self.rows.items()
                 if r["avg"] is not None and (not only_designs or is_design(c))]
        if not cands:
            return None
        key = (lambda t: t[1]) if self.better == "higher" else (lambda t: -t[1])
        return max(cands, key=key)[0]


def summarize_runs(runs, baseline):
    """A summary from the runs themselves, for JSON whose summary is missing (no noise test)."""
    data = {}  # (case, metric) -> {"unit", "better", "vals": {config: [values]}}
    order = []
    for run in runs:
        run = as_dict(run)
        if run.get("ok") is False:
            continue
        config = as_str(run.get("config"))
        if not config:
            continue
        for v in as_list(run.get("values")):
            v = as_dict(v)
            value = as_num(v.get("value"))
            case = as_str(v.get("case"))
            if value is None or not case:
                continue
            key = (case, as_str(v.get("metric")))
            if key not in data:
                data[key] = {"unit": as_str(v.get("unit")), "better": as_str(v.get("better")),
                             "vals": {}}
                order.append(key)
            data[key]["vals"].setdefault(config, []).append(value)
    out = []
    for key in order:
        d = data[key]
        rows = []
        for config, vals in d["vals"].items():
            n = len(vals)
            avg = sum(vals) / n
            sd = math.sqrt(sum((x - avg) ** 2 for x in vals) / (n - 1)) if n > 1 else 0.0
            rows.append({"config": config, "n": n, "min": min(vals), "max": max(vals),
                         "avg": avg, "sd": sd, "pct": None, "p": None, "noise": None})
        base = next((r for r in rows if r["config"] == baseline), None)
        if base and base["avg"]:
            for r in rows:
                if r is base:
                    continue
                change = (r["avg"] - base["avg"]) / abs(base["avg"]) * 100.0
                r["pct"] = change if d["better"] != "lower" else -change
        out.append({"case": key[0], "metric": key[1], "unit": d["unit"], "better": d["better"],
                    "baseline": baseline, "rows": rows})
    return out


class Workload:
    def __init__(self, raw):
        raw = as_dict(raw)
        self.raw = raw
        self.name = as_str(raw.get("name"), "?") or "?"
        self.status = as_str(raw.get("status"), "ok")
        self.why = as_str(raw.get("why"))
        self.baseline = as_str(raw.get("baseline"))
        self.layout = as_str(raw.get("layout"), "by_config")
        self.configs = [as_dict(c) for c in as_list(raw.get("configs"))]
        self.runs = [as_dict(r) for r in as_list(raw.get("runs"))]
        summary = as_list(raw.get("summary"))
        self.computed = False
        if not summary and self.runs:
            summary = summarize_runs(self.runs, self.baseline)
            self.computed = bool(summary)
        self.entries = [Entry(e, self.baseline) for e in summary]
        self.entries = [e for e in self.entries if e.case]
        # Configurations in order: as listed, then any only the summary or the runs name.
        names = []
        for c in self.configs:
            n = as_str(c.get("name"))
            if n and n not in names:
                names.append(n)
        for e in self.entries:
            for n in e.rows:
                if n not in names:
                    names.append(n)
        for r in self.runs:
            n = as_str(r.get("config"))
            if n and n not in names:
                names.append(n)
        self.config_names = names
        self.config_status = {as_str(c.get("name")): c for c in self.configs}
        self.plots = []  # (file name, caption)

    def winners(self):
        """[(case, config, design)] from the JSON's "winner", else from the summary."""
        out = []
        raw = as_list(self.raw.get("winner"))
        if raw:
            for w in raw:
                w = as_dict(w)
                case = as_str(w.get("case"))
                if case:
                    out.append((case, as_str(w.get("config")), as_str(w.get("design"))))
            return out
        for e in self.entries:
            best = e.best()
            if best is not None:
                out.append((e.case, best, e.best(only_designs=True) or ""))
        return out

    def entry_for(self, case):
        return next((e for e in self.entries if e.case == case), None)


# --- plots -----------------------------------------------------------------------------------

SERIES_RE = re.compile(r"^(.+)/([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)$")


def split_series(case):
    m = SERIES_RE.match(case)
    if not m:
        return None
    x = float(m.group(2))
    return (m.group(1), x) if math.isfinite(x) else None


class Colors:
    def __init__(self, names):
        self.map = {}
        if not HAVE_MPL:
            return
        if len(names) <= 10:
            cmap = plt.get_cmap("tab10")
            for i, n in enumerate(names):
                self.map[n] = cmap(i)
            return
        # tab20's dark colors first, then its light ones: neighbours stay distinct.
        cmap = plt.get_cmap("tab20")
        for i, n in enumerate(names):
            j = i % 20
            self.map[n] = cmap((2 * j) % 20 + (2 * j) // 20)

    def __call__(self, name):
        return self.map.get(name, (0.4, 0.4, 0.4, 1.0))


class Namer:
    def __init__(self):
        self.used = set()

    def __call__(self, *parts):
        base = sanitize("-".join(p for p in parts if p))
        name, i = base, 2
        while name.lower() in self.used:
            name = f"{base}-{i}"
            i += 1
        self.used.add(name.lower())
        return name + ".png"


def title_text(workload, what, entry):
    return "\n".join(textwrap.wrap(f"{workload}: {what} ({entry.label()})", 90))


def save(fig, outdir, fname):
    fig.savefig(os.path.join(outdir, fname), dpi=DPI)
    plt.close(fig)


def line_plot(wl, series, points, outdir, fname, colors):
    """points: [(x, Entry)] sorted by x, all of one metric."""
    first = points[0][1]
    fig = plt.figure(figsize=(FIG_W, FIG_H), dpi=DPI)
    ax = fig.add_axes([0.09, 0.11, 0.68, 0.76])
    xs_all = [x for x, _ in points]
    ys_all = []
    drawn = 0
    nlines = sum(1 for c in wl.config_names
                 if any(c in e.rows and e.rows[c]["avg"] is not None for _, e in points))
    band = nlines <= 4  # many lines: whiskers, since bands would bury each other
    for config in wl.config_names:
        xs, ys, lo, hi = [], [], [], []
        for x, e in points:
            r = e.rows.get(config)
            if not r or r["avg"] is None:
                continue
            xs.append(x)
            ys.append(r["avg"])
            lo.append(r["min"] if r["min"] is not None else r["avg"])
            hi.append(r["max"] if r["max"] is not None else r["avg"])
        if not xs:
            continue
        ys_all += lo + hi
        base = config == first.baseline
        color = colors(config)
        ax.plot(xs, ys, marker="o", markersize=4 if not base else 6, color=color,
                linewidth=2.6 if base else 1.4, linestyle="--" if base else "-",
                label=f"{config} (baseline)" if base else config, zorder=3 if base else 2)
        if band and len(xs) > 1:
            ax.fill_between(xs, lo, hi, color=color, alpha=0.15, linewidth=0)
        else:
            ax.errorbar(xs, ys, yerr=[[max(0.0, y - a) for y, a in zip(ys, lo)],
                                      [max(0.0, b - y) for y, b in zip(ys, hi)]],
                        fmt="none", ecolor=color, elinewidth=0.8, capsize=2, alpha=0.6)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return False
    pos = [x for x in xs_all if x > 0]
    if len(pos) == len(xs_all) and max(pos) / min(pos) > 30:
        ax.set_xscale("log")
        ax.minorticks_off()
    if len(xs_all) <= 12:  # the measured points as the ticks: 64, 1024, 4096
        ax.set_xticks(xs_all)
        ax.set_xticklabels([fmt_num(x) for x in xs_all],
                           rotation=45 if len(xs_all) > 8 else 0)
    ypos = [y for y in ys_all if y > 0]
    if ypos and len(ypos) == len(ys_all) and max(ypos) / min(ypos) > 1000:
        ax.set_yscale("log")
    ax.set_xlabel(series)
    ylabel = first.metric + (f" ({first.unit})" if first.unit else "")
    ax.set_ylabel(ylabel or "value")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(title_text(wl.name, series, first), fontsize=11)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8 if drawn <= 12 else 6.5,
              frameon=False, borderaxespad=0)
    save(fig, outdir, fname)
    return True


def bar_plot(wl, entry, outdir, fname, colors):
    rows = [(c, entry.rows[c]) for c in wl.config_names
            if c in entry.rows and entry.rows[c]["avg"] is not None]
    if not rows:
        return False
    n = len(rows)
    fig = plt.figure(figsize=(FIG_W, FIG_H), dpi=DPI)
    ax = fig.add_axes([0.2, 0.11, 0.74, 0.76])
    ys = list(range(n))
    avgs = [r["avg"] for _, r in rows]
    lo = [max(0.0, r["avg"] - r["min"]) if r["min"] is not None else 0.0 for _, r in rows]
    hi = [max(0.0, r["max"] - r["avg"]) if r["max"] is not None else 0.0 for _, r in rows]
    best = entry.best()
    for y, (c, r) in zip(ys, rows):
        base = c == entry.baseline
        ax.barh(y, r["avg"], color=colors(c), edgecolor="black" if base else "none",
                linewidth=1.5 if base else 0, hatch="//" if base else None, height=0.7)
    ax.errorbar(avgs, ys, xerr=[lo, hi], fmt="none", ecolor="black", elinewidth=1, capsize=3)
    labels = []
    for c, _ in rows:
        s = c
        if c == entry.baseline:
            s += " (baseline)"
        if c == best:
            s += " ★"
        labels.append(s)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8 if n <= 14 else 6.5)
    ax.invert_yaxis()
    xmax = max((a + h for a, h in zip(avgs, hi)), default=0.0)
    xmin = min(0.0, min(avgs))
    span = (xmax - xmin) or 1.0
    for y, (a, h) in enumerate(zip(avgs, hi)):
        ax.text(a + h + span * 0.01, y, fmt_num(a), va="center", fontsize=7 if n <= 14 else 6)
    ax.set_xlim(xmin, xmax + span * 0.12)
    ax.set_xlabel(entry.metric + (f" ({entry.unit})" if entry.unit else ""))
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title_text(wl.name, entry.case, entry), fontsize=11)
    save(fig, outdir, fname)
    return True


def make_plots(wl, outdir, colors, namer):
    if not HAVE_MPL or wl.status == "skipped" or not wl.entries:
        return
    # Series: (series name, metric) -> [(x, entry)]; a metric's first entry fixes the order.
    series = {}
    singles = []
    for e in wl.entries:
        if not any(r["avg"] is not None for r in e.rows.values()):
            continue
        s = split_series(e.case)
        if s is None:
            singles.append(e)
            continue
        series.setdefault((s[0], e.metric), []).append((s[1], e))
    metrics_per_series = {}
    for name, metric in series:
        metrics_per_series.setdefault(name, []).append(metric)
    for (name, metric), pts in series.items():
        seen = {}
        for x, e in pts:
            seen.setdefault(x, e)
        pts = sorted(seen.items())
        if len(pts) < 2:
            singles.extend(e for _, e in pts)
            continue
        multi = len(metrics_per_series[name]) > 1
        fname = namer(wl.name, name, metric if multi else "")
        try:
            if line_plot(wl, name, pts, outdir, fname, colors):
                what = f"{name} ({metric})" if multi else name
                wl.plots.append((fname, f"{wl.name}: {what}, the cases {name}/<n> against n"))
        except Exception as ex:  # a plot that fails leaves the rest
            print(f"report.py: {wl.name}: plot {name}: {ex}", file=sys.stderr)
            plt.close("all")
    case_metrics = {}
    for e in singles:
        case_metrics.setdefault(e.case, []).append(e.metric)
    for e in singles:
        multi = len(case_metrics[e.case]) > 1
        fname = namer(wl.name, e.case, e.metric if multi else "")
        try:
            if bar_plot(wl, e, outdir, fname, colors):
                what = f"{e.case} ({e.metric})" if multi else e.case
                wl.plots.append((fname, f"{wl.name}: {what}"))
        except Exception as ex:
            print(f"report.py: {wl.name}: plot {e.case}: {ex}", file=sys.stderr)
            plt.close("all")


# --- HTML ------------------------------------------------------------------------------------

CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 2px solid #ccc; }
h3 { margin-top: 1.4em; font-size: 1.1em; }
table { border-collapse: collapse; margin: 0.5em 0 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; vertical-align: top; }
th { background: #f0f0f0; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.base td { background: #f6f6ff; }
td.best { font-weight: bold; background: #eaffea; }
.ok { color: #060; } .bad { color: #b00; font-weight: bold; } .skip { color: #876; }
.note { color: #555; font-size: 0.9em; }
.noise { color: #888; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; margin: 0.3em 0; }
figure { margin: 0.5em 0 1.2em 0; } figcaption { color: #555; font-size: 0.85em; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em; }
dl.meta dt { font-weight: bold; } dl.meta dd { margin: 0; }
code { background: #f4f4f4; padding: 0 0.2em; }
"""


def status_span(status):
    cls = {"ok": "ok", "skipped": "skip"}.get(status, "bad")
    return f'<span class="{cls}">{esc(status or "?")}</span>'


def html_header(doc):
    m = as_dict(doc.get("machine"))
    out = ['<dl class="meta">']
    fields = [("command", doc.get("command")), ("scale", doc.get("scale")),
              ("runs", doc.get("runs")), ("noise test", doc.get("noise_test"))]
    labels = {"cpu": "CPU", "cpus": "CPUs", "memory_kib": "memory", "kernel": "kernel",
              "os": "OS", "date": "date", "commit": "commit", "host": "host"}
    for key, label in labels.items():
        if key in m:
            v = m[key]
            if key == "memory_kib" and as_num(v) is not None:
                v = f"{as_num(v) / 1048576:.1f} GiB ({int(as_num(v))} KiB)"
            fields.append((label, v))
    for key, v in m.items():
        if key not in labels:
            fields.append((key, v))
    for label, v in fields:
        if v is None or v == "":
            continue
        val = f"<code>{esc(v)}</code>" if label == "command" else esc(v)
        out.append(f"<dt>{esc(label)}</dt><dd>{val}</dd>")
    out.append("</dl>")
    version = doc.get("slabbench")
    if version not in (None, 1):
        out.append(f'<p class="bad">Schema version {esc(version)}; this report reads version 1 '
                   "and shows what it recognizes.</p>")
    return "\n".join(out)


def avg_text(entry, config):
    if entry is None:
        return ""
    r = entry.rows.get(config)
    if not r or r["avg"] is None:
        return ""
    unit = f" {entry.unit}" if entry.unit else ""
    return f"{fmt_num(r['avg'])}{unit}"


def html_winners(workloads):
    rows = []
    for wl in workloads:
        if wl.status == "skipped":
            continue
        for case, config, design in wl.winners():
            e = wl.entry_for(case)
            metric = f" <span class='note'>({esc(e.label())})</span>" if e else ""
            cfg = esc(config or "–")
            if config and e:
                cfg += f' <span class="note">{esc(avg_text(e, config))}</span>'
            des = esc(design or "–")
            if design and e:
                des += f' <span class="note">{esc(avg_text(e, design))}</span>'
                r = e.rows.get(design)
                if r and r["pct"] is not None:
                    des += f' <span class="note">{esc(fmt_pct(r["pct"]))} vs {esc(e.baseline)}'
                    des += ' ~' if r["noise"] else ""
                    des += "</span>"
            rows.append(f"<tr><td><a href='#w-{esc(sanitize(wl.name))}'>{esc(wl.name)}</a></td>"
                        f"<td>{esc(case)}{metric}</td><td>{cfg}</td><td>{des}</td></tr>")
    if not rows:
        return "<p class='note'>No results to rank.</p>"
    return ("<table><tr><th>workload</th><th>case</th><th>best config</th>"
            "<th>best design</th></tr>\n" + "\n".join(rows) + "</table>")


def html_targets(doc):
    targets = as_list(doc.get("targets"))
    if not targets:
        return "<p class='note'>No targets in this run.</p>"
    rows = []
    for t in targets:
        t = as_dict(t)
        met = as_bool(t.get("met"))
        mark = ('<span class="ok">met</span>' if met else '<span class="bad">not met</span>'
                if met is False else '<span class="skip">not tested</span>')
        rows.append(f"<tr><td>{esc(t.get('name'))}</td><td>{mark}</td>"
                    f"<td>{esc(t.get('detail'))}</td></tr>")
    return ("<table><tr><th>target</th><th>result</th><th>detail</th></tr>\n"
            + "\n".join(rows) + "</table>")


def html_configs(wl):
    if not wl.configs:
        return ""
    runs_by = {}
    for r in wl.runs:
        c = as_str(r.get("config"))
        ok = r.get("ok") is True
        d = runs_by.setdefault(c, [0, 0])
        d[0 if ok else 1] += 1
    rows = []
    for c in wl.configs:
        name = as_str(c.get("name"))
        ok, bad = runs_by.get(name, [0, 0])
        runs = f"{ok} ok" + (f", <span class='bad'>{bad} failed</span>" if bad else "")
        base = " <span class='note'>(baseline)</span>" if name == wl.baseline else ""
        rows.append(f"<tr><td>{esc(name)}{base}</td><td>{esc(c.get('what'))}</td>"
                    f"<td>{status_span(as_str(c.get('status'), 'ok'))}</td>"
                    f"<td class='num'>{runs}</td><td>{esc(c.get('why'))}</td></tr>")
    return ("<h3>Configurations</h3><table><tr><th>config</th><th>what</th><th>status</th>"
            "<th>runs</th><th>why</th></tr>\n" + "\n".join(rows) + "</table>")


def html_problems(wl):
    items = []
    for r in wl.runs:
        who = f"{as_str(r.get('config'), '?')} run {as_str(r.get('run'), '?')}"
        if r.get("ok") is False:
            items.append(f"<li><b>{esc(who)}</b> failed: {esc(r.get('error') or 'no reason given')}"
                         "</li>")
        for ch in as_list(r.get("checks")):
            ch = as_dict(ch)
            if ch.get("ok") is False:
                items.append(f"<li><b>{esc(who)}</b>: check <code>{esc(ch.get('name'))}</code> "
                             f"failed: {esc(ch.get('detail'))}</li>")
    if not items:
        return ""
    if len(items) > 50:
        items = items[:50] + [f"<li>… and {len(items) - 50} more</li>"]
    return "<h3>Failed runs and checks</h3><ul>" + "\n".join(items) + "</ul>"


def html_by_config(wl):
    out = []
    for e in wl.entries:
        best = e.best()
        rows = []
        for c in wl.config_names:
            r = e.rows.get(c)
            if r is None:
                continue
            cls = " class='base'" if c == e.baseline else ""
            mark = "~" if r["noise"] else ""
            base = " <span class='note'>(baseline)</span>" if c == e.baseline else ""
            cname = f"<td class='best'>{esc(c)}{base}</td>" if c == best else \
                f"<td>{esc(c)}{base}</td>"
            n = r["n"]
            rows.append(
                f"<tr{cls}>{cname}<td class='num'>{esc(fmt_num(n))}</td>"
                f"<td class='num'>{esc(fmt_num(r['min']))}</td>"
                f"<td class='num'>{esc(fmt_num(r['max']))}</td>"
                f"<td class='num'>{esc(fmt_num(r['avg']))}</td>"
                f"<td class='num'>{esc(fmt_num(r['sd']))}</td>"
                f"<td class='num'>{esc(fmt_pct(r['pct']))}</td>"
                f"<td class='num'>{esc(fmt_p(r['p']))}</td>"
                f"<td class='noise'>{mark}</td></tr>")
        missing = [c for c in wl.config_names if c not in e.rows]
        out.append(f"<h3>{esc(e.case)} <span class='note'>({esc(e.label())})</span></h3>")
        if rows:
            out.append("<table><tr><th>config</th><th>n</th><th>min</th><th>max</th><th>avg</th>"
                       f"<th>sd</th><th>% vs {esc(e.baseline or 'baseline')}</th><th>p</th>"
                       "<th>noise</th></tr>\n" + "\n".join(rows) + "</table>")
        else:
            out.append("<p class='note'>No configuration has data for this case.</p>")
        if missing and rows:
            out.append(f"<p class='note'>No data: {esc(', '.join(missing))}.</p>")
    return "\n".join(out)


def html_matrix(wl):
    configs = wl.config_names
    if not configs:
        return ""
    head = "".join(f"<th>{esc(c)}" + (" <span class='note'>(baseline)</span>" if c == wl.baseline
                                      else "") + "</th>" for c in configs)
    rows = []
    for e in wl.entries:
        best = e.best()
        cells = []
        for c in configs:
            r = e.rows.get(c)
            if r is None or r["avg"] is None:
                st = as_str(as_dict(wl.config_status.get(c)).get("status"))
                cells.append(f"<td class='num note'>{esc(st) if st and st != 'ok' else '–'}</td>")
                continue
            text = fmt_num(r["avg"])
            if c == e.baseline:
                text += " (base)"
            elif r["pct"] is not None:
                text += f" ({fmt_pct(r['pct'])})"
            if r["noise"]:
                text += " ~"
            cls = "num best" if c == best else "num"
            cells.append(f"<td class='{cls}'>{esc(text)}</td>")
        rows.append(f"<tr><td>{esc(e.case)}</td><td class='note'>{esc(e.label())}</td>"
                    + "".join(cells) + "</tr>")
    if not rows:
        return ""
    return ("<h3>Results</h3><table><tr><th>case</th><th>metric</th>" + head + "</tr>\n"
            + "\n".join(rows) + "</table>"
            "<p class='note'>avg (% better than the baseline); ~: within noise; bold: best.</p>")


def html_notes(wl):
    """The runs' notes (peak RSS, slow-path shares), averaged over each configuration's ok
    runs; the design counters of --counters have a table of their own (html_counters)."""
    keys, per = [], {}
    for r in wl.runs:
        if r.get("ok") is False:
            continue
        c = as_str(r.get("config"))
        d = per.setdefault(c, {})
        wall = as_num(r.get("wall_s"))
        items = list(as_dict(r.get("notes")).items())
        if wall is not None:
            items.insert(0, ("wall_s", wall))
        for k, v in items:
            v = as_num(v)
            if v is None or k.startswith(COUNTER):
                continue
            if k not in keys:
                keys.append(k)
            d.setdefault(k, []).append(v)
    if not keys:
        return ""
    rows = []
    for c in wl.config_names:
        if c not in per:
            continue
        cells = "".join(
            f"<td class='num'>{esc(fmt_num(sum(per[c][k]) / len(per[c][k])) if per[c].get(k) else '–')}</td>"
            for k in keys)
        rows.append(f"<tr><td>{esc(c)}</td>{cells}</tr>")
    return ("<h3>Run notes <span class='note'>(averages over ok runs)</span></h3><table><tr>"
            "<th>config</th>" + "".join(f"<th>{esc(k)}</th>" for k in keys) + "</tr>\n"
            + "\n".join(rows) + "</table>")


def html_counters(wl):
    """`slabbench --counters`: each design counter per 1000 allocations (the runs' sums over
    the allocations they made), a row per counter, a column per configuration that has them."""
    allocs_key = COUNTER + "allocs"
    sums, cols, names = {}, [], []
    for r in wl.runs:
        if r.get("ok") is False:
            continue
        notes = as_dict(r.get("notes"))
        allocs = as_num(notes.get(allocs_key))
        if allocs is None:
            continue
        c = as_str(r.get("config"))
        if c not in sums:
            sums[c] = {"": 0.0}
        sums[c][""] += allocs
        for k, v in notes.items():
            v = as_num(v)
            if v is None or not k.startswith(COUNTER) or k == allocs_key:
                continue
            name = k[len(COUNTER):]
            if name not in names:
                names.append(name)
            sums[c][name] = sums[c].get(name, 0.0) + v
    cols = [c for c in wl.config_names if c in sums] + [c for c in sums if c not in wl.config_names]
    if not cols or not names:
        return ""
    def cell(c, n):
        v, allocs = sums[c].get(n), sums[c][""]
        return esc(fmt_num(v / allocs * 1000)) if v and allocs else "–"

    rows = []
    for n in sorted(names):
        cells = "".join(f"<td class='num'>{cell(c, n)}</td>" for c in cols)
        rows.append(f"<tr><td>{esc(n)}</td>{cells}</tr>")
    return ("<h3>Design counters <span class='note'>(per 1000 allocations, over the ok runs)"
            "</span></h3><table><tr><th>counter</th>"
            + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>\n" + "\n".join(rows)
            + "</table>")


def html_workload(wl):
    out = [f"<h2 id='w-{esc(sanitize(wl.name))}'>{esc(wl.name)} {status_span(wl.status)}</h2>"]
    raw = wl.raw
    if raw.get("seed"):
        out.append(f"<p><b>Seed:</b> {esc(raw.get('seed'))}</p>")
    if wl.status == "skipped":
        out.append(f"<p class='skip'><b>Skipped:</b> {esc(wl.why or 'no reason given')}</p>")
        return "\n".join(out)
    if wl.why:
        out.append(f"<p class='bad'><b>{esc(wl.status)}:</b> {esc(wl.why)}</p>")
    if raw.get("maps_to"):
        out.append(f"<p><b>Maps to:</b> {esc(raw.get('maps_to'))}</p>")
    if raw.get("cannot"):
        out.append(f"<p><b>Cannot:</b> {esc(raw.get('cannot'))}</p>")
    params = as_dict(raw.get("params"))
    if params:
        ps = ", ".join(f"{k}={as_str(v)}" for k, v in params.items())
        out.append(f"<p><b>Parameters:</b> <code>{esc(ps)}</code></p>")
    if wl.baseline:
        out.append(f"<p><b>Baseline:</b> {esc(wl.baseline)}</p>")
    out.append(html_configs(wl))
    out.append(html_problems(wl))
    if wl.computed:
        out.append("<p class='note'>The JSON has no summary for this workload; the table below "
                   "is computed from its runs, without a noise test.</p>")
    if not wl.entries:
        out.append("<p class='note'>No results.</p>")
    elif wl.layout == "matrix":
        out.append(html_matrix(wl))
    else:
        out.append(html_by_config(wl))
    out.append(html_notes(wl))
    out.append(html_counters(wl))
    if wl.plots:
        out.append("<h3>Plots</h3>")
        for fname, caption in wl.plots:
            out.append(f"<figure><img src='{esc(fname)}' alt='{esc(caption)}' width='900' "
                       f"height='500'><figcaption>{esc(caption)}</figcaption></figure>")
    return "\n".join(p for p in out if p)


def render(doc, workloads):
    m = as_dict(doc.get("machine"))
    title = "slabbench report"
    if m.get("date"):
        title += f" – {as_str(m.get('date'))}"
    toc = " · ".join(f"<a href='#w-{esc(sanitize(w.name))}'>{esc(w.name)}</a>" for w in workloads)
    parts = [
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>", html_header(doc),
        f"<p>Workloads: {toc}</p>" if toc else "<p class='note'>No workloads in this run.</p>",
        "<h2>Summary: who won</h2>",
        "<p class='note'>Per case, the best average among all configurations and among "
        f"slabkit's designs ({esc(', '.join(DESIGNS))} and their variants).</p>",
        html_winners(workloads), "<h2>Targets</h2>", html_targets(doc),
    ]
    for wl in workloads:
        parts.append(html_workload(wl))
    if not HAVE_MPL:
        parts.append("<p class='bad'>matplotlib was not available: no plots.</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def main(argv):
    if len(argv) != 3:
        print("usage: report.py RESULTS.json OUTDIR", file=sys.stderr)
        return 2
    src, outdir = argv[1], argv[2]
    os.makedirs(outdir, exist_ok=True)
    try:
        with open(src, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as ex:
        print(f"report.py: {src}: {ex}", file=sys.stderr)
        with open(os.path.join(outdir, "index.html"), "w", encoding="utf-8") as f:
            f.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>slabbench report"
                    f"</title></head><body><p>Could not read {esc(src)}: {esc(str(ex))}</p>"
                    "</body></html>\n")
        return 1
    doc = as_dict(doc)
    global DESIGNS
    designs = [d for d in as_list(doc.get("designs")) if isinstance(d, str) and d]
    if designs:
        DESIGNS = tuple(designs)
    workloads = [Workload(w) for w in as_list(doc.get("workloads"))]
    all_configs = []
    for wl in workloads:
        for c in wl.config_names:
            if c not in all_configs:
                all_configs.append(c)
    if not HAVE_MPL:
        print("report.py: matplotlib not available (use /usr/bin/python3): no plots",
              file=sys.stderr)
    colors = Colors(all_configs)
    namer = Namer()
    namer.used.add("index")
    for wl in workloads:
        make_plots(wl, outdir, colors, namer)
    with open(os.path.join(outdir, "index.html"), "w", encoding="utf-8") as f:
        f.write(render(doc, workloads))
    nplots = sum(len(w.plots) for w in workloads)
    print(f"report.py: {os.path.join(outdir, 'index.html')} ({len(workloads)} workloads, "
          f"{nplots} plots)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
