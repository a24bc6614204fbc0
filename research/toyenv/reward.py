"""The reward path: plan -> Triton source -> sandbox verdict -> reward, with a disk cache of judged sources.

``PlanJudge.judge_many`` renders every plan, answers what the cache already holds, submits each distinct
remaining (reference, solution) once to ``kernels_env.client.SandboxClient`` (futures, so the sandbox judges
them in parallel) and returns one ``Judgement`` per plan, in order.

Rewards follow the judge's reward function (``JudgeConfig.reward``). A plan that does not parse or render
earns that function's failure reward (the same as a kernel that does not compile: the policy's doing). A
verdict that is not the policy's doing (a broken reference, the sandbox's own error, a timeout: toy
kernels have no loop that could hang, so a timeout is the infrastructure's) has ``reward=None`` and
``dropped=True``: never a reward, never cached.

Cache: an append-only JSONL file of verdicts keyed by sha256 of (reference source, solution source, judge
settings, device); a cut-off last line (a killed run) is ignored. Final held-out evaluation passes
``use_cache=False`` (or builds the judge without a cache) so every verdict is fresh.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels_env.client import (
    INFRA_ERROR,
    NO_VERDICT,
    REFERENCE_ERROR,
    BrokenReference,
    JudgeConfig,
    SandboxClient,
    SandboxError,
    failure_reward,
)

from .grammar import Plan, PlanError, parse_plan
from .render import render_plan
from .tasks import ToyTask

INVALID_PLAN = "invalid_plan"
# Statuses that are never the plan's doing here: the sandbox's (no verdict, judge or reference errors) and
# timeouts (an interpreted CPU-mode kernel can run long whatever the plan).
NOT_POLICY = ("timeout", *NO_VERDICT)


@dataclass
class Judgement:
    status: str  # a sandbox status, or "invalid_plan"
    reward: float | None
    speedups: dict[str, float | None] = field(default_factory=dict)
    error: str | None = None
    cached: bool = False
    dropped: bool = False  # not the policy's doing: no reward, excluded from training
    key: str | None = None  # cache key (None for invalid plans)
    median_ms: float | None = None

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def faster_than(self, baseline: str, margin: float = 0.05) -> bool:
        """CUDA Agent's "faster by more than 5%" over a baseline mode (``eager``, ``compile``)."""
        s = self.speedups.get(baseline)
        return self.correct and s is not None and s > 0 and 1.0 - 1.0 / s > margin


def _verdict(result: dict[str, Any]) -> dict[str, Any]:
    cand = (result.get("timings") or {}).get("candidate") or {}
    error = result.get("error")
    return {
        "status": result["status"],
        "reward": result.get("reward"),
        "speedups": result.get("speedups") or {},
        "error": error[:500] if isinstance(error, str) else None,
        "median_ms": cand.get("median_ms"),
    }


class JudgeCache:
    """Verdicts by key in an append-only JSONL file (thread-safe; ``path=None``: in memory only)."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path is not None else None
        self._data: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        if self.path is not None and self.path.exists():
            lines = self.path.read_text().splitlines()
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    self._data[entry["key"]] = entry["verdict"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    if i == len(lines) - 1:
                        continue  # an append cut off by a kill
                    raise ValueError(f"{self.path}:{i + 1}: not a cache entry") from None

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: str, verdict: dict[str, Any]) -> None:
        with self._lock:
            if key in self._data:
                return
            self._data[key] = verdict
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    f.write(json.dumps({"key": key, "verdict": verdict}, sort_keys=True) + "\n")


def cache_key(reference: str, solution: str, judge: JudgeConfig, device: str) -> str:
    settings = json.dumps(dataclasses.asdict(judge), sort_keys=True, default=str)
    h = hashlib.sha256()
    for part in (reference, solution, settings, device):
        h.update(hashlib.sha256(part.encode()).digest())
    return h.hexdigest()


def _same_ops(task: ToyTask, plan: Plan) -> None:
    """A plan must name the task's ops (in some order, with axes): it says what it computes. Without this a
    wrong op whose output happens to lie within the tolerance was rewarded (at CPU sizes, sigmoid in place
    of softplus after a log_softmax: both are ~e^x for very negative x)."""
    if sorted(plan.ops) != sorted(task.ops):
        raise PlanError(f"the plan's ops {list(plan.ops)} are not the task's {list(task.ops)} in any order")


class PlanJudge:
    """Judge plans for toy tasks with the real sandbox. ``client`` is started on first use; the judge
    settings and the client's device (plus GPU name) are part of every cache key."""

    def __init__(
        self, client: SandboxClient, judge: JudgeConfig | None = None, cache: JudgeCache | None = None
    ):
        self.client = client
        self.judge_config = judge or JudgeConfig()
        self.cache = cache
        self.invalid_reward = failure_reward(self.judge_config.reward)  # unknown rewards fail here
        self.stats = {"judged": 0, "cache_hits": 0, "invalid": 0, "dropped": 0}

    def _device(self) -> str:
        self.client.start()
        env = self.client.environment
        return f"{self.client.device}:{env.get('gpu') or ''}"

    def judge(self, task: ToyTask, plan: Plan | str | list[str], use_cache: bool = True) -> Judgement:
        return self.judge_many([(task, plan)], use_cache=use_cache)[0]

    def judge_many(
        self, items: list[tuple[ToyTask, Plan | str | list[str]]], use_cache: bool = True
    ) -> list[Judgement]:
        out: list[Judgement | None] = [None] * len(items)
        pending: dict[str, tuple[str, str, list[int]]] = {}
        device = self._device() if items else ""
        for i, (task, plan) in enumerate(items):
            try:
                plan = plan if isinstance(plan, Plan) else parse_plan(plan)
                _same_ops(task, plan)
                source = render_plan(task, plan)
            except PlanError as exc:
                out[i] = Judgement(INVALID_PLAN, self.invalid_reward, error=str(exc))
                self.stats["invalid"] += 1
                continue
            key = cache_key(task.source, source, self.judge_config, device)
            hit = self.cache.get(key) if (use_cache and self.cache is not None) else None
            if hit is not None:
                out[i] = self._from_verdict(hit, key, cached=True)
                self.stats["cache_hits"] += 1
            else:
                pending.setdefault(key, (task.source, source, []))[2].append(i)
        futures = {
            key: self.client.submit(ref, sol, self.judge_config, problem="toy", solution_name="plan")
            for key, (ref, sol, _) in pending.items()
        }
        for key, fut in futures.items():
            try:
                verdict = _verdict(fut.result())
            except (BrokenReference, SandboxError) as exc:
                status = REFERENCE_ERROR if isinstance(exc, BrokenReference) else INFRA_ERROR
                verdict = {"status": status, "reward": None, "speedups": {}, "error": str(exc)[:500]}
            self.stats["judged"] += 1
            judgement = self._from_verdict(verdict, key, cached=False)
            if not judgement.dropped and self.cache is not None:
                self.cache.put(key, verdict)
            for i in pending[key][2]:
                out[i] = dataclasses.replace(judgement)
        self.stats["dropped"] += sum(1 for j in out if j is not None and j.dropped)
        return out  # type: ignore[return-value]

    def _from_verdict(self, v: dict[str, Any], key: str, cached: bool) -> Judgement:
        dropped = v["status"] in NOT_POLICY or v.get("reward") is None
        return Judgement(
            status=v["status"],
            reward=None if dropped else float(v["reward"]),
            speedups=dict(v.get("speedups") or {}),
            error=v.get("error"),
            cached=cached,
            dropped=dropped,
            key=key,
            median_ms=v.get("median_ms"),
        )
