"""Decontamination against an evaluation set by Python-AST similarity, and source-level op signatures.

Similarity of two sources = ``difflib.SequenceMatcher`` ratio of their normalised AST token sequences
(pre-order node types; variable names, docstrings and large literals erased; API attribute names such as
``Conv2d`` or ``gelu`` kept). A task whose nearest eval problem scores above the threshold (default 0.9) is
dropped, and the nearest problem and its score are reported. A multiset upper bound of the ratio (the
``quick_ratio`` bound, vectorised over all eval problems) prunes exact comparisons, so the nearest problem
is exact but costs a few ``SequenceMatcher`` calls, not one per eval problem.
"""

from __future__ import annotations

import ast
import difflib
from collections import Counter
from pathlib import Path

import numpy as np

KEEP_NAMES = {"torch", "nn", "F", "math", "self"}


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _tokens(node: ast.AST, out: list[str]) -> None:
    if isinstance(node, ast.expr_context | ast.Load | ast.Store) or _is_docstring(node):
        return
    if isinstance(node, ast.Name):
        out.append(f"Name:{node.id}" if node.id in KEEP_NAMES else "Name")
        return
    if isinstance(node, ast.Attribute):
        self_attr = isinstance(node.value, ast.Name) and node.value.id == "self"
        out.append("Attr:self" if self_attr else f"Attr:{node.attr}")
        if not self_attr:
            _tokens(node.value, out)
        return
    if isinstance(node, ast.Constant):
        v = node.value
        small = isinstance(v, int) and not isinstance(v, bool) and -10 < v < 10
        out.append(f"Const:{v}" if small else f"Const:{type(v).__name__}")
        return
    if isinstance(node, ast.FunctionDef):
        keep = node.name in {"forward", "__init__", "get_inputs", "get_init_inputs"}
        out.append(f"Def:{node.name}" if keep else "Def")
    elif isinstance(node, ast.keyword):
        out.append(f"kw:{node.arg}")
    elif isinstance(node, ast.ClassDef):
        out.append("Class")
    else:
        out.append(type(node).__name__)
    for child in ast.iter_child_nodes(node):
        _tokens(child, out)


def ast_tokens(source: str) -> list[str]:
    out: list[str] = []
    _tokens(ast.parse(source), out)
    return out


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, ast_tokens(a), ast_tokens(b), autojunk=False).ratio()


class EvalIndex:
    """Tokenised eval problems (``name -> source``) with a vectorised pre-filter."""

    def __init__(self, problems: dict[str, str]):
        self.names = sorted(problems)
        self.tokens = [ast_tokens(problems[n]) for n in self.names]
        vocab = sorted({t for toks in self.tokens for t in toks})
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.counts = np.zeros((len(self.names), len(vocab)), dtype=np.int32)
        for i, toks in enumerate(self.tokens):
            for t, c in Counter(toks).items():
                self.counts[i, self.vocab[t]] = c
        self.lengths = np.array([len(t) for t in self.tokens], dtype=np.int64)

    @classmethod
    def from_dir(cls, path: str | Path) -> EvalIndex:
        root = Path(path).expanduser()
        if not root.is_dir():
            raise FileNotFoundError(f"decontamination eval dir {root} does not exist")
        problems = {}
        for f in sorted(root.rglob("*.py")):
            try:
                src = f.read_text()
                ast.parse(src)
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue  # not a problem file; nothing to compare against
            problems[str(f.relative_to(root))] = src
        if not problems:
            raise ValueError(f"decontamination eval dir {root} holds no parseable .py problems")
        return cls(problems)

    def __len__(self) -> int:
        return len(self.names)

    def nearest(self, source: str) -> tuple[str | None, float]:
        """The most similar eval problem and the exact similarity."""
        toks = ast_tokens(source)
        vec = np.zeros(len(self.vocab), dtype=np.int32)
        for t, c in Counter(toks).items():
            if t in self.vocab:
                vec[self.vocab[t]] = c
        bound = 2.0 * np.minimum(self.counts, vec).sum(axis=1) / (self.lengths + len(toks))
        best_name, best = None, -1.0
        for i in np.argsort(-bound, kind="stable"):
            if bound[i] <= best:
                break
            r = difflib.SequenceMatcher(None, toks, self.tokens[i], autojunk=False).ratio()
            if r > best:
                best_name, best = self.names[i], r
        return best_name, max(best, 0.0)


def source_ops(source: str) -> list[str]:
    """Ops a KernelBench-format source uses, in order: nn modules built in ``__init__`` and calls in
    ``forward`` (``F.gelu`` -> ``gelu``, ``self.conv(x)`` -> ``Conv2d``, ``x.transpose`` -> ``transpose``)."""
    tree = ast.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        return []
    modules: dict[str, str] = {}
    ops: list[str] = []
    for fn in (n for n in model.body if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(fn):
            if fn.name == "__init__" and isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                target = node.targets[0]
                func = node.value.func
                if isinstance(target, ast.Attribute) and isinstance(func, ast.Attribute):
                    modules[target.attr] = func.attr
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    for node in ast.walk(forward) if forward else []:
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute):
                if isinstance(f.value, ast.Name) and f.value.id == "self":
                    ops.append(modules.get(f.attr, f.attr))
                else:
                    ops.append(f.attr)
            elif isinstance(f, ast.Name):
                ops.append(f.id)
        elif isinstance(node, ast.BinOp):
            ops.append(type(node.op).__name__.lower())
    return ops


def source_signature(source: str) -> str:
    """Normalised operator-graph signature of any KernelBench-format source (dedup for loaded datasets)."""
    return " > ".join(source_ops(source))
