"""A whole RL step's time split (generate, judge, learn) for a Qwen2-shaped random model (--model, default
~0.5B) on one GPU,
judging serial and overlapped with generation, and the share of a step the GPU idles (target: < 10%).

    python -m benchmarks.rl.rl_step --out /tmp/rl_step.json --budget-s 150   # GPU: B=32, P=512, L=512
    python -m benchmarks.rl.rl_step --model 1.5b --out /tmp/rl_step.json   # GPU: the 1.5B shape
    python -m benchmarks.rl.rl_step --smoke --out /tmp/rl_step.json         # CPU, tiny model, CPU sandbox

A random model writes no code, so only the judging's workload stands in:
* generate: ``models.Sampler`` samples B sequences of L tokens (EOS off: every step does the same work)
  after P random prompt tokens, from the learner's current actor (fp32 master weights, bf16 compute; handed
  over after every update without recompiling).
* judge: each episode's code is a real fixture (the single-file examples/solutions our sandbox judges
  correct on a GPU: Triton, and fast-path CUDA), cycled over the B episodes, all B submitted through
  ``SandboxClient.submit`` (the client runs compile workers + run worker + 2 at once) with CUDA Agent's
  judge (protocol, policy, reward ``cuda_agent``; candidates timed); the verdict's reward is the episode's.
  After the warm-up the repeated fixtures hit the build cache, where a policy's fresh code would build
  (about 1 s of CPU each, in the compile workers). Baselines are per task and cached, as in training;
  default eager only (torch.compile's take minutes cold), so rewards top out at 2.
* learn: ``research.rl.Learner.ppo_step`` on the packed episodes: prepare (old log-probs, values, GAE) and
  one actor + critic AdamW update, the learner of benchmarks/models/ppo_update.py.

After one shared warm-up step (compiles, overlapping the sandbox's cold start), two schedules:
* overlapped: judge k is submitted when generate k ends and runs in the sandbox's processes while the
  learner runs learn k-1 and generate k+1 (the one-step-off-policy pipeline of async RL systems); learn k
  waits for judge k. Steady iteration: generate k+1, wait for judge k, learn k (fill/drain not in medians).
* serial: generate k, judge k, learn k.
judge_wall_s: submission to the last verdict; judge_hidden_s: the part of it during which the learner
generated or learned (time it waited, for this batch or the one before, is not hidden);
judge_hidden_share = hidden / wall. Medians over the timed steps.

GPU idle: NVML utilisation of the learner's GPU every 100 ms over each schedule's timed steps (pynvml, else
``nvidia-smi -lms``): the share of the driver's sample period (1/6 s to 1 s) in which any process's kernel
ran (the sandbox's too): idle_share = 1 - mean utilisation (time-weighted; zero_util_samples_share, the
samples at 0%, is far lower and says little); learner_idle_share = 1 -
(generate + learn) / step is the learner's own view. The judge shares the GPU (JAX takes --jax-mem-fraction,
research.rl.DevicesConfig), so candidate and baseline timings see the learner's kernels.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import concurrent.futures
import dataclasses
import datetime
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from benchmarks._common.jax_bench import jax_device_info, table
from benchmarks._common.shapes import add_model_arg, bench_config
from benchmarks._results import env_info, write_results
from benchmarks.models.ppo_update import update_flops
from kernels_env.client import JudgeConfig, SandboxClient, SandboxConfig

ROOT = Path(__file__).resolve().parents[2]

EXAMPLES = ROOT / "examples"
# examples/solutions/<problem>__<name>.py judged correct on a GPU; the smoke run's two are the fastest under
# the CPU sandbox's Triton interpreter (CPU mode compiles CUDA but never runs it: no reward).
FIXTURES = ["1_relu__triton", "2_softmax__triton", "3_matmul__triton", "7_gemm_bias_relu__triton"]
FIXTURES += ["9_rmsnorm__triton", "1_relu__cuda"]
SMOKE_FIXTURES = ["1_relu__triton", "7_gemm_bias_relu__triton"]
TARGET_IDLE = 0.10
TIMES = ["generate_s", "judge_wall_s", "judge_wait_s", "judge_hidden_s", "judge_hidden_share", "learn_s"]
TIMES += ["step_s"]


class GpuUtil:
    """Timestamped utilisation samples (%) of the learner's GPU (CUDA ordinal 0), taken in the background."""

    def __init__(self, ms: int = 100):
        self.samples: list[tuple[float, int]] = []  # list.append is thread-safe
        self.source, self._proc, self._stop = None, None, threading.Event()
        gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
        try:
            import pynvml

            pynvml.nvmlInit()
            get = pynvml.nvmlDeviceGetHandleByIndex if gpu.isdigit() else pynvml.nvmlDeviceGetHandleByUUID
            handle = get(int(gpu) if gpu.isdigit() else gpu)
            read, self.source = (lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu), "pynvml"
            threading.Thread(target=self._poll, args=(read, ms / 1e3), daemon=True).start()
            return
        except Exception:
            pass
        if not shutil.which("nvidia-smi"):
            return
        # Each line carries nvidia-smi's own timestamp, so pipe buffering cannot move a sample to another
        # window; stdbuf only makes the last lines arrive before stop().
        cmd = ["nvidia-smi", "-i", gpu, "--query-gpu=timestamp,utilization.gpu"]
        cmd += ["--format=csv,noheader,nounits", "-lms", str(ms)]
        cmd = (["stdbuf", "-oL"] if shutil.which("stdbuf") else []) + cmd
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.source = "nvidia-smi"
        atexit.register(self._proc.terminate)  # it loops forever: never let it outlive this process
        threading.Thread(target=self._read, daemon=True).start()

    def _poll(self, read, interval: float) -> None:
        while not self._stop.wait(interval):
            self.samples.append((time.perf_counter(), int(read())))

    def _read(self) -> None:
        offset = time.time() - time.perf_counter()  # wall clock -> perf_counter
        for line in self._proc.stdout:
            try:
                stamp, util = (x.strip() for x in line.split(","))
                wall = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.samples.append((wall - offset, int(util)))
            except ValueError:
                continue  # "[N/A]" or a partial line

    def stop(self) -> None:
        time.sleep(0.3)  # the last timed step's samples
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)

    def window(self, t0: float, t1: float) -> dict:
        u = [v for t, v in list(self.samples) if t0 <= t <= t1]
        if not u:
            return {"source": self.source, "samples": 0, "idle_share": None, "mean_util": None}
        # NVML's utilisation is the share of its sample period with a kernel running: idle time is 1 - it
        # (time-weighted). Samples at exactly 0% alone would call a half-busy GPU busy.
        mean = statistics.fmean(u)
        return {
            "source": self.source,
            "samples": len(u),
            "idle_share": 1.0 - mean / 100.0,
            "mean_util": mean,
            "zero_util_samples_share": sum(v == 0 for v in u) / len(u),
        }


def submit(sb, fixtures, b: int) -> dict:
    """Judge b episodes' stand-in code (fixtures cycled); each verdict's completion time is recorded."""
    job = {"t": time.perf_counter(), "done": [], "futures": []}
    for i in range(b):
        sol = fixtures[i % len(fixtures)]
        ref = EXAMPLES / "problems" / f"{sol.split('__')[0]}.py"
        f = sb.submit(ref, EXAMPLES / "solutions" / f"{sol}.py")
        f.add_done_callback(lambda _, done=job["done"]: done.append(time.perf_counter()))
        job["futures"].append(f)
    return job


def wait(job, row: dict, spans: list[tuple[float, float]]) -> list[dict]:
    """The verdicts; into ``row`` the learner's wait, the judge wall (submission to the last verdict) and the
    part of the wall that overlapped ``spans`` (the learner's generate and learn calls)."""
    t = time.perf_counter()
    verdicts = [f.result() for f in job["futures"]]
    now = time.perf_counter()
    # a done-callback may still be running when result() returns: count a missing one as finishing now
    job["end"] = max(job["done"] + ([now] if len(job["done"]) < len(verdicts) else []))
    row.update(judge_wait_s=now - t, judge_wall_s=job["end"] - job["t"])
    row["judge_hidden_s"] = sum(max(0.0, min(e, job["end"]) - max(s, job["t"])) for s, e in spans)
    row["judge_hidden_share"] = row["judge_hidden_s"] / row["judge_wall_s"] if row["judge_wall_s"] else None
    return verdicts


def base_config(args):
    """The learner's and sampler's model before this benchmark's runtime choices: the tiny model with
    --smoke (--model ignored), else the --model shape's architecture (0.5b: ``qwen2_0_5b_config()``)."""
    return bench_config(args.model, args.smoke)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default: runs/benchmarks/)")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny model, CPU sandbox, B=2, 2 steps")
    add_model_arg(ap)
    ap.add_argument("--episodes", type=int, default=32, help="B: sequences generated and judged per step")
    ap.add_argument("--prompt-len", type=int, default=512, help="P: prompt tokens per sequence")
    ap.add_argument("--new-tokens", type=int, default=512, help="L: generated tokens per sequence")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per schedule")
    ap.add_argument("--schedules", default="overlapped,serial")
    ap.add_argument("--micro-batches", type=int, default=2, help="learner gradient accumulation")
    ap.add_argument("--chunk", type=int, default=1024, help="tokens per log-prob chunk")
    ap.add_argument("--jax-mem-fraction", type=float, default=0.5, help="the rest is the sandbox's")
    ap.add_argument("--baselines", default="eager", help="judge baselines, e.g. eager,compile")
    ap.add_argument("--compile-workers", type=int, default=4)
    ap.add_argument("--judge", choices=("protocol", "training"), default="protocol",
                    help="protocol: CUDA Agent's trials, families and timing; training: the RL pipeline's "
                    "training-rollout judge (2 trials, no families, short timing: demo.fast_judge)")
    ap.add_argument("--budget-s", type=float, default=150.0, help="no step starts that would end past it")
    args = ap.parse_args(argv)
    start, smoke = time.perf_counter(), args.smoke
    sizes = (2, 16, 8, 2) if smoke else (args.episodes, args.prompt_len, args.new_tokens, args.steps)
    b, p, n_new, steps = sizes
    schedules = args.schedules.split(",")
    if set(schedules) - {"overlapped", "serial"}:
        ap.error(f"--schedules: overlapped and/or serial, got {args.schedules!r}")

    import jax

    if smoke:
        jax.config.update("jax_platforms", "cpu")
    from research import rl

    rl.apply_devices(rl.DevicesConfig(jax_memory_fraction=args.jax_mem_fraction))  # before JAX's backends
    import numpy as np

    import models

    sandbox = SandboxConfig(device="cpu" if smoke else "cuda", cache_dir=tempfile.mkdtemp(prefix="rl_step_"),
                            num_compile_workers=1 if smoke else args.compile_workers,
                            standby_run_workers=not smoke)
    quick = dict(time_candidate=False, num_trials=2, families=[]) if smoke else {}  # as agent_loop's smoke
    judge = JudgeConfig(protocol="cuda_agent", policy="cuda_agent", reward="cuda_agent",
                        baselines=args.baselines.split(","), **quick)
    if args.judge == "training" and not smoke:
        from research.rl.pipeline.demo import fast_judge

        train = fast_judge()
        judge = dataclasses.replace(judge, num_trials=train.num_trials, families=train.families,
                                    timing=train.timing)
    fixtures = SMOKE_FIXTURES if smoke else FIXTURES
    util = GpuUtil()
    cfg = base_config(args).replace(  # ppo_update.py's learner
        param_dtype="float32", compute_dtype="bfloat16",
        attention_impl="xla" if smoke else "cudnn", remat="none" if smoke else "save_attn")
    seq = -(-(p + n_new) // 64) * 64  # pack_trajectories' padded length (every row is P + L long)
    flops = update_flops(cfg, b, seq)["total"] * 4 / 3  # + prepare: both forwards, 1/3 of the update
    settings = dict(model="tiny" if smoke else args.model, params=cfg.num_params(), smoke=smoke,
                    episodes=b, prompt_len=p, new_tokens=n_new, steps=steps, seq=seq,
                    micro_batches=args.micro_batches, chunk=args.chunk, attention=cfg.attention_impl,
                    remat=cfg.remat, jax_memory_fraction=args.jax_mem_fraction, fixtures=fixtures,
                    judge=dataclasses.asdict(judge), judge_preset=args.judge, budget_s=args.budget_s,
                    learn_model_flops=flops)
    res: dict = {"benchmark": "rl_step", "env": env_info(), "settings": settings,
                 "target_idle_share": TARGET_IDLE, "stopped_by_budget": [], "steps": {}}
    rng = np.random.default_rng(0)
    prompts = lambda: rng.integers(1, cfg.vocab_size, (b, p)).tolist()
    sampling = models.SamplingConfig(max_new_tokens=n_new, temperature=1.0, eos_token_ids=())
    pack = rl.PackConfig(max_len=p + n_new, rows_multiple=b)  # B rows even when an episode is dropped
    windows: dict = {}
    spans: list[tuple[float, float]] = []  # the learner's generate and learn calls (start, end)

    with SandboxClient(sandbox, judge) as sb:
        # The sandbox's cold start (workers, builds, Triton JIT, baselines) runs while JAX initialises and
        # compiles the warm-up step: its judging is submitted first, from a thread (start() blocks).
        t0, pool = time.perf_counter(), concurrent.futures.ThreadPoolExecutor(1)
        warm_job = pool.submit(submit, sb, fixtures, b)
        actor = models.init_model(cfg, seed=0)
        learner = rl.Learner(rl.LearnerConfig(micro_batches=args.micro_batches, chunk_size=args.chunk),
                             actor, models.Critic.from_policy(actor))
        del actor  # the learner holds copies (its updates donate their state)
        sampler = models.Sampler(learner.actor_model())
        res["device"] = jax_device_info()

        def generate(k: int):
            ids, t = prompts(), time.perf_counter()
            out = sampler.generate(ids, sampling, seed=k)  # returns host arrays: generation has finished
            spans.append((t, time.perf_counter()))
            return ids, out, spans[-1][1] - t

        def learn(ids, out, verdicts) -> tuple[float, dict]:
            t, n = time.perf_counter(), out.lengths
            recs = [{"prompt_ids": ids[i], "response_ids": out.response_ids(i), "response_mask": [1] * n[i],
                     "logprobs": out.logprobs[i, : n[i]], "verdict": v} for i, v in enumerate(verdicts)]
            batch, drops, _ = rl.pack_trajectories(recs, rl.RewardConfig(), pack)
            if batch is not None:
                learner.ppo_step(batch)  # returns host metrics: the update has finished
            sampler.set_model(learner.actor_model())  # the next generation samples the new weights
            spans.append((t, time.perf_counter()))
            rewards = [v["reward"] for v in verdicts if v.get("reward") is not None]
            info = {"statuses": dict(collections.Counter(v.get("status") for v in verdicts)),
                    "dropped": dict(drops), "mean_reward": statistics.fmean(rewards) if rewards else None}
            return time.perf_counter() - t, info

        def record(schedule: str, row: dict) -> None:
            busy = (row.get("generate_s") or 0.0) + (row.get("learn_s") or 0.0)
            row["learner_idle_share"] = max(0.0, 1.0 - busy / row["step_s"])
            res["steps"].setdefault(schedule, []).append(row)
            line = ", ".join(f"{k} {row[k]:.3g}" for k in (*TIMES, "mean_reward") if row.get(k) is not None)
            print(f"[rl_step] {schedule} {row['phase']} {row['step']}: {line}", flush=True)
            # progressive: an outer timeout still leaves what finished
            write_results("rl_step", res, args.out)

        def fits(last: dict, overlap: bool) -> bool:
            """Whether the next step, estimated from the last timed one, ends within the budget (the
            warm-up's times are mostly compilation: no estimate; a serial one from an overlapped step's
            parts, whose judge wall may include judging the batch before: an overestimate)."""
            parts = ("step_s",) if overlap else ("generate_s", "judge_wall_s", "learn_s")
            est = 0.0 if last["phase"] == "warmup" else sum(last[k] for k in parts)
            return time.perf_counter() - start + est <= args.budget_s

        ids, out, gen_s = generate(0)
        last = {"phase": "warmup", "step": 0, "generate_s": gen_s}
        job = warm_job.result()
        pool.shutdown()
        last["learn_s"], info = learn(ids, out, wait(job, last, spans))
        last.update(info, step_s=time.perf_counter() - t0)
        record("warmup", last)
        traces = dict(sampler.trace_counts)
        for schedule in schedules:
            overlap, timed, prev = schedule == "overlapped", [], None
            gens = steps + overlap  # overlapped: a fill iteration (generate only) and a drain (learn only)
            for k in range(gens + overlap):
                more = k < gens and fits(last, overlap)
                if k < gens and not more and schedule not in res["stopped_by_budget"]:
                    res["stopped_by_budget"].append(schedule)
                if not more and prev is None:
                    break
                t0, row, cur = time.perf_counter(), {"step": k + 1}, None
                if more:
                    ids, out, row["generate_s"] = generate(100 * (1 + overlap) + k)
                    cur = (ids, out, submit(sb, fixtures, b))
                todo = prev if overlap else cur  # overlapped: learn the step before, judged meanwhile
                if todo is not None:
                    row["learn_s"], info = learn(todo[0], todo[1], wait(todo[2], row, spans))
                    row.update(info)
                row["phase"] = "fill" if todo is None else "drain" if cur is None else "steady"
                row["step_s"] = time.perf_counter() - t0
                if row["phase"] == "steady":
                    timed += [t0, time.perf_counter()]
                last = row if row["phase"] == "steady" else last
                record(schedule, row)
                prev = cur if overlap else None
            windows[schedule] = (min(timed), max(timed)) if timed else None
        res["sampler_traces"] = {"after_warmup": traces, "end": dict(sampler.trace_counts)}  # 0 recompiles
        res["sandbox_environment"] = sb.environment
    util.stop()

    summary: dict = {}
    for schedule, window in windows.items():
        steady = [r for r in res["steps"].get(schedule, []) if r["phase"] == "steady"]
        med = lambda k, rows=steady: statistics.median(v) if (v := [r[k] for r in rows if k in r]) else None
        s = summary[schedule] = {"steps": len(steady), **{k: med(k) for k in (*TIMES, "learner_idle_share")}}
        s["gpu"] = util.window(*window) if window else {}
        s["target_met"] = None if s["gpu"].get("idle_share") is None else s["gpu"]["idle_share"] < TARGET_IDLE
        s["learn_model_tflops_per_s"] = flops / s["learn_s"] / 1e12 if s["learn_s"] else None
        s["generated_tokens_per_s"] = b * n_new / s["generate_s"] if s["generate_s"] else None
    rows = [[k, s["steps"], s["generate_s"], s["judge_wall_s"], s["judge_hidden_share"], s["learn_s"],
             s["step_s"], s["learner_idle_share"], s["gpu"].get("idle_share"), s["gpu"].get("mean_util")]
            for k, s in summary.items()]
    head = ["schedule", "steps", "gen s", "judge s", "hidden", "learn s", "step s", "learner idle"]
    head += ["gpu idle", "util %"]
    summary["table"] = f"RL step ({settings['model']}), B={b} P={p} L={n_new} (medians)\n" + table(rows, head)
    ser, ovl = summary.get("serial", {}), summary.get("overlapped", {})
    if ser.get("step_s") and ovl.get("step_s"):
        summary["overlapped_speedup"] = ser["step_s"] / ovl["step_s"]
    res.update(summary=summary, wall_s=time.perf_counter() - start)
    write_results("rl_step", res, args.out)
    print(summary["table"], flush=True)
    return res


if __name__ == "__main__":
    main()
