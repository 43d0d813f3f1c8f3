"""Line charts as small SVG files, for examples and benchmarks on machines
without a plotting library (Debian's python3 has none by default).

    line_svg("loss.svg", {"loss": (steps, losses)}, title="training loss", xlabel="step")
"""

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]


def line_svg(path, series, title, xlabel, y_from_zero=False):
    """Writes `series` ({name: (xs, ys)}) as lines on shared axes to `path`.
    The y axis spans the data (from 0 with `y_from_zero`); a legend names
    the lines when there are several."""
    w, h, pad = 480, 260, 44
    all_x = [x for xs, _ in series.values() for x in xs]
    all_y = [y for _, ys in series.values() for y in ys]
    x0, x1 = min(all_x), max(all_x)
    y0 = 0.0 if y_from_zero else min(all_y)
    y1 = max(all_y) * (1.05 if y_from_zero else 1.0)
    xspan, yspan = (x1 - x0) or 1, (y1 - y0) or 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="11">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">{xlabel}</text>',
             f'<text x="{pad}" y="{h - pad + 14}" text-anchor="middle">{x0:g}</text>',
             f'<text x="{w - pad}" y="{h - pad + 14}" text-anchor="end">{x1:.3g}</text>',
             f'<text x="{pad - 4}" y="{h - pad}" text-anchor="end">{y0:.2f}</text>',
             f'<text x="{pad - 4}" y="{pad + 4}" text-anchor="end">{y1:.2f}</text>',
             f'<text x="{w / 2}" y="{pad - 16}" text-anchor="middle">{title}</text>']
    for i, (name, (xs, ys)) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        points = " ".join(f"{pad + (w - 2 * pad) * (x - x0) / xspan:.1f},"
                          f"{h - pad - (h - 2 * pad) * (y - y0) / yspan:.1f}"
                          for x, y in zip(xs, ys))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                     f'points="{points}"/>')
        if len(series) > 1:
            parts.append(f'<text x="{w - pad}" y="{pad + 14 * i}" text-anchor="end" '
                         f'fill="{color}">{name}</text>')
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n</svg>\n")
