"""Bugs a first attempt may have, each a small edit of the correct solution's text that a person makes:
a dropped bounds mask, a flattened output, an output allocated in the wrong dtype, a Triton kernel that uses
a name it never defined, a Python syntax slip. ``inject`` applies one and says what it did; a bug that does
not apply to a source (nothing to edit) raises ``ValueError``."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The verdicts each bug is meant to earn in the sandbox (the corpus checks the real one is among them). A
# dropped mask reads and writes past the buffer: the CPU sandbox's Triton interpreter aborts the worker
# (runtime_error); on a GPU it may fault (runtime_error) or just compute garbage (incorrect).
EXPECTED = {
    "missing_mask": ("runtime_error", "incorrect"),
    "wrong_shape": ("incorrect",),
    "wrong_dtype": ("rejected", "incorrect"),  # the judge's output_dtype policy check
    "undefined_name": ("runtime_error", "compile_error"),
    "syntax_error": ("compile_error",),
}
BUG_KINDS = tuple(EXPECTED)


@dataclass(frozen=True)
class Bug:
    kind: str
    source: str  # the buggy solution
    note: str  # what went wrong, as the fixing turn says it


def _once(pattern: str, repl: str, text: str, kind: str, last: bool = False) -> str:
    hits = list(re.finditer(pattern, text))
    if not hits:
        raise ValueError(f"{kind}: nothing to edit (no match for {pattern!r})")
    m = hits[-1] if last else hits[0]
    return text[: m.start()] + m.expand(repl) + text[m.end() :]


def inject(source: str, kind: str, *, out_rank: int, dtype: str) -> Bug:
    if kind == "missing_mask":
        # the first kernel's row/flat loads and stores lose their bounds mask (reads and writes past the end)
        m = re.search(r"@triton\.jit\ndef (\w+)\((.|\n)*?(?=\n\n\n|\Z)", source)
        if m is None or "mask=mask" not in m.group(0):
            raise ValueError("missing_mask: no masked kernel")
        body = m.group(0).replace(", mask=mask, other=0.0)", ")").replace(", mask=mask)", ")")
        body = re.sub(r', mask=mask, other=float\("-?inf"\)\)', ")", body)
        note = f"{m.group(1)} indexes past the end of the tensor: its loads and stores need the bounds mask"
        return Bug(kind, source[: m.start()] + body + source[m.end() :], note)
    if kind == "wrong_shape":
        if out_rank < 2:
            raise ValueError("wrong_shape: the output is already flat")
        text = _once(r"\n        return x\n", r"\n        return x.reshape(-1)\n", source, kind, last=True)
        return Bug(kind, text, "the output came back flattened; it must keep the reference's shape")
    if kind == "wrong_dtype":
        wrong = "torch.float64" if dtype == "float32" else "torch.float32"
        text = _once(r"dtype=x\.dtype\)", f"dtype={wrong})", source, kind, last=True)
        return Bug(kind, text, f"the output buffer was allocated as {wrong}; it must be the input's dtype")
    if kind == "undefined_name":
        text = _once(r"tl\.load\(x_ptr \+ (base \+ )?offs\b", r"tl.load(x_ptr + \1offsets", source, kind)
        return Bug(kind, text, "the kernel reads `offsets`, a name it never defined (it is `offs`)")
    if kind == "syntax_error":
        text = _once(r"\n    def forward\((.*)\):\n", r"\n    def forward(\1)\n", source, kind)
        return Bug(kind, text, "the forward's `def` line lost its colon")
    raise ValueError(f"unknown bug kind {kind!r} (known: {', '.join(BUG_KINDS)})")
