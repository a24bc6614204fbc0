"""Per-task results of runs on one protocol split, paired by task, and the study's report: the headline of
a pair of runs and the ablation table (each ablation vs the full pipeline, Holm-corrected).

A run's results file (``study-results/1``)::

    {"schema": "study-results/1", "run": "full-s0", "split": "test_seen", "protocol_sha256": "...",
     "results": [{"task": "toy0-2-00017", "seed": 0, "status": "correct", "pass": true,
                  "faster_than_eager": true, "faster_than_compile": false,
                  "speedup_vs_eager": 1.31, "speedup_vs_compile": 0.97}, ...]}

``seed`` is the training seed of the run's policy (one row per task and seed; every task has the same
seeds). ``faster_*`` use CUDA Agent's >5% rule and are null when the timing was not comparable (CPU mode);
speedups are null for a failed task. ``result_from_verdict`` makes a row from a sandbox verdict with the
sandbox's own scoring (``kernels_env.client.summarize``). ``pair_runs`` aligns two runs task by task
(``study-paired/1``: ``{"split", "a", "b", "tasks": [{"task", "a": [rows], "b": [rows]}]}``).

Rates get a Wilson interval on the pooled (task, seed) counts (exact binomial intervals only with one seed;
with several, the paired bootstrap's ``seeds`` mode says how seeds enter the difference). Geomean speedups
are over the correct (task, seed) results, as in Table 1; the paired speedup ratio is over the tasks both
runs solved (per task: the mean log-speedup over its correct seeds).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kernels_env.client import CORRECT, summarize

from . import stats
from ._jsonio import read_json, write_json
from .protocol import Protocol

RESULTS_SCHEMA, PAIRED_SCHEMA = "study-results/1", "study-paired/1"
BINARY = ("pass", "faster_than_compile", "faster_than_eager")
HEADLINE = "faster_than_compile"


class ResultsError(ValueError):
    """Results that cannot be read or paired as asked (one line: which file, task or field)."""


@dataclass
class TaskResult:
    task: str
    seed: int
    status: str
    passed: bool
    faster_than_eager: bool | None = None
    faster_than_compile: bool | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    sample: int = 0  # which of k samples of the task (sampled decoding, pass@k); greedy: 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("passed")
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TaskResult:
        try:
            return cls(
                task=str(d["task"]),
                seed=int(d["seed"]),
                status=str(d.get("status", CORRECT if d["pass"] else "incorrect")),
                passed=bool(d["pass"]),
                **{k: d.get(k) for k in ("faster_than_eager", "faster_than_compile")},
                **{k: d.get(k) for k in ("speedup_vs_eager", "speedup_vs_compile")},
                sample=int(d.get("sample", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultsError(f"result row {dict(d)!r:.80} lacks or mistypes a field ({exc})") from None


def result_from_verdict(task: str, seed: int, verdict: Mapping[str, Any], sample: int = 0) -> TaskResult:
    """A row from a sandbox verdict (``status``, ``speedups``, ``timings``), scored by the sandbox's
    summary: a failure is never faster; a correct one without comparable timing has ``faster_*`` null."""
    status = str(verdict.get("status"))
    v = {
        "problem": task,
        "status": status,
        "speedups": verdict.get("speedups") or {},
        "timings": verdict.get("timings") or {},
    }
    s = summarize([v], [task])
    comparable = bool(v["timings"].get("comparable"))

    def faster(mode: str) -> bool | None:
        if status != CORRECT:
            return False
        if not comparable:
            return None
        return bool(s["faster_than"].get(mode) or 0.0)  # no speedup for a mode: its baseline failed

    ok = status == CORRECT
    sp = v["speedups"]
    return TaskResult(
        task,
        int(seed),
        status,
        ok,
        faster("eager"),
        faster("compile"),
        sp.get("eager") if ok else None,
        sp.get("compile") if ok else None,
        int(sample),
    )


@dataclass
class RunResults:
    run: str
    split: str
    results: list[TaskResult]
    protocol_sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RESULTS_SCHEMA,
            "run": self.run,
            "split": self.split,
            "protocol_sha256": self.protocol_sha256,
            "results": [r.to_dict() for r in self.results],
        }

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, self.to_dict(), indent=1)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> RunResults:
        d = read_json(Path(path), RESULTS_SCHEMA, ResultsError, "no results file", "file")
        return cls(
            str(d["run"]),
            str(d["split"]),
            [TaskResult.from_dict(r) for r in d["results"]],
            d.get("protocol_sha256"),
        )

    def sample_grid(self) -> tuple[list[str], list[int], list[int], dict[tuple[str, int, int], TaskResult]]:
        """(tasks, seeds, samples, (task, seed, sample) -> row), checking one row per task, seed and sample
        and the same seeds and samples for every task."""
        cells: dict[tuple[str, int, int], TaskResult] = {}
        for r in self.results:
            if (r.task, r.seed, r.sample) in cells:
                what = f" sample {r.sample}" if r.sample else ""
                raise ResultsError(f"run {self.run}: task {r.task} seed {r.seed}{what} appears twice")
            cells[(r.task, r.seed, r.sample)] = r
        tasks = sorted({t for t, _, _ in cells})
        seeds = sorted({s for _, s, _ in cells})
        samples = sorted({i for _, _, i in cells})
        for t in tasks:
            for s in seeds:
                for i in samples:
                    if (t, s, i) not in cells:
                        what = f" sample {i}" if len(samples) > 1 else ""
                        raise ResultsError(f"run {self.run}: task {t} has no result for seed {s}{what}")
        if not tasks:
            raise ResultsError(f"run {self.run}: no results")
        return tasks, seeds, samples, cells

    def grid(self) -> tuple[list[str], list[int], dict[tuple[str, int], TaskResult]]:
        """(tasks, seeds, (task, seed) -> row), checking one row per task and seed and the same seeds for
        every task: the paired comparisons' view (one greedy sample per task and seed)."""
        tasks, seeds, samples, cells = self.sample_grid()
        if len(samples) > 1:
            raise ResultsError(
                f"run {self.run} has {len(samples)} samples per task and seed: paired comparisons take one "
                "(greedy) result per task and seed; a sampled run reports pass@k"
            )
        return tasks, seeds, {(t, s): r for (t, s, _), r in cells.items()}


def check_run(run: RunResults, protocol: Protocol) -> None:
    """A run's results cover exactly its protocol split's tasks, under this protocol (a task without a
    result must be written as a failed row, never left out)."""
    if run.split not in protocol.splits:
        raise ResultsError(f"run {run.run}: the protocol has no split {run.split!r}")
    if run.protocol_sha256 and run.protocol_sha256 != protocol.sha256:
        raise ResultsError(f"run {run.run} was evaluated under another protocol ({run.protocol_sha256[:12]})")
    tasks, _, _, _ = run.sample_grid()
    want = set(protocol.splits[run.split])
    missing, extra = sorted(want - set(tasks)), sorted(set(tasks) - want)
    if missing or extra:
        parts = [f"{len(missing)} tasks missing (e.g. {missing[0]})"] if missing else []
        parts += [f"{len(extra)} tasks not in the split (e.g. {extra[0]})"] if extra else []
        what = "; ".join(parts)
        raise ResultsError(f"run {run.run} on {run.split}: {what}")


def pair_runs(a: RunResults, b: RunResults) -> dict[str, Any]:
    """The ``study-paired/1`` form of two runs on the same split and the same tasks."""
    if a.split != b.split:
        raise ResultsError(f"runs {a.run} and {b.run} are on different splits ({a.split} vs {b.split})")
    if a.protocol_sha256 and b.protocol_sha256 and a.protocol_sha256 != b.protocol_sha256:
        raise ResultsError(f"runs {a.run} and {b.run} were evaluated under different protocols")
    ta, sa, ca = a.grid()
    tb, sb, cb = b.grid()
    if ta != tb:
        only = sorted(set(ta) ^ set(tb))
        raise ResultsError(
            f"runs {a.run} and {b.run} cover different tasks ({len(only)} differ, e.g. {only[0]})"
        )
    return {
        "schema": PAIRED_SCHEMA,
        "split": a.split,
        "a": a.run,
        "b": b.run,
        "tasks": [
            {"task": t, "a": [ca[(t, s)].to_dict() for s in sa], "b": [cb[(t, s)].to_dict() for s in sb]}
            for t in ta
        ],
    }


def pass_at_k_table(
    run: RunResults, ks: list[int] | None = None, n_boot: int = 10000, seed: int = 0
) -> dict[str, Any]:
    """pass@k of a run with n samples per task and seed (Chen et al. 2021's unbiased estimator per task
    and seed, ``stats.pass_at_k``), averaged over seeds then tasks, with a bootstrap CI over tasks; ``ks``
    default: 1, 2, 4, ... up to n and n itself. A greedy run (one sample) has pass@1 only."""
    tasks, seeds, samples, cells = run.sample_grid()
    n = len(samples)
    ks = ks or sorted({*(2**i for i in range(n.bit_length()) if 2**i <= n), n})
    bad = [k for k in ks if not 1 <= k <= n]
    if bad:
        raise ResultsError(f"run {run.run}: pass@{bad[0]} needs 1 <= k <= {n} (its samples per task)")
    correct = np.array(
        [[sum(cells[(t, s, i)].passed for i in samples) for s in seeds] for t in tasks], dtype=int
    )
    rows = {}
    for k in ks:
        per = np.vectorize(lambda c, k=k: stats.pass_at_k(n, int(c), k))(correct).astype(float)
        est, boot = stats.bootstrap_means(per, n_boot, seed)
        lo, hi = np.quantile(boot, [0.025, 0.975])
        rows[k] = {"pass_at_k": est, "lo": float(lo), "hi": float(hi)}
    return {
        "run": run.run,
        "split": run.split,
        "n_tasks": len(tasks),
        "n_seeds": len(seeds),
        "n": n,
        "pass_at": rows,
    }


def format_pass_at_k(table: Mapping[str, Any]) -> str:
    head = f"{table['run']} on {table['split']}: {table['n_tasks']} tasks x {table['n_seeds']} seeds, "
    cells = [
        f"pass@{k} {r['pass_at_k']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]" for k, r in table["pass_at"].items()
    ]
    return head + f"{table['n']} samples each: " + ", ".join(cells) + " (95% bootstrap over tasks)"


def _matrix(paired: Mapping[str, Any], side: str, key: str) -> np.ndarray | None:
    """(n_tasks, n_seeds) of one field; None when any entry is null (e.g. no comparable timing)."""
    rows = [[r.get(key) for r in t[side]] for t in paired["tasks"]]
    if any(v is None for row in rows for v in row):
        return None
    return np.asarray(rows, dtype=float)


def _rate(m: np.ndarray) -> dict[str, Any]:
    k, n = int(m.sum()), int(m.size)
    lo, hi = stats.wilson(k, n)
    return {"rate": k / n, "k": k, "n": n, "lo": lo, "hi": hi}


def _log_speedups(paired: Mapping[str, Any], side: str) -> tuple[list[float], dict[str, float]]:
    """(log-speedup vs compile of every correct (task, seed), per task: mean over its correct seeds)."""
    flat, per_task = [], {}
    for t in paired["tasks"]:
        logs = [
            math.log(r["speedup_vs_compile"]) for r in t[side] if r["pass"] and r.get("speedup_vs_compile")
        ]
        flat += logs
        if logs:
            per_task[t["task"]] = float(np.mean(logs))
    return flat, per_task


def compare(paired: Mapping[str, Any], n_boot: int = 10000, seed: int = 0, seeds: str = "average") -> dict:
    """The headline of run a vs run b: per binary metric each run's rate (Wilson), the paired difference
    a - b (bootstrap CI) and McNemar's p; geomean speedup vs compile of each (bootstrap CI) and their paired
    ratio over the tasks both solved (CI and permutation p)."""
    out: dict[str, Any] = {
        "split": paired["split"],
        "a": paired["a"],
        "b": paired["b"],
        "n_tasks": len(paired["tasks"]),
        "metrics": {},
    }
    for key in BINARY:
        ma, mb = _matrix(paired, "a", key), _matrix(paired, "b", key)
        if ma is None or mb is None:
            out["metrics"][key] = None  # no comparable timing: this metric is unknown, not zero
            continue
        out["metrics"][key] = {
            "a": _rate(ma),
            "b": _rate(mb),
            "diff": stats.paired_bootstrap(ma, mb, n_boot, seed, seeds=seeds),
            "mcnemar": stats.mcnemar(ma, mb),
        }
    fa, pa = _log_speedups(paired, "a")
    fb, pb = _log_speedups(paired, "b")
    both = sorted(set(pa) & set(pb))
    ratio = None
    if both:
        la, lb = [pa[t] for t in both], [pb[t] for t in both]
        d = stats.paired_bootstrap(la, lb, n_boot, seed)
        ratio = {
            "ratio": math.exp(d["diff"]),
            "lo": math.exp(d["lo"]),
            "hi": math.exp(d["hi"]),
            "n_tasks": len(both),
            "p": stats.permutation_test(la, lb, seed=seed)["p"],
        }
    out["geomean_vs_compile"] = {
        "a": stats.geomean_ci(np.exp(fa), n_boot, seed),
        "b": stats.geomean_ci(np.exp(fb), n_boot, seed),
        "paired_ratio": ratio,
    }
    return out


def ablation_table(
    full: RunResults,
    ablations: Mapping[str, RunResults],
    metric: str = HEADLINE,
    alpha: float = 0.05,
    n_boot: int = 10000,
    seed: int = 0,
    seeds: str = "average",
) -> dict[str, Any]:
    """Each ablation vs the full pipeline on ``metric`` (a binary one): difference ablation - full with its
    bootstrap CI, McNemar p, Holm-adjusted p over the ablations, and whether it is significant at
    ``alpha`` after the correction."""
    if metric not in BINARY:
        raise ResultsError(f"ablation metric must be one of {BINARY}, got {metric!r}")
    rows = []
    for name, run in ablations.items():
        p = pair_runs(run, full)
        ma, mb = _matrix(p, "a", metric), _matrix(p, "b", metric)
        if ma is None or mb is None:
            raise ResultsError(f"ablation {name}: {metric} is unknown for some task (no comparable timing)")
        rows.append(
            {
                "ablation": name,
                "run": run.run,
                "rate": float(ma.mean()),
                "full_rate": float(mb.mean()),
                **{
                    k: v
                    for k, v in stats.paired_bootstrap(ma, mb, n_boot, seed, seeds=seeds).items()
                    if k in ("diff", "lo", "hi")
                },
                "p": stats.mcnemar(ma, mb)["p"],
            }
        )
    h = stats.holm([r["p"] for r in rows], alpha)
    for r, adj, rej in zip(rows, h["adjusted"], h["reject"]):
        r["p_holm"], r["significant"] = adj, rej
    return {"metric": metric, "full": full.run, "split": full.split, "alpha": alpha, "rows": rows}


def _ci(d: Mapping[str, Any] | None, fmt: str = "{:+.3f}") -> str:
    if not d:
        return "n/a"
    return f"{fmt.format(d['diff'])} [{fmt.format(d['lo'])}, {fmt.format(d['hi'])}]"


def _p(p: float) -> str:
    return f"{p:.1e}" if p < 1e-3 else f"{p:.4f}"


def _gm(r: Mapping[str, Any] | None) -> str:
    if not r or r.get("geomean") is None:
        return "n/a"
    return f"{r['geomean']:.3f}x [{r['lo']:.3f}, {r['hi']:.3f}] over {r['n']}"


def format_compare(rep: Mapping[str, Any]) -> str:
    lines = [
        f"{rep['a']} (a) vs {rep['b']} (b) on {rep['split']}, {rep['n_tasks']} tasks",
        f"{'metric':<22}{'a [95% Wilson]':>24}{'b [95% Wilson]':>24}{'a - b [95% bootstrap]':>30}"
        f"{'McNemar p':>11}",
    ]
    for key, m in rep["metrics"].items():
        if m is None:
            lines.append(f"{key:<22}{'n/a (no comparable timing)':>24}")
            continue
        rate = lambda r: f"{r['rate']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"  # noqa: E731
        lines.append(
            f"{key:<22}{rate(m['a']):>24}{rate(m['b']):>24}{_ci(m['diff']):>30}{_p(m['mcnemar']['p']):>11}"
        )
    g = rep["geomean_vs_compile"]
    lines.append(f"geomean vs compile      a {_gm(g['a'])}   b {_gm(g['b'])}")
    r = g["paired_ratio"]
    if r is None:
        lines.append("paired a/b speedup      n/a (no task solved by both)")
    else:
        lines.append(
            f"paired a/b speedup      {r['ratio']:.3f}x [{r['lo']:.3f}, {r['hi']:.3f}] over "
            f"{r['n_tasks']} tasks both solved, permutation p {_p(r['p'])}"
        )
    return "\n".join(lines)


def format_ablations(table: Mapping[str, Any]) -> str:
    lines = [
        f"{table['metric']}: ablation - full ({table['full']}) on {table['split']}, Holm at "
        f"alpha {table['alpha']:g}",
        f"{'ablation':<22}{'rate':>7}{'full':>7}{'diff [95% bootstrap]':>30}{'p':>9}{'p Holm':>9}  sig",
    ]
    for r in table["rows"]:
        lines.append(
            f"{r['ablation'][:21]:<22}{r['rate']:>7.3f}{r['full_rate']:>7.3f}{_ci(r):>30}"
            f"{_p(r['p']):>9}{_p(r['p_holm']):>9}  {'yes' if r['significant'] else 'no'}"
        )
    return "\n".join(lines)


def report(a: RunResults, b: RunResults, ablations: Mapping[str, RunResults] | None = None, **kw) -> dict:
    """Print the headline of a vs b (and the ablation table vs ``a`` as the full pipeline, when given) and
    return them: ``{"compare": ..., "ablations": ... | None}``."""
    rep = compare(pair_runs(a, b), **kw)
    print(format_compare(rep))
    table = None
    if ablations:
        table = ablation_table(a, ablations, **kw)
        print(format_ablations(table))
    return {"compare": rep, "ablations": table}
