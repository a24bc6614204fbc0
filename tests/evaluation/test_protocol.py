"""The study protocol: disjoint seeded splits, the held-out category, KernelBench decontamination by op
chain, the manifest's integrity and the touched-once guard."""

from __future__ import annotations

import json
import random

import pytest

from research.evaluation.protocol import (
    DEV,
    KERNELBENCH,
    TEST_HELDOUT,
    TEST_SEEN,
    TRAIN,
    ProtocolConfig,
    ProtocolError,
    load_protocol,
    make_protocol,
    record_evaluation,
    split_tasks,
    write_protocol,
)

from .conftest import SHARED_KERNELBENCH

# op -> (category, forward expression); a task is a chain of them over x
OPS = {
    "relu": ("elementwise", "torch.relu({})"),
    "tanh": ("elementwise", "torch.tanh({})"),
    "sigmoid": ("elementwise", "torch.sigmoid({})"),
    "exp": ("elementwise", "torch.exp({})"),
    "softmax": ("attention", "torch.softmax({}, dim=-1)"),
    "amax": ("reduction", "torch.amax({}, dim=-1)"),
}
SOURCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.rand({n}, 64)]


def get_init_inputs():
    return []
"""


def _task(i: int, chain: list[str]) -> dict:
    expr = "x"
    for op in chain:
        expr = OPS[op][1].format(expr)
    cats = list(dict.fromkeys(OPS[op][0] for op in chain))
    return {
        "id": f"t{i:04d}",
        "source": SOURCE.format(expr=expr, n=16 + i),
        "categories": cats,
        "signature": f"{' > '.join(chain)} #{i}",
    }


def pool(n_plain: int = 200, n_reduction: int = 60) -> list[dict]:
    """Elementwise/attention chains, and chains ending in a reduction (the held-out category)."""
    rng = random.Random(0)
    plain = ["relu", "tanh", "sigmoid", "exp", "softmax"]
    out = [_task(i, rng.sample(plain, rng.randint(1, 3))) for i in range(n_plain)]
    out += [_task(n_plain + i, [*rng.sample(plain, rng.randint(1, 2)), "amax"]) for i in range(n_reduction)]
    return out


CFG = ProtocolConfig(seed=3, heldout_category="reduction")


def _ids(p, split):
    return set(p.splits[split])


def test_splits_disjoint_sized_and_category_held_out():
    tasks = pool()
    p = make_protocol(tasks, CFG)
    splits = [TRAIN, DEV, TEST_SEEN, TEST_HELDOUT]
    for x, y in [(x, y) for i, x in enumerate(splits) for y in splits[i + 1 :]]:
        assert not _ids(p, x) & _ids(p, y), (x, y)
    assert len(p.splits[TEST_SEEN]) == len(p.splits[TEST_HELDOUT]) == len(p.splits[DEV]) == 48
    cats = {t["id"]: set(t["categories"]) for t in tasks}
    for split in (TRAIN, DEV, TEST_SEEN):
        assert all("reduction" not in cats[i] for i in p.splits[split]), split
    assert all("reduction" in cats[i] for i in p.splits[TEST_HELDOUT])
    # every task is somewhere: train, one of the evaluation splits, or an unused held-out-category task
    placed = set().union(*(_ids(p, s) for s in splits), p.unused)
    assert placed == set(cats) and len(p.unused) == 60 - 48
    assert len(p.splits[TRAIN]) == 200 - 96 and p.unseen_test_categories == []
    assert KERNELBENCH not in p.splits and p.decontam == {"ran": False}


def test_pool_too_small_is_one_clear_line():
    with pytest.raises(ProtocolError) as exc:
        make_protocol(pool(n_reduction=40), CFG)
    assert "'reduction' has 40 tasks" in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(ProtocolError, match="test_seen \\+ dev \\+ train need at least 97"):
        make_protocol(pool(n_plain=90), CFG)
    with pytest.raises(ProtocolError, match="n_test_seen=20 is below the 48 tasks"):
        make_protocol(pool(), ProtocolConfig(n_test_seen=20))
    with pytest.raises(ProtocolError, match="no category has 48 tasks"):
        make_protocol(pool(n_plain=60, n_reduction=10), ProtocolConfig())


def test_duplicate_signatures_count_once():
    tasks = pool()
    tasks.append({**tasks[0], "id": "copy-of-t0000"})
    p = make_protocol(tasks, CFG)
    assert p.duplicates == {"t0000": "copy-of-t0000"} or p.duplicates == {"copy-of-t0000": "t0000"}
    assert not set(p.duplicates) & set().union(*map(set, p.splits.values()))


def test_deterministic_and_order_free():
    tasks = pool()
    a = make_protocol(tasks, CFG)
    shuffled = list(tasks)
    random.Random(1).shuffle(shuffled)
    b = make_protocol(shuffled, CFG)
    assert a.manifest() == b.manifest() and a.sha256 == b.sha256
    c = make_protocol(tasks, ProtocolConfig(seed=4, heldout_category="reduction"))
    assert c.splits[TEST_SEEN] != a.splits[TEST_SEEN]
    # not given, the held-out category is drawn by seed among those with >= 48 tasks and >= 97 others
    inside = {c: sum(c in t["categories"] for t in tasks) for c in ("elementwise", "attention", "reduction")}
    eligible = {c for c, k in inside.items() if k >= 48 and len(tasks) - k >= 97}
    assert eligible == {"attention", "reduction"}, inside  # elementwise is in nearly every task
    drawn = {make_protocol(tasks, ProtocolConfig(seed=s)).heldout_category for s in range(8)}
    assert drawn == eligible


KB_RELU = SOURCE.format(expr="torch.relu(x)", n=8)
KB_CONV = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(x)
"""
KB_CONV_RELU = KB_CONV.replace("return self.conv(x)", "return torch.relu(self.conv(x))")
KB_AMAX = SOURCE.format(expr="torch.amax(x, dim=-1)", n=8)
KB_TANH_EXP = SOURCE.format(expr="torch.exp(torch.tanh(x))", n=8)


def _kernelbench(root):
    (root / "level1").mkdir(parents=True)
    (root / "level2").mkdir()
    (root / "level1" / "1_ReLU.py").write_text(KB_RELU)
    (root / "level1" / "2_Conv.py").write_text(KB_CONV)
    (root / "level1" / "3_Amax.py").write_text(KB_AMAX)
    (root / "level1" / "4_TanhExp.py").write_text(KB_TANH_EXP)
    (root / "level1" / "5_NoModel.py").write_text("x = 1\n")
    (root / "level1" / "6_ConvReLU.py").write_text(KB_CONV_RELU)  # relu is trained, conv+relu is not
    (root / "level2" / "1_ReLU_again.py").write_text(KB_RELU)  # another level: not read
    return root


def test_kernelbench_decontam_by_op_chain(tmp_path):
    p = make_protocol(
        pool(),
        ProtocolConfig(
            seed=3, heldout_category="reduction", kernelbench_dir=str(_kernelbench(tmp_path / "kb"))
        ),
    )
    # relu and tanh+exp are inside training chains; amax only in held-out (non-training) tasks; conv nowhere
    assert p.splits[KERNELBENCH] == ["level1/2_Conv", "level1/3_Amax", "level1/6_ConvReLU"]
    dropped = {d["problem"]: d for d in p.decontam["dropped"]}
    assert set(dropped) == {"level1/1_ReLU", "level1/4_TanhExp", "level1/5_NoModel"}
    assert dropped["level1/1_ReLU"]["train_task"] in p.splits[TRAIN]
    assert dropped["level1/4_TanhExp"]["train_task"] in p.splits[TRAIN]
    assert dropped["level1/5_NoModel"]["reason"] == "no ops read from the source"
    assert p.decontam["problems"] == 6 and p.decontam["kept"] == 3
    # without the held-out category the amax problem is in training chains and goes too
    q = make_protocol(
        pool(), ProtocolConfig(seed=3, heldout_category="attention", kernelbench_dir=str(tmp_path / "kb"))
    )
    assert q.splits[KERNELBENCH] == ["level1/2_Conv", "level1/6_ConvReLU"]


def test_kernelbench_dir_missing_is_one_line(tmp_path):
    with pytest.raises(ProtocolError, match="not a KernelBench checkout"):
        make_protocol(pool(), ProtocolConfig(heldout_category="reduction", kernelbench_dir=str(tmp_path)))


@pytest.mark.skipif(not (SHARED_KERNELBENCH / "level1").is_dir(), reason="no shared KernelBench checkout")
def test_shared_kernelbench_level1_decontam():
    p = make_protocol(
        pool(), ProtocolConfig(seed=3, heldout_category="reduction", kernelbench_dir=str(SHARED_KERNELBENCH))
    )
    kept = p.splits[KERNELBENCH]
    assert not any(k.endswith(("_ReLU", "_Tanh", "_Sigmoid")) for k in kept)  # ops of training chains
    assert any("conv" in k.lower() for k in kept) and p.decontam["problems"] == 100
    assert p.decontam["kept"] + len(p.decontam["dropped"]) == 100


def test_manifest_roundtrip_and_touched_once_guard(tmp_path):
    path = tmp_path / "protocol.json"
    p = make_protocol(pool(), CFG)
    write_protocol(p, path)
    assert load_protocol(path).sha256 == p.sha256
    write_protocol(p, path)  # the same protocol again: fine
    e = record_evaluation(path, TEST_SEEN, "full-s0")
    assert e["split"] == TEST_SEEN and not e["forced"]
    with pytest.raises(ProtocolError) as exc:
        record_evaluation(path, TEST_SEEN, "full-s0")
    assert "already evaluated for run 'full-s0'" in str(exc.value) and "\n" not in str(exc.value)
    record_evaluation(path, TEST_SEEN, "full-s1")  # another run: its own first look
    record_evaluation(path, TEST_HELDOUT, "full-s0")
    assert record_evaluation(path, DEV, "full-s0") is None and record_evaluation(path, DEV, "full-s0") is None
    forced = record_evaluation(path, TEST_SEEN, "full-s0", force=True)
    assert forced["forced"]
    log = load_protocol(path).evaluations
    assert [(x["split"], x["run"], x["forced"]) for x in log] == [
        (TEST_SEEN, "full-s0", False),
        (TEST_SEEN, "full-s1", False),
        (TEST_HELDOUT, "full-s0", False),
        (TEST_SEEN, "full-s0", True),
    ]
    with pytest.raises(ProtocolError, match="no kernelbench_l1 split"):
        record_evaluation(path, KERNELBENCH, "full-s0")
    with pytest.raises(ProtocolError, match="no protocol at"):
        record_evaluation(tmp_path / "missing" / "protocol.json", TEST_SEEN, "full-s0")


def test_fixed_protocol_cannot_be_replaced_or_edited(tmp_path):
    path = tmp_path / "protocol.json"
    write_protocol(make_protocol(pool(), CFG), path)
    other = make_protocol(pool(), ProtocolConfig(seed=9, heldout_category="reduction"))
    with pytest.raises(ProtocolError, match="already fixes another protocol"):
        write_protocol(other, path)
    m = json.loads(path.read_text())
    m["splits"][TEST_SEEN] = m["splits"][TEST_SEEN][1:]
    path.write_text(json.dumps(m))
    with pytest.raises(ProtocolError, match="edited after the protocol was fixed"):
        load_protocol(path)
    with pytest.raises(ProtocolError, match="no protocol at"):
        load_protocol(tmp_path / "none.json")


def test_split_tasks_checks_sources():
    tasks = pool()
    p = make_protocol(tasks, CFG)
    by_split = split_tasks(p, tasks)
    assert [t["id"] for t in by_split[TEST_SEEN]] == p.splits[TEST_SEEN]
    changed = [dict(t) for t in tasks]
    victim = next(t for t in changed if t["id"] == p.splits[DEV][0])
    victim["source"] += "\n# edited\n"
    with pytest.raises(ProtocolError, match=f"task '{victim['id']}' changed since the protocol was fixed"):
        split_tasks(p, changed)


def test_toy_task_pool():
    """The real toy task set (research.toyenv) as the pool: its held-out category stays out of training."""
    from research.toyenv.tasks import ToyTaskConfig, make_tasks

    toy = make_tasks(ToyTaskConfig(decontam_dir=None, num_train=110, num_test=0, num_heldout=50))
    p = make_protocol(toy.tasks, ProtocolConfig(heldout_category="normalization", n_dev=10))
    by_split = split_tasks(p, toy.tasks)
    assert all("normalization" not in t.categories for s in (TRAIN, DEV, TEST_SEEN) for t in by_split[s])
    assert len(by_split[TEST_HELDOUT]) == 48 and len(by_split[TRAIN]) == 110 - 58
