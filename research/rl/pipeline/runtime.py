"""What the stages share in one process: the learner mesh (``cfg.mesh``), the environment of ``cfg.env``
(the real agent loop, ``agent_env.AgentEnv``, or the toy plan environment, ``ToyEnv``: tasks, sandbox
client, judges), the tokenizer (and for the agent, its chat template), samplers (one per bucket shape,
weights swapped in with ``set_model``: no recompilation between steps or stages; they decode from the
learner's sharded arrays, no copy), the policy model builder and the time budget.

Several JAX processes: the learner mesh spans every process's devices, rollouts are split across the
processes (``shares.py``), each process samples from a local copy of the weights (gathered through host
memory at each swap) and judges with its own sandbox client (its own GPUs: ``devices.judge_gpus``), its
judge cache in its own file; time-budget decisions are process 0's."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import jax

import models
from kernels_env.client import SandboxClient
from research.agent import load_tasks
from research.agent.policies.chat import TINY_TEMPLATE, ChatFormat
from research.evaluation.protocol import load_protocol
from research.evaluation.protocol_tasks import TRAINING_SPLITS, protocol_splits
from research.rollout import RolloutConfig
from research.toyenv import JudgeCache, PlanJudge, corpus_tasks, cpu_size, make_tasks, toy_tokenizer
from research.toyenv.rollout import ToyEnv, make_sampler

from .._distributed import agree, local_model
from .._mesh import AXES, MeshConfig, MeshError, build_mesh
from .agent_env import AgentEnv
from .config import PipelineConfig
from .shares import SharedEnv, share_rollout, split_env


class DeadlineReached(Exception):
    """The pipeline's time budget ran out; the stage in progress checkpoints what it has."""


def build_policy(spec: models.ModelSpec, vocab: int):
    """A fresh policy for ``spec`` (random init of ``arch``, or a local HF checkpoint), checked to cover
    the toy vocabulary (ids beyond it are never in a prompt; sampled ones make an invalid plan)."""
    if spec.checkpoint:
        model, cfg = models.load_hf(spec.checkpoint, **spec.runtime())
    else:
        cfg = dataclasses.replace(spec.arch, **spec.runtime())
        model = models.init_model(cfg, spec.seed)
    if cfg.vocab_size < vocab:
        raise ValueError(
            f"model vocabulary {cfg.vocab_size} < the toy vocabulary {vocab}: the toy environment's token "
            "ids would be out of range (use model=toy or a checkpoint with a larger vocabulary)"
        )
    return model


class Runtime:
    def __init__(self, cfg: PipelineConfig, judge=None, eval_judge=None, client=None):
        self.cfg = cfg
        self.timings: dict[str, float] = {"weight_swap_s": 0.0}
        if cfg.model.attention_impl == "cudnn" and jax.default_backend() != "gpu":
            raise ValueError(
                f"model.attention_impl=cudnn needs a GPU (JAX runs on {jax.default_backend()}): "
                "set model.attention_impl=xla (preset=agent_cpu and preset=toy_cpu do)"
            )
        # Every learner and sampler of the run shares this mesh (None: one device); checked before any
        # stage starts so a bad size fails in one line, not inside a jitted update.
        self.mesh = build_mesh(cfg.mesh)
        if self.mesh is not None:
            cfg.check_mesh_rows(MeshConfig(*(self.mesh.shape[a] for a in AXES)))
        self.process, processes = jax.process_index(), jax.process_count()
        if processes > 1 and cfg.overlap.enabled:
            # the rollout thread's weight gathers (collectives) would race the learner's in the main thread
            raise MeshError(
                f"overlap.enabled=true needs one JAX process, got {processes}: "
                "set overlap.enabled=false for a run over several processes"
            )
        if processes > 1 and self.mesh is None:
            # one learner per process would train alone (and Orbax would write its shards from each)
            raise MeshError(
                f"{processes} JAX processes: the learners need a mesh over every process's devices "
                "(set mesh, e.g. mesh=auto)"
            )
        # the samplers' local copy of the weights (several processes): over this process's devices
        local = jax.local_devices() if processes > 1 else []
        self.local_mesh = models.make_mesh(1, -1, 1, devices=local) if len(local) > 1 else None
        self.out = Path(cfg.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.deadline = None if cfg.time_budget_s is None else time.monotonic() + cfg.time_budget_s
        self._samplers: dict[tuple, models.Sampler] = {}
        self._start_error: BaseException | None = None
        self.client = None
        self.train_tasks: set[str] | None = None  # a study protocol's train task ids (env=agent)
        if cfg.env == "agent":
            self._agent_env(client)
            return
        self.tokenizer = toy_tokenizer()
        self.pad_id = self.tokenizer.pad_id
        self.template = None
        self.taskset = make_tasks(cfg.tasks)
        splits = {s: self.taskset.split(s) for s in ("train", "test", "heldout_category")}
        self.client = None
        interim = None  # the judge of evaluations before the last stage's (see EvalConfig.cache_until_final)
        if judge is None:
            self.client = SandboxClient(cfg.sandbox)
            # Workers import torch for seconds: start them while pretraining / compilation runs.
            self._starter = threading.Thread(target=self._start_client, daemon=True)
            self._starter.start()
            cache = JudgeCache(self._own(self.out / cfg.judge_cache)) if cfg.judge_cache else None
            judge = PlanJudge(self.client, cfg.judge, cache)
            eval_cfg = cfg.eval.judge or cfg.judge
            eval_cache = cache if (not cfg.eval.fresh and eval_cfg == cfg.judge) else None
            eval_judge = PlanJudge(self.client, eval_cfg, eval_cache)
            if cfg.eval.fresh and cfg.eval.cache_until_final and cfg.judge_cache:
                path = self.out / cfg.judge_cache
                interim = PlanJudge(
                    self.client, eval_cfg, JudgeCache(self._own(path.with_name(path.stem + "_eval.jsonl")))
                )
        self.env = split_env(ToyEnv(splits, judge, self._judge_size))
        self.eval_env = split_env(ToyEnv(splits, eval_judge or judge, self._judge_size))
        self.interim_eval_env = (
            split_env(ToyEnv(splits, interim, self._judge_size)) if interim else self.eval_env
        )

    def _own(self, path: Path) -> Path:
        """A file this process appends to: its own beside process 0's (appends of several hosts to one
        file on a shared filesystem may interleave)."""
        p = self.process
        return path if p == 0 else path.with_name(f"{path.stem}.process{p}{path.suffix}")

    @property
    def shares(self) -> int:
        """Into how many shares rollouts are split (the JAX processes; 1: not split)."""
        return self.env.count if isinstance(self.env, SharedEnv) else 1

    def _agent_env(self, client=None) -> None:
        """The agent loop's environment: the learner's tokenizer and chat template (the checkpoint's own;
        the bundled tokenizer gets ``TINY_TEMPLATE``, a Qwen2.5-shaped template with tools), the tasks of
        ``cfg.tasks`` by split and one sandbox client for tools and final verdicts (``client``: a test's)."""
        cfg, spec = self.cfg, self.cfg.model
        tok_dir = spec.tokenizer or spec.checkpoint
        self.tokenizer = models.load_tokenizer(tok_dir) if tok_dir else models.default_tokenizer()
        self.template = None if tok_dir else TINY_TEMPLATE
        self.chat = ChatFormat(self.tokenizer, self.template)  # fails here, in one line, without ChatML
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.tokenizer.eos_token_id)
        self.client = client or SandboxClient(cfg.sandbox)
        self._own_client = client is None
        # problems written per process (another process may be reading its copy while this one writes)
        root = self.out if self.process == 0 else self.out / f"process{self.process}"
        tasks = load_tasks(cfg.tasks, root, self._device)
        splits: dict[str, list] = {}
        for t in tasks:
            splits.setdefault(t.split, []).append(t)
        if cfg.tasks.protocol:  # the study's splits: the test splits never reach the environment
            splits = protocol_splits(tasks, load_protocol(cfg.tasks.protocol), TRAINING_SPLITS)
        # with a protocol, SFT clones demos of train tasks only (None: every demo)
        self.train_tasks = {t.id for t in splits["train"]} if cfg.tasks.protocol else None
        draw = ("train",) if cfg.tasks.protocol else None
        env = AgentEnv(splits, self.client, cfg.judge, self.tokenizer, self.template, cfg.agent, draw)
        self.env = split_env(env)
        eval_cfg = cfg.eval.judge or cfg.judge
        eval_env = AgentEnv(splits, self.client, eval_cfg, self.tokenizer, self.template, cfg.agent, draw)
        self.eval_env = split_env(eval_env)
        self.interim_eval_env = self.eval_env

    def _device(self) -> str | None:
        self.client.start()
        return self.client.device

    def restore_actor(self, path: str):
        """A stage's actor: a ``models`` checkpoint, or the Hugging Face checkpoint a run started from
        (restored onto the run's mesh with the model spec's runtime settings)."""
        if not (Path(path) / "model.json").is_file() and (Path(path) / "config.json").is_file():
            model, _ = models.load_hf(path, mesh=self.mesh, **self.cfg.model.runtime())
            return model
        return models.restore_checkpoint(path, mesh=self.mesh)

    def _start_client(self):
        try:
            self.client.start()
        except BaseException as exc:  # reported by the first judge call, which starts it again
            self._start_error = exc

    def _judge_size(self, task):
        if self.client is None:
            return task
        self.client.start()
        return cpu_size(task, self.cfg.cpu_task_rows) if self.client.device == "cpu" else task

    def corpus_tasks(self):
        held = self.taskset.split("test") + self.taskset.split("heldout_category")
        return corpus_tasks(self.cfg.tasks, self.cfg.pretrain.num_corpus_tasks, avoid=held)

    def sampler(self, model, rollout: RolloutConfig) -> models.Sampler:
        """The sampler of ``rollout``'s shapes (of one share's, rollouts split over processes) holding
        ``model``'s current parameters (a local copy when they span processes; the swap is timed:
        ``timings['weight_swap_s']``)."""
        rollout = share_rollout(rollout, self.shares)
        key = (rollout.episodes, rollout.max_context)
        t0 = time.perf_counter()
        model = local_model(model, self.local_mesh)  # itself in one process
        if key not in self._samplers:
            make = self.env.make_sampler if self.cfg.env == "agent" else make_sampler
            self._samplers[key] = make(model, rollout)
        else:
            self._samplers[key].set_model(model)
        self.timings["weight_swap_s"] = time.perf_counter() - t0
        return self._samplers[key]

    def check_deadline(self) -> None:
        left = self.seconds_left()
        if left is not None and left < 0:
            raise DeadlineReached()

    def seconds_left(self) -> float | None:
        """Process 0's reading with several processes (they stop at the same step, or a collective hangs)."""
        return None if self.deadline is None else agree(self.deadline - time.monotonic())

    def close(self) -> None:
        if self.client is not None and getattr(self, "_own_client", True):
            self.client.close()
