"""Options shared by the subcommands, and how they fill the config dataclasses."""

from __future__ import annotations

import argparse

from ..rules.config import JudgeConfig, SandboxConfig


def add_sandbox_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sandbox")
    g.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default: auto")
    g.add_argument("--cache-dir", default=SandboxConfig.cache_dir, help="baselines and build caches")
    g.add_argument("--compile-workers", type=int, default=SandboxConfig.num_compile_workers)
    g.add_argument("--compile-timeout", type=float, default=SandboxConfig.compile_timeout_s, help="seconds")
    imports = "seconds to import reference and solution, builds excluded"
    g.add_argument("--import-timeout", type=float, default=SandboxConfig.import_timeout_s, help=imports)
    g.add_argument("--run-timeout", type=float, default=SandboxConfig.run_timeout_s, help="seconds")
    g.add_argument("--memory-limit-gb", type=float, default=SandboxConfig.memory_limit_gb)


def add_judge_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("judge")
    g.add_argument("--protocol", default="kernelbench", help="kernelbench (default) | cuda_agent")
    g.add_argument("--policy", default="strict", help="strict (default) | cuda_agent | kernelbench")
    g.add_argument("--reward", default="cuda_agent", help="cuda_agent | binary | speedup | log_speedup")
    g.add_argument("--num-trials", type=int, default=None, help="default: the protocol's")
    g.add_argument("--baselines", default="eager,compile,max-autotune", help="comma-separated baseline modes")
    g.add_argument("--no-timing", action="store_true", help="correctness only")


def sandbox_config(args: argparse.Namespace) -> SandboxConfig:
    return SandboxConfig(
        device=args.device,
        cache_dir=args.cache_dir,
        num_compile_workers=args.compile_workers,
        compile_timeout_s=args.compile_timeout,
        import_timeout_s=args.import_timeout,
        run_timeout_s=args.run_timeout,
        memory_limit_gb=args.memory_limit_gb,
    )


# not shared with sandbox_config: alike only as field-by-field copies of options into another dataclass
def judge_config(args: argparse.Namespace) -> JudgeConfig:
    return JudgeConfig(
        protocol=args.protocol,
        policy=args.policy,
        reward=args.reward,
        num_trials=args.num_trials,
        baselines=[m.strip() for m in args.baselines.split(",") if m.strip()],
        time_candidate=not args.no_timing,
    )
