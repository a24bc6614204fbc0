"""The shipped toy plan policy (``policy=toy``) on toy tasks (``tasks.source=toy``) through the real agent
loop and the CPU-mode sandbox, and ``make demo``'s command end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernels_env.client import CORRECT, INCORRECT, Result
from research.agent import (
    RunConfig,
    TasksConfig,
    ToolResult,
    ToyPolicyConfig,
    make_policy,
    read_jsonl,
    run_agent,
)
from research.agent.config import AgentConfig, AgentConfigError
from research.agent.policies.toy_policy import DEFAULT_CHECKPOINT, TRAINED_BY, ToyEpisode
from research.agent.tasks import Task
from research.agent.tools import render_verdict
from research.toyenv import observation_tokens, toy_tokenizer

from .conftest import FAST

ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 20 * 2**20
STATUSES = {"correct", "incorrect", "rejected", "compile_error", "runtime_error", "no_solution"}


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_shipped_checkpoint_restores_is_small_and_tracked():
    import models

    files = [p for p in DEFAULT_CHECKPOINT.rglob("*") if p.is_file()]
    assert files and sum(p.stat().st_size for p in files) <= MAX_BYTES
    model = models.restore_checkpoint(DEFAULT_CHECKPOINT)
    assert model.config.vocab_size == len(toy_tokenizer()) == 91
    trained = json.loads((DEFAULT_CHECKPOINT / TRAINED_BY).read_text())
    assert trained["command"].startswith("python -m ")
    ignored = subprocess.run(
        ["git", "check-ignore", *map(str, files)], cwd=ROOT, capture_output=True, text=True
    )
    assert ignored.returncode == 1 and not ignored.stdout, f"git ignores {ignored.stdout}"


def _observed(results, invalid: bool = False) -> list[str]:
    """The observation tokens a toy episode appends for one turn's tool results."""
    from research.toyenv.tasks import ToyTaskConfig, make_task

    task = make_task(ToyTaskConfig(ops=["relu"], op_count_weights={1: 1.0}, decontam_dir=None), 1, 1)
    tok = toy_tokenizer()
    sampling = SimpleNamespace(temperature=0.0, max_new_tokens=32)
    episode = ToyEpisode(SimpleNamespace(tok=tok, sampling=sampling), "toy", task, task)
    episode.builder.policy([tok.eos_id], [0.0], "eos")  # the turn whose tool results are observed
    episode.invalid = invalid
    episode.observe([r.message() for r in results or ()], results)
    traj = episode.builder.traj
    assert traj.response_mask == [1] + [0] * (len(traj.response_ids) - 1)
    return tok.decode(traj.response_ids[1:])


def _bench(status, speedups=None):
    verdict = Result(status, "timing", "toy", "ws", speedups=speedups or {}).to_dict()
    text = render_verdict(verdict, timed=True)
    return ToolResult("c1", "benchmark", text, status == CORRECT, verdict=verdict)


def test_the_toy_policy_observes_the_benchmark_verdict_not_its_text():
    # 1.0496 is at par (< 1.05); its text says 1.050x, which parsed back was the next bucket up (lt1.5)
    bench = _bench(CORRECT, {"eager": 1.0496, "compile": 0.9})
    assert "eager 1.050x" in bench.text
    write = ToolResult("c0", "write_file", "wrote model_new.py (10 bytes)", True)
    assert _observed([write, bench]) == ["<obs>", "st_correct", "e_par", "c_lt0.95", "<sep>"]
    assert _observed([_bench(CORRECT, {"eager": 2.5, "compile": None})]) == [
        "<obs>", "st_correct", "e_ge2", "c_na", "<sep>"
    ]  # fmt: skip
    assert _observed([_bench(INCORRECT)]) == ["<obs>", "st_incorrect", "e_na", "c_na", "<sep>"]
    failed = ToolResult("c1", "benchmark", "error: benchmark failed: SandboxError: down", False)
    assert _observed([write, failed]) == ["<obs>", "st_other", "e_na", "c_na", "<sep>"]  # no verdict
    assert _observed(None, invalid=True) == ["<obs>", "st_invalid_plan", "e_na", "c_na", "<sep>"]


def test_toy_policy_plays_toy_tasks_only(tmp_path):
    policy = make_policy(ToyPolicyConfig(turns=2, max_tokens=32))
    with pytest.raises(ValueError, match="toy tasks only"):
        policy.prepare([Task("level1/1_relu", tmp_path / "1_relu.py", "1")])
    with pytest.raises(AgentConfigError, match="tasks.limit"):
        TasksConfig(source="toy")


def test_toy_policy_episodes_through_the_agent_loop(tmp_path, sandbox, monkeypatch):
    def no_library(*args, **kwargs):
        raise AssertionError("the toy policy never calls skill: no skill library (a GPU image lacks bm25s)")

    monkeypatch.setattr("research.agent.skills.SkillLibrary.__init__", no_library)
    cfg = RunConfig(
        policy=ToyPolicyConfig(turns=2, temperature=0.0, max_tokens=32),
        agent=AgentConfig(skills=True, concurrency=2, max_turns=10),
        tasks=TasksConfig(source="toy", limit=2),
        judge=FAST,
        out_dir=str(tmp_path / "run"),
        progress=False,
    )
    summary = run_agent(cfg, client=sandbox)
    results = read_jsonl(tmp_path / "run" / "results.jsonl")
    trajectories = {t["task"]: t for t in read_jsonl(tmp_path / "run" / "trajectories.jsonl")}
    assert len(results) == 2 and summary["num_results"] == 2 and summary["policy"]["name"] == "toy"
    assert set(summary["levels"]) == {"heldout"} and summary["policy"]["trained_by"]["command"]
    tok, observed = toy_tokenizer(), 0
    for rec in results:
        # every episode ends in the fresh full evaluation's verdict (a reward for every policy-made status)
        assert rec["status"] in STATUSES and rec["reward"] in (-1.0, 1.0), rec
        assert rec["end_reason"] == "submitted" and 1 <= rec["turns"] <= 2
        problem = tmp_path / "run" / "problems" / "heldout" / f"{rec['task']}.py"
        assert "batch_size = 6" in problem.read_text()  # CPU mode: the task at cpu_size
        traj = trajectories[rec["task"]]
        calls = [c["function"]["name"] for m in traj["messages"] for c in m.get("tool_calls") or []]
        # a turn that is not a plan writes nothing: only episodes with a valid plan write the workspace
        planned = any(t["action"] for t in traj["turns"])
        assert calls[-1] == "submit" and ("write_file" in calls) == planned, (calls, traj["turns"])
        n = len(traj["response_ids"])
        assert len(traj["response_mask"]) == len(traj["logprobs"]) == len(traj["turn_ids"]) == n
        assert traj["response_mask"][-1] == 1 and traj["sampling"]["temperature"] == 0.0
        # a turn is invalid exactly when it wrote no plan and did not stop (ToyEnv's per-turn fields)
        assert all(t["invalid"] == (not t["action"] and not t["stop"]) for t in traj["turns"])
        assert traj["prompt_ids"][0] == tok.bos_id and traj["prompt_ids"][-1] == tok.sep_id
        first = traj["turns"][0]
        if len(traj["turns"]) == 2 and first["action"]:  # the first plan was benchmarked and observed
            bench = next(m for m in traj["messages"] if m.get("name") == "benchmark")
            v = first["verdict"]  # the benchmark's structured verdict, observed
            status, speedups = v["status"], {k: x for k, x in v["speedups"].items() if x is not None}
            assert bench["content"].startswith(f"status: {status}")
            obs = tok.encode(observation_tokens(status, speedups))
            end = first["end"]
            assert traj["response_ids"][end : end + len(obs)] == obs
            assert traj["response_mask"][end : end + len(obs)] == [0] * len(obs)
            observed += 1
    assert observed, "no episode's first plan was benchmarked and observed"


@pytest.mark.integration  # a subprocess or sandbox worker, ~42 s
def test_make_demo_command_on_two_tasks(tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "experiments.agent",
        "policy=toy",
        "tasks=toy_heldout",
        "tasks.limit=2",
        "sandbox=cpu",
        f"out_dir={out}",
        f"sandbox.cache_dir={tmp_path / 'cache'}",
        "sandbox.num_compile_workers=1",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = read_jsonl(out / "results.jsonl")
    assert len(results) == 2
    text = proc.stdout + proc.stderr  # per-task lines go through tqdm (stderr), the table to stdout
    for rec in results:
        assert f"{rec['task']}: {rec['status']}, reward " in text
    assert "heldout" in proc.stdout and "pass" in proc.stdout and "wrote" in proc.stdout


class _ScriptedToyPolicy:
    """What ToyEpisode uses of a ToyPolicy, with scripted turns in place of the sampler; ``shift`` makes
    the 'sampler' report a context other than the one it was given (a re-rendered history)."""

    def __init__(self, script, turns=3, shift=False):
        import models

        self.tok, self.turns, self.max_context, self.seed = toy_tokenizer(), turns, 128, 0
        self.sampling = models.SamplingConfig(max_new_tokens=32, temperature=0.0)
        self.script, self.shift = list(script), shift

    def generate(self, context, seed):
        ids = self.script.pop(0)
        finish = "eos" if ids[-1] == self.tok.eos_id else "length"
        return ids, [-0.25] * len(ids), finish, context[1:] if self.shift else list(context)


def test_toy_episode_keeps_its_tokens_in_the_trajectory_builder():
    """In-process: the toy policy's turns, observations and per-turn fields go through
    research.rollout.TrajectoryBuilder, as ToyEnv's do (no sandbox: the tool results are given)."""
    from research.agent.policies.toy_policy import ToyEpisode
    from research.rollout import TrajectoryError
    from research.toyenv import ToyTaskConfig, baseline_plan, make_tasks

    cfg = ToyTaskConfig(num_train=4, num_test=2, num_heldout=2, decontam_dir=None)
    tasks = make_tasks(cfg).split("train")
    task = tasks[0]
    other = next(t for t in tasks if set(t.ops) - set(task.ops))
    tok = toy_tokenizer()
    plan, foreign = tok.encode_plan(baseline_plan(task)), tok.encode_plan(baseline_plan(other))
    junk = [4] * 32  # 32 plan tokens without <eos>
    bench = _bench(CORRECT, {"eager": 1.3})  # the benchmark's ToolResult with its structured verdict
    ep = ToyEpisode(_ScriptedToyPolicy([plan, junk, foreign]), task.id, task, task)
    first = ep.act([])
    assert [c.name for c in first.tool_calls] == ["write_file", "benchmark"]
    ep.observe([bench.message()], [bench])
    assert ep.act([]).tool_calls == []  # no <eos>: not a plan, nothing written
    ep.observe([])
    last = ep.act([])
    assert [c.name for c in last.tool_calls] == ["write_file", "submit"]
    got = ep.tokens().build().to_dict()  # the builder the loop finishes
    obs_ok = tok.encode(observation_tokens("correct", {"eager": 1.3}))
    obs_bad = tok.encode(observation_tokens("invalid_plan", {}))
    assert got["prompt_ids"] == tok.encode_prompt(task)
    assert got["response_ids"] == plan + obs_ok + junk + obs_bad + foreign
    assert got["response_mask"] == [1] * len(plan) + [0] * 5 + [1] * 32 + [0] * 5 + [1] * len(foreign)
    assert got["turn_ids"] == [0] * len(plan) + [-1] * 5 + [1] * 32 + [-1] * 5 + [2] * len(foreign)
    assert got["logprobs"] == [-0.25 if m else 0.0 for m in got["response_mask"]]
    assert got["sampling"] == {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 32}
    turns = got["turns"]
    assert [t["action"] for t in turns] == [baseline_plan(task).text(), None, baseline_plan(other).text()]
    assert [t["invalid"] for t in turns] == [False, True, False] and "no <eos>" in turns[1]["error"]
    assert [t["hallucinated"] for t in turns] == [False, False, True]
    assert [t["finish"] for t in turns] == ["eos", "length", "eos"]
    # a sampler that continued another context than the episode's tokens is refused
    bad = ToyEpisode(_ScriptedToyPolicy([plan], shift=True), task.id, task, task)
    with pytest.raises(TrajectoryError, match="re-rendered"):
        bad.act([])
