"""The benchmark's problems: its own (``benchmarks/sandbox/tasks/``) and example problems measured at the
benchmark's sizes. An example problem is read from ``examples/problems/``, so it is written once; only its
module-level size constants are set here (the examples are small for the CPU demo, the benchmark wants
kernels over 100 us on a GPU)."""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from pathlib import Path

from . import AREA, ROOT

TASKS = AREA / "tasks"
EXAMPLES = ROOT / "examples" / "problems"
# task -> (example problem, the sizes the benchmark measures it at)
FROM_EXAMPLES = {
    "01_relu": ("1_relu.py", {"batch_size": 4096, "dim": 8192}),
    "07_sum_reduction": ("5_sum_reduction.py", {"batch_size": 64, "dim1": 2048}),
    "10_matmul": ("3_matmul.py", {"N": 4096}),
}
# Where the sized example problems are written: the sandbox and the build processes take a problem file.
RENDERED = Path(tempfile.gettempdir()) / f"sandbox_throughput_problems_{os.getuid()}"


def task_names() -> list[str]:
    return sorted({p.stem for p in TASKS.glob("*.py") if not p.name.startswith("_")} | set(FROM_EXAMPLES))


def problem_source(task: str) -> str:
    """The KernelBench-format source of a task (an example problem with the benchmark's sizes set)."""
    if task not in FROM_EXAMPLES:
        return (TASKS / f"{task}.py").read_text()
    example, sizes = FROM_EXAMPLES[task]
    text = (EXAMPLES / example).read_text()
    for name, value in sizes.items():
        text, n = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", text, flags=re.MULTILINE)
        if n != 1:
            raise ValueError(f"{task}: {EXAMPLES / example} sets {name} {n} times at module level, not once")
    return text


def problem_path(task: str) -> Path:
    """A file holding ``problem_source(task)`` under the task's name."""
    if task not in FROM_EXAMPLES:
        return TASKS / f"{task}.py"
    path = RENDERED / f"{task}.py"
    text = problem_source(task)
    if not path.is_file() or path.read_text() != text:
        RENDERED.mkdir(parents=True, exist_ok=True)
        tmp = RENDERED / f".{task}.{uuid.uuid4().hex}.tmp"  # build processes may write it at the same time
        tmp.write_text(text)
        os.replace(tmp, path)
    return path
