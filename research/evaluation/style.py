"""One look for every figure of the project's reports: fonts, grid, palette, sizes; each figure saved as PDF
(papers) and PNG (notebooks, READMEs) side by side. And the rules every figure keeps: at most ``MAX_PANELS``
panels, no empty panel without a note saying why (``note``), integer ticks on count axes (``integer_ticks``),
a marker on a series of one point (``marker``), legends beside the data, not on it (``legend_below``)."""

from __future__ import annotations

from pathlib import Path

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")
WIDTH = 6.4  # inches: one column of a two-column page at 100%
MAX_PANELS = 6  # more panels than this in one figure are unreadable in a paper: split into more figures
RC = {
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.4,
    "pdf.fonttype": 42,  # embedded TrueType: editable text in the PDF
}


def pyplot():
    """matplotlib.pyplot with the Agg backend and the project style applied."""
    import logging

    import matplotlib

    logging.getLogger("fontTools").setLevel(logging.WARNING)  # PDF font subsetting chatters at INFO
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    plt.rcParams.update(RC)
    plt.rcParams["axes.prop_cycle"] = cycler(color=list(PALETTE))
    return plt


def figure(nrows: int = 1, ncols: int = 1, height: float = 3.0, **kw):
    plt = pyplot()
    return plt.subplots(
        nrows, ncols, figsize=(WIDTH * max(1, ncols / 2), height * nrows), squeeze=False, **kw
    )


def save(fig, path_stem: str | Path) -> list[Path]:
    """``<stem>.pdf`` and ``<stem>.png``; the figure is closed."""
    plt = pyplot()
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("pdf", "png"):
        path = stem.with_suffix(f".{ext}")
        fig.savefig(path)
        out.append(path)
    plt.close(fig)
    return out


def note(ax, text: str) -> None:
    """Say in the panel why it holds no data (e.g. CPU mode: no timings), instead of leaving it blank."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.35")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def integer_ticks(ax, axis: str = "y") -> None:
    """Whole-number ticks on an axis of counts (claims, problems, steps): never 2.5 claims."""
    from matplotlib.ticker import MaxNLocator

    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(integer=True))


def marker(n_points: int, default: str | None = None) -> str | None:
    """A line of one point draws nothing without a marker."""
    return "o" if n_points == 1 else default


def legend_below(ax, ncol: int = 3, **kw) -> None:
    """The legend under the panel (outside the data), so it never covers bars or lines."""
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=min(ncol, len(handles)), **kw)
