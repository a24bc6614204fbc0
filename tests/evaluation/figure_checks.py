"""What every report figure must keep (research.evaluation.style's rules), checked on the matplotlib Figure
itself: at most 6 panels; every visible panel holds data or a text note; a line of one point has a marker;
no legend covers a bar; the named count axes tick whole numbers."""

from __future__ import annotations

from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

MAX_PANELS = 6


def _has_data(ax) -> bool:
    lines = any(len(line.get_xdata()) for line in ax.lines)
    bars = any(isinstance(p, Rectangle) for p in ax.patches)
    points = any(len(c.get_offsets()) or len(c.get_paths()) for c in ax.collections)
    return lines or bars or points or bool(ax.images)


def _bar_extents(fig):
    for ax in fig.axes:
        for p in ax.patches:
            if isinstance(p, Rectangle) and p.get_visible() and p.get_width() and p.get_height():
                yield p.get_window_extent()


def _overlap(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def figure_problems(fig, count_axes=()) -> list[str]:
    """Every rule the figure breaks (an empty list: none). ``count_axes``: (panel index, "x" | "y") pairs
    that show counts."""
    fig.canvas.draw()  # legend placement and window extents are known after a draw
    problems = []
    panels = [ax for ax in fig.axes if ax.get_visible()]
    if len(panels) > MAX_PANELS:
        problems.append(f"{len(panels)} panels > {MAX_PANELS}")
    for i, ax in enumerate(panels):
        if not _has_data(ax) and not [t for t in ax.texts if t.get_text().strip()]:
            problems.append(f"panel {i} ({ax.get_title()!r}) is empty and says nothing")
        for line in ax.lines:
            if len(line.get_xdata()) == 1 and line.get_marker() in (None, "None", "", " "):
                problems.append(f"panel {i}: line {line.get_label()!r} of one point has no marker")
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    bars = list(_bar_extents(fig))
    for leg in legends:
        box = leg.get_window_extent()
        if any(_overlap(box, bar) > 1.0 for bar in bars):  # more than a pixel of a bar under the legend
            problems.append(f"legend {[t.get_text() for t in leg.get_texts()]} covers a bar")
    for i, axis in count_axes:
        loc = getattr(panels[i], f"{axis}axis").get_major_locator()
        if not (isinstance(loc, MaxNLocator) and loc._integer):
            problems.append(f"panel {i}: count axis {axis} has no integer ticks ({type(loc).__name__})")
    return problems
