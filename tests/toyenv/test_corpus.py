"""The pretraining corpus: one kernel per op, never an optimisation of the list, and the detector of those."""

from __future__ import annotations

import pytest

from research.toyenv import (
    HELDOUT,
    OPTIMISATIONS,
    CorpusConfig,
    corpus_plans,
    corpus_tasks,
    optimisation_shares,
    optimisations,
    parse_plan,
)

from .conftest import SMALL


def test_corpus_plans_are_one_kernel_per_op_and_unoptimised(tasks):
    pairs = corpus_plans(tasks.tasks)
    assert len(pairs) >= 2 * len(tasks.tasks)
    for task, plan in pairs:
        assert plan.ops == task.ops and all(len(k.steps) == 1 for k in plan.kernels)
        assert optimisations(plan) == frozenset(), plan.text()
    assert optimisation_shares(p for _, p in pairs) == {**{n: 0.0 for n in OPTIMISATIONS}, "any": 0.0}
    # the corpus still varies its (unoptimised) settings, so a pretrained policy keeps some entropy
    assert len({p.text() for _, p in pairs}) > len(tasks.tasks)


@pytest.mark.parametrize(
    "plan, expected",
    [
        ("K relu K softmax", set()),
        ("K relu softmax", {"fusion"}),
        ("K relu V4", {"vector_width"}),
        ("K relu B2048", {"large_block"}),
        ("K relu B1024", set()),
        ("K softmax R4", {"multi_row"}),
        ("K softmax W8", {"many_warps"}),
        ("K relu W2", set()),
        ("K relu M0", {"no_tail_mask"}),
        ("K relu scale B4096 V2 W16 M0 K softmax R2", {"fusion", "vector_width", "large_block", "many_warps",
                                                        "no_tail_mask", "multi_row"}),
    ],
)  # fmt: skip
def test_optimisation_detector(plan, expected):
    assert optimisations(parse_plan(plan)) == expected


def test_shares():
    plans = [parse_plan("K relu softmax"), parse_plan("K relu K softmax"), parse_plan("K relu V2 K softmax")]
    shares = optimisation_shares(plans)
    assert shares["fusion"] == pytest.approx(1 / 3) and shares["vector_width"] == pytest.approx(1 / 3)
    assert shares["any"] == pytest.approx(2 / 3) and shares["multi_row"] == 0.0


def test_corpus_config_refuses_optimised_settings():
    with pytest.raises(ValueError, match="unoptimised"):
        CorpusConfig(tiles=[[1024, 4], [2048, 4]], tile_weights=[])
    with pytest.raises(ValueError, match="unoptimised"):
        CorpusConfig(tiles=[[256, 8]], tile_weights=[])
    with pytest.raises(ValueError, match="tile_weights"):
        CorpusConfig(tiles=[[32, 1], [64, 1]], tile_weights=[1.0])
    with pytest.raises(ValueError, match="pairs"):
        CorpusConfig(tiles=[[32, 1, 2]], tile_weights=[])


def test_corpus_tiles_follow_their_weights_one_per_plan(tasks):
    """The naive tile is the likeliest (the pretrained greedy plan is slow), every other stays present, and
    a plan uses one tile throughout (a good tile is one choice, not one per kernel)."""
    from collections import Counter

    cfg = CorpusConfig(plans_per_task=1)
    pairs = corpus_plans(corpus_tasks(SMALL, 400), cfg)
    tiles = Counter()
    for _, p in pairs:
        assert len({k.warps for k in p.kernels}) == 1 and len({k.block for k in p.kernels if k.block}) <= 1
        block = next((k.block for k in p.kernels if k.block), None)
        if block is not None:
            tiles[(block, p.kernels[0].warps)] += 1
    assert tiles.most_common(1)[0][0] == (32, 1) and set(tiles) == {tuple(t) for t in cfg.tiles}
    n = sum(tiles.values())
    for t, w in zip(cfg.tiles, cfg.tile_weights):  # 400 draws: within 4 binomial standard deviations
        assert abs(tiles[tuple(t)] / n - w) < 4 * (w * (1 - w) / n) ** 0.5 + 1e-9, (t, tiles)
    uniform = CorpusConfig(plans_per_task=1, tile_weights=[])
    flat = Counter(
        (k.block, k.warps)
        for _, p in corpus_plans(corpus_tasks(SMALL, 400), uniform)
        for k in p.kernels[:1]
        if k.block
    )
    assert flat[(32, 1)] < tiles[(32, 1)]


def test_corpus_tasks_avoid_held_out_chains(tasks):
    held = tasks.split("test") + tasks.split(HELDOUT)
    corpus = corpus_tasks(SMALL, 30, avoid=held)
    assert len(corpus) == 30 and all(t.split == "corpus" for t in corpus)
    assert not {t.signature for t in corpus} & {t.signature for t in held}
    assert any(t.categories and SMALL.heldout_category in t.categories for t in corpus)
    no_heldout = corpus_tasks(SMALL, 20, avoid=held, include_heldout_category=False)
    assert all(SMALL.heldout_category not in t.categories for t in no_heldout)
