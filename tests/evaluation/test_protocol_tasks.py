"""A study protocol in the training pipeline (tasks.protocol): the agent environment holds train and dev
only, rollouts draw from train, the in-pipeline evaluation is dev's, and a changed task is one line."""

from __future__ import annotations

import dataclasses

import pytest

from kernels_env.client import JudgeConfig
from research.agent import Task
from research.agent.data_tasks import data_tasks
from research.evaluation import ProtocolError
from research.evaluation.protocol_tasks import TRAINING_SPLITS, protocol_splits, protocol_view
from research.rl.pipeline import PipelineConfig
from research.rl.pipeline.agent_env import AgentEnv, AgentEnvConfig
from research.rollout import RolloutConfig

from .study_fixtures import pool_config, write_pool, write_pool_protocol

TESTS = ("test_seen", "test_heldout")


@pytest.fixture
def pool(tmp_path):
    path = write_pool(tmp_path / "data")
    protocol, manifest = write_pool_protocol(path, tmp_path / "protocol.json", n_dev=2)
    tasks = data_tasks(pool_config(path), tmp_path / "problems", lambda: "cpu")
    return tasks, protocol, manifest


def test_protocol_splits_of_agent_tasks_follow_the_manifest(pool):
    tasks, protocol, _ = pool
    splits = protocol_splits(tasks, protocol)
    for split, ids in protocol.splits.items():
        got = splits[split]
        assert [protocol_view(t)["id"] for t in got] == ids  # record ids, not the agent's <split>/<name>
        assert {t.split for t in got} == {split}
    kept = protocol_splits(tasks, protocol, TRAINING_SPLITS)
    assert set(kept) == {"train", "dev"}
    with pytest.raises(ProtocolError, match="kernelbench_l1"):
        protocol_splits(tasks, protocol, ("kernelbench_l1",))


def test_agent_env_with_a_protocol_never_draws_a_test_task(pool):
    tasks, protocol, _ = pool
    env = AgentEnv(
        protocol_splits(tasks, protocol, TRAINING_SPLITS),
        None,
        JudgeConfig(),
        None,
        None,
        AgentEnvConfig(),
        draw_splits=("train",),
    )
    test_ids = {i for s in TESTS for i in protocol.splits[s]}
    cfg = RolloutConfig(episodes=4, group_size=2, seed=3)
    drawn = {protocol_view(t)["id"] for c in range(200) for t in env.draw(cfg, c)}
    assert drawn == set(protocol.splits["train"])  # every train task, over enough batches
    assert not drawn & test_ids
    with pytest.raises(ValueError, match="draw only from"):
        env.draw(dataclasses.replace(cfg, split="dev"), 0)
    for split in TESTS:
        with pytest.raises(ValueError, match="no agent tasks in split"):
            env.tasks(split)
    assert [protocol_view(t)["id"] for t in env.tasks("dev")] == protocol.splits["dev"]


def test_a_task_changed_since_the_protocol_is_one_line(pool, tmp_path):
    tasks, protocol, _ = pool
    rec = tasks[0].meta["record"]
    edited = dataclasses.replace(rec, source=rec.source + "\n# edited\n")
    changed = [dataclasses.replace(tasks[0], meta={**tasks[0].meta, "record": edited}), *tasks[1:]]
    with pytest.raises(ProtocolError, match=f"task '{rec.id}' changed since the protocol was fixed") as e:
        protocol_splits(changed, protocol)
    assert "\n" not in str(e.value)


def test_a_dir_task_is_seen_by_its_id_and_file(tmp_path):
    path = tmp_path / "level1" / "1_x.py"
    path.parent.mkdir()
    path.write_text("print(1)\n")
    view = protocol_view(Task(id="level1/1_x", path=path, level="1", meta={"category": "elementwise"}))
    assert (view["id"], view["source"], view["categories"]) == ("level1/1_x", "print(1)\n", ("elementwise",))


def _agent_cfg(tmp_path, pool_path, manifest, **over):
    import models

    return PipelineConfig(
        out_dir=str(tmp_path / "run"),
        env="agent",
        model=models.ModelSpec(compute_dtype="float32", attention_impl="xla"),
        tasks=dataclasses.asdict(pool_config(pool_path, manifest)),
        progress=False,
        tensorboard=False,
        **over,
    )


def test_pipeline_config_keeps_rollouts_on_train_and_evaluation_on_dev(tmp_path):
    pool_path = write_pool(tmp_path / "data")
    _, manifest = write_pool_protocol(pool_path, tmp_path / "protocol.json")
    cfg = _agent_cfg(tmp_path, pool_path, manifest)  # evaluation off: fine
    cfg.eval.enabled = True
    with pytest.raises(ValueError, match=r"eval.splits=\['test', 'heldout_category'\]: with tasks.protocol"):
        cfg.__post_init__()
    cfg.eval.splits = ["dev"]
    cfg.ppo.rollout.split = "dev"
    with pytest.raises(ValueError, match="ppo.rollout.split=dev: with tasks.protocol rollouts use train"):
        cfg.__post_init__()
    cfg.ppo.rollout.split = "train"
    cfg.__post_init__()


def test_runtime_builds_the_agent_env_from_the_protocol(tmp_path):
    from research.rl.pipeline.runtime import Runtime

    pool_path = write_pool(tmp_path / "data")
    protocol, manifest = write_pool_protocol(pool_path, tmp_path / "protocol.json")
    rt = Runtime(_agent_cfg(tmp_path, pool_path, manifest), client=object())  # no sandbox call is made
    for env in (rt.env, rt.eval_env):
        assert set(env.splits) == {"train", "dev"}
        assert env.draw_splits == ("train",)
        assert [protocol_view(t)["id"] for t in env.splits["train"]] == protocol.splits["train"]
    assert rt.train_tasks == {t.id for t in rt.env.splits["train"]}  # SFT's demo filter
    # the pool changed after the protocol was fixed: the run refuses to start
    pool_path.write_text(pool_path.read_text().replace("randn(64)", "randn(65)"))
    with pytest.raises(ProtocolError, match="changed since the protocol was fixed"):
        Runtime(_agent_cfg(tmp_path, pool_path, manifest), client=object())


def test_kernelbench_split_picks_the_checkout_problems_the_protocol_kept(tmp_path):
    """study.split=kernelbench_l1 plays the checkout's problems (find_tasks ids = ProblemIndex keys) that
    decontamination kept; a problem the training pool contains (the scale op) is not among them."""
    from research.agent import TasksConfig, find_tasks
    from research.agent.data_tasks import read_records
    from research.evaluation import ProtocolConfig, make_protocol
    from research.evaluation.study_eval import _split_picker
    from tests.rl.agent_fixtures import SCALE_PROBLEM

    from .test_protocol import KB_CONV

    kb = tmp_path / "kb"
    (kb / "level1").mkdir(parents=True)
    (kb / "level1" / "1_Scale.py").write_text(SCALE_PROBLEM)  # mul: inside every training task
    (kb / "level1" / "2_Conv.py").write_text(KB_CONV)
    pool_path = write_pool(tmp_path / "data")
    cfg = ProtocolConfig(
        heldout_category="reduction",
        n_dev=1,
        n_test_seen=1,
        n_test_heldout=1,
        min_test_tasks=1,
        kernelbench_dir=str(kb),
    )
    protocol = make_protocol(read_records(pool_config(pool_path)), cfg)
    assert protocol.splits["kernelbench_l1"] == ["level1/2_Conv"]
    chosen = []
    picked = _split_picker(protocol, "kernelbench_l1", chosen)(find_tasks(TasksConfig(problems_dir=str(kb))))
    assert [(t.id, t.split) for t in picked] == [("level1/2_Conv", "kernelbench_l1")] and chosen == picked
    (kb / "level1" / "2_Conv.py").rename(kb / "level1" / "2_Conv2d.py")
    with pytest.raises(ProtocolError, match="1 kernelbench_l1 problems not in the checkout"):
        _split_picker(protocol, "kernelbench_l1", [])(find_tasks(TasksConfig(problems_dir=str(kb))))


@pytest.mark.parametrize("tasks", ["data", "examples"])
def test_every_agent_task_option_takes_a_protocol(tasks):
    """`tasks=data tasks.protocol=P` (the documented command) composes: every task option has the key."""
    from hydra import compose, initialize_config_dir

    from experiments._hydra import CONF
    from experiments.train import to_config

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="train",
            overrides=["env=agent", f"tasks={tasks}", "tasks.protocol=/p.json", "eval.splits=[dev]"]
            + (["tasks.path=/d"] if tasks == "data" else []),
        )
    assert to_config(cfg).tasks.protocol == "/p.json"
