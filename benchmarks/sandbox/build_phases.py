"""Where the CPU time of one cold load_inline build goes, phase by phase, on this machine (no GPU needed).

    python -m benchmarks.sandbox.build_phases [--solution 29_row_sum] [--repeat 3] [--json out.json]

Builds one solution of the load_inline set (``load_inline_set``) through the sandbox's build hooks as the
compile stage does
(``KERNELS_ENV_BUILD_ONLY=1``, a content-keyed build directory, ``KERNELS_ENV_PCH=wait``: the shared PCH is
built first; the fast build path and the lean-header path on; ``TORCH_CUDA_ARCH_LIST=9.0`` unless set; with
a CPU-only torch the CUDA half is compiled and linked against stubs, never loaded), then replays the
commands ninja ran, one at a time, ``--repeat`` times each (variants interleaved), and reports CPU seconds
(user + sys of the command and its children) of:

  pch             g++ precompiling torch/extension.h (once per compiler, torch and flags; shared)
  main.cpp        g++: without/with the shared PCH, without/with the fast path's flags (fast_build.py)
  nvcc steps      cuda.cu split as ``nvcc --dryrun`` lists it: host preprocess (gcc -E), cudafe++ (the host
                  side's EDG front end, writes the host C++), device preprocess, cicc (device EDG front end
                  and NVVM), ptxas, fatbinary, host compile (g++ over cudafe++'s output); the source as
                  written, plain and fast, and lean (lean_headers.py: without its torch/extension.h), fast
  link            g++ -shared

Min and median over the repeats (on a shared machine the min is the better estimate of the work itself),
whether the fast path's objects equal the plain ones (nvcc's temporary file names aside), and whether the
lean build's device code (its sm_90 cubin, ``cuobjdump -xelf``) equals the as-written build's.

Measured on this project's 2-core CPU machine, shared with other jobs (torch 2.13 CPU, nvcc 13.0, g++ 12;
sm_90; ``--repeat 2``; min CPU-s; docs/results/data/build_phases_2026-12-02_cpu_01_relu.json, 33_row_softmax's
at git 676f647), 33_row_softmax at a load of ~2.5 / 01_relu at ~3 (contention inflates CPU seconds:
compare within a solution):

  cuda.cu as written, fast flags    66.9 / 84.8   cudafe++ 23.2 / 30.0, cicc 22.9 / 28.2, host g++ 17.5 / 22.6
  cuda.cu lean, fast flags          30.5 / 35.8   cudafe++ 11.9 / 13.4, cicc 7.8 / 9.9, host g++ 8.2 / 9.4
  main.cpp, fast flags              19.7 / 25.1 without the shared PCH, 11.7 / 14.8 with it
  link                               0.2 / 0.3
  cold build, shared PCH ready      78.6 / 99.0 as written -> 42.4 / 50.9 lean (the PCH itself: 34 / 44, once)

Lean and as-written device code identical in both (sm_90 cubins byte for byte). An earlier 01_relu run at a
lower load gave 75.5 -> 39.5. main.cpp with the PCH (-ftime-report, 01_relu): 43% instantiating pybind11's
binding code for the candidate's functions (overload resolution alone 23%), 55% optimising and emitting it
at the candidate's -O3, and ~2 s of system time mapping the 0.8 GB PCH; nothing there is output-neutral to
cut.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._results import ROOT, write_results
from benchmarks.sandbox.load_inline_set import set_dir

NVCC_TEMP = re.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}")
FORMS = {"nvcc fast": "as-written", "nvcc plain": "as-written", "nvcc lean": "lean"}  # the .cu each compiles


def load_inline_args(solution: Path | str) -> dict:
    """The literal keyword arguments of the solution's load_inline call (its source strings resolved);
    ``solution`` is its file or its source text."""
    tree = ast.parse(solution.read_text() if isinstance(solution, Path) else solution)
    consts = {
        n.targets[0].id: ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign)
        and isinstance(n.targets[0], ast.Name)
        and isinstance(n.value, ast.Constant)
    }
    call = next(
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline"
    )
    args = {}
    for kw in call.keywords:
        args[kw.arg] = consts[kw.value.id] if isinstance(kw.value, ast.Name) else ast.literal_eval(kw.value)
    return args


def build(solution: Path, cache: Path) -> Path:
    """Build in a fresh process as the compile stage does; the build directory."""
    env = {**os.environ, "KERNELS_ENV_PCH": "wait", "KERNELS_ENV_SANDBOX_CACHE": str(cache),
           "KERNELS_ENV_BUILD_ONLY": "1"}  # fmt: skip
    env.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # the H200's; a CPU-only torch has no GPU to ask
    cmd = [sys.executable, "-m", "benchmarks.sandbox.build_phases", "_build", str(solution), str(cache)]
    subprocess.run(cmd, env=env, check=True, cwd=ROOT)
    (directory,) = (cache / "torch_extensions" / "content").iterdir()
    return directory


def _build(solution: str, cache: str) -> None:
    from kernels_env.judge.build import hooks
    from kernels_env.judge.build.cache import BUILDS

    hooks.install_build_hooks(True, cache)
    hooks.content_keyed_extensions()
    import torch.utils.cpp_extension as ce

    ce.load_inline(**load_inline_args(Path(solution)))
    print("builds:", json.dumps(BUILDS))


def cpu_seconds(cmd: str, cwd: Path, env: dict | None = None) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def ninja_commands(directory: Path) -> dict[str, str]:
    out = subprocess.run(
        ["ninja", "-t", "commands"], cwd=directory, capture_output=True, text=True, check=True
    )
    cmds = {}
    for line in out.stdout.splitlines():
        target = re.search(r" -o (\S+)", line).group(1)
        cmds[target] = line
    return cmds


def nvcc_steps(cmd: str, keep: Path) -> tuple[list[tuple[str, str]], dict]:
    """(name, command) of each step ``nvcc --dryrun`` lists, and the environment its lines set."""
    keep.mkdir(parents=True, exist_ok=True)
    dry = cmd.replace(" -c ", f" --dryrun --keep --keep-dir {keep} -c ", 1)
    lines = subprocess.run(["bash", "-c", dry], capture_output=True, text=True).stderr.splitlines()
    env, steps = dict(os.environ), []
    for line in (ln[3:] for ln in lines if ln.startswith("#$ ")):
        assign = re.match(r"^([A-Za-z_]+)=(\S*)$", line)
        if assign:
            env[assign.group(1)] = assign.group(2)
            continue
        if re.match(r"^[A-Za-z_]+=", line) or line.startswith(("--", "rm ")):
            continue  # multi-word assignments (include lists) are in the commands already; dependency filter
        tool = os.path.basename(shlex.split(line.replace('"$CICC_PATH/', '"'))[0])
        if tool == "gcc" and " -E " in line:
            tool = "gcc -E (device)" if "-D__CUDA_ARCH__=" in line else "gcc -E (host)"
        elif tool == "gcc":
            tool = "gcc (host compile)"
        steps.append((tool, line))
    return steps, env


def variants(cmds: dict[str, str], out: Path, source: Path, lean: bool) -> dict[str, tuple[str, str]]:
    """phase -> (command, object it writes) for each replayed variant; the nvcc variants compile ``source``
    (``FORMS`` says which form of it to write there first), ``nvcc lean`` only if ``lean``."""
    from kernels_env.judge.build import fast_build

    main = next(c for t, c in cmds.items() if t == "main.o").replace("-MMD -MF main.o.d ", "")
    pch = re.search(r" -I(\S+/pch/\w+)", main)
    flags = " ".join(fast_build.FLAGS)
    cuda_flags = " ".join(fast_build.CUDA_FLAGS)

    def strip(cmd: str, *parts: str) -> str:
        for part in parts:
            cmd = cmd.replace(" " + part, "")
        return cmd

    found = {}
    for name, drop_pch, drop_fast in (
        ("main.cpp plain", True, True),
        ("main.cpp plain+pch", False, True),
        ("main.cpp fast", True, False),
        ("main.cpp fast+pch", False, False),
    ):
        drop = ([f"-I{pch.group(1)}"] if pch and drop_pch else []) + ([flags] if drop_fast else [])
        obj = out / (name.replace(" ", "_").replace("+", "_") + ".o")
        found[name] = (strip(main, *drop).replace("-o main.o", f"-o {obj}"), str(obj))  # fmt: skip
    cu = next(c for t, c in cmds.items() if t.endswith(".cuda.o"))
    built = re.search(r" -c (\S+/cuda\.cu) ", cu).group(1)
    cu = cu.replace(f" -c {built} ", f" -c {source} ")
    found["nvcc fast"] = (cu, "cuda.cuda.o")
    found["nvcc plain"] = (strip(cu, cuda_flags), "cuda.cuda.o")
    if lean:
        found["nvcc lean"] = (cu, "cuda.cuda.o")
    link = next(c for t, c in cmds.items() if t.endswith(".so"))
    found["link"] = (re.sub(r" -o \S+", f" -o {out / 'ext.so'}", link), str(out / "ext.so"))
    return found


def pch_seconds(solution: Path) -> float:
    """The shared PCH's build for this solution's flags, once."""
    from kernels_env.judge.build import pch

    args = load_inline_args(solution)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = pch.pch_command(args.get("extra_cflags"), args.get("extra_include_paths"), f"{tmp}/x.gch")
        return cpu_seconds(shlex.join(cmd) + " 2>/dev/null", Path(tmp))


def measure(args) -> dict:
    from kernels_env.judge.build import fast_build

    work = Path(tempfile.mkdtemp(prefix="build_phases-"))
    try:
        solution = set_dir() / "solutions" / f"{args.solution}.py"
        directory = build(solution, work / "cache")
        forms = cuda_sources(solution)
        source = work / "src" / "cuda.cu"  # every form at one path: objects embed it (e.g. in the cubin)
        source.parent.mkdir()
        runs = variants(ninja_commands(directory), work, source, "lean" in forms)
        samples: dict[str, list[float]] = {}
        shared: set[str] = set()  # nvcc steps the fast path's flags do not reach (cudafe++, cicc, ...)
        objects: dict[str, bytes] = {}
        cubins: dict[str, dict[str, bytes] | None] = {}
        if args.pch:
            samples["pch"] = [pch_seconds(solution)]
        for _ in range(args.repeat):
            for name, (cmd, obj) in runs.items():
                if name.startswith("nvcc"):
                    cwd = work / name.replace(" ", "_")
                    source.write_text(forms[FORMS[name]])
                    steps, env = nvcc_steps(cmd, cwd / "keep")
                    for step, line in steps:
                        samples.setdefault(f"{name}: {step}", []).append(cpu_seconds(line, cwd, env))
                        if name == "nvcc fast" and fast_build.FLAGS[-1] not in line:  # same in both
                            shared.add(step)
                    objects[name] = NVCC_TEMP.sub(b"", (cwd / obj).read_bytes())
                    cubins[name] = device_code(cwd / obj)
                else:
                    samples.setdefault(name, []).append(cpu_seconds(cmd, directory))
                    if obj.endswith(".o"):
                        objects[name] = Path(obj).read_bytes()
        stats = {k: {"min_s": round(min(v), 2), "median_s": round(statistics.median(v), 2),
                     "runs": [round(x, 2) for x in v]} for k, v in samples.items()}  # fmt: skip
        return {
            "solution": args.solution,
            "repeat": args.repeat,
            "machine": machine(),
            "phases": stats,
            "totals_min_s": totals(stats, shared),
            "nvcc_steps_without_the_flags": sorted(shared),
            "same_objects": {
                "main.cpp": len({objects[k] for k in objects if k.startswith("main.cpp")}) == 1,
                "nvcc": objects.get("nvcc fast") == objects.get("nvcc plain"),
                # None: no lean build (the source keeps its include) or no cuobjdump
                "device code lean": (
                    cubins["nvcc lean"] == cubins["nvcc fast"]
                    if "nvcc lean" in cubins and cubins["nvcc fast"] is not None
                    else None
                ),
            },
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def totals(stats: dict, shared: set[str]) -> dict:
    """Build CPU seconds (min of each phase) per variant. A step both as-written nvcc variants run with the
    same command counts with its min over both: their difference is this machine's noise, not the flags'."""

    def nvcc(kind: str) -> float:
        other = {"fast": "plain", "plain": "fast"}.get(kind)
        total = 0.0
        for key, value in stats.items():
            if key.startswith(f"nvcc {kind}: "):
                step = key.split(": ", 1)[1]
                pooled = stats.get(f"nvcc {other}: {step}", value) if other and step in shared else value
                total += min(value["min_s"], pooled["min_s"])
        return total

    link = stats["link"]["min_s"]
    out = {}
    for name, main, cu in (
        ("plain", "main.cpp plain", "plain"),
        ("plain+pch", "main.cpp plain+pch", "plain"),
        ("fast", "main.cpp fast", "fast"),
        ("fast+pch", "main.cpp fast+pch", "fast"),
        ("fast+lean", "main.cpp fast", "lean"),
        ("fast+pch+lean", "main.cpp fast+pch", "lean"),
    ):
        if any(k.startswith(f"nvcc {cu}: ") for k in stats):
            out[name] = round(stats[main]["min_s"] + nvcc(cu) + link, 2)
    return out


def machine() -> dict:
    """Where it ran: date, cores, load, and the compilers' versions."""
    import datetime
    import platform

    import torch

    def first_line(cmd: list[str]) -> str:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return (out.stdout.strip().splitlines() or [""])[-1]

    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "nvcc": first_line(["nvcc", "--version"]),
        "gcc": first_line(["gcc", "-dumpfullversion"]),
    }


def cuda_sources(solution: Path) -> dict[str, str]:
    """cuda.cu as load_inline writes it: {form: text} as written and, where the lean path applies, lean."""
    from kernels_env.judge.build import lean_headers
    from kernels_env.judge.build.full_header_names import IMPLICIT_HEADERS

    written = load_inline_args(solution)["cuda_sources"]
    forms = {"as-written": written, "lean": lean_headers.rewrite(written)}
    return {form: "\n".join([*IMPLICIT_HEADERS, text]) for form, text in forms.items() if text is not None}


def device_code(obj: Path) -> dict[str, bytes] | None:
    """{cubin name: bytes} embedded in ``obj`` (``cuobjdump -xelf all``), or None without cuobjdump."""
    from kernels_env.tools._sass import find_cuda_binary

    cuobjdump = find_cuda_binary("cuobjdump")
    if cuobjdump is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [cuobjdump, "-xelf", "all", str(obj)]
        subprocess.run(cmd, cwd=tmp, check=True, capture_output=True, timeout=120)
        return {p.name: p.read_bytes() for p in Path(tmp).iterdir()}


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "_build":
        _build(sys.argv[2], sys.argv[3])
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--solution", default="29_row_sum", help="a stem of the load_inline set")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-pch", dest="pch", action="store_false", help="do not time the PCH build itself")
    p.add_argument("--json", type=Path, default=None, help="results JSON (default: runs/benchmarks/)")
    args = p.parse_args(argv)
    result = measure(args)
    for name, s in result["phases"].items():
        print(f"  {name:34s} min {s['min_s']:7.2f} s   median {s['median_s']:7.2f} s")
    print("totals (min):", result["totals_min_s"], " same objects:", result["same_objects"])
    write_results("build_phases", result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
