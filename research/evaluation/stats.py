"""Statistics of the study: intervals and paired tests over per-task results (numpy and the standard library
only; the tests check them against scipy).

Per-task arrays are ``(n_tasks,)`` or ``(n_tasks, n_seeds)`` (one column per training seed of a policy). A
seed is one whole training run that every task is evaluated on, so seeds are *crossed* with tasks, not
nested in them. Two ways to use several seeds (``seeds=``):

- ``"average"`` (default): each task's metric is its mean over the policy's seeds, then tasks are resampled.
  The interval covers the sampling of tasks for these trained runs (seed-to-seed variation is averaged, not
  propagated).
- ``"resample"``: the pigeonhole (crossed) bootstrap of Owen (2007, Ann. Appl. Stat. 1(1), "The pigeonhole
  bootstrap"): each replicate resamples tasks and, independently, each policy's seeds (whole runs, the same
  seed draw for every task). Resampling seeds separately within each task would treat one run's luck as
  independent across tasks and shrink the seed variance with the task count; the crossed scheme keeps it.
  Owen shows it is mildly conservative. Use it when the claim is about the training recipe, not the runs.

The exact tests (sign, McNemar) and the permutation test take seed-averaged per-task values.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

SEED_MODES = ("average", "resample")


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (Wilson 1927, JASA 22:209; Agresti & Coull 1998,
    Am. Stat. 52:119, eq. 2): (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n). n = 0: (0, 1)."""
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    z = _z(confidence)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _binom_two_sided_half(k: int, n: int) -> float:
    """Exact two-sided p of k successes in n Bernoulli(1/2) trials: min(1, 2 P(X <= min(k, n - k)))
    (the symmetric case of Clopper-Pearson's / scipy's binomtest 'two-sided')."""
    if n == 0:
        return 1.0
    m = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(m + 1))
    return min(1.0, 2.0 * tail / 2.0**n)


def per_task(x, seeds: str = "average") -> np.ndarray:
    """(n_tasks, n_seeds) array of floats from (n_tasks,) or (n_tasks, n_seeds) input."""
    a = np.asarray(x, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"per-task values must be (n_tasks,) or (n_tasks, n_seeds), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("per-task values hold NaN or inf: leave such tasks out before the test")
    if seeds not in SEED_MODES:
        raise ValueError(f"seeds must be one of {SEED_MODES}, got {seeds!r}")
    return a


def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = per_task(a), per_task(b)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"paired values need the same tasks: {a.shape[0]} vs {b.shape[0]} rows")
    return a, b


def sign_test(a, b) -> dict:
    """Exact two-sided sign test of paired values (Conover 1999, Practical Nonparametric Statistics, 3.4):
    per-task differences (seed-averaged), ties dropped, #positive ~ Binomial(n_untied, 1/2) under H0."""
    a, b = _paired(a, b)
    d = a.mean(axis=1) - b.mean(axis=1)
    pos, neg = int((d > 0).sum()), int((d < 0).sum())
    return {
        "positive": pos,
        "negative": neg,
        "ties": int(d.size - pos - neg),
        "p": _binom_two_sided_half(pos, pos + neg),
    }


def mcnemar(a, b) -> dict:
    """Exact two-sided McNemar test of paired binary outcomes (McNemar 1947, Psychometrika 12:153; exact
    form: the sign test on the discordant pairs, Agresti 2013, Categorical Data Analysis, 11.1.4).
    ``a_only``: tasks A solved and B did not. Several seeds: a task's outcome is its majority over seeds
    (ties count as discordant in neither direction)."""
    a, b = _paired(a, b)
    if not (np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all()):
        raise ValueError("McNemar's test needs binary (0/1) outcomes")
    ma, mb = a.mean(axis=1), b.mean(axis=1)
    xa = np.where(ma > 0.5, 1, np.where(ma < 0.5, 0, -1))
    xb = np.where(mb > 0.5, 1, np.where(mb < 0.5, 0, -1))
    a_only = int(((xa == 1) & (xb == 0)).sum())
    b_only = int(((xa == 0) & (xb == 1)).sum())
    return {"a_only": a_only, "b_only": b_only, "p": _binom_two_sided_half(a_only, a_only + b_only)}


def permutation_test(a, b, n_perm: int = 10000, seed: int = 0, exact_max: int = 16) -> dict:
    """Two-sided paired permutation (sign-flip) test of the mean difference (Good 2005, Permutation,
    Parametric and Bootstrap Tests of Hypotheses, 3.1): under H0 each task's difference is symmetric about
    0. Exact over all 2^n sign patterns when n <= ``exact_max``; else ``n_perm`` random patterns with
    p = (1 + #extreme) / (1 + n_perm) (Phipson & Smyth 2010, SAGMB 9:39)."""
    a, b = _paired(a, b)
    d = a.mean(axis=1) - b.mean(axis=1)
    n = d.size
    obs = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))  # equal means up to rounding count as extreme
    if n <= exact_max:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n)) & 1)
        stats = np.abs(signs @ d) / n
        return {"mean_diff": float(d.mean()), "p": float((stats >= obs - tol).mean()), "exact": True}
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(n_perm, n))
    extreme = int((np.abs(signs @ d) / n >= obs - tol).sum())
    return {"mean_diff": float(d.mean()), "p": (1 + extreme) / (1 + n_perm), "exact": False}


def _weights(rng: np.random.Generator, n_boot: int, n: int) -> np.ndarray:
    """(n_boot, n) resampling weights: counts of each index in a draw of n with replacement, over n."""
    idx = rng.integers(0, n, size=(n_boot, n)) + n * np.arange(n_boot)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * n).reshape(n_boot, n) / n


def _percentile(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    _z(confidence)  # validates
    lo, hi = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def bootstrap_means(
    x, n_boot: int = 10000, seed: int = 0, seeds: str = "average"
) -> tuple[float, np.ndarray]:
    """(estimate, replicates) of the mean of per-task values: tasks resampled, seeds averaged or resampled
    (module docstring)."""
    a = per_task(x, seeds)
    rng = np.random.default_rng(seed)
    wt = _weights(rng, n_boot, a.shape[0])
    ws = (
        np.full((n_boot, a.shape[1]), 1.0 / a.shape[1])
        if seeds == "average"
        else _weights(rng, n_boot, a.shape[1])
    )
    return float(a.mean()), np.einsum("rn,nk,rk->r", wt, a, ws)


def mean_ci(
    x, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95, seeds: str = "average"
) -> dict:
    """Mean of per-task values with the percentile bootstrap CI of ``bootstrap_means`` (Efron & Tibshirani
    1993, 13.3): one run's rate over tasks, with an interval over tasks (and seeds, ``seeds="resample"``)."""
    est, boot = bootstrap_means(x, n_boot, seed, seeds)
    lo, hi = _percentile(boot, confidence)
    return {"mean": est, "lo": lo, "hi": hi, "n_tasks": int(per_task(x).shape[0]), "seeds": seeds}


def paired_bootstrap(
    a, b, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95, seeds: str = "average"
) -> dict:
    """Percentile bootstrap CI (Efron & Tibshirani 1993, An Introduction to the Bootstrap, 13.3) of
    mean(A) - mean(B) over the same tasks: each replicate draws one task sample used for both policies
    (the pairing), and with ``seeds="resample"`` each policy's seeds independently (runs of A and B are
    separate trainings). Fixed ``seed``: the same interval every time."""
    a, b = _paired(a, b)
    if seeds not in SEED_MODES:
        raise ValueError(f"seeds must be one of {SEED_MODES}, got {seeds!r}")
    rng = np.random.default_rng(seed)
    wt = _weights(rng, n_boot, a.shape[0])

    def seed_w(k: int) -> np.ndarray:
        return np.full((n_boot, k), 1.0 / k) if seeds == "average" else _weights(rng, n_boot, k)

    wa, wb = seed_w(a.shape[1]), seed_w(b.shape[1])
    boot = np.einsum("rn,nk,rk->r", wt, a, wa) - np.einsum("rn,nk,rk->r", wt, b, wb)
    lo, hi = _percentile(boot, confidence)
    return {
        "diff": float(a.mean() - b.mean()),
        "lo": lo,
        "hi": hi,
        "n_tasks": a.shape[0],
        "n_boot": n_boot,
        "seed": seed,
        "seeds": seeds,
    }


def geomean_ci(
    x, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95, seeds: str = "average"
) -> dict:
    """Geometric mean exp(mean(log x)) of positive ratios (e.g. speedups) with a percentile bootstrap CI of
    the mean log, exponentiated (Efron & Tibshirani 1993, 13.3; the percentile interval is transformation
    respecting, so exp of the log-scale interval is the interval of the geomean)."""
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return {"geomean": None, "lo": None, "hi": None, "n": 0}
    if not (a > 0).all():
        raise ValueError("a geometric mean needs positive values")
    est, boot = bootstrap_means(np.log(a), n_boot, seed, seeds)
    lo, hi = _percentile(boot, confidence)
    return {"geomean": math.exp(est), "lo": math.exp(lo), "hi": math.exp(hi), "n": int(per_task(a).shape[0])}


def holm(pvalues, alpha: float = 0.05) -> dict:
    """Holm's step-down correction (Holm 1979, Scand. J. Stat. 6:65): sort p ascending, adjusted
    p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)); reject where adjusted p <= alpha. Order as given."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    adj_sorted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    adj = np.empty(m)
    adj[order] = adj_sorted
    return {"adjusted": adj.tolist(), "reject": (adj <= alpha).tolist(), "alpha": alpha}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task from ``n`` samples of which ``c`` are correct (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code", eq. 1): 1 - C(n - c, k) / C(n, k), the chance that
    k samples drawn without replacement from the n include a correct one. Computed as the product
    1 - prod_{i = n - c + 1}^{n} (1 - k / i) (their numerically stable form)."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
