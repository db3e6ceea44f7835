#!/usr/bin/env python3
"""Draws the pictures of `switchyard calibrate --plot DIR`.

The tool writes one JSON file per op family into DIR (format
"switchyard-calibration-plot", version 1) and this script beside them, then runs
it on those files. Each DIR/<family>.json becomes DIR/<family>.svg: one panel per binding key, and in it
per sibling the measured times (dots), the fitted cost the planner ranks by with
the profile (solid line) and the modelled cost it ranks by without one (dashed
line), against the size of the work on log-log axes. Where a dashed line strays
from its dots, the modelled cost is wrong there.

Usage: python3 plot_calibration.py DATA.json...
Exit status: 0 drawn, 2 bad usage or data, 3 matplotlib is missing.
"""

import json
import math
import pathlib
import sys

FORMAT = "switchyard-calibration-plot"
VERSION = 1
COLUMNS = 3


class PlotDataError(Exception):
    """A data file this script cannot draw."""


def load_family(path):
    """The parsed, checked contents of one family's data file."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise PlotDataError(f"{path}: {e}") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PlotDataError(f"{path}: not a {FORMAT} file")
    if data.get("version") != VERSION:
        raise PlotDataError(
            f"{path}: version {data.get('version')}, this script reads {VERSION}")
    for key in ("family", "x_label", "series"):
        if key not in data:
            raise PlotDataError(f"{path}: no '{key}'")
    for s in data["series"]:
        for key in ("kernel", "key", "measured", "modelled", "fitted"):
            if key not in s:
                raise PlotDataError(f"{path}: a series without '{key}'")
    return data


def panels_of(series):
    """The series grouped by binding key, keys in first-seen order."""
    panels = {}
    for s in series:
        panels.setdefault(s["key"], []).append(s)
    return list(panels.items())


def positive(points):
    """The (x, y) pairs that a log-log axis can show."""
    return [(x, y) for x, y in points if x > 0 and y > 0 and math.isfinite(x) and math.isfinite(y)]


def draw_family(plt, data, out):
    panels = panels_of(data["series"])
    rows = max(1, math.ceil(len(panels) / COLUMNS))
    columns = min(COLUMNS, max(1, len(panels)))
    fig, axes = plt.subplots(rows, columns, figsize=(6.0 * columns, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (key, siblings) in zip(axes.flat, panels):
        for i, s in enumerate(siblings):
            color = f"C{i % 10}"
            measured = positive(s["measured"])
            fitted = sorted(positive(s["fitted"]))
            modelled = sorted(positive(s["modelled"]))
            if measured:
                ax.scatter(*zip(*measured), s=14, color=color, zorder=3, label=s["kernel"])
            if fitted:
                ax.plot(*zip(*fitted), color=color, linewidth=1.2)
            if modelled:
                ax.plot(*zip(*modelled), color=color, linewidth=1.0, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(key, fontsize=9)
        ax.set_xlabel(data["x_label"], fontsize=8)
        ax.set_ylabel("ns per call", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", linewidth=0.3)
        ax.legend(fontsize=6, loc="upper left")
    title = f"{data['family']}: measured (dots), fitted (solid), modelled (dashed)"
    machines = "; ".join(data.get("machines", []))
    fig.suptitle(f"{title}\n{machines}" if machines else title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv):
    if len(argv) < 2:
        print("usage: plot_calibration.py DATA.json...", file=sys.stderr)
        return 2
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_calibration.py: the pictures need matplotlib "
              "(Debian: apt-get install python3-matplotlib; or pip install matplotlib)",
              file=sys.stderr)
        return 3
    try:
        families = [(path, load_family(path)) for path in map(pathlib.Path, argv[1:])]
    except PlotDataError as e:
        print(f"plot_calibration.py: {e}", file=sys.stderr)
        return 2
    for path, data in families:
        out = path.with_suffix(".svg")
        draw_family(plt, data, out)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
