"""The ``profile`` tool: where the forward's time goes and why, per kernel, for the candidate and the eager
reference; plus the task's roofline floor and the candidate's distance from it.

Modes: ``ncu`` (Nsight Compute: one process profiles the reference's then the candidate's forward inside an
NVTX range, split by a marker kernel; only launches in that range, at most ``max_launches`` each) and
``events`` (no ncu: per-launch device time from the PyTorch profiler, CUDA events per forward). ``auto``
picks ncu when it and a GPU are there.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from . import _candidate
from ._bottleneck import classify
from ._context import CmdResult, ToolContext, ToolError, run_cmd
from ._events import profile_forward
from ._ncu import MARKER_KERNEL, find_ncu, kernel_metrics, ncu_command, parse_ncu_csv
from ._prestart import LOG_FILE, PRESTARTER, Launch
from ._prestart import enabled as prestart_enabled
from ._roofline import (
    cached_ceilings,
    count_reference,
    distance,
    floor,
    measure_ceilings,
    nominal_ceilings,
)

_REPO_ROOT = str(Path(__file__).resolve().parents[2])


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def target_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def target_argv(
    args: dict, which: str, mode: str, result: Path, warmup: int, iters: int, device: str = "cuda"
) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "kernels_env.tools._target",
        "--reference",
        str(args["reference"]),
        "--which",
        which,
        "--mode",
        mode,
        "--warmup",
        str(warmup),
        "--iters",
        str(iters),
        "--result",
        str(result),
        "--device",
        device,
    ]
    if which != "reference":
        argv += ["--solution", str(args["solution"])]
    return argv


def launch_target(
    wrapper: list[str], target: list[str], log: Path | None, timeout_s: float, prestart: bool = True
) -> tuple[CmdResult, str, bool]:
    """Run ``wrapper + target`` (a profiler's command, ``LOG_FILE`` for its log, then ``target_argv``):
    (result, the log's text, whether a pre-started process ran it). Pre-started in a run worker
    (``_prestart``), else a fresh process (the cold path)."""
    env = target_env()
    if prestart and prestart_enabled():  # the job: target_argv's arguments after "python -m module"
        run = PRESTARTER.run(Launch.of(wrapper, env), target[3:], env, timeout_s)
        return run.result, run.log, run.prestarted, (run.handed_at, run.ended_at)
    cmd = [str(log) if a == LOG_FILE else a for a in wrapper] + target
    started = time.monotonic()
    res = run_cmd(cmd, timeout_s, env=env)
    text = log.read_text(errors="replace") if log is not None and log.exists() else ""
    return res, text, False, (started, time.monotonic())


def _read_status(path: Path) -> dict:
    """The target's JSON status; {} when it wrote none or a torn one (killed mid-write): the caller reports
    that the target did not finish."""
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def timeline(clock: tuple[float, float], status: dict) -> dict | None:
    """Where a target run's wall time went, from the owner's and the target's monotonic clocks: waiting for
    a pre-started process to finish its imports (a call that came sooner than its start-up), the job itself,
    and the tail after the target wrote its result (interpreter and CUDA teardown, the profiler's report)."""
    handed, ended = clock
    job_at, result_at = (status.get("prestart_s") or {}).get("job_at"), status.get("result_at")
    if not (handed and ended and result_at):
        return None
    out = {"wall_s": round(ended - handed, 3), "exit_tail_s": round(ended - result_at, 3)}
    if job_at:
        out.update(ready_wait_s=round(job_at - handed, 3), job_s=round(result_at - job_at, 3))
    return out


def aggregate(records: list[dict], iters: int) -> dict:
    """Group launches by kernel; metrics and bottleneck of each kernel from its longest launch."""
    groups: dict[str, dict] = {}
    for rec in records:
        km = kernel_metrics(rec)
        g = groups.setdefault(
            rec["name"],
            {
                "name": rec["name"],
                "short_name": rec["short_name"],
                "launches": 0,
                "total_us": 0.0,
                "grid": rec.get("grid"),
                "block": rec.get("block"),
                "_best": None,
            },
        )
        g["launches"] += 1
        g["total_us"] += km["duration_us"] or 0.0
        if g["_best"] is None or (km["duration_us"] or 0) > (g["_best"]["duration_us"] or 0):
            g["_best"] = km
    total = sum(g["total_us"] for g in groups.values())
    kernels = []
    for g in sorted(groups.values(), key=lambda r: -r["total_us"]):
        km = g.pop("_best")
        label, evidence = classify(km)
        g.update(
            share_pct=100.0 * g["total_us"] / total if total else 0.0,
            mean_us=g["total_us"] / g["launches"],
            metrics={k: v for k, v in km.items() if v is not None and v != {}},
            bottleneck=label,
            evidence=evidence,
        )
        kernels.append(g)
    return {
        "kernels": kernels,
        "kernel_us_per_forward": total / max(iters, 1),
        "launches_per_forward": sum(k["launches"] for k in kernels) / max(iters, 1),
    }


def split_at_marker(records: list[dict]) -> tuple[list[dict], list[dict], bool]:
    idx = next((i for i, r in enumerate(records) if MARKER_KERNEL in r["name"]), None)
    if idx is None:
        return [], records, False
    return records[:idx], records[idx + 1 :], True


def _run_ncu(
    args: dict,
    ctx: ToolContext,
    which: str,
    iters: int,
    warmup: int,
    max_launches: int,
    marker: bool | None = None,
) -> dict:
    """ncu over the ``_target`` job: ``SUMMARY_METRICS`` first; if ncu fails without a record (a name did
    not resolve), once more with whole sections, cold. ``marker`` (default: ``which == "both"``): a
    ``kernel_regex`` lets the marker kernel through, which keeps the ncu command the same as for ``both``."""
    ncu = find_ncu()
    tmp = ctx.tmpdir()
    result_file, log = tmp / f"target_{which}.json", tmp / f"ncu_{which}.csv"
    target = target_argv(args, which, "range", result_file, warmup, iters)
    attempts = []
    for sections in (False, True):
        regex = args.get("kernel_regex")
        if regex and (which == "both" if marker is None else marker):  # keep the marker that splits the sides
            regex = f"(?:{regex})|{MARKER_KERNEL}"
        wrapper = ncu_command(
            ncu,
            [],
            LOG_FILE,
            launch_count=max_launches,
            kernel_regex=regex,
            sections=sections,
            metrics=not sections,
        )
        # The rare retry with sections runs cold: it must not displace the waiting process.
        left = ctx.check_time(f"ncu ({which})")
        result_file.unlink(missing_ok=True)  # a retry's status is its own, never the first attempt's
        res, text, prestarted, clock = launch_target(wrapper, target, log, left, prestart=not sections)
        status = _read_status(result_file)
        attempts.append(
            {
                "metrics": "sections" if sections else "summary",
                "returncode": res.returncode,
                "timed_out": res.timed_out,
                "elapsed_s": round(res.elapsed_s, 2),
                "prestarted": prestarted,
                "timeline_s": timeline(clock, status),
            }
        )
        records = parse_ncu_csv(text)
        if res.timed_out:
            raise ToolError(f"ncu timed out after {res.elapsed_s:.0f}s (time limit {ctx.limits.time_s:.0f}s)")
        if records or (res.returncode == 0 and "==ERROR==" not in text + res.stdout):
            break
    out = {"records": records, "target": status, "attempts": attempts}
    if not status.get("ok", False):
        out["error"] = status.get("error") or f"target did not finish (ncu rc={res.returncode})"
        out["log_tail"] = (text + res.stdout + res.stderr)[-3000:]
    elif not records:
        out["log_tail"] = (text + res.stdout + res.stderr)[-3000:]
    return out


# The eager reference's ncu profile, per reference (its files' contents) and profile settings: a task's
# reference does not change between an agent's calls, so a later call profiles the candidate alone (its
# kernels only: no reference kernel, no marker) and reuses this one (``reuse_reference: false``: measure it
# again). This process's (a run worker's), a few tasks at most.
_REFERENCE_PROFILES: dict[tuple, dict] = {}
_REFERENCE_PROFILES_MAX = 16


def reference_key(args: dict, iters: int, warmup: int, max_launches: int) -> tuple | None:
    """What the reference's profile depends on; None if the reference cannot be read (profile it again)."""
    path = Path(args["reference"])
    digest = hashlib.sha256()
    try:
        if path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                    digest.update(f.relative_to(path).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
        else:
            digest.update(path.read_bytes())
    except OSError:
        return None
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    return (digest.hexdigest(), iters, warmup, max_launches, args.get("kernel_regex"), find_ncu(), gpu)


def _remember_reference(key: tuple | None, reference: dict) -> None:
    if key is None:
        return
    _REFERENCE_PROFILES.pop(key, None)
    _REFERENCE_PROFILES[key] = copy.deepcopy(reference)
    while len(_REFERENCE_PROFILES) > _REFERENCE_PROFILES_MAX:
        _REFERENCE_PROFILES.pop(next(iter(_REFERENCE_PROFILES)))


def _events(args: dict, ctx: ToolContext, device: str, warmup: int, iters: int, with_reference: bool) -> dict:
    """The cheap profile. On a GPU it runs in a fresh process (``_target --mode events``): the PyTorch
    profiler attaches CUPTI, which a long-lived GPU worker must not keep (its later timings would pay for
    it, and CUPTI re-initialisation after CUDA graphs, e.g. a max-autotune baseline, can crash). Without a
    GPU there is no CUPTI and it runs here."""
    if device == "cuda":
        return _events_in_target(args, ctx, warmup, iters, with_reference, device)
    problem = _candidate.load_reference(args["reference"])
    _, cls = _candidate.load_candidate(_candidate.resolve_candidate(args["solution"]))
    out = {}
    runs = ([("reference", problem.Model)] if with_reference else []) + [("candidate", cls)]
    for side, model_cls in runs:
        ctx.check_time(f"profiling the {side}")
        model = _candidate.build_model(problem, model_cls, device)
        out[side] = profile_forward(
            model, _candidate.task_inputs(problem, device), device=device, warmup=warmup, iters=iters
        )
    return out


def _events_in_target(
    args: dict, ctx: ToolContext, warmup: int, iters: int, with_reference: bool, device: str
) -> dict:
    result = ctx.tmpdir() / "target_events.json"
    which = "both" if with_reference else "candidate"
    target = target_argv(args, which, "events", result, warmup, iters, device)
    res, _, prestarted, _clock = launch_target([], target, None, ctx.check_time("profiling (events)"))
    if res.timed_out:
        raise ToolError(
            f"the profiled forward did not finish within the time limit ({ctx.limits.time_s:g} s)"
        )
    status = _read_status(result)
    if status.get("diagnostic"):
        raise _candidate.CandidateError(status["diagnostic"])
    if not status.get("ok"):
        tail = (res.stdout + res.stderr)[-1500:]
        raise ToolError(status.get("error") or f"the profiling process died (exit {res.returncode}): {tail}")
    # Where a profile's seconds go: the fresh process's stages (import, load, build, forward), its wall time.
    return {
        **status["events"],
        "target_stages_s": status.get("stages_s"),
        "target_elapsed_s": round(res.elapsed_s, 2),
        "target_prestarted": prestarted,
        "target_prestart_s": status.get("prestart_s"),
    }


def roofline_block(args: dict, cuda: bool, measured_us: float | None) -> dict:
    counts = count_reference(_candidate.load_reference(args["reference"]))
    out = {"counts": {k: v for k, v in counts.items() if k != "ops"}, "top_ops": counts["ops"][:8]}
    ceilings = None
    if cuda:
        try:
            ceilings = measure_ceilings(args.get("cache_dir"))
        except Exception as e:  # noqa: BLE001 - fall back to the spec sheet
            out["ceilings_error"] = f"{type(e).__name__}: {e}"
            import torch

            ceilings = nominal_ceilings(torch.cuda.get_device_name())
    elif args.get("device_name"):  # without a GPU: this device's measured ceilings if cached, else its spec
        ceilings = cached_ceilings(args.get("cache_dir"), args["device_name"])
        ceilings = ceilings or nominal_ceilings(args["device_name"])
    if ceilings:
        out["ceilings"] = ceilings
        out["floor"] = floor(counts, ceilings)
        out["candidate"] = distance(out["floor"]["floor_us"], measured_us)
    else:
        out["note"] = "no GPU and no known 'device_name': FLOP/byte counts only"
    return out


def profile_tool(args: dict, ctx: ToolContext) -> dict:
    for key in ("reference", "solution"):
        if not args.get(key):
            raise ToolError(f"profile needs '{key}'")
    cuda = _cuda()
    mode = args.get("mode", "auto")
    if mode not in ("auto", "ncu", "events"):
        raise ToolError(f"mode must be auto, ncu or events, not {mode!r}")
    notes = []
    if mode == "auto":
        mode = "ncu" if cuda and find_ncu() else "events"
        if cuda and mode == "events":
            notes.append("ncu not found: cheap mode (per-launch times only, no bottleneck metrics)")
    if mode == "ncu" and not (cuda and find_ncu()):
        raise ToolError(
            "mode 'ncu' needs a CUDA GPU and Nsight Compute (ncu on PATH, /usr/local/cuda/bin, "
            "/opt/nvidia/nsight-compute/*)"
        )
    with_ref = bool(args.get("include_reference", True))
    device = "cuda" if cuda else "cpu"
    result: dict = {"mode": mode, "device": _device_name(cuda), "notes": notes}
    if mode == "ncu":
        iters = int(args.get("iters", 1))
        warmup = int(args.get("warmup", 2))
        max_launches = int(args.get("max_launches", 64))
        launch_count = 2 * max_launches + 1 if with_ref else max_launches
        key = reference_key(args, iters, warmup, launch_count) if with_ref else None
        known = _REFERENCE_PROFILES.get(key) if key and args.get("reuse_reference", True) else None
        # A known reference: the candidate's kernels only, under the same ncu command as with the reference
        if known is not None:
            run = _run_ncu(args, ctx, "candidate", iters, warmup, launch_count, marker=True)
        else:
            run = _run_ncu(args, ctx, "both" if with_ref else "candidate", iters, warmup, launch_count)
        if run.get("error"):
            result["error"] = run["error"]
            result["log_tail"] = run.get("log_tail")
            if run["target"].get("traceback"):
                result["traceback"] = run["target"]["traceback"]
            return result
        records = run["records"]
        if known is not None:
            result["reference"] = {**copy.deepcopy(known), "reused": True}
            cand_recs = records
        elif with_ref:
            ref_recs, cand_recs, found = split_at_marker(records)
            if not found:
                notes.append(
                    f"launch limit reached inside the reference (>{max_launches} launches): candidate "
                    f"not profiled; rerun with include_reference=false"
                )
            result["reference"] = aggregate(ref_recs, iters)
            if found and ref_recs:
                _remember_reference(key, result["reference"])
        else:
            cand_recs = records
        result["candidate"] = aggregate(cand_recs, iters)
        if not cand_recs:
            notes.append(
                "no kernel was launched inside the candidate's forward (computing on the CPU? everything "
                "cached?)"
            )
            if run.get("log_tail"):
                result["log_tail"] = run["log_tail"]
        result["ncu_attempts"] = run["attempts"]
        result["target_stages_s"] = run["target"].get("stages_s")
        result["target_prestart_s"] = run["target"].get("prestart_s")
        measured = result["candidate"]["kernel_us_per_forward"] or None
    else:
        ev = _events(args, ctx, device, int(args.get("warmup", 3)), int(args.get("iters", 10)), with_ref)
        result.update(ev)
        measured = ev["candidate"].get("forward_us") if cuda else None
    if result.get("reference") and result.get("candidate"):
        rt = result["reference"].get("kernel_us_per_forward")
        ct = result["candidate"].get("kernel_us_per_forward")
        if rt and ct:
            result["kernel_time_ratio"] = rt / ct  # >1: the candidate's kernels take less device time
    if args.get("roofline", True):
        started = time.monotonic()
        try:
            result["roofline"] = roofline_block(args, cuda, measured)
            result["roofline"]["elapsed_s"] = round(time.monotonic() - started, 3)
        except Exception as e:  # noqa: BLE001 - data-dependent references cannot run on meta tensors
            result["roofline"] = {"error": f"{type(e).__name__}: {e}"[:500]}
    return result


def _device_name(cuda: bool) -> str:
    if not cuda:
        return "cpu"
    import torch

    return torch.cuda.get_device_name()
