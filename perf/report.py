#!/usr/bin/python3
"""Side-by-side report of tacl, Open MPI and Gloo (see report.sh).

report.py RAW_DIR OUT_DIR
    Reads the results report.sh collected in RAW_DIR (one JSON file per
    run, named SETTING.RANKS.COLL.PART.LIBRARY.ALGO.json, machine.txt,
    memcpy.txt) and writes OUT_DIR/report.csv, OUT_DIR/report.md and one
    PNG per collective and setting (busbw against size).

The parser reads both the JSON (-J) and the text table the perf binaries
print (nccl-tests' layout, with or without tacl-cluster's line prefix);
busbw is recomputed from size and time with nccl-tests' factors.
"""
import csv
import json
import math
import os
import re
import sys

# nccl-tests' bus bandwidth factors (busbw = algbw * factor).
def bus_factor(collective, nranks):
    """The nccl-tests factor of a collective on nranks ranks."""
    n = float(nranks)
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    return 1.0


def algbw(nbytes, time_us):
    """GB/s (1e9 bytes per second) of nbytes moved in time_us."""
    return nbytes / 1e3 / time_us if time_us > 0 else 0.0


def busbw(collective, nranks, nbytes, time_us):
    """nccl-tests' bus bandwidth in GB/s."""
    return algbw(nbytes, time_us) * bus_factor(collective, nranks)


COLL_ALIASES = {
    "allgather": "all_gather", "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
    "allreduce": "all_reduce", "all_reduce": "all_reduce",
}

_HEADER = re.compile(r"#\s*(\S+)\s+\((\w+)\):\s+nRanks\s+(\d+)")
_COLL = re.compile(r"#\s*collective:\s*(\S+)\s+algorithm:\s*(\S+)")
_PREFIX = re.compile(r"^\[node \d+ rank \d+\] ")


def _num(text):
    return float(text)


def _wrong(text):
    return -1 if text == "N/A" else int(float(text))


def parse_text(text):
    """Parse one run's printed output into the JSON layout of -J."""
    run = {"library": None, "collective": None, "nranks": None,
           "algorithm": "auto", "results": []}
    for line in text.splitlines():
        line = _PREFIX.sub("", line).rstrip()
        m = _HEADER.match(line)
        if m:
            run["library"] = m.group(2)
            run["nranks"] = int(m.group(3))
            continue
        m = _COLL.match(line)
        if m:
            run["collective"] = m.group(1)
            run["algorithm"] = m.group(2)
            continue
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) != 13 or not f[0].isdigit():
            continue
        row = {"size": int(f[0]), "count": int(f[1])}
        for name, at in (("out_of_place", 5), ("in_place", 9)):
            row[name] = {"time_us": _num(f[at]), "algbw": _num(f[at + 1]),
                         "busbw": _num(f[at + 2]),
                         "wrong": _wrong(f[at + 3])}
        run["results"].append(row)
    if run["collective"] is None or run["nranks"] is None:
        raise ValueError("no perf header in the output")
    return run


def parse_file(path):
    """A run from a -J file or a saved text output."""
    with open(path) as f:
        text = f.read()
    if text.lstrip().startswith("{"):
        return json.loads(text)
    return parse_text(text)


def records(run, setting, library=None, algorithm=None, default=False):
    """CSV rows of one run: one per size and placement, busbw recomputed."""
    coll = COLL_ALIASES.get(run["collective"], run["collective"])
    lib = library or run["library"]
    algo = algorithm or run.get("algorithm") or "auto"
    algo = algo.split("=", 1)[-1]
    out = []
    for r in run["results"]:
        for place in ("out_of_place", "in_place"):
            res = r[place]
            out.append({
                "library": lib, "algorithm": algo, "setting": setting,
                "ranks": int(run["nranks"]), "collective": coll,
                "bytes": int(r["size"]), "time_us": float(res["time_us"]),
                "busbw": busbw(coll, run["nranks"], r["size"],
                               res["time_us"]),
                "placement": place, "wrong": int(res["wrong"]),
                "default": default,
            })
    return out


# File names: SETTING.RANKS.COLL.PART.LIBRARY.ALGO.json
_NAME = re.compile(r"^(?P<setting>[^.]+)\.(?P<ranks>\d+)\.(?P<coll>\w+)\."
                   r"(?P<part>\d+)\.(?P<lib>\w+)\.(?P<algo>[\w-]+)\.json$")
DEFAULTS = ("auto", "tuned", "default")
LIB_NAMES = {"tacl": "tacl", "ompi": "Open MPI", "gloo": "Gloo"}


def collect(raw_dir):
    """All rows of the runs in raw_dir."""
    rows = []
    for name in sorted(os.listdir(raw_dir)):
        m = _NAME.match(name)
        if not m:
            continue
        try:
            run = parse_file(os.path.join(raw_dir, name))
        except (ValueError, OSError, KeyError) as e:
            print("report.py: skipping %s: %s" % (name, e), file=sys.stderr)
            continue
        algo = m.group("algo")
        if algo == "default":
            algo = run.get("algorithm") or "default"
        rows += records(run, m.group("setting"), m.group("lib"), algo,
                        m.group("algo") in DEFAULTS)
    return rows


def read_machine(raw_dir):
    info = {}
    try:
        with open(os.path.join(raw_dir, "machine.txt")) as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    info[k.strip()] = v.strip()
    except OSError:
        pass
    return info


def memcpy_figures(raw_dir):
    """(size, one thread, all threads) rows of memcpy_bw's output."""
    out = []
    try:
        with open(os.path.join(raw_dir, "memcpy.txt")) as f:
            for line in f:
                f_ = line.split()
                if len(f_) >= 3 and f_[0].isdigit():
                    out.append((int(f_[0]), float(f_[1]), float(f_[2])))
    except OSError:
        pass
    return out


def size_name(nbytes):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= div:
            v = nbytes / div
            return ("%d%s" if v == int(v) else "%.1f%s") % (v, unit)
    return str(nbytes)


def series_name(lib, algo):
    return "%s %s" % (LIB_NAMES.get(lib, lib), algo)


def write_csv(rows, path):
    cols = ["library", "algorithm", "setting", "ranks", "collective",
            "bytes", "time_us", "busbw", "placement", "wrong"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([r[c] if c not in ("time_us", "busbw") else
                        "%.3f" % r[c] if c == "time_us" else "%.4f" % r[c]
                        for c in cols])


def groups(rows):
    """{(setting, ranks, coll): {(lib, algo, default): {bytes: row}}}."""
    g = {}
    for r in rows:
        if r["placement"] != "out_of_place":
            continue
        key = (r["setting"], r["ranks"], r["collective"])
        s = g.setdefault(key, {}).setdefault(
            (r["library"], r["algorithm"], r["default"]), {})
        s[r["bytes"]] = r
    return g


def order(series):
    rank = {"tacl": 0, "ompi": 1, "gloo": 2}
    return sorted(series, key=lambda k: (rank.get(k[0], 9), not k[2], k[1]))


def plot(g, out_dir):
    """One PNG per collective and setting; returns the file names."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report.py: no matplotlib, no plots", file=sys.stderr)
        return {}
    names = {}
    styles = {"tacl": "-", "ompi": "--", "gloo": ":"}
    for key in sorted(g):
        setting, ranks, coll = key
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for s in order(g[key]):
            pts = sorted(g[key][s].items())
            ax.plot([p[0] for p in pts], [p[1]["busbw"] for p in pts],
                    styles.get(s[0], "-"), marker="o",
                    label=series_name(s[0], s[1]))
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({b for s in g[key].values() for b in s}))
        ax.set_xticklabels([size_name(b) for b in ax.get_xticks()])
        ax.set_xlabel("size (bytes, float32)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title("%s, %s, %d ranks" % (coll, setting, ranks))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        name = "%s-%s-%d.png" % (coll, setting, ranks)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, name), dpi=90)
        plt.close(fig)
        names[key] = name
    return names


def ratio(a, b):
    return a / b if a and b else None


def geomean(vals):
    vals = [v for v in vals if v]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def fmt(v, spec="%.2f"):
    return "-" if v is None else spec % v


def default_of(series, lib):
    for s in series:
        if s[0] == lib and s[2]:
            return s
    return None


def peer_columns(series):
    """The peers tacl's default is compared with: each peer's default,
    plus Open MPI's HAN."""
    peers = []
    for s in order(series):
        if s[0] != "tacl" and (s[2] or s[1] == "han"):
            peers.append(s)
    return peers


def write_md(g, rows, raw_dir, out_dir, plots):
    m = read_machine(raw_dir)
    lines = ["# tacl vs Open MPI vs Gloo", ""]
    lines.append("Generated by `perf/report.sh` (`%s`); busbw in GB/s "
                 "(nccl-tests formulas: all-gather and reduce-scatter "
                 "algbw * (n-1)/n, all-reduce algbw * 2(n-1)/n), float32, "
                 "out of place, time = mean over ranks." %
                 m.get("command", "perf/report.sh BUILD OUT"))
    lines.append("")
    lines.append("Measured on: %s; %s CPUs (nproc), %s; kernel %s; "
                 "%s memory; %s." % (
                     m.get("host", "?"), m.get("nproc", "?"),
                     m.get("cpu", "?"), m.get("kernel", "?"),
                     m.get("memory", "?"), m.get("date", "?")))
    lines.append("Load average at start / end: %s / %s (the machine is "
                 "shared; figures are noisy). Run time %s s. %s; Gloo %s." %
                 (m.get("loadavg_start", "?"), m.get("loadavg_end", "?"),
                  m.get("runtime_s", "?"), m.get("openmpi", "Open MPI ?"),
                  m.get("gloo", "?")))
    lines.append("")
    mc = memcpy_figures(raw_dir)
    if mc:
        lines.append("memcpy_bw (2 threads, GB/s of bytes copied): " +
                     ", ".join("%s: %.2f" % (size_name(s), a)
                               for s, _, a in mc) +
                     "; one thread: " +
                     ", ".join("%s: %.2f" % (size_name(s), o)
                               for s, o, _ in mc) + ".")
        lines.append("")
    lines.append("Settings: `shm` = one node, shared memory (tacl: "
                 "tacl-run; Open MPI: btl self,vader with CMA, `tuned` "
                 "default or `han` = coll_han_priority 100; Gloo: TCP on "
                 "the loopback). `cluster-NxR-RATE` = tacl-cluster's "
                 "emulated nodes, uplinks shaped to RATE (Open MPI: mpirun "
                 "on node 0, its daemons started with ip netns exec, btl "
                 "self,vader,tcp).")
    lines.append("")
    wrong = [r for r in rows if r["wrong"] > 0]
    if wrong:
        lines.append("**Wrong results**: " + ", ".join(
            "%s %s %s %d ranks %s %s" % (r["library"], r["algorithm"],
                                         r["collective"], r["ranks"],
                                         size_name(r["bytes"]),
                                         r["placement"]) for r in wrong))
        lines.append("")
    # Summary: geometric mean over sizes of tacl's ratio to each peer.
    lines.append("## Summary: tacl (auto) / peer, geometric mean over sizes")
    lines.append("")
    lines.append("| setting | ranks | collective | peer | ratio |")
    lines.append("|---|---|---|---|---|")
    for key in sorted(g):
        series = g[key]
        t = default_of(series, "tacl")
        if t is None:
            continue
        for p in peer_columns(series):
            rs = [ratio(series[t][b]["busbw"], series[p][b]["busbw"])
                  for b in series[t] if b in series[p]]
            lines.append("| %s | %d | %s | %s | %s |" % (
                key[0], key[1], key[2], series_name(p[0], p[1]),
                fmt(geomean(rs))))
    lines.append("")
    for key in sorted(g):
        setting, ranks, coll = key
        series = g[key]
        cols = order(series)
        t = default_of(series, "tacl")
        peers = peer_columns(series) if t else []
        lines.append("## %s, %s, %d ranks" % (coll, setting, ranks))
        lines.append("")
        head = ["size"] + [series_name(s[0], s[1]) for s in cols] + \
            ["tacl/%s" % series_name(p[0], p[1]) for p in peers]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for b in sorted({b for s in series.values() for b in s}):
            cells = [size_name(b)]
            for s in cols:
                r = series[s].get(b)
                cells.append(fmt(r["busbw"] if r else None) +
                             (" (!)" if r and r["wrong"] > 0 else ""))
            for p in peers:
                a, o = series[t].get(b), series[p].get(b)
                cells.append(fmt(ratio(a["busbw"] if a else None,
                                       o["busbw"] if o else None)))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        if key in plots:
            lines.append("![%s](%s)" % (plots[key], plots[key]))
            lines.append("")
    for log, title in (("failures.log", "Runs that failed"),
                       ("skipped.log", "Runs skipped")):
        path = os.path.join(raw_dir, log)
        if os.path.exists(path) and os.path.getsize(path) > 0:
            lines.append("## " + title)
            lines.append("")
            with open(path) as f:
                lines += ["- " + l.strip() for l in f if l.strip()]
            lines.append("")
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines))


def generate(raw_dir, out_dir):
    rows = collect(raw_dir)
    if not rows:
        print("report.py: no results in %s" % raw_dir, file=sys.stderr)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    write_csv(rows, os.path.join(out_dir, "report.csv"))
    g = groups(rows)
    plots = plot(g, out_dir)
    write_md(g, rows, raw_dir, out_dir, plots)
    print("report.py: %d rows; wrote %s/report.csv, report.md and %d "
          "plots" % (len(rows), out_dir, len(plots)))
    return 0


def main(argv):
    if len(argv) == 2:
        return generate(argv[0], argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
