"""Typed configuration of the sandbox and of batch evaluation (filled from Hydra by ``experiments``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SandboxConfig:
    """Where and how candidates run. ``device='auto'`` picks CUDA when a GPU is visible, else CPU mode."""

    device: str = "auto"  # auto | cpu | cuda
    num_gpu_workers: int = 0  # 0: one worker per visible GPU (one in CPU mode)
    # Run workers sharing each GPU (CPU mode: the CPU), each with its standby. More than 1 overlaps their
    # non-timing work (imports, correctness checks, torch.compile code generation) and lets a crash, hang or
    # restart stall one of N workers instead of the GPU's only one; timed measurements stay exclusive under
    # ``exclusive_timing``. Each plans with 1/N of the device's memory.
    run_workers_per_gpu: int = 1
    # With run_workers_per_gpu > 1: every timed measurement (candidates, baselines, inductor autotuning) and
    # every profile/sanitize tool holds its GPU alone, through a cross-process lock per GPU, while the
    # workers' other work (imports, correctness checks, torch.compile code generation) overlaps; timings are
    # then as comparable as with one worker (docs/sandbox.md, "Several run workers per GPU"). False: no lock,
    # the workers' timings disturb each other (verdicts say so, baselines are cached apart): for soaks and
    # correctness-only runs that time nothing. No effect with one run worker per GPU.
    exclusive_timing: bool = True
    # The GPUs run workers use, as CUDA ordinals of this process (indices into CUDA_VISIBLE_DEVICES when
    # set); None: every visible GPU. Lets a learner keep others to itself (research DevicesConfig).
    gpus: list[int] | None = None
    num_compile_workers: int = 2
    compile_timeout_s: float = 300.0  # the compile stage: importing the solution and every build it runs
    import_timeout_s: float = 60.0  # importing reference and solution, time in builds (nvcc, ninja) excluded
    run_timeout_s: float = 120.0
    baseline_timeout_s: float = 900.0  # torch.compile max-autotune of a reference can take minutes
    startup_timeout_s: float = 180.0  # a worker that is not ready by then is an infrastructure error
    memory_limit_gb: float = 16.0  # host memory (RSS, worker and its children) before it is killed
    cache_dir: str = "~/.cache/cuda_agent_jax"
    cuda_arch: str = "auto"  # auto: the GPU's compute capability (CPU mode: 9.0), else e.g. "9.0"
    max_requests_per_worker: int = 500  # recycle a run worker after this many requests (0: never)
    standby_run_workers: bool = True  # a started twin per run worker replaces it at once after a crash
    # profile: each run worker keeps its next profiling process started, past torch's import (~3 s less per
    # call after the first; kernels_env.tools._prestart). False: every profile starts a fresh process.
    prestart_profiler: bool = True
    # Where the workers run: "local" (processes on this machine) or "ray" (one Ray actor per run worker and
    # per compile worker, placed by GPU/CPU resources on a Ray cluster; docs/sandbox.md, "Ray cluster").
    backend: str = "local"
    ray_address: str | None = None  # None: an initialised Ray, else $RAY_ADDRESS, else start a local Ray
    ray_namespace: str = "kernels_env"
    ray_run_actors: int = 0  # 0: num_gpu_workers, else one per GPU of the cluster (CPU mode: one)
    ray_cpus_per_actor: float = 1.0  # CPU resource each actor reserves (GPU run actors also take one GPU)

    def default_in_flight(self) -> int:
        """Requests worth keeping in flight when nothing else says: one per compile worker and per run worker
        (of ``num_gpu_workers`` GPUs, at least one), plus one waiting, so that no worker idles."""
        return self.num_compile_workers + max(self.num_gpu_workers, 1) * self.run_workers_per_gpu + 1


@dataclass
class TimingConfig:
    """How candidates and baselines are timed (CUDA events, L2 flush, rotated input sets)."""

    warmup_iters: int = 3
    min_iters: int = 20
    max_iters: int = 200
    target_time_s: float = 0.5  # keep timing until this much measured time (within min/max iters)
    num_input_sets: int = 3  # fresh input sets rotated across timed calls
    l2_flush: bool = True  # write a buffer of 2x the device's L2 before every timed call
    # nvbench-style noise criterion: while IQR/median exceeds max_spread, keep sampling (up to stabilize_s
    # more seconds), so a transient (clock ramp, a neighbour's burst) cannot own a quarter of the samples.
    max_spread: float = 0.02
    stabilize_s: float = 1.0


@dataclass
class JudgeConfig:
    """What judges a candidate: protocol (how correctness is checked), policy (what it may do), reward.

    ``None`` fields take the protocol's value (see ``kernels_env.rules.protocols``).
    """

    protocol: str = "kernelbench"  # kernelbench | cuda_agent
    policy: str = "strict"  # strict | cuda_agent | kernelbench
    reward: str = "cuda_agent"  # name in the reward registry
    num_trials: int | None = None
    weight_sync: str | None = None  # seed | state_dict | auto (state_dict when names match, else seed)
    mode: str | None = None  # train | eval
    order: str | None = None  # alternate | reference_first | candidate_first
    atol: float | None = None  # overrides every dtype's tolerance
    rtol: float | None = None
    input_family: str = "random"  # name in the input-family registry (kernels_env.judge.check.inputs)
    families: list[str] | None = None  # adversarial families after the trials (None: the protocol's; [] none)
    fatal_families: list[str] | None = None  # families whose failure is 'incorrect' (None: the protocol's)
    time_candidate: bool = True  # False: correctness only (no timings, speedups or speed tiers)
    # Device memory (GiB) the judge plans a request with (timing sets, which families run; judge.memory_plan)
    # when it is less than what the device has free; None: the device's free memory.
    memory_budget_gb: float | None = None
    baselines: list[str] = field(default_factory=lambda: ["eager", "compile", "max-autotune"])
    # compute-sanitizer racecheck on a correct GPU verdict (judge.assemble.race_probe): "top_tier" (only
    # when the candidate beat every measured baseline by the reward's margin: where a race that passes under
    # typical scheduling would be paid most), "always", or "off". One extra forward under the sanitizer.
    race_check: str = "top_tier"
    timing: TimingConfig = field(default_factory=TimingConfig)


@dataclass
class BatchConfig:
    """Evaluate every solution in ``solutions_dir`` against its problem in ``problems_dir``."""

    problems_dir: str = "examples/problems"
    solutions_dir: str = "examples/solutions"
    out_dir: str = "."  # experiments set this to the Hydra run directory
    results_name: str = "results.jsonl"  # one result per line, resumable
    summary_name: str = "summary.json"
    plot_name: str = "speedups.png"
    resume: bool = True
    progress: bool = True
    plot: bool = True
    max_in_flight: int = 0  # requests submitted at once (0: sandbox.default_in_flight())
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
