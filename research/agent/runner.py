"""Many episodes over a task set: concurrent episode threads sharing one sandbox client and one policy
(the Flax policy batches their generation), results.jsonl / trajectories.jsonl appended as episodes end
(a rerun into the same directory resumes), summary.json with Table 1 per level, progress on the terminal."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from kernels_env.client import SandboxClient
from kernels_env.session import WorkspaceSession

from .config import RunConfig
from .episode import EpisodeResult, run_episode
from .policies import Policy, make_policy
from .skills import SkillLibrary
from .summary import format_table1, table1
from .task_sources import load_tasks
from .tasks import Task

log = logging.getLogger(__name__)
RESULTS, TRAJECTORIES, SUMMARY = "results.jsonl", "trajectories.jsonl", "summary.json"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL file; a torn last line (an interrupted write) is skipped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            log.warning("skipping a malformed line in %s", path)
    return out


def run_agent(
    cfg: RunConfig,
    *,
    policy: Policy | None = None,
    client: SandboxClient | None = None,
    pick: Callable[[list[Task]], list[Task]] | None = None,
) -> dict:
    """Run every task not yet in ``out_dir/results.jsonl``; returns the summary (also written). ``pick``:
    which of the loaded tasks run (e.g. a study protocol's split); None: all."""
    if policy is None:
        cfg.policy.check()  # a setting only the user can give, before any sandbox starts
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    own_policy, own_client = policy is None, client is None
    client = client or SandboxClient(cfg.sandbox, cfg.judge)
    try:
        tasks = load_tasks(cfg.tasks, out, lambda: _device(client))
        tasks = pick(tasks) if pick is not None else tasks
        policy = policy or make_policy(cfg.policy, cfg.agent.max_context_tokens)
        return _run(cfg, out, tasks, policy, client)
    finally:
        if own_policy and policy is not None:
            policy.close()
        if own_client:
            client.close()


def _device(client: SandboxClient) -> str | None:
    client.start()
    return client.device


def _run(cfg: RunConfig, out: Path, tasks: list[Task], policy: Policy, client: SandboxClient) -> dict:
    for name in (RESULTS, TRAJECTORIES):
        _drop_torn_line(out / name)
    done = {r["task"] for r in read_jsonl(out / RESULTS)} if cfg.resume else set()
    if not cfg.resume:
        for name in (RESULTS, TRAJECTORIES):
            (out / name).unlink(missing_ok=True)
    todo = [t for t in tasks if t.id not in done]
    policy.prepare(tasks)
    skills = None
    if cfg.agent.skills and cfg.agent.mode == "agentic" and policy.uses_skills:
        skills = SkillLibrary()
    lock = threading.Lock()

    def one(task: Task) -> dict[str, Any]:
        with WorkspaceSession(task.path, client=client) as ws:
            res = run_episode(
                task.id,
                task.path.read_text(),
                policy,
                ws,
                cfg.agent.budgets,
                cfg.judge,
                skills=skills,
                level=task.level,
                single_turn=cfg.agent.mode == "single_turn",
                skill_results=cfg.agent.skill_results,
            )
        _append(out, res, lock)
        return res.result_record()

    with _progress(cfg.progress, len(todo)) as bar, ThreadPoolExecutor(cfg.agent.concurrency) as pool:
        futures = {pool.submit(one, t): t for t in todo}
        for fut in as_completed(futures):
            task = futures[fut]
            try:
                bar(_line(task.id, fut.result()))
            except Exception as exc:  # one broken task never stops the others
                log.exception("task %s failed", task.id)
                bar(f"{task.id}: error {type(exc).__name__}: {exc}")
    results = read_jsonl(out / RESULTS)
    summary = {
        "policy": policy.describe(),
        "mode": cfg.agent.mode,
        "skills": cfg.agent.skills,
        "num_tasks": len(tasks),
        "num_results": len(results),
        **table1(results),
    }
    (out / SUMMARY).write_text(json.dumps(summary, indent=2))
    print(format_table1(summary))
    print(f"wrote {out / RESULTS}, {out / TRAJECTORIES} and {out / SUMMARY}")
    return summary


def _line(task_id: str, rec: dict[str, Any]) -> str:
    """One task's verdict on the terminal: status, reward, why and after how many turns it ended."""
    reward = "n/a" if rec["reward"] is None else f"{rec['reward']:g}"
    return f"{task_id}: {rec['status']}, reward {reward} ({rec['end_reason']}, {rec['turns']} turns)"


def _drop_torn_line(path: Path) -> None:
    """Cut an interrupted last write (no newline) so appended records start on a line of their own."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])
        log.warning("dropped an incomplete last line of %s", path)


def _append(out: Path, res: EpisodeResult, lock: threading.Lock) -> None:
    with lock:  # trajectory first: a result line means its trajectory is on disk
        with open(out / TRAJECTORIES, "a") as f:
            f.write(json.dumps(res.trajectory_record(), default=str) + "\n")
        with open(out / RESULTS, "a") as f:
            f.write(json.dumps(res.result_record(), default=str) + "\n")


class _progress:
    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total, self.bar = enabled, total, None

    def __enter__(self):
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc="episodes", unit="task")
        return self.update

    def update(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line)
            self.bar.update(1)
        else:
            print(line, flush=True)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
