"""Time distributions as SVG plots, byte-identical from one run to the next.

They are drawn on matplotlib's Figure with an Agg canvas, never pyplot.
So no global backend or figure state is touched.
No artifact-supplied text goes into a plot, since a `$` would read as mathtext.
"""

from __future__ import annotations

import io
import math

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from runner.core import verdicts as verdict_table

HASH_SALT = "prooflock-report"  # fixed SVG IDs: the same run gives the same bytes


def time_distribution(wall_ms_by_verdict: dict[str, list[int]]) -> bytes:
    """A histogram of wall time per record in seconds, stacked by verdict."""
    verdicts = verdict_table.ordered(v for v, wall in wall_ms_by_verdict.items() if wall)
    seconds = [np.asarray(wall_ms_by_verdict[v], dtype=float) / 1000 for v in verdicts]
    every = np.concatenate(seconds) if seconds else np.zeros(0)
    bins = min(30, max(5, math.isqrt(len(every)) + 1))
    edges = np.histogram_bin_edges(every, bins=bins) if len(every) else np.linspace(0, 1, bins + 1)
    with matplotlib.rc_context({"svg.hashsalt": HASH_SALT, "svg.fonttype": "path"}):
        figure = Figure(figsize=(6.4, 2.4), dpi=100)
        # Fixed margins leave room for the legend; a layout engine costs ~0.3 s a plot.
        figure.subplots_adjust(left=0.09, right=0.8, bottom=0.2, top=0.95)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        if verdicts:
            axes.hist(
                seconds,
                bins=edges.tolist(),
                stacked=True,
                label=verdicts,
                color=[verdict_table.facts(v).colour for v in verdicts],
            )
            axes.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1, 1))
        axes.set_xlabel("wall time per record (s)")
        axes.set_ylabel("records")
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.spines[["top", "right"]].set_visible(False)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})  # no time stamp
    return buffer.getvalue()


def percentile_seconds(wall_ms: list[int], q: float) -> str:
    return f"{np.percentile(np.asarray(wall_ms, dtype=float), q) / 1000:.2f}" if wall_ms else "–"
