"""The moves a plan prefix allows for a task: what a base model that knows the plan language (but not which
plans are fast) would consider next.

A *move* is a class of next tokens: the task's next op (fused into the open kernel, or opening one after
``K``), a new kernel (``K``), one setting key (``B``, ``V``, ``W``, ``R``, ``M``: any of its values), or
``<eos>`` once every op is placed. ``legal_moves(task, prefix)`` lists the moves that keep the plan one
that renders for the task: ops in the task's order, settings of the open kernel's kind each at most once,
fusion only where ``render`` can fuse (one reduction axis, nothing row-wise after a reduction in the same
kernel). Axis tokens are not moves: the tasks' row ops run on the last dim, the default.

``smoothing_target`` spreads a probability mass uniformly over the legal moves and, within a move, over its
tokens: the pretraining's grammar-aware smoothing (``research.rl.pipeline.pretrain``), which gives the
pretrained policy support on every legal plan (fused ones included) without any such plan in its corpus.
Uniform over tokens instead would give the eight block sizes eight times the weight of fusing the next op.

``detour(task, tokens, rate, rng)`` is the other half of that: a corpus plan whose tokens each leave the
corpus with probability ``rate`` for a draw from ``smoothing_target`` (the moves a smoothed policy samples),
with, as labels, what the corpus would write next after the prefix so far (``corpus_next``). Trained on
corpus plans alone, a model sees only corpus prefixes; sampled with smoothing it leaves them at some token
of most plans (a setting skipped, a kernel closed early, an op fused) and then, on a prefix it never saw,
loses its place: the shipped policy's invalid samples were mostly an op of the task written after ``K`` out
of turn, with no fusion before it. The labels never name an optimisation: a detour is input, never a target.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np

from .grammar import (
    BLOCKS,
    DEFAULT_BLOCK,
    DEFAULT_ROWS,
    DEFAULT_VEC,
    DEFAULT_WARPS,
    KERNEL,
    MASKS,
    ROWS,
    VECS,
    WARPS,
    Kernel,
    Plan,
    Step,
)
from .ops import MAP, TOY_OPS
from .render import RenderError, _bind, _check_shapes
from .tasks import OpCall, ToyTask
from .tokenizer import EOS

SETTING_VALUES = {
    "B": tuple(f"B{b}" for b in BLOCKS),
    "V": tuple(f"V{v}" for v in VECS),
    "W": tuple(f"W{w}" for w in WARPS),
    "R": tuple(f"R{r}" for r in ROWS),
    "M": tuple(MASKS),
}
_MAP_KEYS, _ROW_KEYS = "BVWM", "RWM"


@functools.lru_cache(maxsize=65536)
def _fusable(calls: tuple[OpCall, ...], groups: tuple[int, ...]) -> bool:
    """Whether kernels of ``groups`` op counts (in the task's order) can render: ``_bind`` and
    ``_check_shapes`` (which read only a task's calls) on a plan with those groups and the remaining ops one
    per kernel."""
    ops = [c.name for c in calls]
    sizes = list(groups) + [1] * (len(ops) - sum(groups))
    kernels, i = [], 0
    for n in sizes:
        kernels.append(Kernel.make([Step(o) for o in ops[i : i + n]]))
        i += n
    try:
        _check_shapes(_bind(SimpleNamespace(calls=calls), Plan(tuple(kernels))))  # type: ignore[arg-type]
    except RenderError:
        return False
    return True


class PlanPrefix:
    """A plan being written for ``task``, one token at a time: ``moves()`` after the tokens so far."""

    def __init__(self, task: ToyTask):
        self.task = task
        self.groups: list[int] = []  # ops per kernel so far
        self.used: set[str] = set()  # setting keys of the open kernel
        self.tokens: list[str] = []

    def moves(self) -> dict[str, tuple[str, ...]]:
        return _moves(self.task.calls, self.groups, self.used)

    def setting_keys(self) -> str:
        """The setting keys of the open kernel's kind, in canonical order (``BVWM`` or ``RWM``)."""
        return _keys(self.task.calls, self.groups)

    def push(self, tok: str) -> None:
        """Append ``tok``; ``ValueError`` when no legal move allows it."""
        if not any(tok in toks for toks in self.moves().values()):
            raise ValueError(f"token {len(self.tokens)} ({tok!r}) is not a legal move after {self.tokens}")
        if tok == KERNEL:
            self.groups.append(0)
            self.used = set()
        elif tok in TOY_OPS:
            self.groups[-1] += 1
        elif tok != EOS:
            self.used.add(tok[0])
        self.tokens.append(tok)


def legal_moves(task: ToyTask, prefix: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``{move: tokens}`` after the plan tokens ``prefix`` (no ``<eos>`` in it); ``ValueError`` when the
    prefix itself leaves the language (a token no legal move allows)."""
    state = PlanPrefix(task)
    for tok in prefix:
        state.push(tok)
    return state.moves()


def _moves(calls: tuple[OpCall, ...], groups: list[int], used: set[str]) -> dict[str, tuple[str, ...]]:
    ops, placed = [c.name for c in calls], sum(groups)
    if not groups:
        return {"kernel": (KERNEL,)}
    if groups[-1] == 0:  # right after K: the next op opens the kernel
        return {"op": (ops[placed],)}
    out: dict[str, tuple[str, ...]] = {}
    if not used and placed < len(ops) and _fusable(calls, (*groups[:-1], groups[-1] + 1)):
        out["op"] = (ops[placed],)
    for key in _keys(calls, groups):
        if key not in used:
            out[key] = SETTING_VALUES[key]
    if placed < len(ops):
        out["kernel"] = (KERNEL,)
    else:
        out["eos"] = (EOS,)
    return out


def _keys(calls: tuple[OpCall, ...], groups: list[int]) -> str:
    placed = sum(groups)
    kernel_ops = [c.name for c in calls[placed - groups[-1] : placed]]
    return _MAP_KEYS if all(TOY_OPS[o].kind == MAP for o in kernel_ops) else _ROW_KEYS


def smoothing_target(moves: dict[str, tuple[str, ...]]) -> dict[str, float]:
    """The smoothing distribution over ``moves`` (``legal_moves``, ``PlanPrefix.moves``): uniform over the
    moves, then over each move's tokens (sums to 1)."""
    out: dict[str, float] = {}
    for toks in moves.values():
        for t in toks:
            out[t] = out.get(t, 0.0) + 1.0 / len(moves) / len(toks)
    return out


# The grammar's defaults, as tokens: what a setting a corpus plan lacks would be.
DEFAULT_VALUES = {
    "B": f"B{DEFAULT_BLOCK}",
    "V": f"V{DEFAULT_VEC}",
    "W": f"W{DEFAULT_WARPS}",
    "R": f"R{DEFAULT_ROWS}",
    "M": "M1",  # the tail mask on (grammar.Kernel's default)
}


def corpus_next(state: PlanPrefix, values: dict[str, str]) -> str:
    """The token a corpus plan writes after ``state``'s prefix, whatever that prefix: the next op after
    ``K``; the open kernel's missing settings in canonical order, valued from ``values`` (``{"B": "B512",
    ...}``, ``DEFAULT_VALUES`` for a key it lacks); then ``K`` while ops remain, else ``<eos>``. On a corpus
    prefix this is the corpus plan's own next token."""
    groups, placed = state.groups, sum(state.groups)
    if not groups:
        return KERNEL
    if groups[-1] == 0:
        return state.task.ops[placed]
    for key in state.setting_keys():
        if key not in state.used:
            return values.get(key, DEFAULT_VALUES[key])
    return KERNEL if placed < len(state.task.ops) else EOS


def detour(task: ToyTask, tokens: Sequence[str], rate: float, rng) -> tuple[list[str], list[str]]:
    """``(inputs, labels)`` of equal length for corpus plan ``tokens`` (ending in ``<eos>``): input token i
    is, with probability ``rate`` (``rng.random()``), a draw from ``smoothing_target`` of the legal moves
    after inputs[:i] (``rng.choice``; it may be the corpus's own token), else ``labels[i]``, the corpus's
    next token after inputs[:i] (``corpus_next``, the settings' values read from ``tokens``). Rate 0 gives
    ``tokens`` twice. Every input is a legal plan for the task, ending in ``<eos>``."""
    values: dict[str, str] = {}
    for t in tokens:
        if t not in (KERNEL, EOS) and t not in TOY_OPS:
            values.setdefault(t[0], t)
    state, inputs, labels = PlanPrefix(task), [], []
    while not inputs or inputs[-1] != EOS:
        label = corpus_next(state, values)
        tok = label
        if rate > 0 and rng.random() < rate:
            target = smoothing_target(state.moves())
            toks = list(target)
            tok = toks[rng.choice(len(toks), p=np.asarray(list(target.values())) / sum(target.values()))]
        state.push(tok)
        inputs.append(tok)
        labels.append(label)
    return inputs, labels
