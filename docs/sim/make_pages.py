#!/usr/bin/env python3
"""Writes the simulator's p4d and p5 pages (docs/sim/p4d.md, p5.md and
their SVG plots) by running tacl-sim over a grid, caching every figure in
docs/sim/results.csv.

usage: docs/sim/make_pages.py [--build DIR] [--jobs N] [--reuse]
           [--topos NAME,...] [--nodes N,...] [--colls C,...]
           [--sizes MIN:MAX:FACTOR]
           [--direct] [--pages-only] [--out DIR] [--cache FILE]

For each topology (topologies/NAME.topo), node count, collective and
size it simulates, out of place in fp16, the all-gathers ring, MiCS,
H-Ring, HO-Ring, Bruck, recursive doubling and qwZ 8-bit (over MiCS)
and the reduce-scatters ring, MiCS, H-Ring, HO-Ring, recursive doubling
and qgZ 4-bit, plus the closed-form tuner's own choice (tacl-sim -A
auto); one tacl-sim run per (topology, nodes, collective, algorithm,
size), --jobs at a time.  The direct algorithms are simulated only with
--direct (or where they are the tuner's choice): at 64 and more nodes
they cost minutes each in this simulator.

Without --reuse every cell of the grid is simulated again and the cache
holds exactly the grid; with --reuse the cache's rows are kept and only
the missing cells simulated (so an interrupted run resumes, and
`--reuse` on a complete cache only rewrites the pages); --pages-only
simulates nothing and shows the cells missing from the cache as -.  The
cache is appended to as cells finish and rewritten sorted at the end, so
the output is the same whatever the order the jobs finished in.

Python 3 standard library only.  Every figure is a prediction of the
model in sim/sim.h, not a measurement.
"""
import argparse
import concurrent.futures
import csv
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "perf"))
import svg_chart  # noqa: E402  (perf/svg_chart.py)

COLLS = ["all_gather", "reduce_scatter"]

# (variant, -A name, -Q bits, label); the variant names the cache's rows.
_HIER = [("ring", "ring", 0, "ring"), ("mics", "mics", 0, "MiCS"),
         ("hring", "hring", 0, "H-Ring"), ("horing", "horing", 0, "HO-Ring")]
_RD = ("rd", "rd", 0, "rec. doubling")
_LAST = [("direct", "direct", 0, "direct"),
         ("model", "auto", 0, "closed-form choice")]
VARIANTS = {
    "all_gather": _HIER + [("qwz8", "mics", 8, "qwZ 8-bit"),
                           ("bruck", "bruck", 0, "Bruck"), _RD] + _LAST,
    "reduce_scatter": _HIER + [("qgz4", "auto", 4, "qgZ 4-bit"),
                               _RD] + _LAST,
}
# Plotted and tabled per collective: the algorithms (and the
# reduce-scatter's H-Ring and HO-Ring, simulated anyway for the best).
SHOWN = {
    "all_gather": ["ring", "mics", "hring", "horing", "qwz8"],
    "reduce_scatter": ["ring", "mics", "hring", "horing", "qgz4"],
}
FIELDS = ["topology", "nodes", "ranks_per_node", "collective", "variant",
          "size", "algorithm", "time_us", "busbw", "net_bytes", "commit"]
DEFAULT_TOPOS = "p4d.24xlarge,p5.48xlarge"
DEFAULT_NODES = "2,4,8,16,32,64,128"
DEFAULT_SIZES = "1M:1G:4"


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s and s[-1].upper() in mult:
        return int(s[:-1]) * mult[s[-1].upper()]
    return int(s)


def size_name(b):
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= m and b % m == 0:
            return f"{b // m} {unit}B"
    return f"{b} B"


def sizes_of(spec):
    lo, hi, f = spec.split(":")
    lo, hi, f = parse_size(lo), parse_size(hi), int(f)
    if lo < 1 or hi < lo or f < 2:
        raise ValueError(f"bad --sizes {spec}")
    out = [lo]
    while out[-1] * f <= hi:
        out.append(out[-1] * f)
    return out


# What tacl-sim is built from: its figures change only with these.
SIM_SOURCES = ["sim", "algorithms", "core", "include", "topologies",
               "tools/tacl_sim.c", "perf/common.c", "perf/common.h"]


def commit_of_tree():
    """The last commit that changed the simulator's sources (short hash),
    with "+changes" when the working tree changes them further."""
    def git(*a):
        return subprocess.run(["git", "-C", ROOT] + list(a), check=True,
                              capture_output=True, text=True).stdout.strip()
    try:
        last = git("log", "-1", "--format=%h", "--abbrev=12", "--",
                   *SIM_SOURCES)
        dirty = git("status", "--porcelain", "--", *SIM_SOURCES)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return (last or "unknown") + ("+changes" if dirty else "")


def key_of(r):
    return (r["topology"], int(r["nodes"]), r["collective"], r["variant"],
            int(r["size"]))


def read_cache(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for r in csv.DictReader(line for line in f
                                if not line.startswith("#")):
            rows[key_of(r)] = r
    return rows


def write_cache(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        f.write("# tacl-sim predictions (docs/sim/make_pages.py); "
                "time_us and busbw out of place\n")
        w = csv.DictWriter(f, FIELDS, lineterminator="\n")
        w.writeheader()
        for k in sorted(rows):
            w.writerow({n: rows[k][n] for n in FIELDS})
    os.replace(tmp, path)


# The tuner's INFO line (algorithms/registry.c) naming its choice.
CHOICE_RE = re.compile(r"elements on \d+ ranks, \d+ nodes: (\S+) "
                       r"\(modelled")


def tacl_sim_cmd(tool, topo_path, task, js):
    topo, nodes, coll, variant, size = task
    _, algo, qbits, _ = next(v for v in VARIANTS[coll] if v[0] == variant)
    cmd = [tool, "--topo", topo_path, "--nodes", str(nodes), "--coll", coll,
           "-d", "half", "-b", str(size), "-e", str(size), "-A", algo,
           "-J", js]
    return cmd + (["-Q", str(qbits)] if qbits else [])


def simulate(tool, topo_path, task, commit, known=()):
    """One tacl-sim run of one cell: its cache row; for the tuner's
    choice ("model") that is one of `known`, the choice's name alone.

    Under -A auto every rank of the simulation runs the closed-form
    selection, which costs minutes at 1024 ranks (against a second for a
    forced Bruck); the first rank's selection names the choice at once
    (TACL_DEBUG=INFO, subsystem TUNE), and a simulation of that
    algorithm in the same cell is the same schedule, so the run stops
    there.  Without that line it runs to the end."""
    topo, nodes, coll, variant, size = task
    with tempfile.TemporaryDirectory() as d:
        js = os.path.join(d, "out.json")
        cmd = tacl_sim_cmd(tool, topo_path, task, js)
        env = dict(os.environ)
        if variant == "model":
            env.update(TACL_DEBUG="INFO", TACL_DEBUG_SUBSYS="TUNE")
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env=env)
        tail = []
        for line in p.stderr:
            m = CHOICE_RE.search(line) if variant == "model" else None
            if m and m.group(1) in known:
                p.kill()
                p.wait()
                p.stderr.close()
                return {"choice": m.group(1)}
            tail = (tail + [line])[-20:]
        if p.wait() != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): "
                               f"{''.join(tail).strip()[-500:]}")
        with open(js) as f:
            data = json.load(f)
    res = data["results"][0]
    oop = res["out_of_place"]
    return {"topology": topo, "nodes": nodes,
            "ranks_per_node": data["nranks"] // nodes, "collective": coll,
            "variant": variant, "size": size,
            "algorithm": res["counters"]["algorithm"],
            "time_us": "%.9g" % oop["time_us"],
            "busbw": "%.6g" % oop["busbw"],
            "net_bytes": res["counters"]["bytes"]["net"], "commit": commit}


def run_grid(args, tasks, rows):
    # The tuner's cells after the others of their node count: one may
    # wait for its choice's cell, which is then already running or done.
    todo = sorted((t for t in tasks if t not in rows),
                  key=lambda t: (t[1], t[3] == "model"))
    if not todo:
        return
    tool = os.path.join(args.build, "tools", "tacl-sim")
    if not os.access(tool, os.X_OK):
        sys.exit(f"make_pages: no {tool} (build it: ninja -C {args.build})")
    commit = commit_of_tree()
    lock = threading.Lock()
    start = time.time()
    done = [0]
    fresh = not os.path.exists(args.cache)
    cache = open(args.cache, "a", newline="")
    w = csv.DictWriter(cache, FIELDS, lineterminator="\n")
    if fresh:
        cache.write("# partial: rewritten sorted when the run ends\n")
        w.writeheader()

    grid, failed = set(tasks), set()

    def one(task):
        t0 = time.time()
        topo_path = os.path.join(ROOT, "topologies", task[0] + ".topo")
        known = {v for v in EXACT
                 if v != "model" and task[:3] + (v, task[4]) in grid}
        try:
            row = simulate(tool, topo_path, task, commit, known)
        except Exception:
            failed.add(task)
            raise
        if "choice" in row:  # the chosen algorithm's own cell, once done
            choice = task[:3] + (row["choice"], task[4])
            while choice not in rows:
                if choice in failed:
                    raise RuntimeError(f"{choice} failed")
                time.sleep(0.2)
            row = dict(rows[choice], variant="model")
        with lock:
            rows[task] = row
            w.writerow(row)
            cache.flush()
            done[0] += 1
            cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
            print(f"[{done[0]}/{len(todo)} {time.time() - start:6.0f}s, "
                  f"cpu {cpu.ru_utime + cpu.ru_stime:6.0f}s] "
                  f"{task[0]} {task[1]} nodes {task[2]} {task[3]} "
                  f"{size_name(task[4])}: {time.time() - t0:.1f} s",
                  file=sys.stderr, flush=True)

    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            for f in [ex.submit(one, t) for t in todo]:
                f.result()
    finally:
        cache.close()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"make_pages: {len(todo)} simulations in "
          f"{time.time() - start:.0f} s ({cpu.ru_utime + cpu.ru_stime:.0f} "
          "s of CPU)", file=sys.stderr)


def grid_tasks(args):
    tasks = []
    for nodes in args.nodes:
        for topo in args.topos:
            for coll in args.colls:
                for size in args.sizes:
                    for v in VARIANTS[coll]:
                        if v[0] == "direct" and not args.direct:
                            continue
                        tasks.append((topo, nodes, coll, v[0], size))
    return tasks


def main():
    ap = argparse.ArgumentParser(
        description="Simulate the p4d/p5 grid and write docs/sim's pages.")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reuse", action="store_true",
                    help="keep the cache's rows; simulate only the rest")
    ap.add_argument("--topos", default=DEFAULT_TOPOS)
    ap.add_argument("--nodes", default=DEFAULT_NODES)
    ap.add_argument("--colls", default=",".join(COLLS),
                    help="collectives to simulate (both by default)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help="MIN:MAX:FACTOR, K/M/G suffixes (1M:1G:4)")
    ap.add_argument("--pages-only", action="store_true",
                    help="simulate nothing: pages from the cache as it is")
    ap.add_argument("--direct", action="store_true",
                    help="simulate the direct algorithms everywhere")
    ap.add_argument("--out", default=HERE, help="pages' folder")
    ap.add_argument("--cache", default=None,
                    help="results CSV (OUT/results.csv)")
    args = ap.parse_args()
    try:
        args.topos = [t for t in args.topos.split(",") if t]
        args.nodes = [int(n) for n in args.nodes.split(",") if n]
        args.colls = [c for c in args.colls.split(",") if c]
        if not args.colls or set(args.colls) - set(COLLS):
            raise ValueError(f"--colls takes {','.join(COLLS)}")
        args.sizes = sizes_of(args.sizes)
    except ValueError as e:
        sys.exit(f"make_pages: {e}")
    if args.jobs < 1 or not args.topos or not args.nodes or \
            min(args.nodes) < 1:
        sys.exit("make_pages: --jobs, --topos and --nodes need values >= 1")
    for t in args.topos:
        if not os.path.exists(os.path.join(ROOT, "topologies", t + ".topo")):
            sys.exit(f"make_pages: no topologies/{t}.topo")
    os.makedirs(args.out, exist_ok=True)
    args.cache = args.cache or os.path.join(args.out, "results.csv")
    tasks = grid_tasks(args)
    args.reuse |= args.pages_only
    rows = read_cache(args.cache) if args.reuse else {}
    if not args.reuse and os.path.exists(args.cache):
        os.remove(args.cache)
    elif args.reuse:
        write_cache(args.cache, rows)  # drops a partial run's comment
    if not args.pages_only:
        run_grid(args, tasks, rows)
    if not args.reuse:
        rows = {k: r for k, r in rows.items() if k in set(tasks)}
    write_cache(args.cache, rows)
    write_pages(args, rows)


# The exact algorithms, the simulated best's candidates (the quantized
# ones change the data and the tuner never picks them).
EXACT = ["ring", "mics", "hring", "horing", "bruck", "rd", "direct",
         "model"]
LABEL = {v: lab for c in COLLS for v, _, _, lab in VARIANTS[c]}
README_BEGIN = "<!-- make_pages.py: begin -->"
README_END = "<!-- make_pages.py: end -->"
COMMAND = "docs/sim/generate.sh build"


def page_name(topo):
    return topo.split(".")[0]


def bw(v):
    return "-" if v is None else "%.0f" % v if v >= 100 else \
        "%.1f" % v if v >= 10 else "%.2f" % v


def cell(rows, topo, nodes, coll, variant, size):
    return rows.get((topo, nodes, coll, variant, size))


def tuner_cells(rows, topo, nodes_list, coll, sizes):
    """Per cell with the tuner's run: (nodes, size, its choice, the best
    exact algorithm, the choice's time over the best's, the best's
    busbw)."""
    out = []
    for nodes in nodes_list:
        for size in sizes:
            m = cell(rows, topo, nodes, coll, "model", size)
            if m is None:
                continue
            ex = {v: r for v in EXACT
                  if (r := cell(rows, topo, nodes, coll, v, size))}
            best = min(ex, key=lambda v: (float(ex[v]["time_us"]),
                                          v == "model"))
            out.append((nodes, size, m["algorithm"], ex[best]["algorithm"],
                        float(m["time_us"]) / float(ex[best]["time_us"]),
                        float(ex[best]["busbw"])))
    return out


def algo_label(name):
    return LABEL.get(name, name)


def size_chart(rows, topo, nodes, coll, sizes):
    series = [(LABEL[v], [(s, float(r["busbw"]) if (r := cell(
        rows, topo, nodes, coll, v, s)) else None) for s in sizes])
        for v in SHOWN[coll] + ["model"]]
    return svg_chart.line_chart(
        series, f"{topo}, {nodes} nodes: {coll} busbw (predicted, fp16)",
        "size", "busbw (GB/s)", xlog=True, ylog=True, xticks=sizes,
        xfmt=lambda b: size_name(int(b)).replace(" ", ""))


def nodes_chart(rows, topo, nodes_list, coll, size):
    series = [(LABEL[v], [(n, float(r["busbw"]) if (r := cell(
        rows, topo, n, coll, v, size)) else None) for n in nodes_list])
        for v in SHOWN[coll] + ["model"]]
    return svg_chart.line_chart(
        series, f"{topo}, {size_name(size)}: {coll} busbw against nodes "
        "(predicted, fp16)", "nodes (8 GPUs each)", "busbw (GB/s)",
        xlog=True, ylog=True, xticks=nodes_list)


def topo_lines(topo):
    keep = ("link", "node", "fabric", "kernel")
    out, seen_node = [], False
    with open(os.path.join(ROOT, "topologies", topo + ".topo")) as f:
        for line in f:
            w = line.split()
            if not w or w[0] not in keep or (w[0] == "node" and seen_node):
                continue
            seen_node |= w[0] == "node"
            out.append(line.rstrip())
    return out


def ratio_summary(cells):
    """Lines summarising the tuner's ratios over cells."""
    if not cells:
        return ["no cell has both the tuner's run and the others."]
    rs = sorted(c[4] for c in cells)
    exact = sum(1 for r in rs if r <= 1.0005)
    near = sum(1 for r in rs if r <= 1.10)
    gmean = math.exp(sum(math.log(r) for r in rs) / len(rs))
    worst = [c for c in sorted(cells, key=lambda c: (-c[4], c[0], c[1]))
             if c[4] > 1.0005][:5]
    return [f"{len(rs)} cells: the closed-form choice is the simulated best "
            f"(within 0.05%) in {exact}, within 10% in {near}; geometric "
            f"mean of its time over the best's {gmean:.2f}, median "
            f"{rs[len(rs) // 2]:.2f}, worst {rs[-1]:.2f}." +
            ("  Worst cells (nodes, size: the choice, its time over the "
             "best's, the best): " + "; ".join(
                 f"{n}, {size_name(sz)}: {algo_label(p)} {r:.2f}x "
                 f"{algo_label(b)}" for n, sz, p, b, r, _ in worst) + "."
             if worst else "")]


def write_page(args, rows, topo, plots_dir):
    name = page_name(topo)
    nodes_list = [n for n in args.nodes]
    sizes = args.sizes
    commits = sorted({r["commit"] for k, r in rows.items()
                      if k[0] == topo})
    lines = [f"# tacl-sim predictions: {topo}", "",
             "Predicted by `tacl-sim` (the model of `sim/sim.h`: the "
             "schedules of the real builders for every rank, run on the "
             "described cluster), not measured.  Out of place, fp16 "
             "(qwZ 8-bit over MiCS and qgZ 4-bit count the fp16 size, "
             "like nccl-tests); busbw in GB/s.  The simulator's sources "
             "(`sim/`, `algorithms/`, `core/`, the topology, `tacl-sim`) "
             "as of commit " + (", ".join(f"`{c}`" for c in commits) or
                                "-") +
             f"; `{COMMAND}` rewrites this page (`--reuse` from "
             "`results.csv` without simulating).", "",
             f"The nodes, as `topologies/{topo}.topo` describes them "
             "(replicated to each node count, 8 ranks per node):", "",
             "```"] + topo_lines(topo) + ["```", ""]
    missing = sum(1 for t in grid_tasks(args)
                  if t[0] == topo and t not in rows)
    if missing:
        lines += [f"**Incomplete:** {missing} of the grid's cells were not "
                  "simulated (shown as -); `--reuse` simulates just "
                  "those.", ""]
    if not any(line.split()[0] == "kernel" for line in topo_lines(topo)):
        lines += ["This description has no `kernel` line: reductions, "
                  "copies and quantization cost nothing here, which "
                  "flatters qwZ and qgZ (and every reduce-scatter a "
                  "little).", ""]
    plot_nodes = [n for n in (16, max(nodes_list)) if n in nodes_list] \
        or [max(nodes_list)]
    for coll in COLLS:
        lines += [f"## {coll}", ""]
        charts = []
        for n in sorted(set(plot_nodes)):
            charts.append((f"{name}_{coll}_{n}nodes.svg",
                           size_chart(rows, topo, n, coll, sizes),
                           f"busbw against size, {n} nodes"))
        if len(nodes_list) > 1:
            big = size_name(sizes[-1]).replace(" ", "")
            charts.append((f"{name}_{coll}_{big}.svg",
                           nodes_chart(rows, topo, nodes_list, coll,
                                       sizes[-1]),
                           f"busbw against nodes, {size_name(sizes[-1])}"))
        for fname, svg, alt in charts:
            svg_chart.write(os.path.join(plots_dir, fname), svg)
            lines += [f"![{alt}](plots/{fname})", ""]
        shown = SHOWN[coll]
        lines += ["| nodes | size | " + " | ".join(LABEL[v] for v in shown)
                  + " | best exact | closed-form choice | its time / "
                  "best |", "|---:|---:|" + "---:|" * len(shown) +
                  "---|---|---:|"]
        tc = {(c[0], c[1]): c for c in
              tuner_cells(rows, topo, nodes_list, coll, sizes)}
        for n in nodes_list:
            for sz in sizes:
                vals = [bw(float(r["busbw"])) if (r := cell(
                    rows, topo, n, coll, v, sz)) else "-" for v in shown]
                t = tc.get((n, sz))
                tail = [f"{algo_label(t[3])} {bw(t[5])}", algo_label(t[2]),
                        f"{t[4]:.2f}"] if t else ["-", "-", "-"]
                lines.append(f"| {n} | {size_name(sz)} | " +
                             " | ".join(vals + tail) + " |")
        lines += ["", "The closed-form choice (`TACL_TUNER=model`, what "
                  "`tacl-sim -A auto` runs) against the fastest exact "
                  "algorithm simulated for the cell (ring, MiCS, H-Ring, "
                  "HO-Ring, " + ("Bruck, " if coll == "all_gather" else "")
                  + "recursive doubling" + (", direct" if args.direct else
                  "; direct only where it is the choice") + "): "] + \
            ratio_summary(list(tc.values())) + [""]
    with open(os.path.join(args.out, name + ".md"), "w") as f:
        f.write("\n".join(lines))
    return name


def write_readme_block(args, rows, pages):
    path = os.path.join(args.out, "README.md")
    if not os.path.exists(path):
        return
    text = open(path).read()
    if README_BEGIN not in text or README_END not in text:
        return
    block = [README_BEGIN, "", "Pages (plots, tables, the tuner per cell): "
             + ", ".join(f"[{t}]({p}.md)" for t, p in pages) + ".", ""]
    for topo, _ in pages:
        for coll in COLLS:
            cells = tuner_cells(rows, topo, args.nodes, coll, args.sizes)
            block += [f"- {topo} {coll}: " + ratio_summary(cells)[0]]
    block += ["", README_END]
    head, rest = text.split(README_BEGIN, 1)
    tail = rest.split(README_END, 1)[1]
    with open(path, "w") as f:
        f.write(head + "\n".join(block) + tail)


def write_pages(args, rows):
    plots_dir = os.path.join(args.out, "plots")
    os.makedirs(plots_dir, exist_ok=True)
    pages = [(t, write_page(args, rows, t, plots_dir)) for t in args.topos]
    write_readme_block(args, rows, pages)


if __name__ == "__main__":
    main()
