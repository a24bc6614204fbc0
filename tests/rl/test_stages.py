"""The staged pipeline (research.rl.pipeline): RFT filters on planted trajectories, observations, the toy
rollout against a scripted sampler, rollout metrics by hand, manifests, the pretraining loss against numpy,
the whole pipeline with a rule-based judge (default suite), on a tiny random Qwen2 HF checkpoint
(``model=hf``), and ``preset=toy_cpu`` end to end with the real sandbox (``slow``)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx
from pipeline_fixtures import SMALL_TASKS, TINY_ARCH, RuleJudge, ScriptedSampler, tiny_pipeline

import models
from research import rl
from research.rl import pipeline as pl
from research.rollout import Sampling, Trajectory
from research.toyenv import VOCAB, make_tasks

ROOT = Path(__file__).resolve().parents[2]
REWARD = rl.RewardConfig()
LENIENT = pl.RFTFilterConfig(
    min_reward=-2.0, drop_invalid=False, drop_hallucinated=False, drop_redundant=False
)


# --- RFT filters on planted trajectories ---
def _planted(actions, statuses, final="correct", reward=1.0, hallucinated=None, stop_last=False):
    """A record whose turn k wrote the tokens ``actions[k]`` and got ``statuses[k]``."""
    ids, turns = [], []
    for k, (a, st) in enumerate(zip(actions, statuses)):
        turns.append(
            {
                "start": len(ids),
                "end": len(ids) + len(a),
                "status": st,
                "hallucinated": bool(hallucinated and hallucinated[k]),
                "stop": False,
            }
        )
        ids += list(a) + [90, 91]  # an observation after each turn
    if stop_last:
        turns.append({"start": len(ids), "end": len(ids) + 1, "stop": True})
        ids += [2]
    mask = [int(any(t["start"] <= k < t["end"] for t in turns)) for k in range(len(ids))]
    return {
        "prompt_ids": [1, 3],
        "response_ids": ids,
        "response_mask": mask,
        "logprobs": [-0.5 * m for m in mask],
        "turns": turns,
        "verdict": {"status": final, "reward": reward, "speedups": {}},
    }


def test_rft_filters_on_planted_trajectories():
    good = _planted([[4, 5, 2], [4, 6, 2]], ["correct", "correct"], reward=2.0)
    negative = _planted([[4, 5, 2]], ["incorrect"], final="incorrect", reward=-1.0)
    invalid = _planted([[7, 7], [4, 5, 2]], ["invalid_plan", "correct"])
    halluc = _planted([[4, 5, 2], [4, 8, 2]], ["correct", "correct"], hallucinated=[False, True])
    loop = _planted([[4, 5, 2], [4, 6, 2], [4, 5, 2]], ["correct"] * 3)
    judge_err = _planted([[4, 5, 2]], ["correct"], final="judge_error", reward=None)
    stopped = _planted([[4, 5, 2]], ["correct"], stop_last=True)  # a stop turn is not a repeated action
    records = [good, negative, invalid, halluc, loop, judge_err, stopped]
    kept, drops = pl.rft_filter(records, pl.RFTFilterConfig(), REWARD)
    assert kept == [good, stopped]
    assert dict(drops) == {
        "reward_not_positive": 1,
        "invalid_action": 1,
        "hallucinated_action": 1,
        "redundant_loop": 1,
        "judge_error": 1,
    }
    assert pl.has_redundant_loop(loop) and not pl.has_redundant_loop(loop, max_repeats=2)
    assert pl.has_invalid_action(invalid) and not pl.has_invalid_action(good)
    assert pl.has_hallucination(halluc) and not pl.has_hallucination(good)
    # Reasons in order: a negative, looping, invalid episode counts as invalid (the first failed check).
    worst = _planted([[7], [7]], ["invalid_plan", "invalid_plan"], final="invalid_plan", reward=-1.0)
    assert pl.rejection_reason(worst, pl.RFTFilterConfig(), REWARD) == "invalid_action"
    off = pl.RFTFilterConfig(drop_invalid=False, drop_hallucinated=False, drop_redundant=False)
    assert pl.rft_filter(records, off, REWARD)[0] == [good, invalid, halluc, loop, stopped]
    # The raw-speedup reward: the verdict's speedup decides, recomputed from status and speedups.
    slow = _planted([[4, 5, 2]], ["correct"], reward=1.0)
    slow["verdict"]["speedups"] = {"eager": 0.5}
    assert pl.episode_reward(slow, rl.RewardConfig(reward_fn="speedup")) == 0.5


# --- observations ---
def test_observation_tokens_extend_the_plan_vocabulary():
    tok = pl.toy_tokenizer()
    assert pl.TOY_VOCAB[: len(VOCAB)] == VOCAB and len(tok) == len(VOCAB) + len(pl.OBS_TOKENS) == 91
    assert [pl.speed_bucket(s) for s in (None, 0.0, 0.49, 0.5, 0.97, 1.05, 1.49, 1.99, 2.0)] == [
        "na",
        "na",
        "lt0.5",
        "lt0.95",
        "par",
        "lt1.5",
        "lt1.5",
        "lt2",
        "ge2",
    ]
    assert pl.observation_tokens("correct", {"eager": 1.3, "compile": 0.9}) == [
        "<obs>",
        "st_correct",
        "e_lt1.5",
        "c_lt0.95",
        "<sep>",
    ]
    assert pl.observation_tokens("incorrect", {"eager": 3.0}) == [
        "<obs>",
        "st_incorrect",
        "e_na",
        "c_na",
        "<sep>",
    ]
    assert pl.observation_tokens("weird", None)[1] == "st_other"
    tok.encode(pl.observation_tokens("rejected", {}))  # every observation token is in the vocabulary


# --- the rollout against a scripted sampler ---
@pytest.fixture(scope="module")
def toy_tasks():
    return make_tasks(SMALL_TASKS)


def test_multi_turn_rollout_masks_observations_and_ends_on_the_last_plan(toy_tasks):
    tok = pl.toy_tokenizer()
    task = toy_tasks.split("train")[0]
    other = next(t for t in toy_tasks.split("train") if set(t.ops) - set(task.ops))
    from research.toyenv import TOY_OPS, baseline_plan, parse_plan

    plan_a = tok.encode_plan(baseline_plan(task))
    row = any(TOY_OPS[o].kind != "map" for o in task.ops)
    fused = parse_plan(["K", *task.ops, "R1" if row else "B1024", "W4", "M1"])
    plan_b = tok.encode_plan(fused)
    halluc = tok.encode_plan(baseline_plan(other))
    eos = tok.eos_id
    script = [
        [plan_a, [tok.encode(["K"])[0]] * 40, halluc],  # turn 0: a plan, no <eos> (invalid), a hallucination
        [plan_b, plan_a, [eos]],  # turn 1: revised plan; same plan again; stop (submit the previous)
        [[eos], plan_b],  # turn 2 (episodes 0 and 1 still running): stop; a plan
    ]
    sampler = ScriptedSampler(script, eos)
    env = pl.ToyEnv({"train": [task]}, RuleJudge())
    cfg = pl.RolloutConfig(turns=3, episodes=4, group_size=1, max_turn_tokens=32, max_context=128)
    recs = env.rollout(sampler, cfg, 0, tasks=[task, task, task], groups=["a", "b", "c"])
    r0, r1, r2 = recs
    assert all(isinstance(r, Trajectory) for r in recs) and [r.group for r in recs] == ["a", "b", "c"]
    obs = lambda st, e, c: tok.encode(["<obs>", f"st_{st}", e, c, "<sep>"])
    assert r0.prompt_ids == tok.encode_prompt(task) and r0.task_id == task.id and r0.split == task.split
    o_unfused = obs("correct", "e_lt0.95", "c_lt0.95")
    o_fused = obs("correct", "e_lt1.5", "c_lt1.5")
    assert r0.response_ids == plan_a + o_unfused + plan_b + o_fused + [eos]
    assert r0.response_mask == [1] * len(plan_a) + [0] * 5 + [1] * len(plan_b) + [0] * 5 + [1]
    assert r0.turn_ids == [0] * len(plan_a) + [-1] * 5 + [1] * len(plan_b) + [-1] * 5 + [2]
    assert r0.logprobs == [-0.5] * len(plan_a) + [0.0] * 5 + [-0.5] * len(plan_b) + [0.0] * 5 + [-0.5]
    assert r0.info["final_plan"] == fused.text() and r0.verdict["reward"] == 3.0 and r0.turns[-1].stop
    assert r0.sampling == Sampling(temperature=1.0, max_new_tokens=32)
    # Per turn: the plan written, its own verdict (none for the stop turn), where its tokens lie.
    t0, t1, t2 = r0.turns
    a, b = len(plan_a), len(plan_b)
    assert [(t.start, t.end) for t in r0.turns] == [(0, a), (a + 5, a + 5 + b), (a + 10 + b, a + 11 + b)]
    assert t0.action == baseline_plan(task).text() and t1.action == fused.text() and t2.action is None
    assert t0.verdict["status"] == t1.verdict["status"] == "correct" and t2.verdict is None
    assert (t0.verdict["reward"], t1.verdict["reward"]) == (1.0, 3.0)
    assert t1.verdict["speedups"] == {"eager": 1.3, "compile": 1.1} and t1.verdict["cached"] is False
    assert r0.turn_verdicts == [t0.verdict, t1.verdict, None] and r0.verdict == t1.verdict
    assert not any(t.invalid or t.hallucinated for t in r0.turns)
    assert [t.finish for t in r0.turns] == ["eos"] * 3
    assert [r.end_reason for r in recs] == ["submitted", "max_turns", "submitted"]
    # Episode 1: invalid turn (no <eos>), then a correct plan, then another correct plan.
    assert [t.verdict["status"] for t in r1.turns] == ["invalid_plan", "correct", "correct"]
    assert [t.invalid for t in r1.turns] == [True, False, False] and r1.turns[0].finish == "length"
    assert "no <eos>" in r1.turns[0].error and r1.turns[0].action is None and r1.verdict["reward"] == 3.0
    # Episode 2: a plan for another task's ops (hallucinated), then stop: the final verdict is turn 0's.
    assert (
        r2.turns[0].hallucinated
        and r2.turns[1].stop
        and r2.verdict["status"] in ("invalid_plan", "incorrect")
        and r2.verdict["reward"] == -1.0
        and r2.info["final_plan"] == baseline_plan(other).text()
    )
    # Every context is the previous one plus the new tokens (token-in-token-out, nothing re-tokenised).
    assert sampler.contexts[1][0] == r0.prompt_ids + plan_a + o_unfused
    batch, drops, kept = rl.pack_trajectories(recs, REWARD, rl.PackConfig(max_len=cfg.max_len, pad_to=8))
    assert kept == [0, 1, 2] and not drops
    packed = batch.tokens[0, : len(r0.prompt_ids) + len(r0.response_ids)]
    assert packed.tolist() == r0.prompt_ids + r0.response_ids


def test_rollout_metrics_by_hand():
    recs = [
        {
            "verdict": {"status": "correct", "reward": 3.0, "speedups": {"eager": 1.5, "compile": 1.2}},
            "final_plan": "K relu gelu B1024 V1 W4 M1",
            "turns": [{"start": 0, "end": 9, "status": "correct"}],
            "response_mask": [1] * 9,
        },
        {
            "verdict": {"status": "correct", "reward": 1.0, "speedups": {"eager": 1.04, "compile": 0.9}},
            "final_plan": "K relu B1024 V1 W4 M1 K gelu B1024 V4 W4 M1",
            "turns": [
                {"start": 0, "end": 2, "status": "invalid_plan"},
                {"start": 2, "end": 4, "status": "correct"},
                {"start": 4, "end": 5, "stop": True},
            ],
            "response_mask": [1] * 5,
        },
        {
            "verdict": {"status": "incorrect", "reward": -1.0, "speedups": {}},
            "final_plan": None,
            "turns": [{"start": 0, "end": 3, "status": "incorrect", "hallucinated": True}],
            "response_mask": [1, 0, 1],
        },
        {
            "verdict": {"status": "judge_error", "reward": None, "speedups": {}},
            "turns": [],
            "response_mask": [1],
        },
    ]
    for r in recs:  # dict records as older JSONL holds them (turns with a status, no turn fields)
        r.update(prompt_ids=[1], response_ids=[4] * len(r["response_mask"]), logprobs=r["response_mask"])
    m = pl.rollout_metrics(recs, REWARD)
    assert "tool_call_valid_rate" not in m and not any(k.startswith("end/") for k in m)  # none recorded
    assert m["episodes"] == 3 and m["dropped/judge_error"] == 1 and m["dropped/total"] == 1
    assert m["reward_mean"] == pytest.approx(1.0) and m["pass_rate"] == pytest.approx(2 / 3)
    assert m["faster_eager"] == pytest.approx(1 / 3) and m["faster_compile"] == pytest.approx(1 / 3)
    assert m["turns_mean"] == pytest.approx(4 / 3) and m["invalid_turn_rate"] == pytest.approx(1 / 4)
    assert m["hallucinated_turn_rate"] == pytest.approx(1 / 4) and m["response_tokens_mean"] == pytest.approx(
        16 / 3
    )
    assert m["opt/fusion"] == pytest.approx(1 / 3) and m["opt/vector_width"] == pytest.approx(1 / 3)
    assert m["opt/any"] == pytest.approx(2 / 3) and m["tier/3"] == m["tier/1"] == m[
        "tier/-1"
    ] == pytest.approx(1 / 3)


# --- manifests ---
def test_manifest_round_trip_and_hash_chain(tmp_path):
    a = pl.Manifest("warmup", "/a", "/c", 3, pl.config_hash(pl.WarmupConfig()), {"reward_mean": 1.0})
    a.save(tmp_path / "warmup")
    assert pl.Manifest.load(tmp_path / "warmup") == a
    h = pl.config_hash(pl.RFTConfig(), a)
    other = pl.Manifest("warmup", "/a", "/c", 3, pl.config_hash(pl.WarmupConfig(steps=4)))
    assert h != pl.config_hash(pl.RFTConfig(), other) and h == pl.config_hash(pl.RFTConfig(), a)
    assert pl.Manifest.find(tmp_path / "warmup", a.config_hash) == a
    assert pl.Manifest.find(tmp_path / "warmup", "different") is None
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a stage manifest"):
        pl.Manifest.load(tmp_path / "bad.json")


# --- pretraining loss against numpy ---
@pytest.mark.slow  # ~15 s on 2 loaded cores (tests/_tiers.py)
def test_pretraining_loss_matches_numpy_and_decreases(toy_tasks, tmp_path):
    from research.rl.pipeline.pretrain import _nll

    tok = pl.toy_tokenizer()
    model = models.init_model(models.tiny_config(**TINY_ARCH), 0)
    from research.toyenv import corpus_plans

    pairs = corpus_plans(toy_tasks.split("train")[:4])
    ids, mask, _ = pl.encode_corpus(pairs, tok, 48)
    assert mask[0].sum() == len(tok.encode_plan(pairs[0][1]))
    logits = np.asarray(model(ids[:, :-1]), np.float64)
    logp = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    nll = -np.take_along_axis(logp, ids[:, 1:, None], -1)[..., 0]
    m = mask[:, 1:]
    eps = 0.1
    want = (((1 - eps) * nll - eps * logp.mean(-1)) * m).sum() / m.sum()
    got, (got_nll, _) = _nll(model, ids, mask, eps)
    assert float(got) == pytest.approx(want, rel=1e-5) and float(got_nll) == pytest.approx(
        (nll * m).sum() / m.sum(), rel=1e-5
    )
    cfg = pl.PretrainConfig(steps=40, batch_size=16, lr=3e-3, log_every=20, label_smoothing=0.0)
    _, last = pl.pretrain(model, toy_tasks.split("train"), cfg, tmp_path, progress=False)
    rows = rl.read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [20, 40] and last["nll"] < 0.6 * float(got_nll)


@pytest.mark.slow  # ~100 s on 2 loaded cores (tests/_tiers.py)
def test_grammar_smoothing_loss_matches_numpy_and_gives_fusion_probability(toy_tasks, tmp_path):
    """The grammar-aware smoothing: its loss against a float64 reference built from ``legal_moves`` one
    prefix at a time (not from ``legal_targets``' table), and pretraining with it gives the never-seen
    fusion of the next op probability on held-out tasks while the greedy choice stays the corpus's."""
    from research.rl.pipeline.pretrain import _nll, legal_targets
    from research.toyenv import corpus_plans, format_plan
    from research.toyenv.legal import legal_moves, smoothing_target

    tok = pl.toy_tokenizer()
    model = models.init_model(models.tiny_config(**TINY_ARCH), 0)
    pairs = corpus_plans(toy_tasks.split("train")[:4])
    # With detours (inputs leave the corpus, labels stay the corpus's next token): both terms see them.
    ids, mask, labels = pl.encode_corpus(pairs, tok, 64, multi_turn_share=0.5, detour_rate=0.3)
    assert ((labels != ids) & (mask > 0)).any() and (labels[mask == 0] == ids[mask == 0]).all()
    qid, table = legal_targets(pairs, tok, ids, mask)
    logits = np.asarray(model(ids[:, :-1]), np.float64)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    eps, want, den = 0.3, 0.0, 0.0
    for i, (task, _) in enumerate(pairs):
        prefix: list[str] = []
        for t in range(1, ids.shape[1]):
            if not mask[i, t]:
                prefix = []
                continue
            q = smoothing_target(legal_moves(task, prefix))
            cross = -sum(p * logp[i, t - 1, tok.encode([k])[0]] for k, p in q.items())
            want += (1 - eps) * -logp[i, t - 1, labels[i, t]] + eps * cross
            den += 1
            prefix.append(tok.vocab[ids[i, t]])
    import jax.numpy as jnp

    got, _ = _nll(model, ids, mask, 0.0, jnp.asarray(table)[qid], eps, jnp.asarray(labels))
    assert float(got) == pytest.approx(want / den, rel=1e-5)

    # Pretrained with it: fusing the next op (never in the corpus) gets probability, yet stays no greedy
    # choice. A model a little larger than TINY_ARCH: one layer of width 32 cannot learn which op is next.
    from research.toyenv import baseline_plan

    def fuse(m, task):
        ctx = tok.encode_prompt(task) + tok.encode(format_plan(baseline_plan(task))[:2])
        lp = np.asarray(jax.nn.log_softmax(m(np.asarray([ctx]))[0, -1]))
        nxt = tok.encode([task.ops[1]])[0]
        return float(np.exp(lp[nxt])), int(lp.argmax()) == nxt

    held = [t for t in toy_tasks.split("test") if len(t.ops) > 1]
    arch = dict(TINY_ARCH, hidden_size=64, num_layers=2, intermediate_size=128)
    probs = {}
    for g in (0.0, 0.3):
        m = models.init_model(models.tiny_config(**arch), 0)
        cfg = pl.PretrainConfig(steps=200, batch_size=32, lr=3e-3, log_every=200, grammar_smoothing=g)
        m, _ = pl.pretrain(m, toy_tasks.split("train"), cfg, tmp_path / f"g{g}", progress=False)
        got = [fuse(m, t) for t in held]
        probs[g] = float(np.mean([p for p, _ in got]))
        assert not any(greedy for _, greedy in got)
    # measured: 0.00025 without, 0.013 with (CPU, these seeds)
    assert probs[0.0] < 0.002 and probs[0.3] > max(0.005, 10 * probs[0.0]), probs
    with pytest.raises(ValueError, match=r"pretrain.grammar_smoothing must be in \[0, 1\), got 1.0"):
        pl.PretrainConfig(grammar_smoothing=1.0)


# --- the pipeline with a rule-based judge (mechanics) ---
@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipeline")
    cfg = tiny_pipeline(out)
    cfg.rft.filters = LENIENT
    judge = RuleJudge()
    manifests = pl.run_pipeline(cfg, judge=judge)
    return out, cfg, manifests, judge


@pytest.mark.slow  # ~190 s on 2 loaded cores (tests/_tiers.py)
def test_pipeline_runs_every_stage_and_hands_over_checkpoints(smoke_run):
    out, cfg, ms, judge = smoke_run
    assert list(ms) == ["pretrain", "warmup", "rft", "value", "ppo"]
    assert ms["warmup"].step == 2 and ms["rft"].step >= 1 and ms["value"].step == 2 and ms["ppo"].step == 2
    assert ms["rft"].actor.startswith(str(out / "rft")) and ms["rft"].critic is None
    assert ms["value"].actor == ms["rft"].actor and ms["value"].critic.startswith(str(out / "value"))
    assert ms["ppo"].extra["critic_init"] == "pretrained"
    for name in ("warmup", "rft", "value", "ppo"):
        m = pl.Manifest.load(out / name)
        assert (
            m == ms[name]
            and Path(m.inputs).parent.name
            == {"warmup": "pretrain", "rft": "warmup", "value": "rft", "ppo": "value"}[name]
        )
        rows = rl.read_metrics(out / name)
        assert len(rows) == m.step and (out / name / "curves.png").is_file()
    warm = rl.read_metrics(out / "warmup")
    assert {"reward_mean", "pass_rate", "faster_eager", "entropy", "value_loss", "time/generate_s"} <= set(
        warm[0]
    )
    assert (
        "nll" in rl.read_metrics(out / "rft")[0] and "explained_variance" in rl.read_metrics(out / "value")[0]
    )
    assert ms["rft"].extra["sampled"] == 8 * cfg.rft.rollout_batches
    accepted = ms["rft"].extra["accepted"]  # indices into trajectories.jsonl (what value.on=accepted reads)
    assert isinstance(accepted, list) and len(accepted) == ms["rft"].metrics["accepted"] == 8 * 2  # lenient
    trajs = pl.read_trajectories(ms["rft"].extra["trajectories"])
    assert len(trajs) == 8 * cfg.rft.rollout_batches and all(
        1 <= len(t.turns) <= 2 and t.turns[0].verdict["status"] and t.end_reason for t in trajs
    )
    models.restore_checkpoint(ms["ppo"].actor)  # a handed-over checkpoint loads alone
    summary = json.loads((out / "pipeline.json").read_text())
    assert set(summary["stages"]) == set(ms) and not summary["truncated"]


@pytest.mark.slow  # ~31 s on 2 loaded cores (tests/_tiers.py)
def test_finished_stages_are_skipped_and_a_changed_stage_reruns(smoke_run):
    out, cfg, ms, _ = smoke_run
    again = pl.run_pipeline(cfg, judge=RuleJudge())
    assert {k: m.config_hash for k, m in again.items()} == {k: m.config_hash for k, m in ms.items()}
    cfg.ppo.steps = 3  # only the last stage changes: it resumes from its step-2 checkpoint
    judge = RuleJudge()
    third = pl.run_pipeline(cfg, judge=judge)
    assert third["ppo"].step == 3 and third["value"] == ms["value"]
    assert [r["step"] for r in rl.read_metrics(out / "ppo")] == [1, 2, 3]


@pytest.mark.slow  # the pipeline run it reuses (smoke_run) takes over a minute on 2 cores
def test_an_rft_stage_that_accepts_nothing_says_why(smoke_run, tmp_path):
    """RFT from the smoke run's warm-up with a filter no episode passes: the stage learns nothing, hands the
    warm-up actor on, and its console line says why (what was sampled and why each episode was rejected)
    instead of an empty metrics dict."""
    out, cfg, ms, _ = smoke_run
    strict = tiny_pipeline(tmp_path, stage="rft", init=str(out / "warmup" / "manifest.json"))
    strict.rft.rollout_batches = 1
    strict.rft.filters = dataclasses.replace(LENIENT, min_reward=100.0)  # above every reward
    got = pl.run_pipeline(strict, judge=RuleJudge())["rft"]
    assert got.step == 0 and got.metrics == {} and got.actor == ms["warmup"].actor
    assert got.extra["reason"] == "no trajectory accepted" and got.extra["rejected/total"] == 8
    line = pl.stage_line("rft", got)
    n = int(got.extra["rejected/reward_too_low"])
    assert line == (
        "rft       step    0  learned nothing: no trajectory accepted (0 of 8 sampled trajectories "
        f"accepted; rejected: reward_too_low {n}); the previous stage's actor goes on unchanged"
    )
    assert n == 8  # lenient otherwise: every episode falls to the reward threshold alone
    assert pl.stage_line("warmup", ms["warmup"]).startswith("warmup    step    2  {'")


@pytest.mark.slow  # ~16 s on 2 loaded cores (tests/_tiers.py)
def test_time_budget_truncates_cleanly(tmp_path):
    cfg = tiny_pipeline(tmp_path, time_budget_s=0.0)
    cfg.pretrain.steps = 3
    ms = pl.run_pipeline(cfg, judge=RuleJudge())
    summary = json.loads((tmp_path / "pipeline.json").read_text())
    assert list(ms) == ["pretrain"] and summary["truncated"]
    assert set(summary["skipped"]) == {"warmup", "rft", "value", "ppo"}


@pytest.mark.slow  # ~61 s on 2 loaded cores (tests/_tiers.py)
def test_a_kl_penalty_is_to_the_stage_s_starting_policy(tmp_path):
    """With a KL penalty the warm-up's learner gets the pretrained actor as its frozen reference: its first
    rollout batch is sampled by that same policy, so the reference KL starts at ~0 and grows as it learns."""
    cfg = tiny_pipeline(tmp_path, stages=["warmup"])
    cfg.warmup.steps = 3
    cfg.warmup.learner.loss = dataclasses.replace(cfg.warmup.learner.loss, kl_penalty="k3_loss", kl_coef=0.1)
    cfg.warmup.learner.actor = dataclasses.replace(cfg.warmup.learner.actor, lr=3e-3)
    pl.run_pipeline(cfg, judge=RuleJudge())
    rows = [json.loads(line) for line in (tmp_path / "warmup" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert abs(rows[0]["kl_ref"]) < 1e-4 and rows[-1]["kl_ref"] > 1e-4, [r["kl_ref"] for r in rows]
    assert all("kl_loss" in r for r in rows)


# --- every stage on a tiny random Qwen2 Hugging Face checkpoint (model=hf) ---
@pytest.mark.slow  # ~186 s on 2 loaded cores (tests/_tiers.py)
def test_every_stage_runs_on_a_tiny_hf_qwen2(tmp_path):
    torch = pytest.importorskip("torch")
    from hydra import compose, initialize_config_dir
    from transformers import Qwen2Config, Qwen2ForCausalLM

    import experiments.train as train

    torch.manual_seed(0)
    hf = Qwen2Config(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        eos_token_id=2,
        bos_token_id=1,
        pad_token_id=0,
    )
    Qwen2ForCausalLM(hf).save_pretrained(tmp_path / "qwen2")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = train.to_config(
            compose(
                "train",
                [
                    "model=hf",
                    f"model.checkpoint={tmp_path / 'qwen2'}",
                    "model.compute_dtype=float32",
                    "model.attention_impl=xla",
                    "model.remat=none",
                    f"out_dir={tmp_path / 'run'}",
                    "progress=false",
                ],
            )
        )
    small = tiny_pipeline(cfg.out_dir)
    small.model = cfg.model
    small.pretrain.steps = 5
    small.rft.filters = LENIENT
    ms = pl.run_pipeline(small, judge=RuleJudge())
    assert list(ms) == ["pretrain", "warmup", "rft", "value", "ppo"]
    assert all(ms[s].step >= 1 for s in ("warmup", "rft", "value", "ppo"))
    actor = models.restore_checkpoint(ms["ppo"].actor)
    assert actor.config.family == "qwen2" and actor.config.vocab_size == 96 and actor.config.qkv_bias


def test_a_model_smaller_than_the_toy_vocabulary_is_refused():
    spec = models.ModelSpec(arch=models.tiny_config(**{**TINY_ARCH, "vocab_size": 64}))
    with pytest.raises(ValueError, match="toy vocabulary 91"):
        pl.build_policy(spec, 91)


# --- preset=toy_cpu end to end (the real sandbox in CPU mode) ---
@pytest.mark.slow
def test_toy_cpu_preset_end_to_end(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.train",
            "preset=toy_cpu",
            f"out_dir={tmp_path}",
            "progress=false",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((tmp_path / "pipeline.json").read_text())
    assert (
        set(summary["stages"]) == {"pretrain", "warmup", "rft", "value", "ppo"} and not summary["truncated"]
    )
    for name in ("warmup", "value", "ppo"):
        assert len(rl.read_metrics(tmp_path / name)) == 2
        assert (tmp_path / name / "manifest.json").is_file()
    assert (tmp_path / "judge_cache.jsonl").is_file()
    warm = rl.read_metrics(tmp_path / "warmup")
    assert all(r["episodes"] + r["dropped/total"] == 8 for r in warm)
    rft = pl.Manifest.load(tmp_path / "rft")
    assert len(rft.extra["accepted"]) + rft.extra["rejected/total"] == rft.extra["sampled"] == 8
    assert rft.extra["rft_steps"] == len(rl.read_metrics(tmp_path / "rft"))


# --- the GPU demonstration's driver, on CPU with the rule judge (pipeline runs: slow) ---
@pytest.mark.slow
def test_demo_runs_the_full_pipeline_and_the_ablations_and_writes_at_most_8_files(tmp_path):
    from research.rl.pipeline.demo import ABLATIONS, DemoConfig, run_demo

    base = tiny_pipeline(tmp_path / "unused")
    base.rft.filters = LENIENT
    base.eval.enabled, base.eval.turns, base.eval.max_tasks = True, 2, 2
    out = tmp_path / "out"
    assert DemoConfig().ablations == list(ABLATIONS)  # the demo's default: every ablation after the full run
    # One ablation here (raw_speedup_reward runs in the standalone test; no_value_pretrain below, after_full)
    work = tmp_path / "work"
    cfg = DemoConfig(out=str(out), work=str(work), budget_s=3600, min_ablation_s=1, ablations=["no_rft"])
    res = run_demo(cfg, base=base, judge=RuleJudge())
    assert set(res["runs"]) == {"full", "no_rft"} and not any("error" in r for r in res["runs"].values())
    full = res["runs"]["full"]["stages"]
    assert list(full) == ["pretrain", "warmup", "rft", "value", "ppo"]
    assert res["runs"]["no_rft"]["stages"]["rft"]["rft_steps"] == 0
    assert {"full/pretrain", "full/warmup", "full/rft", "full/ppo"} <= set(res["eval"])
    assert set(res["eval"]["full/ppo"]) == {"test", "heldout_category"}
    assert set(res["target"]) == {"test", "heldout_category"}
    files = sorted(p.name for p in out.iterdir())
    assert files == ["curves.png", "eval.png", "results.json", "toy_policy.tar.gz"] and len(files) <= 8
    assert res["exported_policy"]["stage"] == "ppo"
    with tarfile.open(out / "toy_policy.tar.gz") as tar:
        tar.extractall(tmp_path / "policy", filter="data")
    exported = tmp_path / "policy" / "toy_policy"
    assert json.loads((exported / "TRAINED_BY.json").read_text())["stage"] == "ppo"
    final = json.loads((tmp_path / "work" / "full" / "ppo" / "manifest.json").read_text())["actor"]
    a = nnx.to_pure_dict(nnx.state(models.restore_checkpoint(exported), nnx.Param))
    b = nnx.to_pure_dict(nnx.state(models.restore_checkpoint(final), nnx.Param))
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
    assert json.loads((out / "results.json").read_text())["runs"].keys() == res["runs"].keys()
    # --after-full (a second GPU call on the same machine): the full run in --work is read, not rerun, and
    # the ablations start from its manifests.
    full_ppo = (work / "full" / "ppo" / "manifest.json").read_text()
    again = run_demo(
        DemoConfig(
            out=str(tmp_path / "o2"),
            work=str(work),
            budget_s=3600,
            min_ablation_s=1,
            ablations=["no_value_pretrain"],
            after_full=True,
        ),
        base=base,
        judge=RuleJudge(),
    )
    assert (work / "full" / "ppo" / "manifest.json").read_text() == full_ppo  # not rerun
    assert again["runs"]["full"]["earlier_call"] and again["runs"]["full"]["stages"] == full
    assert list(again["runs"]["no_value_pretrain"]["stages"]) == ["rft", "ppo"]  # init manifest + stage 4
    assert again["runs"]["no_value_pretrain"]["stages"]["ppo"]["critic_init"] == "fresh"
    assert "error" not in again["runs"]["no_value_pretrain"]
    written = json.loads((tmp_path / "o2" / "results.json").read_text())
    assert set(written["runs"]) == {"full", "no_value_pretrain"}


@pytest.mark.slow  # ~166 s on 2 loaded cores (tests/_tiers.py)
def test_demo_standalone_ablation_and_sigterm_keep_what_finished(tmp_path, monkeypatch):
    """--standalone runs an ablation from scratch (its own pretraining, no full run); a SIGTERM arriving
    mid-run (the outer timeout of a GPU call) leaves results.json with every stage that finished and its
    evaluation, and starts nothing more."""
    import signal

    from research.rl.pipeline import demo
    from research.rl.pipeline.stages import STAGE_FNS

    def sigterm_at_rft(rt, prev):  # the signal arrives as stage 2 starts
        demo.on_sigterm(signal.SIGTERM, None)

    monkeypatch.setitem(STAGE_FNS, "rft", sigterm_at_rft)
    base = tiny_pipeline(tmp_path / "unused")
    base.eval.enabled, base.eval.turns, base.eval.max_tasks = True, 1, 1
    out = tmp_path / "out"
    cfg = demo.DemoConfig(
        out=str(out),
        work=str(tmp_path / "work"),
        budget_s=3600,
        min_ablation_s=1,
        ablations=["raw_speedup_reward", "no_rft"],
        standalone=True,
    )
    res = demo.run_demo(cfg, base=base, judge=RuleJudge())
    assert res["terminated"] == f"signal {int(signal.SIGTERM)}"
    assert list(res["runs"]) == ["raw_speedup_reward"]  # nothing started after the signal
    run = res["runs"]["raw_speedup_reward"]
    assert run["error"].startswith("terminated") and list(run["stages"]) == ["pretrain", "warmup"]
    assert {"raw_speedup_reward/pretrain", "raw_speedup_reward/warmup"} <= set(res["eval"])
    written = json.loads((out / "results.json").read_text())
    assert written["terminated"] and written["runs"].keys() == res["runs"].keys()
    assert not (tmp_path / "work" / "full").exists()  # standalone: no full run
    summary = json.loads((tmp_path / "work" / "raw_speedup_reward" / "pipeline.json").read_text())
    assert list(summary["stages"]) == ["pretrain", "warmup"]


def test_demo_after_full_without_a_full_run_is_one_clear_error(tmp_path, capsys):
    from scripts import toy_rl_demo

    with pytest.raises(SystemExit) as exit_:
        toy_rl_demo.main(["--out", str(tmp_path / "o"), "--work", str(tmp_path / "work"), "--after-full"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "after_full: no full run in " in err and "pipeline.json missing" in err


def test_corpus_multi_turn_sequences_teach_the_format_only(toy_tasks):
    from research.rl.pipeline.pretrain import format_observation
    from research.toyenv import corpus_plans, optimisations
    from research.toyenv.observations import SPEED_NAMES, STATUSES

    tok = pl.toy_tokenizer()
    pairs = corpus_plans(toy_tasks.split("train")[:6])
    ids, mask, labels = pl.encode_corpus(pairs, tok, 80, multi_turn_share=0.5)
    assert (labels == ids).all()  # no detours: the labels are the inputs
    obs_id, sep = tok.encode([pl.OBS_TOKENS[0]])[0], tok.sep_id
    two, seen = 0, set()
    for (task, plan), row, m in zip(pairs, ids.tolist(), mask.tolist()):
        p, q = tok.encode_prompt(task), tok.encode_plan(plan)
        assert (
            row[: len(p) + len(q)] == p + q
            and m[: len(p)] == [0] * len(p)
            and m[len(p) : len(p) + len(q)] == [1] * len(q)
        )
        rest = row[len(p) + len(q) :]
        if rest[0] == obs_id:
            obs = rest[: rest.index(sep) + 1]  # <obs> status eager-bucket compile-bucket <sep>
            assert len(obs) == 5 and tok.decode(obs)[1].startswith("st_")
            seen.add(tuple(obs))
            two += 1
            k = len(p) + len(q) + len(obs)
            assert m[len(p) + len(q) : k] == [0] * len(obs)
            second = tok.decode_plan(row[k:])
            assert second != plan and (task, second) in pairs and not optimisations(second)
        else:
            assert set(rest) == {tok.pad_id} and sum(m) == len(q)
    assert two == len(pairs) // 2
    # the observations span statuses and speed buckets (as a GPU judge reports them), not one CPU-mode form
    assert len(seen) >= min(two, 6)
    many = {tuple(format_observation(i)) for i in range(400)}
    assert {o[1] for o in many} == {f"st_{st}" for st in STATUSES}
    assert {o[2] for o in many} == {f"e_{b}" for b in (*SPEED_NAMES, "na")}
