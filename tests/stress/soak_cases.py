"""The soak's candidates: one category per kind of candidate (correct and wrong Triton kernels, crashes,
hangs, memory blow-ups, forged replies, illegal addresses), each source unique, and the verdict each earns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernels_env.rules.messages import Source

ROOT = Path(__file__).resolve().parents[2]

REFERENCE = ROOT / "tests" / "redteam" / "problems" / "relu.py"
ATTACKS = ROOT / "tests" / "redteam" / "solutions" / "attacks"
FORGERIES = ("forge_reply_protocol_fd.py", "forge_compile_report.py", "forge_reply_stdout.py")

TRITON = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x - shift, 0.0), mask=mask)


@triton.jit
def spin_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    total = tl.sum(acc, axis=0) + 1.0
    # Never false: a kernel that does not end. The loop reads memory (volatile: every iteration) and its
    # result is stored: the first form (total += 1, result unused) was compiled away on the GPU, so the
    # "hang" returned at once and was judged correct (H200 soak, 2026-12-01).
    while total > 0.0:
        total = total + 1.0 + 0.0 * tl.load(x_ptr, volatile=True)
    tl.store(y_ptr + offs, acc + 0.0 * total, mask=offs < n)


@triton.jit
def far_store_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs + (1 << 40), x, mask=offs < n)  # far outside any allocation


def relu(x, shift=0.0):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), shift, BLOCK=256)
    return y

{header}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{body}
"""


@dataclass(frozen=True)
class Category:
    name: str
    expect: str  # alternatives joined by "|": a status, or "rejected:<check>"
    source: Callable[[int], str | Source]
    gpu_only: bool = False


def triton(body: str, header: str = "") -> Callable[[int], str]:
    def make(i: int) -> str:
        indented = "\n".join("        " + line for line in body.strip().splitlines())
        return f"# soak candidate {i}\n" + TRITON.format(header=header, body=indented)

    return make


def _header(file: str) -> dict[str, str]:
    """The red-team header's fields (``# redteam: class=... expect=... helpers=a.py,b.py``)."""
    header = (ATTACKS / file).read_text().splitlines()[0]
    return dict(part.split("=", 1) for part in header.split() if "=" in part)


def attack(file: str) -> Callable[[int], str | Source]:
    """A red-team attack as a candidate: its source, or a workspace with its helper modules (the corpus's
    ``helpers=``), made unique per candidate so no two share a build."""
    text = (ATTACKS / file).read_text()
    helpers = [h for h in _header(file).get("helpers", "").split(",") if h]
    if not helpers:
        return lambda i: f"# soak candidate {i}\n" + text
    files = {h: (ATTACKS.parent / h).read_text() for h in helpers}
    return lambda i: Source(
        name=f"{file[:-3]}_{i}", files={"model_new.py": f"# soak candidate {i}\n" + text, **files}
    )


def attack_expect(file: str) -> str:
    """The red-team header's ``expect=`` (a check name, or several with ``|``) as rejections."""
    return "|".join(f"rejected:{check}" for check in _header(file)["expect"].split("|"))


HOG = "hog = []\nwhile True:\n    hog.append(torch.ones(2**26))"
CATEGORIES = [
    Category("correct", "correct", triton("return relu(x)")),
    Category("wrong", "incorrect", triton("return relu(x, shift=0.25)")),
    Category("abort", "runtime_error", triton("import os\nos.abort()")),
    Category("segfault", "runtime_error", triton("import ctypes\nctypes.string_at(0)")),
    Category("hang_import", "timeout", triton("return relu(x)", header="while True:\n    pass")),
    Category("hang_forward", "timeout", triton("while True:\n    pass")),
    Category(
        "hang_kernel",
        "timeout",
        triton("y = torch.empty_like(x)\nspin_kernel[(1,)](x, y, x.numel(), BLOCK=1024)\nreturn y"),
    ),
    Category("memory", "runtime_error", triton(HOG)),
    Category(
        "illegal_address",
        "runtime_error|rejected:launch_error",
        triton("y = torch.empty_like(x)\nfar_store_kernel[(4,)](x, y, x.numel(), BLOCK=256)\nreturn y"),
        gpu_only=True,
    ),
    *(Category(f"forged:{f[:-3]}", attack_expect(f), attack(f)) for f in FORGERIES),
]
CACHES = ("torchinductor_",)  # torch's compile cache lives in TMPDIR by design: persistent, not a leak
NEEDLES = {"abort": "SIGABRT", "segfault": "SIGSEGV", "memory": "memory"}  # what the error must name


def earned(category: Category, result: dict) -> bool:
    """Whether ``result`` is the verdict this category's candidate earned."""
    for option in category.expect.split("|"):
        status, _, check = option.partition(":")
        if result.get("status") == status and (not check or result.get("check") == check):
            needle = NEEDLES.get(category.name)
            return needle is None or needle in (result.get("error") or "")
    return False
