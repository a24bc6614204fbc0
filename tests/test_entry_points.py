"""The Hydra entry points, run in process: a user's mistake is one line on stderr naming the config key, exit
code 2, and no run directory left behind (experiments._hydra.user_errors); a run that logs nothing leaves no
0-byte <job>.log; the agent's default policy needs no extra keys; the training run folder holds its composed
config and the console says why a stage learned nothing."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from experiments._hydra import CONF
from tests.hydra_mains import run_main


@pytest.fixture()
def inputs(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "problems").mkdir()
    (tmp_path / "problems" / "1_relu.py").write_text("# a problem\n")
    (tmp_path / "bad.json").write_text("[{not json")
    return tmp_path


# (entry point, overrides, the one line it must print); {t}: the test's tmp_path
CASES = [
    ("evaluate", ["eval.problems_dir=/nope"], "eval.problems_dir=/nope: no such directory"),
    ("evaluate", ["eval.problems_dir={t}/empty"], "eval.problems_dir={t}/empty: empty (no *.py in it)"),
    (
        "evaluate",
        ["eval=kernelbench"],
        "eval.solutions_dir is required: give eval.solutions_dir=... on the command line",
    ),
    (
        "evaluate",
        ["eval.problems_dir={t}/problems", "eval.solutions_dir={t}/empty"],
        "no solutions in {t}/empty: expected <problem>.py, <problem>__<variant>.py or a <problem>/ workspace "
        "with model_new.py",
    ),
    ("agent", ["policy=scripted"], "policy=scripted needs policy.script (a JSON list of tool calls)"),
    # an option's ??? over its schema's default (conf/tasks/data.yaml over TasksConfig.path): still required
    ("agent", ["tasks=data"], "tasks.path is required: give tasks.path=... on the command line"),
    ("train", ["env=agent", "tasks=data"], "tasks.path is required: give tasks.path=... on the command line"),
    ("solutions", [], "input is required: give input=... on the command line"),
    (
        "agent",
        ["policy=scripted", "policy.script=/nope.json"],
        "policy.script=/nope.json: no such file or directory",
    ),
    ("agent", ["policy=openai"], "policy=openai needs policy.model (the served model's name)"),
    (
        "agent",
        ["policy=scripted", "policy.script={t}/bad.json", "tasks.problems_dir={t}/empty"],
        "tasks.problems_dir={t}/empty: no problems matching '*.py' in it",
    ),
    (
        "agent",
        ["policy=scripted", "policy.script={t}/bad.json", "tasks.problems_dir={t}/problems"],
        "policy.script={t}/bad.json: not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 3 (char 2)",
    ),
    (
        "agent",
        [
            "policy=flax",
            "policy.generation.backend=engine",
            "policy.generation.kv_budget_tokens=512",
            "agent.max_context_tokens=2048",
            "tasks.problems_dir={t}/problems",
        ],
        "policy.generation.kv_budget_tokens=512 (32 pages of 16) cannot hold one context of 3072 tokens "
        "(context budget + max tokens per turn = 192 pages): raise it or lower the context budget",
    ),
    (
        "agent",
        ["policy=flax", "policy.generation.backend=vllm"],
        "invalid config in 'policy' for FlaxPolicyConfig: generation.backend must be one of ('sampler', "
        "'engine'), got 'vllm'",
    ),
    ("figures", [], "run_dir is required: give run_dir=... on the command line"),
    ("figures", ["run_dir=/nope"], "run_dir=/nope: no such directory"),
    (
        "figures",
        ["run_dir={t}/empty"],
        "{t}/empty: nothing to draw (no results.jsonl, audit report or multirun points)",
    ),
    ("corpus", [], "data_dir is required: give data_dir=... on the command line"),
    (
        "corpus",
        ["data_dir={t}/empty"],
        "{t}/empty/tasks.jsonl does not exist: synthesis has not finished there (resume it first)",
    ),
    (
        "corpus",
        ["data_dir={t}/empty", "corpus.bug_rates.clean=-1"],
        "invalid config in 'corpus' for CorpusConfig: bug_rates needs non-negative weights of clean and "
        "['missing_mask', 'wrong_shape', 'wrong_dtype', 'undefined_name', 'syntax_error'] "
        "(got {{'clean': -1.0, 'missing_mask': 0.2, 'wrong_shape': 0.1, 'wrong_dtype': 0.1, "
        "'undefined_name': 0.15, 'syntax_error': 0.15}})",
    ),
    ("solutions", ["input=/nope.jsonl"], "input=/nope.jsonl: no such file or directory"),
    ("synthesize", ["num_tasks=0", "out_dir={t}/data"], "num_tasks must be >= 1, got 0"),
    (
        "train",
        ["stage=nope"],
        "invalid config in 'train/model/sandbox/judge/preset/ablation/distributed/mesh' for PipelineConfig: "
        "stage must be one of ('sft', 'warmup', 'rft', 'value', 'ppo'), got 'nope'",
    ),
    (
        "train",
        ["env=agent", "agent.generation.backend=engine", "agent.generation.kv_budget_tokens=64"],
        "invalid config in 'train/model/sandbox/judge/preset/ablation/distributed/mesh' for PipelineConfig: "
        "agent.generation.kv_budget_tokens=64 (4 pages of 16) cannot hold one context of 160 tokens "
        "(context budget + max tokens per turn = 10 pages): raise it or lower the context budget",
    ),
    (
        "train",
        ["stage=rft", "init=/nope/manifest.json"],
        "init=/nope/manifest.json: no such file or directory",
    ),
]


# Overrides Hydra cannot compose (experiments._command_line): its report of several lines, as one line, and
# checked before Hydra starts, so not even the run directory's parent is made.
COMPOSE_CASES = [
    (
        "agent",
        ["sandbox.num_compile_workers=abc"],
        "Error merging override sandbox.num_compile_workers=abc: "
        "Value 'abc' of type 'str' could not be converted to Integer",
    ),
    ("train", ["sandbox=gpux"], "In 'train': Could not find 'sandbox/gpux' (options: auto, cpu, gpu)"),
    (
        "evaluate",
        ["judge.foo=1"],
        "Could not override 'judge.foo': Key 'foo' not in 'JudgeConfig' "
        "(to append to your config use +judge.foo=1)",
    ),
]


@pytest.mark.parametrize(("entry", "overrides", "line"), COMPOSE_CASES, ids=[c[0] for c in COMPOSE_CASES])
def test_overrides_hydra_cannot_compose_are_one_line_before_hydra_starts(
    entry, overrides, line, tmp_path, monkeypatch, capsys
):
    assert run_main(entry, [*overrides, f"hydra.run.dir={tmp_path}/outputs/run"], monkeypatch) == 2
    assert capsys.readouterr().err == f"error: {line}\n"
    assert not (tmp_path / "outputs").exists()


def test_the_same_overrides_under_hydra_full_error_are_left_to_hydra(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    from experiments._command_line import command_line_checked

    ran = []
    checked = command_line_checked("agent")(lambda: ran.append(True))
    monkeypatch.setattr("sys.argv", ["agent", "sandbox=gpux"])
    checked()  # no composition first: Hydra itself reports (with its traceback)
    assert ran == [True]


@pytest.mark.parametrize(
    ("entry", "overrides", "line"), CASES, ids=[f"{c[0]}:{' '.join(c[1])}" for c in CASES]
)
def test_user_errors_are_one_line_exit_2_and_leave_no_run_dir(
    entry, overrides, line, inputs, monkeypatch, capsys
):
    run_dir = inputs / "outputs" / "run"
    argv = [o.format(t=inputs) for o in overrides] + [f"hydra.run.dir={run_dir}"]
    assert run_main(entry, argv, monkeypatch) == 2
    err = capsys.readouterr().err
    assert err == f"error: {line.format(t=inputs)}\n"
    assert not run_dir.exists() and (inputs / "outputs").is_dir()  # an absolute run dir: only itself goes


def test_the_run_dir_and_its_empty_parents_below_the_working_directory_go(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs" / "evaluate" / "keep").mkdir(parents=True)  # an earlier run's: stays
    argv = ["eval.problems_dir=/nope", "hydra.run.dir=outputs/evaluate/2026-12-01/10-00-00"]
    assert run_main("evaluate", argv, monkeypatch) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert sorted(p.name for p in (tmp_path / "outputs" / "evaluate").iterdir()) == ["keep"]


def test_a_failed_sweep_leaves_no_sweep_dir(tmp_path, monkeypatch, capsys):
    sweep = tmp_path / "multirun"
    assert run_main("train", ["-m", "stage=nope,rft", f"hydra.sweep.dir={sweep}"], monkeypatch) == 2
    assert "stage must be one of" in capsys.readouterr().err
    assert not sweep.exists()


def test_the_default_agent_policy_needs_no_extra_keys():
    """Plain `python -m experiments.agent` is `make demo`: the shipped toy policy on held-out toy tasks."""
    from experiments.agent import to_config
    from research.agent.policies import make_policy

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        default, openai = compose("agent"), compose("agent", ["policy=openai"])
        toy_on_dir = compose("agent", ["tasks=examples"])
    cfg = to_config(default)
    assert cfg.policy.name == "toy" and cfg.tasks.source == "toy" and cfg.tasks.limit == 4
    make_policy(cfg.policy).close()  # the shipped checkpoint loads: nothing else to give
    assert openai.tasks.source == "dir"  # every other policy plays tasks=examples unless told
    assert toy_on_dir.tasks.source == "dir"  # the command line wins over the toy policy's choice


def _manifests(out: Path, log: bool):
    from research.rl.pipeline import Manifest

    if log:
        logging.getLogger("research.test").warning("a record for the job log")
    warm = Manifest("warmup", "a", "c", 2, "h", metrics={"reward_mean": 0.5, "eval": {"test": {}}})
    rft = Manifest(
        "rft",
        "a",
        None,
        0,
        "h",
        extra={
            "reason": "no trajectory accepted",
            "sampled": 8,
            "accepted": [],
            "rejected/reward_not_positive": 6.0,
            "rejected/invalid_action": 2.0,
            "rejected/total": 8.0,
        },
    )
    return {"warmup": warm, "rft": rft}


@pytest.mark.parametrize("logged", [False, True])
def test_train_saves_its_config_and_says_why_a_stage_learned_nothing(logged, tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_pipeline(config, **kw):
        seen["config"] = config
        return _manifests(Path(config.out_dir), logged)

    monkeypatch.setattr("research.rl.pipeline.run_pipeline", fake_pipeline)
    monkeypatch.setattr("experiments.train.start_jax", lambda config: None)
    out, run_dir = tmp_path / "out", tmp_path / "hydra_run"
    argv = ["preset=toy_cpu", f"out_dir={out}", "seed=3", f"hydra.run.dir={run_dir}"]
    assert run_main("train", argv, monkeypatch) is None
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (
        saved["out_dir"] == str(out) and saved["seed"] == 3 and saved["model"]["arch"]["hidden_size"] == 128
    )
    assert "${" not in (out / "config.yaml").read_text()  # resolved
    assert saved["warmup"]["steps"] == seen["config"].warmup.steps == 2  # the preset's, as the run got it
    stdout = capsys.readouterr().out
    assert (
        "rft       step    0  learned nothing: no trajectory accepted (0 of 8 sampled trajectories accepted; "
        "rejected: invalid_action 2, reward_not_positive 6); the previous stage's actor goes on unchanged"
    ) in stdout
    assert "warmup    step    2  {'reward_mean': 0.5}" in stdout and "{}" not in stdout
    log = run_dir / "train.log"
    assert log.is_file() == logged  # created at its first record: never a 0-byte log
    if logged:
        assert "a record for the job log" in log.read_text()
    assert json.loads(json.dumps(saved))  # plain YAML: no OmegaConf tags
