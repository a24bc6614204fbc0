"""Judge protocols by name: how correctness is checked (weight sync, train/eval, trials, tolerances, order).

``kernelbench`` follows ScalingIntelligence/KernelBench (seed replay, train mode, fp32 atol=rtol=1e-4, half
1e-2); ``cuda_agent`` follows CUDA Agent's verifier (state_dict copy, eval mode, 1e-2). Both go beyond their
originals in the same way: trials alternate candidate-first and reference-first order, and adversarial input
families run after the trials. ``resolve`` merges a protocol, a policy and a ``JudgeConfig`` into the plain
dict that travels to the worker and into the result.

Which families are fatal (the rule, the same for both protocols): a family is fatal when every correct
implementation of the task's math must agree with the reference there within the protocol's tolerance *and* it
exposes a known hack: ``zeros`` and ``negative`` (answers that only fit the task's input range, degenerate
constants), ``large`` (overflow-unsafe or half-precision internals; compared relative to magnitude), ``shape``
and ``init_args`` (sizes or hyper-parameters baked in, catalogue #11). ``nan_inf`` and ``denormal`` are
reported, not fatal: legitimate fast kernels differ from PyTorch there (``fmaxf`` and Triton's default
``maximum`` drop NaNs; fast-math flushes subnormals). ``noncontig`` is opt-in (KernelBench never passes such
views).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ._registry import Registry
from .config import JudgeConfig
from .policies import get_policy
from .rewards import get_reward

WEIGHT_SYNCS = ("seed", "state_dict", "auto")
MODES = ("train", "eval")
ORDERS = ("alternate", "reference_first", "candidate_first")  # alternate: candidate first on even trials
FAMILIES = ("nan_inf", "denormal", "large", "zeros", "negative", "shape", "noncontig", "init_args")
DEFAULT_FAMILIES = ("nan_inf", "denormal", "large", "zeros", "negative", "shape", "init_args")
FATAL_FAMILIES = ("zeros", "negative", "large", "shape", "init_args")
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")  # other dtypes (int, bool) compare exactly
BASELINE_MODES = ("eager", "compile", "max-autotune")


@dataclass(frozen=True)
class JudgeProtocol:
    name: str
    description: str
    weight_sync: (
        str  # seed: seed replay before each constructor; state_dict: copy; auto: state_dict if names match
    )
    mode: str
    num_trials: int = 5
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)  # dtype -> (atol, rtol)
    default_tolerance: tuple[float, float] = (1e-4, 1e-4)  # float dtypes not listed
    order: str = "alternate"
    families: tuple[str, ...] = DEFAULT_FAMILIES  # adversarial families run after the trials
    fatal_families: tuple[str, ...] = FATAL_FAMILIES  # a failure of one of these: incorrect


# not shared with policies: alike only as registries filled with entries of their own dataclass
PROTOCOLS: Registry[JudgeProtocol] = Registry("judge protocol")


def register_protocol(protocol: JudgeProtocol) -> JudgeProtocol:
    return PROTOCOLS.register(protocol.name, protocol)


register_protocol(
    JudgeProtocol(
        name="kernelbench",
        description="KernelBench: seed replay, train mode, fp32 atol=rtol=1e-4, fp16/bf16 1e-2",
        weight_sync="seed",
        mode="train",
        tolerances={"float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)},
        default_tolerance=(1e-4, 1e-4),
    )
)
register_protocol(
    JudgeProtocol(
        name="cuda_agent",
        description="CUDA Agent: state_dict copy (seed replay when names differ), eval mode, atol=rtol=1e-2",
        weight_sync="auto",
        mode="eval",
        default_tolerance=(1e-2, 1e-2),
    )
)


def get_protocol(name: str) -> JudgeProtocol:
    return PROTOCOLS.get_named(name)


@dataclass(frozen=True)
class JudgeSettings:
    """The complete judge settings of one request: the protocol and policy, resolved against overrides.

    Sent to the worker as a dict (``to_dict``; also recorded in every result under ``judge``) and read back
    there with ``from_dict``: the judge's pipeline reads typed fields, never string keys."""

    protocol: str
    policy: str
    reward: str
    num_trials: int
    weight_sync: str
    mode: str
    order: str
    tolerances: dict[str, list[float]]  # dtype name -> [atol, rtol]
    input_family: str
    families: tuple[str, ...]
    fatal_families: tuple[str, ...]
    time_candidate: bool
    baselines: tuple[str, ...]
    timing: dict[str, Any]  # TimingConfig as a dict (the worker may shorten it on CPU)
    allow_tf32: bool
    device: str
    memory_budget_gb: float | None = None  # JudgeConfig.memory_budget_gb (kernels_env.judge.check.memory)
    # Run workers sharing the device (SandboxConfig.run_workers_per_gpu): the memory plan takes this one's
    # share of the device, and timings taken while it is above 1 are disturbed (and keyed apart) unless
    # ``timing_lock``: every timed measurement then held the device alone (kernels_env.host.gpu_lock).
    device_shared_by: int = 1
    timing_lock: bool = False
    race_check: str = "top_tier"  # JudgeConfig.race_check (kernels_env.judge.assemble.race_probe)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeSettings:
        fields = [f for f in dataclasses.fields(cls) if f.name in data or f.default is dataclasses.MISSING]
        missing = [f.name for f in fields if f.name not in data]
        if missing:
            raise ValueError(f"judge settings lack {missing}")
        values = {f.name: data[f.name] for f in fields}
        for name in ("families", "fatal_families", "baselines"):
            values[name] = tuple(values[name])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def resolve(
    judge: JudgeConfig, device: str, device_shared_by: int = 1, timing_lock: bool = False
) -> dict[str, Any]:
    """The complete judge settings for one request (also recorded in every result under ``judge``);
    ``device_shared_by``: the sandbox's run workers per device (``SandboxConfig.run_workers_per_gpu``);
    ``timing_lock``: they time under the GPU lock (``SandboxConfig.exclusive_timing``, shared devices)."""
    protocol = get_protocol(judge.protocol)
    policy = get_policy(judge.policy)
    get_reward(judge.reward)  # unknown names fail here, before any work
    tolerances = {dt: list(protocol.tolerances.get(dt, protocol.default_tolerance)) for dt in FLOAT_DTYPES}
    if (
        policy.fp32_tolerance_floor is not None
    ):  # a precision downgrade the policy allows needs a matching tolerance
        floor = policy.fp32_tolerance_floor
        tolerances["float32"] = [max(floor, t) for t in tolerances["float32"]]
    for dt, (atol, rtol) in tolerances.items():
        tolerances[dt] = [
            judge.atol if judge.atol is not None else atol,
            judge.rtol if judge.rtol is not None else rtol,
        ]
    settings = JudgeSettings(
        protocol=protocol.name,
        policy=policy.name,
        reward=judge.reward,
        num_trials=judge.num_trials if judge.num_trials is not None else protocol.num_trials,
        weight_sync=judge.weight_sync or protocol.weight_sync,
        mode=judge.mode or protocol.mode,
        order=judge.order or protocol.order,
        tolerances=tolerances,
        input_family=judge.input_family,
        families=tuple(judge.families if judge.families is not None else protocol.families),
        fatal_families=tuple(
            judge.fatal_families if judge.fatal_families is not None else protocol.fatal_families
        ),
        time_candidate=judge.time_candidate,
        baselines=tuple(judge.baselines),
        timing=dataclasses.asdict(judge.timing),
        allow_tf32=policy.allow_tf32,
        device=device,
        memory_budget_gb=judge.memory_budget_gb,
        device_shared_by=device_shared_by,
        timing_lock=timing_lock,
        race_check=judge.race_check,
    )
    _check(settings)
    return settings.to_dict()


RACE_CHECKS = ("off", "top_tier", "always")


def _check(s: JudgeSettings) -> None:
    if s.weight_sync not in WEIGHT_SYNCS:
        raise ValueError(f"weight_sync {s.weight_sync!r} is not one of {WEIGHT_SYNCS}")
    if s.mode not in MODES:
        raise ValueError(f"mode {s.mode!r} is not one of {MODES}")
    if s.order not in ORDERS:
        raise ValueError(f"order {s.order!r} is not one of {ORDERS}")
    bad = [f for f in [*s.families, *s.fatal_families] if f not in FAMILIES]
    if bad:
        raise ValueError(f"unknown input families {bad}; known: {FAMILIES}")
    if s.memory_budget_gb is not None and not s.memory_budget_gb > 0:
        raise ValueError(f"memory_budget_gb must be > 0 (or None), got {s.memory_budget_gb}")
    if s.race_check not in RACE_CHECKS:
        raise ValueError(f"race_check {s.race_check!r} is not one of {RACE_CHECKS}")
    if s.num_trials < 1:
        raise ValueError(f"num_trials must be >= 1, got {s.num_trials}")
    if s.device_shared_by < 1:
        raise ValueError(f"run_workers_per_gpu must be >= 1, got {s.device_shared_by}")
    if s.timing_lock and s.device_shared_by == 1:
        raise ValueError("timing_lock is for run workers sharing a device (run_workers_per_gpu > 1)")
    bad = [m for m in s.baselines if m not in BASELINE_MODES]
    if bad:
        raise ValueError(f"unknown baseline modes {bad}; known: {BASELINE_MODES}")
    t = s.timing
    if (
        not (1 <= t["min_iters"] <= t["max_iters"])
        or t["num_input_sets"] < 1
        or t["warmup_iters"] < 0
        or t.get("max_spread", 0) < 0
        or t.get("stabilize_s", 0) < 0
    ):
        raise ValueError(f"inconsistent timing settings {t}")
