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
