"""The legal moves of a plan prefix: every walk through them is a plan the task renders, every plan the
renderer takes is such a walk (fusion included), corpus plans are walks, and the smoothing distribution is
uniform over moves."""

from __future__ import annotations

import itertools
import random

import pytest

from research.toyenv import RenderError, corpus_plans, format_plan, parse_plan, render_plan
from research.toyenv.legal import EOS, PlanPrefix, legal_moves, smoothing_target


def _walk(task, rng):
    state = PlanPrefix(task)
    while True:
        moves = state.moves()
        tok = rng.choice(moves[rng.choice(sorted(moves))])
        if tok == EOS:
            return state.tokens
        state.push(tok)


def test_random_walks_are_plans_the_task_renders(tasks):
    rng = random.Random(0)
    fused = 0
    for task in tasks.tasks:
        for _ in range(20):
            toks = _walk(task, rng)
            plan = parse_plan(toks)
            assert plan.ops == task.ops
            render_plan(task, plan)  # raises if the walk left what the renderer takes
            fused += any(len(k.steps) > 1 for k in plan.kernels)
    assert fused > 0.2 * 20 * len(tasks.tasks)


def test_fusion_is_offered_exactly_where_the_renderer_can_fuse(tasks):
    """Every grouping of each task's ops into consecutive kernels: the walk that writes it offers each
    fusion step iff the renderer takes the grouping (an independent check: render_plan itself)."""
    checked = 0
    for task in tasks.tasks:
        n = len(task.ops)
        for cuts in itertools.product((0, 1), repeat=n - 1):  # 1: a new kernel before op i + 1
            toks = ["K", task.ops[0]]
            ok_walk = True
            for i, cut in enumerate(cuts, start=1):
                moves = legal_moves(task, toks)
                if cut:
                    toks += ["K", task.ops[i]]
                elif "op" in moves and moves["op"] == (task.ops[i],):
                    toks.append(task.ops[i])
                else:
                    ok_walk = False
                    break
            try:
                render_plan(task, toks)
                renders = True
            except RenderError:
                renders = False
            assert ok_walk == renders, (task.ops, toks, cuts)
            checked += 1
    # The generated tasks run row ops on the last dim and reduce last (elementwise ops may follow), so the
    # renderer fuses any grouping of them; the check still guards against offering one it would refuse.
    assert checked > 100


def test_corpus_plans_are_walks_and_wrong_tokens_are_not(tasks):
    for task, plan in corpus_plans(tasks.tasks[:12]):
        state = PlanPrefix(task)
        for tok in format_plan(plan):
            state.push(tok)
        assert "eos" in state.moves()
    task = next(t for t in tasks.tasks if len(set(t.ops)) > 1 and len(t.ops) > 2)
    other = next(o for o in task.ops if o != task.ops[0])
    for bad in (["B64"], ["K", other], ["K", task.ops[0], "B64", "B128"], ["K", task.ops[0], "R2"]):
        if bad[-1] == "R2" and "R" in legal_moves(task, bad[:-1]):
            continue  # a row op first: R is its setting
        with pytest.raises(ValueError, match="not a legal move"):
            legal_moves(task, bad)
    # no end before every op is placed; settings of the open kernel only once; nothing after eos's moves
    moves = legal_moves(task, ["K", task.ops[0], "W4"])
    assert "eos" not in moves and "W" not in moves and "kernel" in moves


def test_smoothing_target_is_uniform_over_moves_then_tokens(tasks):
    task = next(t for t in tasks.tasks if len(t.ops) > 1)
    moves = legal_moves(task, ["K", task.ops[0]])
    q = smoothing_target(moves)
    assert sum(q.values()) == pytest.approx(1.0)
    for toks in moves.values():
        assert sum(q[t] for t in toks) == pytest.approx(1 / len(moves))
        assert len({q[t] for t in toks}) == 1


def test_detour_inputs_are_smoothed_walks_and_labels_the_corpus_next_token(tasks):
    """``detour``: rate 0 gives the corpus plan; otherwise every input is a plan the task renders, each
    label is the corpus's next token after the inputs before it (never an optimisation: only tokens of the
    corpus plan), and at rate 1 the inputs are draws from ``smoothing_target``."""
    import collections

    import numpy as np

    from research.toyenv import corpus_next, detour

    def values(toks):  # the corpus plan's setting tokens by key (one tile per plan)
        out = {}
        for t in toks:
            if t[0] in "BVWRM" and t[1:].isdigit():
                out.setdefault(t[0], t)
        return out

    rng = np.random.default_rng(0)
    pairs = corpus_plans(tasks.split("train")[:12])
    changed = 0
    for task, plan in pairs:
        toks = [*format_plan(plan), EOS]
        assert detour(task, toks, 0.0, rng) == (toks, toks)
        for _ in range(10):
            inputs, labels = detour(task, toks, 0.5, rng)
            assert inputs[-1] == EOS and len(inputs) == len(labels)
            render_plan(task, " ".join(inputs[:-1]))
            assert set(labels) <= set(toks)
            state = PlanPrefix(task)
            for x, y in zip(inputs, labels):
                assert corpus_next(state, values(toks)) == y
                state.push(x)
            changed += inputs != toks
    assert changed > 0.9 * 10 * len(pairs)
    # corpus_next on corpus prefixes is the corpus plan itself
    task, plan = pairs[0]
    toks, state = [*format_plan(plan), EOS], PlanPrefix(task)
    for t in toks:
        assert corpus_next(state, values(toks)) == t
        state.push(t)
    # rate 1: the token after "K op0" follows the smoothing distribution of that prefix
    task, plan = next((t, p) for t, p in pairs if len(t.ops) > 1)
    toks = [*format_plan(plan), EOS]
    n, seen = 4000, collections.Counter()
    for _ in range(n):
        inputs, _ = detour(task, toks, 1.0, rng)
        seen[inputs[2]] += 1
    want = smoothing_target(legal_moves(task, ["K", task.ops[0]]))
    assert set(seen) <= set(want)
    for tok, p in want.items():
        assert abs(seen[tok] / n - p) < 0.025, (tok, seen[tok] / n, p)
