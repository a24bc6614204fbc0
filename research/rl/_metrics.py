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


def plot_curves(metrics_path, out_png, keys=None, *, title: str | None = None) -> Path | None:
    """One panel per numeric metric (or per ``keys``) against the step; None when there is nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    if not rows:
        return None
    if keys is None:
        keys = sorted({k for r in rows for k, v in r.items() if k != "step" and isinstance(v, int | float)})
    keys = [k for k in keys if any(isinstance(r.get(k), int | float) for r in rows)]
    if not keys:
        return None
    cols = min(4, len(keys))
    nrows = -(-len(keys) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.8 * nrows), squeeze=False)
    for ax, key in zip(axes.ravel(), keys):
        pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.2)
        ax.set_title(key, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[len(keys) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png
