"""research.agent: the ReAct agent loop of CUDA Agent (reason -> tool call -> observation) over our sandbox.

    from research.agent import RunConfig, run_agent
    summary = run_agent(RunConfig(policy=OpenAIPolicyConfig(model="m", base_url=URL)))

- ``run_episode`` runs one task in a ``kernels_env.session.WorkspaceSession`` under budgets (turns, context
  tokens, wall time, bytes per observation) and ends with a stated reason; the reward is ALWAYS a fresh full
  evaluation of the workspace (``WorkspaceSession.evaluate``), never earlier tool output.
- Tools (``TOOL_SPECS``, one JSON schema for every policy): list_files, read_file, write_file, edit_file,
  compile, verify, benchmark, profile, sanitize, roofline, skill, submit; errors are observations.
- Skills (``SkillLibrary``): an optimisation guide and verified example kernels, BM25-retrieved; off by
  config (``AgentConfig.skills``).
- Policies (``make_policy``; by name in ``POLICIES``, each with its own config, e.g. ``OpenAIPolicyConfig``;
  ``policy_config(name, **settings)``): ``openai`` (any OpenAI-compatible endpoint), ``flax`` (our decoder,
  token-in-token-out, batched generation, KV cache kept across turns), ``scripted``, ``toy`` (the RL
  pipeline's toy plan policy: plans rendered into Triton, written and benchmarked through the tools).
- Tasks (``load_tasks``): KernelBench-format problems under a directory, ``research.data`` datasets
  (a synthesis output, JSONL or Parquet: ``tasks.source=data``), or toy tasks of ``research.toyenv``
  written as such problems (``tasks.source=toy``); each task has a split.
- ``run_agent`` runs a task set concurrently and writes results.jsonl, trajectories.jsonl (one
  ``research.rollout.Trajectory.to_dict()`` per episode with its messages, offered tools, per-turn tool calls
  and verdicts, end reason and timings; tokens for token policies: what RL and cold-start SFT consume) and
  summary.json (Table 1 per level); it resumes.

May import: the standard library, numpy, ``models`` (the Flax and toy policies), ``research.toyenv`` (toy
tasks and the toy policy), ``research.data`` (dataset tasks), ``research.rollout`` (token trajectories),
``openai``, ``bm25s``, ``tqdm`` and the sandbox only through ``kernels_env.client``, ``kernels_env.session``
and ``kernels_env.rules.messages``. Never imports hydra/omegaconf (the entry point: ``experiments/agent.py``).
"""

from .actions import Action, ToolCall
from .config import (
    AgentConfig,
    AgentConfigError,
    Budgets,
    FlaxPolicyConfig,
    GenerationConfig,
    OpenAIPolicyConfig,
    PolicyConfig,
    RunConfig,
    ScriptedPolicyConfig,
    TasksConfig,
    ToyPolicyConfig,
)
from .episode import EpisodeResult, run_episode
from .policies import (
    POLICIES,
    ChatFormat,
    Policy,
    PolicyEpisode,
    ScriptedPolicy,
    make_policy,
    parse_tool_calls,
    policy_config,
)
from .prompts import extract_code
from .runner import read_jsonl, run_agent
from .skills import Skill, SkillLibrary
from .summary import format_table1, table1
from .task_sources import load_tasks
from .tasks import Task, find_tasks
from .tools import TOOL_NAMES, TOOL_SPECS, ToolBox, ToolResult, tool_specs

__all__ = [
    "TOOL_NAMES",
    "TOOL_SPECS",
    "Action",
    "AgentConfig",
    "AgentConfigError",
    "Budgets",
    "ChatFormat",
    "EpisodeResult",
    "Policy",
    "FlaxPolicyConfig",
    "GenerationConfig",
    "OpenAIPolicyConfig",
    "POLICIES",
    "PolicyConfig",
    "ScriptedPolicyConfig",
    "ToyPolicyConfig",
    "policy_config",
    "PolicyEpisode",
    "RunConfig",
    "ScriptedPolicy",
    "Skill",
    "SkillLibrary",
    "Task",
    "TasksConfig",
    "ToolBox",
    "ToolCall",
    "ToolResult",
    "extract_code",
    "find_tasks",
    "load_tasks",
    "format_table1",
    "make_policy",
    "parse_tool_calls",
    "read_jsonl",
    "run_agent",
    "run_episode",
    "table1",
    "tool_specs",
]
