"""``--model`` of the GPU model benchmarks: each gets its base config from ``base_config(args)``, which is the
conf/model shape's architecture (0.5b, the default: exactly the config they were hard-wired to), and the
training benchmarks derive their attempt plans from ``models.memory_plan`` where the 0.5B plans do not apply.
No GPU, no model init."""

import argparse
import dataclasses

import pytest

import models
from benchmarks._common.shapes import RUNTIME_FIELDS, SHAPES, add_model_arg, model_shape
from benchmarks.models import _decode_phases, _plans, ppo_update, train_step
from benchmarks.models.memory_plan import DEVICE_GIB
from benchmarks.rl import rl_step

ARCH = [f.name for f in dataclasses.fields(models.ModelConfig) if f.name not in RUNTIME_FIELDS]
DEFAULTS = {f.name: f.default for f in dataclasses.fields(models.ModelConfig)}
# each benchmark's base_config and the flag that makes it ignore --model
BENCHMARKS = {
    "train_step": (train_step.base_config, "tiny"),
    "ppo_update": (ppo_update.base_config, "smoke"),
    "decode_throughput": (_decode_phases.base_config, "tiny"),
    "rl_step": (rl_step.base_config, "smoke"),
}


def ns(**kw):
    base = dict(model="0.5b", tiny=False, smoke=False, plan=None, seqs=None, chunk=2048)
    return argparse.Namespace(**{**base, **kw})


def arch(cfg) -> dict:
    return {k: getattr(cfg, k) for k in ARCH}


@pytest.mark.parametrize("bench", sorted(BENCHMARKS))
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_base_config_is_the_shape_arch_with_default_runtime(bench, name):
    cfg = BENCHMARKS[bench][0](ns(model=name))
    assert arch(cfg) == arch(model_shape(name))
    # runtime fields stay the ModelConfig defaults: each benchmark sets its own per attempt, as before
    assert {k: getattr(cfg, k) for k in RUNTIME_FIELDS} == {k: DEFAULTS[k] for k in RUNTIME_FIELDS}


@pytest.mark.parametrize("bench", sorted(BENCHMARKS))
def test_default_model_is_todays_config(bench):
    parser = argparse.ArgumentParser()
    add_model_arg(parser)
    assert parser.parse_args([]).model == "0.5b"
    assert BENCHMARKS[bench][0](ns(model=parser.parse_args([]).model)) == models.qwen2_0_5b_config()


@pytest.mark.parametrize("bench", sorted(BENCHMARKS))
def test_smoke_mode_ignores_model(bench):
    fn, flag = BENCHMARKS[bench]
    tiny = fn(ns(model="3b", **{flag: True}))
    assert tiny == fn(ns(model="0.5b", **{flag: True}))
    assert tiny.num_params() < 10_000_000


def test_unknown_model_is_a_usage_error(capsys):
    parser = argparse.ArgumentParser()
    add_model_arg(parser)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--model", "13b"])
    assert exc.value.code == 2 and "13b" in capsys.readouterr().err


def test_decode_hf_shape_follows_the_model():
    from models import config_to_hf

    assert _decode_phases.hf_shape(ns()) == config_to_hf(models.qwen2_0_5b_config())
    hf = _decode_phases.hf_shape(ns(model="1.5b"))
    ref = model_shape("1.5b")
    assert (hf["hidden_size"], hf["num_hidden_layers"], hf["num_key_value_heads"]) == (1536, 28, 2)
    assert hf["intermediate_size"] == ref.intermediate_size and hf["vocab_size"] == ref.vocab_size


def test_half_billion_keeps_the_hand_sized_plans():
    assert train_step.plan_for(ns(), train_step.base_config(ns()), 4096) == train_step.GPU_PLAN
    assert ppo_update.plan_for(ns(), ppo_update.base_config(ns())) == ppo_update.GPU_PLAN
    assert ppo_update.plan_for(ns(smoke=True), None) == ppo_update.SMOKE_PLAN
    assert train_step.plan_for(ns(tiny=True), None, 64) == train_step.TINY_PLAN


def _check_derived(plan, cfg, seq, *, critic, accumulate):
    """~32K tokens per step, remat lightest first ending with full, and every policy before full fits
    (and every policy left out does not) per models.memory_plan."""
    assert plan and all(a == "cudnn" for a, *_ in plan)
    assert all(b * seq == max(seq, 32768) for _, b, _, _ in plan)
    remats = [r for *_, r in plan]
    assert remats[-1] == "full"
    assert remats == [r for r in _plans.REMAT_ORDER if r in remats]  # lightest first, no repeats
    device = DEVICE_GIB * 1024**3
    for r in _plans.REMAT_ORDER[:-1]:
        c = cfg.replace(attention_impl="cudnn", remat=r)
        micros = [m for _, b, m, rr in plan if rr == r]
        batch = plan[0][1]
        if micros:
            s = models.MemorySettings(micro_batch_tokens=batch // micros[0] * seq, seq_len=seq,
                                      chunk_size=2048, critic=critic, accumulate=micros[0] > 1)
            assert models.memory_plan(c, s).fits(device)
        else:  # left out: even the smallest micro-batch it may take (one row when accumulating) does not fit
            tokens = seq if accumulate else batch * seq
            s = models.MemorySettings(micro_batch_tokens=tokens, seq_len=seq, chunk_size=2048, critic=critic,
                                      accumulate=accumulate and batch > 1)
            assert not models.memory_plan(c, s).fits(device)
    return remats


@pytest.mark.parametrize(("name", "seq"), [("1.5b", 8192), ("3b", 32768)])
def test_train_step_derived_plan(name, seq):
    args = ns(model=name, seq=seq)
    base = train_step.base_config(args)
    plan = train_step.plan_for(args, base, seq)
    cfg = train_step.attempt_config(base, "cudnn", "none")
    _check_derived([(a, b, 1, r) for a, b, r in plan], cfg, seq, critic=False, accumulate=False)
    assert all(len(x) == 3 for x in plan)  # run by train_step's (attention, batch, remat) loop


@pytest.mark.parametrize(("name", "seq"), [("1.5b", 8192), ("3b", 32768)])
def test_ppo_update_derived_plan(name, seq):
    args = ns(model=name, seqs=str(seq))
    base = ppo_update.base_config(args)
    plan = ppo_update.plan_for(args, base)
    assert list(plan) == [seq]
    cfg = ppo_update.attempt_config(base, "cudnn", "none", seq)
    remats = _check_derived(plan[seq], cfg, seq, critic=True, accumulate=True)
    if name == "3b":  # a 3B actor + critic at 32K tokens without remat is far past an H200
        assert "none" not in remats


def test_ppo_update_plan_flag_and_default_lengths():
    args = ns(model="1.5b", plan="cudnn:4:2:full,xla:2:1:save_attn", seqs="8192,16384")
    plan = ppo_update.plan_for(args, ppo_update.base_config(args))
    assert plan == {s: [("cudnn", 4, 2, "full"), ("xla", 2, 1, "save_attn")] for s in (8192, 16384)}
    args = ns(model="1.5b")
    assert list(ppo_update.plan_for(args, ppo_update.base_config(args))) == list(ppo_update.GPU_PLAN)
    # 0.5b at a length GPU_PLAN lacks is derived, not a KeyError
    args = ns(seqs="8192")
    assert ppo_update.plan_for(args, ppo_update.base_config(args))[8192][-1][-1] == "full"


@pytest.mark.parametrize("text", ["cudnn:4:full", "cudnn:4:2:bogus", "flash:4:2:none", "cudnn:0:1:full"])
def test_ppo_update_bad_plan_is_one_line_exit_2(text, capsys):
    with pytest.raises(SystemExit) as exc:
        ppo_update.plan_for(ns(plan=text), None)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "--plan" in err


def test_train_step_plan_flag():
    args = ns(plan="cudnn:8:none,xla:1:full")
    assert train_step.plan_for(args, None, 4096) == [("cudnn", 8, "none"), ("xla", 1, "full")]
    with pytest.raises(SystemExit) as exc:
        train_step.plan_for(ns(plan="cudnn:8:2:none"), None, 4096)
    assert exc.value.code == 2
