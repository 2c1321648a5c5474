"""Write an SVG chart of loss against step (standard library only; the
chart is perf/svg_chart.py's).

Usage: engine_plot.py OUT.svg TITLE NAME=LOGFILE...
Each LOGFILE is a train output; its "step K loss X" lines are one curve.
"""
import sys

import svg_chart


def curve(path):
    pts = []
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) > 3 and w[0] == "step" and w[2] == "loss":
                pts.append((int(w[1]), float(w[3])))
    return pts


def main():
    out, title = sys.argv[1], sys.argv[2]
    curves = []
    for arg in sys.argv[3:]:
        name, path = arg.split("=", 1)
        curves.append((name, curve(path)))
    svg_chart.write(out, svg_chart.line_chart(
        curves, title, "step", "loss", xfmt=lambda x: "%d" % round(x),
        yfmt=lambda y: "%.2f" % y))


if __name__ == "__main__":
    main()
