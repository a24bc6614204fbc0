"""The study's evaluation main (experiments.study): a policy on one protocol split through the real agent loop
into study-results/1 rows, test splits touched once, pass@k rows of sampled decoding, and the comparison of
result files; user mistakes are one line with exit code 2."""

from __future__ import annotations

import json

import pytest

from research.evaluation import RunResults, TaskResult, check_run, load_protocol
from research.evaluation.paired import pass_at_k_table
from tests.hydra_mains import run_main
from tests.rl.agent_fixtures import solve_script

from .study_fixtures import write_pool, write_pool_protocol


def _argv(tmp_path, pool, manifest, *extra):
    script = tmp_path / "solve.json"
    script.write_text(json.dumps(solve_script()))
    return [
        "policy=scripted",
        f"policy.script={script}",
        "sandbox=cpu",
        f"sandbox.cache_dir={tmp_path / 'cache'}",
        "sandbox.num_compile_workers=1",
        "tasks=data",
        f"tasks.path={pool}",
        "agent.max_turns=4",
        "agent.skills=false",
        "judge.num_trials=2",
        "judge.families=[]",
        "judge.time_candidate=false",
        "progress=false",
        f"study.protocol={manifest}",
        f"out_dir={tmp_path / 'out'}",
        f"hydra.run.dir={tmp_path / 'hydra'}",
        *extra,
    ]


@pytest.mark.integration  # starts a CPU sandbox: three scripted episodes judged under the Triton interpreter
def test_study_eval_scripted_cpu(tmp_path, monkeypatch, capsys):
    pool = write_pool(tmp_path / "data")
    protocol, manifest = write_pool_protocol(pool, tmp_path / "protocol.json")
    results = tmp_path / "sft.test_seen.json"
    argv = _argv(
        tmp_path, pool, manifest, "study.run=sft", "study.split=test_seen", f"study.results={results}"
    )
    assert run_main("study", argv, monkeypatch) is None
    run = RunResults.load(results)
    check_run(run, load_protocol(manifest))
    (row,) = run.results
    assert (row.task, row.seed, row.sample, row.passed) == (protocol.splits["test_seen"][0], 0, 0, True)
    assert row.status == "correct" and row.faster_than_compile is None  # CPU mode: no comparable timing
    assert [(e["split"], e["run"]) for e in load_protocol(manifest).evaluations] == [("test_seen", "sft")]
    # the same test split again for the same run: refused before any episode, in one line
    capsys.readouterr()
    assert run_main("study", argv, monkeypatch) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("error: test split test_seen was already evaluated for run 'sft'") and "\n" not in err
    )
    # sampled decoding on dev: a row per sample, pass@k from them (dev is not guarded)
    dev = tmp_path / "sft.dev.json"
    argv = _argv(
        tmp_path,
        pool,
        manifest,
        "study.run=sft",
        "study.split=dev",
        "study.decoding=sampled",
        "study.samples=2",
        f"study.results={dev}",
        f"out_dir={tmp_path / 'out_dev'}",
    )
    assert run_main("study", argv, monkeypatch) is None
    run = RunResults.load(dev)
    check_run(run, load_protocol(manifest))
    assert sorted((r.task, r.sample, r.passed) for r in run.results) == [
        (protocol.splits["dev"][0], 0, True),
        (protocol.splits["dev"][0], 1, True),
    ]
    assert "pass@1 1.000" in capsys.readouterr().out


def _rows(passed, sample=0, seed=0):
    return [
        TaskResult(f"t{i}", seed, "correct" if p else "incorrect", bool(p), sample=sample)
        for i, p in enumerate(passed)
    ]


def test_compare_prints_pass_at_k_and_the_headline(tmp_path, monkeypatch, capsys):
    full = RunResults("full", "dev", _rows([1, 1, 1, 0, 1, 1]))
    sft = RunResults("sft", "dev", _rows([1, 0, 0, 0, 1, 0]))
    abl = RunResults("no_rft", "dev", _rows([1, 1, 0, 0, 1, 0]))
    sampled = RunResults(
        "full-k3",
        "dev",
        _rows([1, 0, 0, 0, 1, 0]) + _rows([1, 1, 0, 0, 0, 0], 1) + _rows([0, 0, 0, 0, 1, 0], 2),
    )
    paths = []
    for r in (full, sft, abl, sampled):
        paths.append(r.save(tmp_path / f"{r.run}.json"))
    # pass@k by hand: per task c of n=3 correct: t0 2, t1 1, t2..t3 0, t4 2, t5 0
    table = pass_at_k_table(sampled, [1, 2, 3], n_boot=200)["pass_at"]
    assert table[1]["pass_at_k"] == pytest.approx((2 / 3 + 1 / 3 + 2 / 3) / 6)
    assert table[2]["pass_at_k"] == pytest.approx((1 + (1 - 1 / 3) + 1) / 6)  # c=1: 1 - C(2,2)/C(3,2)
    assert table[3]["pass_at_k"] == pytest.approx(3 / 6)
    argv = ["study.mode=compare", f"study.runs=[{','.join(map(str, paths))}]", "study.n_boot=200"]
    argv += ["study.metric=pass"]
    argv += [f"hydra.run.dir={tmp_path / 'hydra'}"]
    assert run_main("study", argv, monkeypatch) is None
    out = capsys.readouterr().out
    assert "full (a) vs sft (b) on dev, 6 tasks" in out
    assert "no_rft" in out and "Holm" in out
    assert "full-k3 on dev: 6 tasks x 1 seeds, 3 samples each: pass@1 0.278" in out
    # a results file that is not there: one line, exit 2
    argv = [
        "study.mode=compare",
        f"study.runs=[{tmp_path / 'nope.json'}]",
        f"hydra.run.dir={tmp_path / 'h2'}",
    ]
    assert run_main("study", argv, monkeypatch) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: no results file at {tmp_path / 'nope.json'}"


def test_sampled_rows_are_not_paired_and_samples_are_checked(tmp_path):
    sampled = RunResults("k2", "dev", _rows([1, 0]) + _rows([0, 0], 1))
    with pytest.raises(Exception, match="2 samples per task and seed: paired comparisons take one"):
        sampled.grid()
    gap = RunResults("k2", "dev", _rows([1, 0]) + _rows([0], 1))
    with pytest.raises(Exception, match="task t1 has no result for seed 0 sample 1"):
        gap.sample_grid()
    back = RunResults.load(sampled.save(tmp_path / "k2.json"))
    assert sorted(r.sample for r in back.results) == [0, 0, 1, 1]


def test_study_config_errors_are_one_line(tmp_path, monkeypatch, capsys):
    for extra, want in [
        (["study.split=tests"], "study.split must be one of"),
        (["study.decoding=greedy", "study.samples=4"], "greedy takes 1 sample"),
        (["study.split=dev"], "study.run is required"),
        (["study.run=x", f"study.protocol={tmp_path / 'none.json'}"], "study.protocol="),
    ]:
        argv = [*extra, f"hydra.run.dir={tmp_path / 'h'}"]
        assert run_main("study", argv, monkeypatch) == 2, extra
        err = capsys.readouterr().err.strip()
        assert want in err and "\n" not in err, (extra, err)


def test_training_config_gives_the_evaluation_its_tasks_and_ppo_budgets(tmp_path):
    """study.train_config: the training run's saved config (experiments.train's save_config) sets the
    agent loop's turns, context, tokens per turn, agent settings and tasks as its PPO rollout played them."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import experiments.train  # noqa: F401  (registers the task schemas conf/env/agent.yaml composes)
    from experiments._hydra import CONF
    from research.agent import FlaxPolicyConfig, RunConfig
    from research.evaluation.study_eval import StudyError, read_training, with_training

    overrides = ["env=agent", "preset=agent_cpu", "tasks.protocol=/p/protocol.json", "ppo.rollout.turns=5"]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    OmegaConf.save(cfg, tmp_path / "config.yaml", resolve=True)
    run, temperature = with_training(RunConfig(policy=FlaxPolicyConfig()), read_training(tmp_path))
    ro = cfg.ppo.rollout
    assert (run.agent.max_turns, run.agent.max_context_tokens, run.policy.max_tokens) == (
        5,
        ro.max_context,
        ro.max_turn_tokens,
    )
    assert run.agent.mode == "agentic" and temperature == ro.temperature
    assert (run.agent.skills, run.agent.max_observation_bytes) == (cfg.agent.skills, 1024)
    assert run.tasks.protocol == "/p/protocol.json" and run.tasks.problems_dir == cfg.tasks.problems_dir
    (tmp_path / "toy").mkdir()
    OmegaConf.save(OmegaConf.create({"env": "toy"}), tmp_path / "toy" / "config.yaml")
    with pytest.raises(StudyError, match="not an env=agent training config"):
        read_training(tmp_path / "toy")


def test_a_policy_that_cannot_load_is_not_a_look_at_the_test_split(tmp_path, monkeypatch, capsys):
    pool = write_pool(tmp_path / "data")
    _, manifest = write_pool_protocol(pool, tmp_path / "protocol.json")
    argv = _argv(tmp_path, pool, manifest, "study.run=sft", "study.split=test_seen")
    bad = tmp_path / "bad.json"
    bad.write_text("[not json")
    argv = [a if not a.startswith("policy.script=") else f"policy.script={bad}" for a in argv]
    assert run_main("study", argv, monkeypatch) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: policy.script={bad}: not valid JSON") and "\n" not in err
    assert load_protocol(manifest).evaluations == []  # the test split is still untouched


def test_a_task_left_without_a_verdict_is_a_failed_row(tmp_path):
    """The loop's results.jsonl lacks a task (an infrastructure error): its row is written as failed."""
    from research.agent.data_tasks import data_tasks
    from research.evaluation.protocol_tasks import protocol_splits
    from research.evaluation.study_eval import _rows

    from .study_fixtures import pool_config

    pool = write_pool(tmp_path / "data")
    protocol, _ = write_pool_protocol(pool, tmp_path / "protocol.json", n_dev=2)
    tasks = protocol_splits(data_tasks(pool_config(pool), tmp_path / "p", lambda: "cpu"), protocol)["dev"]
    results = tmp_path / "results.jsonl"
    rec = {"task": tasks[0].id, "status": "correct", "speedups": {"eager": 1.2}, "comparable": True}
    results.write_text(json.dumps(rec) + "\n")
    rows = _rows(tasks, results, seed=2, sample=1, split="dev")
    run = RunResults("r", "dev", rows, protocol.sha256)
    check_run(run, protocol)
    assert [(r.task, r.seed, r.sample, r.status, r.passed) for r in rows] == [
        (protocol.splits["dev"][0], 2, 1, "correct", True),
        (protocol.splits["dev"][1], 2, 1, "error", False),
    ]
    assert rows[0].faster_than_eager is True and rows[0].speedup_vs_eager == 1.2


def test_fix_mode_writes_the_protocol_of_a_data_source_once(tmp_path, monkeypatch, capsys):
    pool = write_pool(tmp_path / "pool")
    expected, _ = write_pool_protocol(pool, tmp_path / "reference.json")
    manifest = tmp_path / "protocol.json"
    fix = [
        "study.mode=fix",
        f"study.protocol={manifest}",
        "tasks=data",
        f"tasks.path={pool}",
        "study.fix.heldout_category=reduction",
        "study.fix.n_dev=1",
        "study.fix.n_test_seen=1",
        "study.fix.n_test_heldout=1",
        "study.fix.min_test_tasks=1",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    assert run_main("study", fix, monkeypatch) is None
    assert load_protocol(manifest).splits == expected.splits  # the library's protocol, through the main
    assert "held-out category reduction" in capsys.readouterr().out
    # a different protocol over the same path is refused; so are a missing path and a non-data source
    cases = [
        (["study.fix.seed=1"], f"error: {manifest}"),
        (["study.protocol="], "error: study.mode=fix needs study.protocol="),
        (["tasks=examples"], "error: study.mode=fix reads a research.data"),  # (tasks=data dropped below)
        (["study.fix.n_test_seen=1", "study.fix.min_test_tasks=48"], "error: n_test_seen=1 is below the 48"),
    ]
    for extra, start in cases:
        capsys.readouterr()
        base = [a for a in fix if not a.startswith("tasks")] if extra == ["tasks=examples"] else fix
        assert run_main("study", base + extra, monkeypatch) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.startswith(start) and "\n" not in err, (extra, err)
