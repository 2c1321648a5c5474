"""docs/sim/make_pages.py on a tiny grid (one topology, 2 nodes, two
sizes): the cache has every cell, the page's tables have a row per cell
with the tuner's ratio recomputed from the cache, the SVGs parse with a
series per algorithm, README's generated block is replaced, --reuse
rewrites the same bytes without simulating, --pages-only shows a cell
missing from the cache as missing, and bad options fail with a message
rather than a traceback.

usage: test_pages.py SOURCE_ROOT BUILD_ROOT
"""
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(gen, build, out, *extra):
    return subprocess.run([sys.executable, gen, "--build", build, "--out",
                           out, "--topos", "p4d.24xlarge", "--nodes", "2",
                           "--sizes", "1M:4M:4", "--jobs", "2"] +
                          list(extra), capture_output=True, text=True)


def table(page, coll):
    """The rows of the page's table under '## coll', as lists of cells."""
    lines = page.split(f"## {coll}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in lines.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows]


def main():
    src, build = sys.argv[1], sys.argv[2]
    gen = os.path.join(src, "docs", "sim", "make_pages.py")
    sys.path.insert(0, os.path.dirname(gen))
    import make_pages as mp

    out = tempfile.mkdtemp(prefix="tacl-pages-")
    try:
        with open(os.path.join(out, "README.md"), "w") as f:
            f.write(f"before\n{mp.README_BEGIN}\nold\n{mp.README_END}\n"
                    "after\n")
        p = run(gen, build, out)
        check(p.returncode == 0, f"generator failed: {p.stderr[-2000:]}")
        check("simulations in" in p.stderr, "no progress on stderr")

        # The cache: every cell of the grid once, each plausible.
        with open(os.path.join(out, "results.csv")) as f:
            lines = f.read().splitlines()
        check(lines[0].startswith("#"), "cache lacks its comment line")
        rows = list(csv.DictReader(lines[1:]))
        want = {("all_gather", v[0], s) for v in mp.VARIANTS["all_gather"]
                for s in (1 << 20, 4 << 20) if v[0] != "direct"} | \
               {("reduce_scatter", v[0], s)
                for v in mp.VARIANTS["reduce_scatter"]
                for s in (1 << 20, 4 << 20) if v[0] != "direct"}
        got = [(r["collective"], r["variant"], int(r["size"]))
               for r in rows]
        check(len(got) == len(set(got)) and set(got) == want,
              f"cache cells {sorted(got)} != {sorted(want)}")
        by = {k: r for k, r in zip(got, rows)}
        for k, r in by.items():
            check(float(r["time_us"]) > 0 and float(r["busbw"]) > 0,
                  f"{k}: non-positive time or busbw")
            check(r["nodes"] == "2" and r["ranks_per_node"] == "8",
                  f"{k}: layout {r['nodes']}x{r['ranks_per_node']}")
        check(by[("all_gather", "qwz8", 1 << 20)]["algorithm"] == "qwz" and
              by[("reduce_scatter", "qgz4", 1 << 20)]["algorithm"] == "qgz",
              "the quantized cells did not run qwZ and qgZ")
        # The ring all-gather's two node crossings (16 ranks on 2 nodes)
        # each carry p - 1 = 15 blocks of size / 16.
        r = by[("all_gather", "ring", 4 << 20)]
        check(int(r["net_bytes"]) == 2 * 15 * (4 << 20) // 16,
              f"ring net bytes {r['net_bytes']}")

        # The page: per collective a header and one row per size.
        page = open(os.path.join(out, "p4d.md")).read()
        for coll in mp.COLLS:
            t = table(page, coll)
            ncol = 2 + len(mp.SHOWN[coll]) + 3
            check(len(t) == 3 and all(len(r) == ncol for r in t),
                  f"{coll} table shape: {t}")
            for row, size in zip(t[1:], (1 << 20, 4 << 20)):
                check(row[0] == "2" and row[1] == mp.size_name(size),
                      f"{coll} row {row}")
                times = [float(by[(coll, v, size)]["time_us"])
                         for v in mp.EXACT if (coll, v, size) in by]
                ratio = float(by[(coll, "model", size)]["time_us"]) / \
                    min(times)
                check(abs(float(row[-1]) - ratio) < 0.006,
                      f"{coll} {size}: ratio {row[-1]} != {ratio:.3f}")
                check(row[-2] == mp.algo_label(
                    by[(coll, "model", size)]["algorithm"]),
                      f"{coll} {size}: choice {row[-2]}")
                for c in row[2:2 + len(mp.SHOWN[coll])]:
                    float(c)

            # Its plot: one series per shown algorithm and the choice,
            # each with a point per size inside the plot.
            svg = os.path.join(out, "plots", f"p4d_{coll}_2nodes.svg")
            check(f"(plots/p4d_{coll}_2nodes.svg)" in page,
                  f"page does not show {svg}")
            root = ET.parse(svg).getroot()
            series = [g for g in root.iter(SVG + "g")
                      if g.get("class") == "series"]
            check(len(series) == len(mp.SHOWN[coll]) + 1,
                  f"{coll}: {len(series)} series")
            w, h = float(root.get("width")), float(root.get("height"))
            for g in series:
                pts = g.find(SVG + "polyline").get("points").split()
                check(len(pts) == 2, f"{g.get('data-name')}: {pts}")
                for pt in pts:
                    x, y = map(float, pt.split(","))
                    check(0 <= x <= w and 0 <= y <= h, f"point {pt}")
        readme = open(os.path.join(out, "README.md")).read()
        check(readme.startswith("before\n") and readme.endswith("after\n")
              and "old" not in readme and "(p4d.md)" in readme,
              "README block not replaced")

        # --reuse: no simulation (no tool), the same bytes.
        before = {n: open(os.path.join(out, n), "rb").read()
                  for n in ("p4d.md", "results.csv", "README.md")}
        p = run(gen, os.path.join(out, "no-build"), out, "--reuse")
        check(p.returncode == 0, f"--reuse failed: {p.stderr[-2000:]}")
        for n, b in before.items():
            check(open(os.path.join(out, n), "rb").read() == b,
                  f"--reuse changed {n}")

        # --pages-only with a cell gone from the cache: no simulation, the
        # page says the grid is incomplete and shows the cell as -.
        cache = os.path.join(out, "results.csv")
        lines = open(cache).read().splitlines(True)
        gone = [i for i, ln in enumerate(lines)
                if ",all_gather,ring,4194304," in ln]
        check(len(gone) == 1, "ring 4 MB row not found once in the cache")
        del lines[gone[0]]
        open(cache, "w").write("".join(lines))
        p = run(gen, os.path.join(out, "no-build"), out, "--pages-only")
        check(p.returncode == 0, f"--pages-only failed: {p.stderr[-2000:]}")
        page = open(os.path.join(out, "p4d.md")).read()
        row = [r for r in table(page, "all_gather") if r[1] == "4 MB"]
        check("**Incomplete:** 1 of" in page and row and row[0][2] == "-",
              "--pages-only does not show the missing cell")

        # Bad input: a message and a non-zero status, no traceback.
        for bad in (["--sizes", "4M:1M:4"], ["--topos", "nosuch"],
                    ["--nodes", "x"]):
            p = run(gen, build, out, *bad)
            check(p.returncode != 0 and "make_pages:" in p.stderr and
                  "Traceback" not in p.stderr, f"{bad}: {p.stderr}")
    finally:
        shutil.rmtree(out)
    print("ok")


if __name__ == "__main__":
    main()
