"""Line charts as SVG text, Python standard library only (no matplotlib or
gnuplot on the machines this runs on).  perf/engine_plot.py and
docs/sim/make_pages.py draw with it.

    svg = line_chart([("ring", [(1, 2.0), (2, 3.5)]), ...], "title",
                     "x label", "y label", xlog=True, ylog=True)

Each series is one <g class="series"> (a polyline and a dot per point)
with a legend entry; the series cycle through solid, dashed, dotted and
dash-dot lines so that close colours, and series that coincide, stay
apart.  Points with a None y are left out (a gap in
the data), as are y <= 0 on a log axis.
"""
import math
from xml.sax.saxutils import escape

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
          "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
          "#3182bd", "#e6550d", "#31a354", "#000000"]

# Solid, dashed, dotted, dash-dot: series that coincide stay visible.
DASHES = ["", "6 3", "2 3", "9 3 2 3"]


def _log_ticks(lo, hi):
    """1-2-5 steps per decade covering [lo, hi] (lo > 0)."""
    ticks = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi * 1.0001:
        for m in (1, 2, 5):
            t = m * 10 ** e
            if lo / 1.0001 <= t <= hi * 1.0001:
                ticks.append(t)
        e += 1
    if len(ticks) > 12:
        ticks = [t for t in ticks if math.log10(t) % 1 < 1e-9 or
                 abs(math.log10(t) % 1 - 1) < 1e-9]
    return ticks


def _axis(values, log):
    lo, hi = min(values), max(values)
    if log:
        lo, hi = lo / 1.15, hi * 1.15
        return lo, hi, (lambda v: (math.log(v) - math.log(lo)) /
                        (math.log(hi) - math.log(lo)))
    if hi == lo:
        hi = lo + 1
    return lo, hi, lambda v: (v - lo) / (hi - lo)


def _num(v):
    return "%g" % v


def line_chart(series, title, xlabel, ylabel, xlog=False, ylog=False,
               xticks=None, xfmt=_num, yfmt=_num, width=900, height=520,
               legend_width=230):
    """The SVG text of a chart of series [(name, [(x, y), ...]), ...].
    xticks: the x values to label (default: six even steps, or the 1-2-5
    steps of a log axis); xfmt and yfmt format tick labels."""
    def usable(x, y):
        return y is not None and (not ylog or y > 0) and (not xlog or x > 0)

    pts = [[(x, y) for x, y in p if usable(x, y)] for _, p in series]
    xs = [x for p in pts for x, _ in p] or [1]
    ys = [y for p in pts for _, y in p] or [1]
    L, R, T, B = 70, legend_width, 40, 50
    pw, ph = width - L - R, height - T - B
    x0, x1, fx = _axis(xs, xlog)
    y0, y1, fy = _axis(ys, ylog)

    def px(x):
        return L + fx(x) * pw

    def py(y):
        return T + (1 - fy(y)) * ph

    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'font-family="sans-serif" font-size="12">' % (width, height),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15">%s</text>' % (L, escape(title)),
         '<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
         'stroke="black"/>' % (L, T, pw, ph)]
    if xticks is None:
        xticks = _log_ticks(x0, x1) if xlog else \
            [x0 + (x1 - x0) * i / 5 for i in range(6)]
    yticks = _log_ticks(y0, y1) if ylog else \
        [y0 + (y1 - y0) * i / 5 for i in range(6)]
    for y in yticks:
        s.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                 % (L, py(y), L + pw, py(y)))
        s.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                 % (L - 5, py(y) + 4, escape(yfmt(y))))
    for x in xticks:
        if x0 <= x <= x1:
            s.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
                     'stroke="#ddd"/>' % (px(x), T, px(x), T + ph))
            s.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                     % (px(x), T + ph + 18, escape(xfmt(x))))
    s.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
             % (L + pw // 2, height - 10, escape(xlabel)))
    s.append('<text x="15" y="%d" transform="rotate(-90 15 %d)" '
             'text-anchor="middle">%s</text>'
             % (T + ph // 2, T + ph // 2, escape(ylabel)))
    for i, ((name, _), p) in enumerate(zip(series, pts)):
        color = COLORS[i % len(COLORS)]
        dash = DASHES[i % len(DASHES)]
        dash = ' stroke-dasharray="%s"' % dash if dash else ""
        s.append('<g class="series" data-name="%s">' % escape(name))
        s.append('<polyline fill="none" stroke="%s" stroke-width="1.5"%s '
                 'points="%s"/>' % (color, dash, " ".join(
                     "%.1f,%.1f" % (px(x), py(y)) for x, y in p)))
        if len(p) <= 40:
            for x, y in p:
                s.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>'
                         % (px(x), py(y), color))
        s.append('</g>')
        ly = T + 16 * i + 10
        s.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                 'stroke-width="2"%s/>' % (width - R + 10, ly, width - R + 35,
                                           ly, color, dash))
        s.append('<text x="%d" y="%d">%s</text>' % (width - R + 40, ly + 4,
                                                   escape(name)))
    s.append("</svg>")
    return "\n".join(s) + "\n"


def write(path, svg):
    with open(path, "w") as f:
        f.write(svg)
