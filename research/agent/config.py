"""Typed configs of the agent loop (filled from Hydra by ``experiments/agent.py``; plain dataclasses here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernels_env.client import JudgeConfig, SandboxConfig

TASK_SOURCES = ("dir", "toy", "data")
MODES = ("agentic", "single_turn")
GENERATION_BACKENDS = ("sampler", "engine")


class AgentConfigError(ValueError):
    """A config value the agent loop cannot run with."""


@dataclass
class Budgets:
    """When an episode ends if the policy never submits (CUDA Agent: 150 turns in training, 200 in
    evaluation; 128K context). ``max_observation_bytes``: one tool result, truncated with a note beyond."""

    max_turns: int = 200
    max_context_tokens: int = 131_072
    max_wall_s: float = 3600.0
    max_observation_bytes: int = 8_192

    def __post_init__(self):
        for name in ("max_turns", "max_context_tokens", "max_wall_s", "max_observation_bytes"):
            if getattr(self, name) <= 0:
                raise AgentConfigError(f"agent budget {name} must be > 0, got {getattr(self, name)}")


@dataclass
class AgentConfig:
    """The loop: budgets, skills on/off (the paper's missing ablation), agentic or single-turn, how many
    episodes run at once, and how many results the skill tool returns. The default budgets are CUDA Agent's
    evaluation budgets (up to 200 turns, 128K context): ``agent=eval`` of the Hydra entry points."""

    max_turns: int = 200
    max_context_tokens: int = 131_072
    max_wall_s: float = 3600.0
    max_observation_bytes: int = 8_192
    skills: bool = True
    skill_results: int = 3
    mode: str = "agentic"
    concurrency: int = 8
    seed: int = 0

    def __post_init__(self):
        if self.mode not in MODES:
            raise AgentConfigError(f"agent.mode must be one of {MODES}, got {self.mode!r}")
        if self.concurrency < 1 or self.skill_results < 1:
            raise AgentConfigError("agent.concurrency and agent.skill_results must be >= 1")
        Budgets(self.max_turns, self.max_context_tokens, self.max_wall_s, self.max_observation_bytes)

    @property
    def budgets(self) -> Budgets:
        return Budgets(self.max_turns, self.max_context_tokens, self.max_wall_s, self.max_observation_bytes)


@dataclass
class GenerationConfig:
    """How the Flax policy generates (``policy.generation`` of ``experiments.agent`` / ``study``,
    ``agent.generation`` of ``experiments.train env=agent``). The defaults live here only.

    ``backend=sampler``: ``models.Sampler``, the waiting episodes' turns as one batched call (lockstep in RL),
    each episode's KV cache kept across turns. ``backend=engine``: ``models.Engine`` (docs/models.md
    "Rollout engine"): ``num_slots`` sequences decode together, ``segment_steps`` steps per host round trip,
    over one pool of ``kv_budget_tokens`` KV positions in pages of ``page_size``; each turn continues the
    episode's kept pages (only the observation is prefilled), an episode frees its pages when it ends, and
    the k episodes of one task share their prompt's prefill when admitted together. Greedy trajectories
    equal the sampler's; a sampled turn draws from its episode's own key (the same whatever the
    concurrency or slot). The pool must hold one whole context (context budget + ``max_tokens``) and should
    hold every live episode's: a turn that cannot get pages waits for others to end."""

    backend: str = "sampler"
    num_slots: int = 8
    page_size: int = 16
    kv_budget_tokens: int = 65_536
    segment_steps: int = 16

    def __post_init__(self):
        if self.backend not in GENERATION_BACKENDS:
            raise AgentConfigError(
                f"generation.backend must be one of {GENERATION_BACKENDS}, got {self.backend!r}"
            )
        for name in ("num_slots", "page_size", "kv_budget_tokens", "segment_steps"):
            if getattr(self, name) < 1:
                raise AgentConfigError(f"generation.{name} must be >= 1, got {getattr(self, name)}")

    def engine_config(self, max_len: int, where: str = "policy"):
        """The ``models.EngineConfig`` of contexts up to ``max_len`` tokens (prompt + every turn's output);
        an ``AgentConfigError`` naming ``where.generation`` when its pool cannot hold one."""
        import models

        pages, have = -(-max_len // self.page_size), self.kv_budget_tokens // self.page_size
        if pages > have:
            raise AgentConfigError(
                f"{where}.generation.kv_budget_tokens={self.kv_budget_tokens} ({have} "
                f"pages of {self.page_size}) cannot hold one context of {max_len} tokens (context budget + "
                f"max tokens per turn = {pages} pages): raise it or lower the context budget"
            )
        return models.EngineConfig(
            num_slots=self.num_slots,
            page_size=self.page_size,
            kv_budget_tokens=self.kv_budget_tokens,
            max_seq_len=max_len,
            segment_steps=self.segment_steps,
        )


@dataclass
class PolicyConfig:
    """The base of every policy's typed config: ``name`` is the policy it configures (its registered name,
    ``research.agent.POLICIES``). Each policy's dataclass below is the one home of its defaults
    (``conf/policy/<name>.yaml`` selects it and keeps only what differs)."""

    name: str = ""

    def __post_init__(self):
        own = type(self).__dataclass_fields__["name"].default
        if self.name != own:
            raise AgentConfigError(f"{type(self).__name__} configures policy={own}, got name={self.name!r}")

    def _at_least(self, **bounds: float) -> None:
        for key, low in bounds.items():
            if (value := getattr(self, key)) < low:
                raise AgentConfigError(f"policy={self.name}: {key} must be >= {low}, got {value}")

    def check(self) -> None:
        """The settings without a usable default that the policy needs (checked when it is built)."""


# Alike in shape (model, temperature, max_tokens, seed), each policy's config is its own: defaults differ.
@dataclass
class OpenAIPolicyConfig(PolicyConfig):
    """Any OpenAI-compatible chat-completions endpoint with tool calling (frontier API, vLLM, SGLang).
    ``model``: the served model's name (required); ``api_key_env``: the environment variable holding the
    key (never the key itself); ``max_retries`` with exponential ``backoff_s`` on 429/5xx/connection
    errors; ``max_tokens`` per turn."""

    name: str = "openai"
    model: str = ""
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.7
    max_tokens: int = 8192
    timeout_s: float = 600.0
    max_retries: int = 5
    backoff_s: float = 2.0
    seed: int = 0

    def __post_init__(self):
        super().__post_init__()
        self._at_least(max_tokens=1, temperature=0, max_retries=0)

    def check(self) -> None:
        if not self.model:
            raise AgentConfigError("policy=openai needs policy.model (the served model's name)")


@dataclass
class FlaxPolicyConfig(PolicyConfig):
    """Our Flax decoder, token-in-token-out. ``model``: ``tiny``, ``qwen2_0_5b_random`` or a Hugging Face
    checkpoint directory; ``tokenizer`` ("": the checkpoint's, the bundled one and our template for the
    random models), ``dtype``, ``batch_buckets``, ``max_wait_s`` (how long a batch waits for more episodes
    to ask), ``keep_cache`` (multi-turn KV cache), ``generation`` (:class:`GenerationConfig`: ``sampler`` |
    ``engine``, e.g. ``policy.generation.backend=engine policy.generation.kv_budget_tokens=262144``)."""

    name: str = "flax"
    model: str = "tiny"
    tokenizer: str = ""
    dtype: str = "bfloat16"
    temperature: float = 0.7
    max_tokens: int = 1024
    batch_buckets: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64])
    max_wait_s: float = 0.05
    keep_cache: bool = True
    seed: int = 0
    generation: GenerationConfig = field(default_factory=GenerationConfig)

    def __post_init__(self):
        super().__post_init__()
        self._at_least(max_tokens=1, temperature=0)


@dataclass
class ScriptedPolicyConfig(PolicyConfig):
    """Replays tool calls (tests, demos, debugging): ``script``, a JSON file with a list of tool calls
    ``{"name", "arguments"}`` (or a list of such lists, one per task in order)."""

    name: str = "scripted"
    script: str = ""

    def check(self) -> None:
        if not self.script:
            raise AgentConfigError("policy=scripted needs policy.script (a JSON list of tool calls)")


@dataclass
class ToyPolicyConfig(PolicyConfig):
    """The toy plan policy of the RL pipeline on toy tasks (``tasks.source=toy`` only). ``model``: a
    ``models`` checkpoint directory ("": the shipped ``research/toyenv/assets/toy_policy``); ``turns``: plans
    at most per episode (the toy environment's ``RolloutConfig.turns``); ``max_tokens``: a plan without
    <eos> within this many tokens is not a plan; ``max_context``: the sampler's context bucket; temperature
    0 is greedy (the RL pipeline's evaluation)."""

    name: str = "toy"
    model: str = ""
    turns: int = 2
    temperature: float = 0.0
    max_tokens: int = 32
    max_context: int = 128
    seed: int = 0

    def __post_init__(self):
        super().__post_init__()
        self._at_least(max_tokens=1, temperature=0, turns=1, max_context=8)


@dataclass
class TasksConfig:
    """Where the run's tasks come from (``source``) and which of them run. Every task has a split; ``split``
    picks splits (comma-separated, e.g. ``train,val``; "": all the source has, toy: ``toy_split``) and
    ``limit`` (0: all) caps each picked split after a deterministic order.

    ``source=dir``: KernelBench-format problems under ``problems_dir`` (recursive; ``level1/``-style
    folders or ``level_1`` in a path give the level). A folder named ``train``, ``val`` or ``test`` below
    ``problems_dir`` (or ``problems_dir`` itself) gives the split, else ``split_name``: so a directory of
    data tasks written by a run (``<out_dir>/problems/<split>/``) loads back with its splits.

    ``source=data``: records of ``research.data`` at ``path``: a ``python -m experiments.synthesize`` output
    directory (its ``tasks.jsonl``), or a JSONL/JSON/Parquet file (or a directory of them) read by
    ``research.data.load_dataset`` with the column map ``columns`` (record field -> column: ``source``,
    ``id``, ``ops``, ``category``, ``level``, ``split`` or any other record field; a column named like a
    record field is that field unless mapped). Each record is written as a problem under
    ``<out_dir>/problems/<split>/<name>.py``; in CPU mode at its ``proxy_sizes`` (records without them as
    they are).

    ``source=toy``: the first ``limit`` tasks of each picked split (default ``toy_split``) of
    ``research.toyenv.make_tasks`` (task seed ``toy_seed``, held-out category ``toy_heldout_category``), each
    reference written as a KernelBench-format problem under ``<out_dir>/problems/`` (in CPU mode at
    ``cpu_size(task, cpu_rows)``, the size the RL pipeline judges there). ``limit`` must be > 0.

    ``protocol``: a study protocol (``research.evaluation`` ``protocol.json``) over this source's tasks: its
    splits (``train``, ``dev``, ``test_seen``, ``test_heldout``) replace the source's own, each task checked
    against the source hash the protocol recorded (``research.agent.protocol_splits``)."""

    source: str = "dir"
    problems_dir: str = "examples/problems"
    pattern: str = "*.py"
    limit: int = 0
    split: str = ""
    split_name: str = "train"
    path: str = ""
    columns: dict[str, str] = field(default_factory=dict)
    toy_split: str = "heldout_category"
    toy_seed: int = 0
    toy_heldout_category: str = "normalization"
    cpu_rows: int = 6
    protocol: str = ""

    def __post_init__(self):
        if self.source not in TASK_SOURCES:
            raise AgentConfigError(f"tasks.source must be one of {TASK_SOURCES}, got {self.source!r}")
        if self.limit < 0:
            raise AgentConfigError(f"tasks.limit must be >= 0 (0: all), got {self.limit}")
        if self.source == "toy" and self.limit < 1:
            raise AgentConfigError("tasks.source=toy needs tasks.limit >= 1 (how many toy tasks)")
        if self.source == "data" and not self.path:
            raise AgentConfigError(
                "tasks.source=data needs tasks.path (a .jsonl/.parquet dataset or a synthesis output dir)"
            )
        if not self.split_name.strip() or "/" in self.split_name:
            raise AgentConfigError(f"tasks.split_name must be a folder name, got {self.split_name!r}")

    @property
    def splits(self) -> list[str]:
        """The picked splits in the order given; empty: all."""
        return list(dict.fromkeys(s.strip() for s in self.split.split(",") if s.strip()))


@dataclass
class RunConfig:
    """One agent run over a task set: writes results.jsonl, trajectories.jsonl and summary.json into
    ``out_dir`` and resumes (tasks already in results.jsonl are skipped)."""

    policy: PolicyConfig = field(default_factory=ScriptedPolicyConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    out_dir: str = "outputs/agent"
    resume: bool = True
    progress: bool = True
