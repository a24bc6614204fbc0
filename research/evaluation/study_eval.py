"""The study's evaluation of a policy on one protocol split, and the comparison of such evaluations.

``evaluate_split`` runs the agent loop (``research.agent.run_agent``: the tools, sandbox workspace, budgets
and final fresh verdict of ``python -m experiments.agent`` and of the pipeline's rollouts) on the tasks of one
protocol split, then writes one ``study-results/1`` file for (run, split, seed):

- ``greedy``: one episode per task at temperature 0, one row per task (``sample`` 0).
- ``sampled``: ``samples`` (k) episodes per task at the sampling temperature, sample i with policy seed
  ``policy.seed + i``; one row per task and sample (``sample`` i). pass@k comes from these rows in the report
  (``paired.pass_at_k_table``, Chen et al.'s unbiased estimator); paired comparisons take greedy runs.

A test split is recorded in the protocol (``record_evaluation``) before any episode runs: a second
evaluation of it for the same run is refused unless ``force``. A task the loop left without a verdict (an
infrastructure error) is a failed row (``status`` ``error``), never left out (``check_run``).

``train_config``: a training run's ``config.yaml`` (``python -m experiments.train`` writes it into its
out_dir): the evaluation then uses that run's task source (with its ``tasks.protocol``) and its PPO
rollout's budgets (turns, context, tokens per turn, temperature) and agent settings (skills, observation
bytes, wall time), so the test is played as training played.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kernels_env.client import SandboxClient
from research.agent import RunConfig, TasksConfig, make_policy, read_jsonl, run_agent
from research.agent.data_tasks import read_records
from research.agent.runner import RESULTS

from .kernelbench import find_kernelbench
from .paired import (
    HEADLINE,
    ResultsError,
    RunResults,
    ablation_table,
    check_run,
    compare,
    format_ablations,
    format_compare,
    format_pass_at_k,
    pair_runs,
    pass_at_k_table,
    result_from_verdict,
)
from .protocol import (  # the names used here; the package __init__ re-exports a like list
    KERNELBENCH,
    SPLITS,
    Protocol,
    ProtocolConfig,
    ProtocolError,
    load_protocol,
    make_protocol,
    record_evaluation,
    write_protocol,
)
from .protocol_tasks import protocol_splits, protocol_view

MODES, DECODINGS = ("fix", "eval", "compare"), ("greedy", "sampled")


class StudyError(ValueError):
    """A study evaluation or comparison that cannot run as configured (one line)."""


@dataclass
class StudyConfig:
    # fix: write the protocol of a task source (before any training); eval: one policy on one split;
    # compare: result files against each other
    mode: str = "eval"
    protocol: str = ""  # protocol.json; "": the task config's tasks.protocol
    split: str = "dev"
    run: str = ""  # the run's name: in the results and in the protocol's record of test evaluations
    seed: int = 0  # the training seed of the evaluated policy (the rows' seed)
    decoding: str = "greedy"
    samples: int = 1  # k episodes per task (sampled)
    temperature: float | None = None  # sampled; None: the training run's PPO temperature, else the policy's
    force: bool = False  # evaluate a test split again for this run (recorded as forced)
    train_config: str = ""  # a training run's config.yaml (or its out_dir): its tasks and budgets
    results: str = ""  # the study-results/1 file; "": <out_dir>/<run>.<split>.seed<seed>.json
    runs: list[str] = field(default_factory=list)  # compare: [a, b, ablation, ...] result files
    ks: list[int] = field(default_factory=list)  # pass@k of sampled runs; empty: 1, 2, 4, ..., n
    metric: str = (
        HEADLINE  # compare: the ablation table's binary metric (pass where timing is not comparable)
    )
    n_boot: int = 10000
    fix: ProtocolConfig = field(default_factory=ProtocolConfig)  # fix: the protocol's seed and split sizes

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise StudyError(f"study.mode must be one of {MODES}, got {self.mode!r}")
        if self.decoding not in DECODINGS:
            raise StudyError(f"study.decoding must be one of {DECODINGS}, got {self.decoding!r}")
        if self.split not in SPLITS:
            raise StudyError(f"study.split must be one of {list(SPLITS)}, got {self.split!r}")
        if self.samples < 1 or (self.decoding == "greedy" and self.samples != 1):
            raise StudyError(f"study.samples={self.samples}: greedy takes 1 sample, sampled k >= 1")


def read_training(path: str | Path) -> dict[str, Any]:
    """A training run's composed config (``config.yaml`` or the out_dir holding it)."""
    p = Path(path)
    p = p / "config.yaml" if p.is_dir() else p
    if not p.is_file():
        raise StudyError(f"study.train_config={path}: no training config.yaml there")
    node = yaml.safe_load(p.read_text()) or {}
    if node.get("env") != "agent" or "ppo" not in node:
        raise StudyError(f"study.train_config={path}: not an env=agent training config")
    return node


def with_training(run: RunConfig, train: dict[str, Any]) -> tuple[RunConfig, float]:
    """``run`` with the training run's tasks, PPO rollout budgets and agent settings; and the PPO
    rollout's temperature."""
    ro, agent = train["ppo"]["rollout"], train.get("agent") or {}
    a = dataclasses.replace(
        run.agent,
        max_turns=int(ro["turns"]),
        max_context_tokens=int(ro["max_context"]),
        mode="single_turn" if int(ro["turns"]) == 1 else "agentic",
        **{
            k: agent[k]
            for k in ("skills", "skill_results", "max_observation_bytes", "max_wall_s")
            if k in agent
        },
    )
    policy = _with(run.policy, max_tokens=int(ro["max_turn_tokens"]))
    tasks = TasksConfig(**train["tasks"])
    return dataclasses.replace(run, agent=a, policy=policy, tasks=tasks), float(ro.get("temperature", 1.0))


def _with(policy, **settings):
    """``policy`` with those of ``settings`` it has (each policy has its own config: a scripted one has no
    temperature, seed or max_tokens)."""
    fields = {f.name for f in dataclasses.fields(policy)}
    return dataclasses.replace(policy, **{k: v for k, v in settings.items() if k in fields})


def _split_picker(protocol: Protocol, split: str, chosen: list):
    def pick(tasks):
        if split == KERNELBENCH:  # the checkout's problems the protocol kept (ids: level<N>/<stem>)
            by_id = {t.id: t for t in tasks}
            missing = [k for k in protocol.splits[split] if k not in by_id]
            if missing:
                raise ProtocolError(
                    f"{len(missing)} {split} problems not in the checkout (e.g. {missing[0]})"
                )
            picked = [dataclasses.replace(by_id[k], split=split) for k in protocol.splits[split]]
        else:
            picked = protocol_splits(tasks, protocol, (split,))[split]
        chosen[:] = picked
        return picked

    return pick


def fix_protocol(study: StudyConfig, tasks: TasksConfig) -> Protocol:
    """Fix the protocol of a ``research.data`` task source (``tasks.source=data``) with ``study.fix`` and
    write it to ``study.protocol`` (never over a different one: ``write_protocol``)."""
    if not study.protocol:
        raise StudyError("study.mode=fix needs study.protocol=PATH/protocol.json (where to write it)")
    if tasks.source != "data":
        raise StudyError(
            f"study.mode=fix reads a research.data task source (tasks.source=data), not {tasks.source!r}"
        )
    protocol = make_protocol(read_records(dataclasses.replace(tasks, protocol="")), study.fix)
    path = write_protocol(protocol, study.protocol)
    sizes = {k: len(v) for k, v in protocol.splits.items()}
    print(f"wrote {path}: held-out category {protocol.heldout_category}, splits {sizes}")
    return protocol


def evaluate_split(study: StudyConfig, run: RunConfig, *, client: SandboxClient | None = None) -> RunResults:
    """Evaluate ``run.policy`` on ``study.split`` of the protocol (module docstring); writes and returns
    the results."""
    if not study.run:
        raise StudyError("study.run is required: the run's name in its results and the protocol")
    temperature = getattr(run.policy, "temperature", 0.0)  # a scripted policy samples nothing
    if study.train_config:
        run, temperature = with_training(run, read_training(study.train_config))
    path = study.protocol or run.tasks.protocol
    if not path:
        raise StudyError("no protocol: set study.protocol=PATH/protocol.json (or tasks.protocol)")
    protocol = load_protocol(path)
    if study.split == KERNELBENCH:
        if not protocol.config.kernelbench_dir:
            raise StudyError(f"the protocol at {path} has no {KERNELBENCH} split (no kernelbench_dir)")
        root = find_kernelbench(protocol.config.kernelbench_dir)
        run = dataclasses.replace(run, tasks=TasksConfig(source="dir", problems_dir=str(root)))
    if study.temperature is not None:
        temperature = study.temperature
    temperature = 0.0 if study.decoding == "greedy" else temperature
    out = Path(run.out_dir)
    results = (
        Path(study.results) if study.results else out / f"{study.run}.{study.split}.seed{study.seed}.json"
    )
    sample_cfg = lambda i: _with(run.policy, temperature=temperature, seed=getattr(run.policy, "seed", 0) + i)  # noqa: E731
    # a policy that cannot load is a config error, not a look
    policy = make_policy(sample_cfg(0), run.agent.max_context_tokens)
    # before any episode: a look at a test split that crashes is still a look
    try:
        record_evaluation(path, study.split, study.run, force=study.force)
    except BaseException:
        policy.close()
        raise
    own_client = client is None
    client = client or SandboxClient(run.sandbox, run.judge)
    rows, chosen = [], []
    try:
        for i in range(study.samples):
            policy_cfg = sample_cfg(i)
            sample_run = dataclasses.replace(run, policy=policy_cfg, out_dir=str(out / f"sample{i}"))
            policy = policy if i == 0 else make_policy(policy_cfg, run.agent.max_context_tokens)
            try:
                run_agent(
                    sample_run,
                    policy=policy,
                    client=client,
                    pick=_split_picker(protocol, study.split, chosen),
                )
            finally:
                policy.close()
            rows += _rows(chosen, Path(sample_run.out_dir) / RESULTS, study.seed, i, study.split)
    finally:
        if own_client:
            client.close()
    res = RunResults(study.run, study.split, rows, protocol.sha256)
    check_run(res, protocol)
    res.save(results)
    print(format_pass_at_k(pass_at_k_table(res, study.ks or None, study.n_boot)))
    print(f"wrote {results}")
    return res


def _rows(tasks: list, results: Path, seed: int, sample: int, split: str) -> list:
    """One row per task of the split: its verdict, or a failed row when the loop left it without one."""
    got = {r["task"]: r for r in read_jsonl(results)}
    rows = []
    for t in tasks:
        rec = got.get(t.id)
        verdict = (
            {
                "status": rec["status"],
                "speedups": rec["speedups"],
                "timings": {"comparable": rec["comparable"]},
            }
            if rec is not None
            else {"status": "error"}
        )
        tid = t.id if split == KERNELBENCH else protocol_view(t)["id"]
        rows.append(result_from_verdict(tid, seed, verdict, sample))
    return rows


def compare_results(study: StudyConfig) -> dict[str, Any]:
    """The report over ``study.runs`` (``study-results/1`` files, each checked against the protocol when one
    is given): pass@k of every run; the headline of the first greedy run against the second, and each
    further greedy run as an ablation against the first."""
    if not study.runs:
        raise StudyError("study.mode=compare needs study.runs=[A.json,B.json,...] (study-results/1 files)")
    runs = [RunResults.load(p) for p in study.runs]
    if study.protocol:
        protocol = load_protocol(study.protocol)
        for r in runs:
            check_run(r, protocol)
    out: dict[str, Any] = {"pass_at_k": []}
    for r in runs:
        table = pass_at_k_table(r, study.ks or None, study.n_boot)
        out["pass_at_k"].append(table)
        print(format_pass_at_k(table))
    greedy = [r for r in runs if len(r.sample_grid()[2]) == 1]
    if len(greedy) >= 2:
        names = [r.run for r in greedy]
        if len(set(names)) != len(names):
            raise ResultsError(f"two result files of the same run name in study.runs: {names}")
        ablations = {r.run: r for r in greedy[2:]}
        out["compare"] = compare(pair_runs(greedy[0], greedy[1]), n_boot=study.n_boot)
        print(format_compare(out["compare"]))
        if ablations:
            out["ablations"] = ablation_table(greedy[0], ablations, metric=study.metric, n_boot=study.n_boot)
            print(format_ablations(out["ablations"]))
    return out
