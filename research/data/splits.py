"""Train/val/test splits with whole operator categories held out (the transfer study)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from .config import SplitConfig, SynthesisConfigError
from .ops import CATEGORIES


def validate(cfg: SplitConfig) -> None:
    unknown = (set(cfg.test_categories) | set(cfg.val_categories)) - set(CATEGORIES)
    if unknown:
        raise SynthesisConfigError(
            f"split holds out unknown categories {sorted(unknown)}; known: {list(CATEGORIES)}"
        )
    both = set(cfg.test_categories) & set(cfg.val_categories)
    if both:
        raise SynthesisConfigError(f"categories {sorted(both)} are held out for both val and test")
    if not (
        0.0 <= cfg.val_fraction and 0.0 <= cfg.test_fraction and cfg.val_fraction + cfg.test_fraction < 1.0
    ):
        raise SynthesisConfigError(
            f"val_fraction + test_fraction must be in [0, 1), got {cfg.val_fraction}, {cfg.test_fraction}"
        )


def _unit_hash(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16) / float(16**12)


def assign_split(task_id: str, categories: Iterable[str], cfg: SplitConfig) -> str:
    """``test`` if the task uses any test-held-out category, else ``val`` if it uses a val-held-out one, else
    by id hash (test_fraction, val_fraction), else ``train``. No train task ever uses a held-out category."""
    cats = set(categories)
    if cats & set(cfg.test_categories):
        return "test"
    if cats & set(cfg.val_categories):
        return "val"
    u = _unit_hash(task_id)
    if u < cfg.test_fraction:
        return "test"
    return "val" if u < cfg.test_fraction + cfg.val_fraction else "train"
