"""Per-step metrics: JSONL (the record tests and plots read), TensorBoard (tensorboardX, pinned in
requirements.txt) and PNG curves at the end of a run.

A resumed run calls ``truncate(step)``: JSONL lines after the restored step are removed (they are about to
be recomputed) and TensorBoard is reopened with ``purge_step`` so its viewer drops the stale events too.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

JSONL = "metrics.jsonl"


# Stops at a torn line (later steps are recomputed on resume); research.agent.read_jsonl skips and warns.
def read_metrics(path) -> list[dict]:
    path = Path(path)
    if path.is_dir():
        path = path / JSONL
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut by a kill: the step is recomputed on resume
            break
    return rows


class MetricsWriter:
    def __init__(self, out_dir, *, tensorboard: bool = True, purge_step: int | None = None):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / JSONL
        self._tb = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(self.dir / "tensorboard"), purge_step=purge_step)

    def truncate(self, step: int) -> None:
        """Keep only the rows of steps <= ``step`` (a resume from that step's checkpoint)."""
        rows = [r for r in read_metrics(self.path) if r["step"] <= step]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.replace(tmp, self.path)
        if self._tb is not None:
            from tensorboardX import SummaryWriter

            self._tb.close()
            self._tb = SummaryWriter(str(self.dir / "tensorboard"), purge_step=step + 1)

    def write(self, step: int, metrics: dict) -> None:
        row = {"step": int(step), **{k: _plain(v) for k, v in metrics.items()}}
        with self.path.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if self._tb is not None:
            for k, v in row.items():
                if k != "step" and isinstance(v, int | float) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _plain(v):
    if isinstance(v, bool | int | str) or v is None:
        return v
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


PANELS = 6  # curves per figure: more are unreadable; the rest go to further pages (<stem>_2.png, ...)


def curve_figures(rows: list[dict], keys: list[str], title: str | None = None) -> list:
    """Pages of at most ``PANELS`` panels, one per metric against the step (whole-number step ticks; a
    metric logged at one step drawn as a marker)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figs = []
    pages = [keys[i : i + PANELS] for i in range(0, len(keys), PANELS)]
    for n, page in enumerate(pages, 1):
        cols = min(3, len(page))
        nrows = -(-len(page) // cols)
        fig = plt.figure(figsize=(4 * cols, 2.8 * nrows))
        for i, key in enumerate(page):
            ax = fig.add_subplot(nrows, cols, i + 1)
            pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.2, marker="o" if len(pts) == 1 else None)
            ax.set_title(key, fontsize=9)
            ax.set_xlabel("step", fontsize=8)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
        if title:
            fig.suptitle(title + (f" ({n}/{len(pages)})" if len(pages) > 1 else ""))
        fig.tight_layout()
        figs.append(fig)
    return figs


def plot_curves(metrics_path, out_png, keys=None, *, title: str | None = None) -> Path | None:
    """One panel per numeric metric (or per ``keys``) against the step, ``PANELS`` per page: ``out_png``,
    then ``<stem>_2.png``, ... (pages a longer earlier run left are removed). Returns the first page; None
    when there is nothing to draw."""
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    if not rows:
        return None
    if keys is None:
        keys = sorted({k for r in rows for k, v in r.items() if k != "step" and isinstance(v, int | float)})
    keys = [k for k in keys if any(isinstance(r.get(k), int | float) for r in rows)]
    if not keys:
        return None
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    figs = curve_figures(rows, keys, title)
    page = lambda n: out_png if n == 1 else out_png.with_name(f"{out_png.stem}_{n}{out_png.suffix}")  # noqa: E731
    for n, fig in enumerate(figs, 1):
        fig.savefig(page(n), dpi=100)
        plt.close(fig)
    n = len(figs) + 1
    while page(n).is_file():
        page(n).unlink()
        n += 1
    return out_png
