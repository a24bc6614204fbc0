"""The cold-start corpus judged for real: scripted episodes of synthesized tasks played through the agent
loop against the CPU sandbox (the Triton interpreter runs the templates), then replayed to the same
verdicts. Integration tier (the session's ``sandbox``); tiny proxy sizes, three tasks, no benchmark call."""

from __future__ import annotations

import json

from research.data import SynthesisConfig, make_candidate
from research.data.ops import Reject
from research.data.transcripts import EXPECTED, CorpusConfig, Uncovered, generate_corpus, plan_episode, replay
from research.data.transcripts.templates import write_solution
from research.rollout import Trajectory

from .conftest import FAST

WANT = {"reduction", "normalization", "matmul", "elementwise", "attention"}


def _candidates():
    cfg = SynthesisConfig(seed=0)
    for j in range(200):
        try:
            yield make_candidate(cfg, "1", j).record
        except Reject:
            continue


def _small_tasks(n: int = 3):
    """Covered one-op float32 tasks of distinct categories (small at proxy size: the interpreter is slow)."""
    out, cats = [], set()
    for rec in _candidates():
        try:
            write_solution(rec.source, rec.ops)
        except Uncovered:
            continue
        if rec.category in cats or rec.category not in WANT or rec.meta["dtype"] != "float32":
            continue
        cats.add(rec.category)
        out.append(rec)
        if len(out) == n:
            return out
    raise AssertionError(f"only {len(out)} small covered tasks")


def _config(tasks) -> CorpusConfig:
    """The first seed whose plans give one clean episode and two different bugs (plans are pure: fast)."""
    rates = {"clean": 1.0, "missing_mask": 1.0, "wrong_shape": 1.0, "syntax_error": 1.0, "wrong_dtype": 1.0}
    for seed in range(200):
        cfg = CorpusConfig(seed=seed, bug_rates=rates, judge=FAST, benchmark=False, skills=False)
        bugs = [plan_episode(t, cfg)["bug"] for t in tasks]
        if bugs.count("clean") == 1 and len(set(bugs)) == 3:
            return cfg
    raise AssertionError("no seed gives a clean episode and two bugs")


def test_corpus_episodes_are_judged_for_real_and_replay_to_their_verdicts(tmp_path, sandbox):
    tasks = _small_tasks()
    cfg = _config(tasks)
    conv = next(r for r in _candidates() if r.ops[0] == "conv2d")  # no template: skipped and counted
    report = generate_corpus([conv, *tasks], cfg, tmp_path / "corpus", sandbox)
    assert report["tasks_given"] == 4 and report["skipped"] == {"op": 1}
    assert report["tasks_covered"] == report["episodes"] == 3 and report["tokens_estimate"] > 1000
    assert report["final_verdicts"] == {"correct": 3} and report["kept"] == 3, report
    assert sum(report["bug_kinds"].values()) == 3 and report["bug_kinds"]["clean"] == 1
    assert report["unseen_optimisations"] == {}  # the corpus itself shows none of what RL should find
    lines = (tmp_path / "corpus" / "trajectories.jsonl").read_text().splitlines()
    recs = [json.loads(line) for line in lines]
    for rec in recs:
        bug, seen = rec["corpus"]["bug"], rec["corpus"]["judged"]
        assert rec["verdict"]["status"] == "correct" and rec["reward"] == rec["verdict"]["reward"]
        assert rec["end_reason"] == "submitted" and rec["messages"][0]["role"] == "system"
        traj = Trajectory.from_dict(rec)  # the learner's reader of trajectories.jsonl lines
        assert traj.task_id == rec["task"] and [c.name for t in traj.turns for c in t.calls][-1] == "submit"
        if bug == "clean":
            assert [s for _, s in seen] == ["correct"]
        else:  # the buggy attempt earned its failure, in the tool text the policy saw, then the fix passed
            assert seen[0][1] in EXPECTED[bug] and seen[1][1] == "correct"
            tool_texts = [m["content"] for m in rec["messages"] if m["role"] == "tool"]
            assert tool_texts[1].startswith(f"status: {seen[0][1]}")
    rows = replay(tmp_path / "corpus", cfg, sandbox)
    assert len(rows) == 3
    for row in rows:
        assert row["replayed"] == row["recorded"], row
