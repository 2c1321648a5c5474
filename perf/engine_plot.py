"""Write an SVG chart of loss against step (standard library only).

Usage: engine_plot.py OUT.svg TITLE NAME=LOGFILE...
Each LOGFILE is a train output; its "step K loss X" lines are one curve.
"""
import sys

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
          "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
          "#3182bd", "#e6550d", "#31a354", "#000000"]


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
    xs = [x for _, c in curves for x, _ in c]
    ys = [y for _, c in curves for _, y in c]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    W, H, L, R, T, B = 900, 520, 60, 230, 40, 50
    pw, ph = W - L - R, H - T - B

    def px(x):
        return L + (x - x0) / max(x1 - x0, 1) * pw

    def py(y):
        return T + (y1 - y) / max(y1 - y0, 1e-9) * ph

    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15">%s</text>' % (L, title),
         '<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
         'stroke="black"/>' % (L, T, pw, ph)]
    for i in range(6):
        y = y0 + (y1 - y0) * i / 5
        s.append('<text x="%d" y="%.1f" text-anchor="end">%.2f</text>'
                 % (L - 5, py(y) + 4, y))
        x = x0 + (x1 - x0) * i / 5
        s.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>'
                 % (px(x), T + ph + 18, round(x)))
    s.append('<text x="%d" y="%d" text-anchor="middle">step</text>'
             % (L + pw // 2, H - 10))
    s.append('<text x="15" y="%d" transform="rotate(-90 15 %d)" '
             'text-anchor="middle">loss</text>' % (T + ph // 2, T + ph // 2))
    for i, (name, pts) in enumerate(curves):
        color = COLORS[i % len(COLORS)]
        dash = ' stroke-dasharray="4 3"' if i % 2 else ""
        path = " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)
        s.append('<polyline fill="none" stroke="%s" stroke-width="1.2"%s '
                 'points="%s"/>' % (color, dash, path))
        ly = T + 14 * i + 10
        s.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                 'stroke-width="2"%s/>' % (W - R + 10, ly, W - R + 35, ly,
                                           color, dash))
        s.append('<text x="%d" y="%d">%s</text>' % (W - R + 40, ly + 4,
                                                   name))
    s.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
