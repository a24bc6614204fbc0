"""The cold-start corpus: per task a scripted episode (a buggy first attempt sampled from a seeded
distribution or a clean one, verify, the fix, verify, benchmark, submit) played THROUGH the real agent loop
(``research.agent.run_agent``) and tools against the sandbox, so every observation is what the tools render
and every verdict is the sandbox's. The run's ``trajectories.jsonl`` is exactly what ``experiments.agent``
writes (and ``sft.demos`` reads); the corpus keeps the episodes that ended ``correct`` and whose first
attempt earned the verdict its bug was meant to, and counts the rest in ``report.json``."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels_env.client import JudgeConfig
from research.agent import AgentConfig, RunConfig, TasksConfig, read_jsonl, run_agent
from research.agent.policies.scripted import ScriptedPolicy
from research.agent.runner import TRAJECTORIES

from ..records import TaskRecord, write_jsonl
from .bugs import BUG_KINDS, EXPECTED, inject
from .detector import uses_unseen_optimisation
from .templates import Uncovered, write_solution

RUN, REPLAY, CORPUS, REPORT = "run", "replay", "trajectories.jsonl", "report.json"
JUDGING = ("verify", "benchmark")


class CorpusError(ValueError):
    """A corpus that cannot be made as asked (bad bug rates, no covered task, another corpus in out_dir)."""


@dataclass
class CorpusConfig:
    """``bug_rates``: relative weight of each first-attempt bug kind and of ``clean`` (no bug); a kind that
    does not apply to a task's solution is drawn again from the others."""

    seed: int = 0
    max_tasks: int = 0  # 0: every covered task
    bug_rates: dict[str, float] = field(
        default_factory=lambda: {
            "clean": 0.3, "missing_mask": 0.2, "wrong_shape": 0.1, "wrong_dtype": 0.1,
            "undefined_name": 0.15, "syntax_error": 0.15,
        }
    )  # fmt: skip
    benchmark: bool = True  # a benchmark call before submit (off: shorter episodes, e.g. tests)
    skills: bool = True  # offer the skill tool (the prompt then says so), as the agent loop's default
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    concurrency: int = 1

    def __post_init__(self):
        unknown = set(self.bug_rates) - {"clean", *BUG_KINDS}
        if unknown or any(v < 0 for v in self.bug_rates.values()) or sum(self.bug_rates.values()) <= 0:
            raise CorpusError(
                f"bug_rates needs non-negative weights of clean and {list(BUG_KINDS)} (got {self.bug_rates})"
            )


def _step(name: str, thought: str = "", **arguments) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "thought": thought}


def _draw(rng: random.Random, rates: dict[str, float], exclude: set[str]) -> str:
    kinds = [k for k, v in rates.items() if v > 0 and k not in exclude]
    return rng.choices(kinds, [rates[k] for k in kinds])[0] if kinds else "clean"


def plan_episode(rec: TaskRecord, cfg: CorpusConfig) -> dict[str, Any]:
    """The script of one task (raises :class:`Uncovered`): ``steps`` and the ``bug`` its first attempt has."""
    dtype = rec.meta.get("dtype") or (rec.dtypes[0] if rec.dtypes else "float32")
    sol = write_solution(rec.source, rec.ops)
    rng = random.Random(f"{cfg.seed}/{rec.id}")
    tried: set[str] = set()
    rank = len(rec.output_shape) if rec.output_shape else 0  # unknown: no flattening bug
    bug = None
    while True:
        kind = _draw(rng, cfg.bug_rates, tried)
        if kind == "clean":
            break
        try:
            bug = inject(sol.source, kind, out_rank=rank, dtype=dtype)
            break
        except ValueError:
            tried.add(kind)
    plan = (
        f"Plan: {len(rec.ops)} op(s) ({', '.join(rec.ops)}); one Triton kernel per op, launched in order, "
        "BLOCK=1024 (32x32x32 tiles for tl.dot). I copy Model's __init__ so the parameters match."
    )
    steps = []
    if bug is not None:
        steps += [_step("write_file", plan, path="model_new.py", content=bug.source), _step("verify")]
        fix = f"verify failed: {bug.note}. Fixing that."
        steps += [_step("write_file", fix, path="model_new.py", content=sol.source), _step("verify")]
    else:
        steps += [_step("write_file", plan, path="model_new.py", content=sol.source), _step("verify")]
    if cfg.benchmark:
        steps.append(_step("benchmark", "Correct. Timing it against eager and torch.compile."))
    steps.append(_step("submit", "" if cfg.benchmark else "Correct. Submitting."))
    return {"steps": steps, "bug": bug.kind if bug else "clean", "kernels": sol.kernels}


class CorpusPolicy(ScriptedPolicy):
    """Plays each task's planned script; the plans are made from the task records in ``prepare``."""

    name = "corpus"

    def __init__(self, cfg: CorpusConfig):
        super().__init__({})
        self.cfg, self.plans, self.ops = cfg, {}, {}
        # the loop offers the skill tool (and the prompt mentions it) only to a policy that uses skills: the
        # corpus' prompts must be the ones the RL policy will see
        self.uses_skills = cfg.skills

    def prepare(self, tasks) -> None:
        for t in tasks:
            self.plans[t.id] = plan_episode(t.meta["record"], self.cfg)
            self.ops[t.id] = list(t.meta["record"].ops)
        self.script = {k: p["steps"] for k, p in self.plans.items()}


def judged(rec: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(tool, verdict status) of every verify/benchmark call of a trajectory record, in order."""
    return [
        (c["name"], (c.get("verdict") or {}).get("status"))
        for t in rec.get("turns") or []
        for c in t.get("calls") or []
        if c["name"] in JUDGING
    ]


def _run(
    tasks_file: Path, out: Path, cfg: CorpusConfig, policy, client, resume: bool
) -> list[dict[str, Any]]:
    if not resume and out.exists():
        shutil.rmtree(out)
    run = RunConfig(
        agent=AgentConfig(skills=cfg.skills, concurrency=cfg.concurrency, max_turns=16),
        tasks=TasksConfig(source="data", path=str(tasks_file)),
        judge=cfg.judge,
        out_dir=str(out),
        resume=resume,
        progress=False,
    )
    run_agent(run, policy=policy, client=client)
    return read_jsonl(out / TRAJECTORIES)


def generate_corpus(tasks: list[TaskRecord], cfg: CorpusConfig, out_dir, client) -> dict[str, Any]:
    """Write ``out_dir/trajectories.jsonl`` (kept episodes), ``out_dir/run/`` (the agent run as it ran) and
    ``out_dir/report.json``; returns the report. ``client``: a started-or-not ``SandboxClient``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    covered, skipped = [], Counter()
    for rec in tasks:
        try:
            plan_episode(rec, cfg)
        except Uncovered as exc:
            skipped[str(exc).split(":")[0]] += 1
            continue
        covered.append(rec)
        if cfg.max_tasks and len(covered) >= cfg.max_tasks:
            break
    if not covered:
        raise CorpusError(f"no task is covered by the templates (skipped: {dict(skipped)})")
    # a rerun into the same out_dir resumes the agent run (episodes already there are kept), so it must be
    # the same corpus: same config and tasks
    fingerprint = json.loads(
        json.dumps({"config": dataclasses.asdict(cfg), "tasks": [r.id for r in covered]})
    )
    if (out / "config.json").is_file() and json.loads((out / "config.json").read_text()) != fingerprint:
        raise CorpusError(f"{out} holds a corpus of another config or task set; choose another out_dir")
    (out / "config.json").write_text(json.dumps(fingerprint, indent=1, default=str))
    write_jsonl(out / "tasks.jsonl", covered)
    policy = CorpusPolicy(cfg)
    records = _run(out / "tasks.jsonl", out / RUN, cfg, policy, client, resume=True)
    kept, drops, bugs, verdicts, flagged, tokens = [], Counter(), Counter(), Counter(), Counter(), 0
    for rec in records:
        plan = policy.plans[rec["task"]]
        status = (rec.get("verdict") or {}).get("status")
        verdicts[str(status)] += 1
        bugs[plan["bug"]] += 1
        seen = judged(rec)
        first = seen[0][1] if seen else None
        if status != "correct":
            drops[f"final_{status}"] += 1
        elif plan["bug"] != "clean" and first not in EXPECTED[plan["bug"]]:
            drops[f"bug_{plan['bug']}_gave_{first}"] += 1
        else:
            rec["corpus"] = {"bug": plan["bug"], "kernels": plan["kernels"], "judged": seen}
            kept.append(rec)
            flagged.update(uses_unseen_optimisation(_final_source(rec), len(policy.ops[rec["task"]])))
            tokens += len(json.dumps(rec["messages"])) // 4
    with open(out / CORPUS, "w") as f:
        for rec in kept:
            f.write(json.dumps(rec, default=str) + "\n")
    report = {
        "config": dataclasses.asdict(cfg),
        "tasks_given": len(tasks),
        "tasks_covered": len(covered),
        "skipped": dict(skipped),
        "episodes": len(records),
        "kept": len(kept),
        "dropped": dict(drops),
        "final_verdicts": dict(verdicts),
        "bug_kinds": dict(bugs),
        "tokens_estimate": tokens,  # 4 bytes per token, the agent loop's own estimate
        # the detector on the corpus' own final sources: empty, or the corpus shows what RL should find
        "unseen_optimisations": dict(flagged),
    }
    (out / REPORT).write_text(json.dumps(report, indent=1, default=str))
    return report


def replay(out_dir, cfg: CorpusConfig, client) -> list[dict[str, Any]]:
    """Play every kept transcript's recorded tool calls (and thoughts) again through the agent loop;
    returns per task the recorded and the replayed (final status, judged calls)."""
    out = Path(out_dir)
    recs = read_jsonl(out / CORPUS)
    script = {r["task"]: _calls(r["messages"]) for r in recs}
    again = {
        r["task"]: r
        for r in _run(out / "tasks.jsonl", out / REPLAY, cfg, ScriptedPolicy(script), client, False)
    }
    rows = []
    for r in recs:
        new = again.get(r["task"], {})
        rows.append(
            {
                "task": r["task"],
                "recorded": (r["verdict"]["status"], judged(r)),
                "replayed": ((new.get("verdict") or {}).get("status"), judged(new)),
            }
        )
    return rows


def _final_source(rec: dict[str, Any]) -> str:
    """The last model_new.py the episode wrote."""
    source = ""
    for step in _calls(rec["messages"]):
        for call in step:
            args = json.loads(call["arguments"]) if isinstance(call["arguments"], str) else call["arguments"]
            if call["name"] == "write_file" and args.get("path") == "model_new.py":
                source = args["content"]
    return source


def _calls(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    steps = []
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            steps.append(
                [
                    {
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                        "thought": m.get("content") or "",
                    }
                    for c in m["tool_calls"]
                ]
            )
    return steps
