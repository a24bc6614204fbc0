"""research.evaluation.stats against hand-computed values, scipy and exhaustive enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats

from research.evaluation import stats


@pytest.mark.parametrize(("k", "n", "lo", "hi"), [(2, 8, 0.0715, 0.5907), (6, 8, 0.4093, 0.9285)])
def test_wilson_hand_computed(k, n, lo, hi):
    got = stats.wilson(k, n)
    assert got == pytest.approx((lo, hi), abs=5e-5)


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_matches_scipy(confidence):
    for n in (1, 5, 17, 48, 200):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            ref = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
            assert stats.wilson(k, n, confidence) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_wilson_rejects_bad_counts():
    with pytest.raises(ValueError, match="0 <= k <= n"):
        stats.wilson(5, 4)
    assert stats.wilson(0, 0) == (0.0, 1.0)


def test_sign_test_matches_scipy_binomtest():
    rng = np.random.default_rng(3)
    for n in (5, 12, 40):
        a = rng.integers(0, 4, n).astype(float)  # small integers: ties happen
        b = rng.integers(0, 4, n).astype(float)
        got = stats.sign_test(a, b)
        pos, neg = int((a > b).sum()), int((a < b).sum())
        assert (got["positive"], got["negative"], got["ties"]) == (pos, neg, n - pos - neg)
        assert got["p"] == pytest.approx(scipy.stats.binomtest(pos, pos + neg, 0.5).pvalue, rel=1e-12)


def test_mcnemar_matches_scipy_binomtest():
    rng = np.random.default_rng(4)
    for n, pa, pb in ((48, 0.6, 0.4), (60, 0.5, 0.5), (20, 0.9, 0.2)):
        a, b = rng.random(n) < pa, rng.random(n) < pb
        got = stats.mcnemar(a, b)
        a_only, b_only = int((a & ~b).sum()), int((~a & b).sum())
        assert (got["a_only"], got["b_only"]) == (a_only, b_only)
        ref = scipy.stats.binomtest(a_only, a_only + b_only, 0.5).pvalue
        assert got["p"] == pytest.approx(ref, rel=1e-12)


def test_mcnemar_needs_binary_outcomes():
    with pytest.raises(ValueError, match="binary"):
        stats.mcnemar([0.5, 1.0], [0.0, 1.0])


def test_permutation_exact_equals_enumeration():
    a = np.array([1.3, 0.2, 2.5, 0.9, 1.1, 3.0, 0.4])
    b = np.array([1.0, 0.5, 1.5, 1.0, 0.7, 2.1, 0.6])
    d = a - b
    obs = abs(d.mean())
    flips = [abs(np.dot(s, d)) / d.size for s in itertools.product((1.0, -1.0), repeat=d.size)]
    ref = sum(f >= obs - 1e-12 for f in flips) / len(flips)
    got = stats.permutation_test(a, b)
    assert got["exact"] and got["p"] == pytest.approx(ref, abs=1e-15)
    # the Monte Carlo branch estimates the same p
    mc = stats.permutation_test(a, b, n_perm=40000, seed=1, exact_max=0)
    assert not mc["exact"] and mc["p"] == pytest.approx(ref, abs=0.01)


def _bootstrap_ci_reference(d: np.ndarray, n_boot: int) -> tuple[float, float]:
    res = scipy.stats.bootstrap(
        (d,), np.mean, n_resamples=n_boot, method="percentile", random_state=np.random.default_rng(7)
    )
    return res.confidence_interval.low, res.confidence_interval.high


def test_paired_bootstrap_covers_known_difference_and_is_reproducible():
    rng = np.random.default_rng(5)
    a, b = rng.random(400) < 0.7, rng.random(400) < 0.4  # true difference 0.3
    got = stats.paired_bootstrap(a, b, n_boot=4000, seed=11)
    assert got["lo"] < 0.3 < got["hi"]
    assert got["diff"] == pytest.approx(a.mean() - b.mean())
    assert stats.paired_bootstrap(a, b, n_boot=4000, seed=11) == got
    assert stats.paired_bootstrap(a, b, n_boot=4000, seed=12)["lo"] != got["lo"]
    ref = _bootstrap_ci_reference(a.astype(float) - b, 20000)
    wide = stats.paired_bootstrap(a, b, n_boot=20000, seed=0)
    assert (wide["lo"], wide["hi"]) == pytest.approx(ref, abs=0.01)


def test_paired_bootstrap_coverage_near_nominal():
    rng = np.random.default_rng(6)
    hits = 0
    for rep in range(200):
        a = rng.normal(0.5, 1.0, 60)
        b = a - 0.3 + rng.normal(0.0, 0.5, 60)  # paired, true mean difference 0.3
        ci = stats.paired_bootstrap(a, b, n_boot=1000, seed=rep)
        hits += ci["lo"] <= 0.3 <= ci["hi"]
    assert 0.88 <= hits / 200 <= 0.99


def test_seed_resampling_keeps_run_to_run_variance():
    rng = np.random.default_rng(8)
    base = (rng.random(80) < 0.5).astype(float)
    runs = base[:, None] + np.array([-0.3, 0.0, 0.3])[None, :]  # a large whole-run effect per seed
    b = (rng.random(80) < 0.5).astype(float)
    avg = stats.paired_bootstrap(runs, b, n_boot=3000, seed=0, seeds="average")
    res = stats.paired_bootstrap(runs, b, n_boot=3000, seed=0, seeds="resample")
    assert avg["diff"] == pytest.approx(res["diff"])
    assert res["hi"] - res["lo"] > 1.2 * (avg["hi"] - avg["lo"])
    with pytest.raises(ValueError, match="seeds must be"):
        stats.paired_bootstrap(runs, b, seeds="within")


def test_mean_ci_is_the_task_mean_with_the_scipy_percentile_interval():
    rng = np.random.default_rng(10)
    x = (rng.random(300) < 0.6).astype(float)
    got = stats.mean_ci(x, n_boot=20000, seed=0)
    assert got["mean"] == pytest.approx(x.mean(), rel=1e-12) and got["n_tasks"] == 300
    assert (got["lo"], got["hi"]) == pytest.approx(_bootstrap_ci_reference(x, 20000), abs=0.01)
    assert stats.mean_ci(x, n_boot=2000, seed=4) == stats.mean_ci(x, n_boot=2000, seed=4)
    runs = np.stack([x, 1.0 - x], axis=1)  # two seeds: each task's seed mean is 0.5
    both = stats.mean_ci(runs, n_boot=500, seed=0)
    assert both["mean"] == pytest.approx(0.5) and both["lo"] == pytest.approx(0.5) == both["hi"]


def test_geomean_ci_matches_scipy_gmean():
    rng = np.random.default_rng(9)
    x = np.exp(rng.normal(0.2, 0.4, 100))
    got = stats.geomean_ci(x, n_boot=4000, seed=3)
    assert got["geomean"] == pytest.approx(scipy.stats.gmean(x), rel=1e-12)
    assert got["lo"] < got["geomean"] < got["hi"]
    ref = _bootstrap_ci_reference(np.log(x), 20000)
    wide = stats.geomean_ci(x, n_boot=20000, seed=0)
    assert (np.log(wide["lo"]), np.log(wide["hi"])) == pytest.approx(ref, abs=0.01)
    with pytest.raises(ValueError, match="positive"):
        stats.geomean_ci([1.0, 0.0])


def test_holm_hand_worked():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06
    got = stats.holm([0.01, 0.04, 0.03, 0.005], alpha=0.05)
    assert got["adjusted"] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert got["reject"] == [True, False, False, True]
    assert stats.holm([0.5, 0.9])["adjusted"] == pytest.approx([1.0, 1.0])


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(ValueError, match="same tasks"):
        stats.paired_bootstrap([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="NaN"):
        stats.sign_test([1.0, float("nan")], [0.0, 0.0])


@pytest.mark.parametrize(
    ("n", "c", "k", "want"),
    [
        (5, 2, 1, 2 / 5),  # pass@1 is the sample mean c / n
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (5, 2, 3, 1 - 1 / 10),  # 1 - C(3,3)/C(5,3)
        (5, 2, 4, 1.0),  # fewer than k failures: every k-subset holds a correct sample
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 0, 2, 0.0),
        (4, 4, 1, 1.0),
    ],
)
def test_pass_at_k_hand_computed(n, c, k, want):
    assert stats.pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12)


def test_pass_at_k_is_the_share_of_k_subsets_with_a_correct_sample():
    for n, c in ((6, 1), (7, 3), (8, 5)):
        outcomes = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            want = sum(any(s) for s in subsets) / len(subsets)
            assert stats.pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12)


def test_pass_at_k_rejects_bad_counts():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        stats.pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        stats.pass_at_k(3, 4, 1)
