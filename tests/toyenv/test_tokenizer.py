"""The plan tokenizer: ids <-> tokens, prompts, plan decoding from generated ids, and a <= 20M decoder."""

from __future__ import annotations

import pytest

from research.toyenv import VOCAB, PlanError, PlanTokenizer, baseline_plan, parse_plan, prompt_tokens


def test_ids_round_trip_and_specials_first():
    tok = PlanTokenizer()
    assert len(tok) == len(VOCAB) < 128
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.sep_id) == (0, 1, 2, 3)
    ids = list(range(len(tok)))
    assert tok.encode(tok.decode(ids)) == ids
    with pytest.raises(ValueError, match="not in the plan vocabulary"):
        tok.encode(["relu", "conv2d"])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([len(tok)])


def test_prompt_and_plan_encoding(tasks):
    tok = PlanTokenizer()
    task = tasks.tasks[0]
    prompt = tok.decode(tok.encode_prompt(task))
    assert prompt[0] == "<bos>" and prompt[-1] == "<sep>" and prompt[1 : 1 + len(task.ops)] == list(task.ops)
    assert prompt_tokens(task.at_size(4, 100))[-2:] == ["D128", "npow2"]
    assert prompt_tokens(task.at_size(4, 1024))[-2:] == ["D1024", "pow2"]
    plan = baseline_plan(task)
    ids = tok.encode_plan(plan)
    assert ids[-1] == tok.eos_id
    assert tok.decode_plan(ids + [tok.pad_id, 7, 9]) == plan  # everything after <eos> is ignored
    with pytest.raises(PlanError):
        tok.decode_plan(tok.encode(["K", "<sep>", "relu"]))


def test_longest_sequences_fit_the_model_context():
    tok = PlanTokenizer()
    plan = parse_plan(" ".join(["K softmax ax0"] * 8))
    assert len(tok.encode_plan(plan)) + 4 + 8 <= tok.model_config().max_position_embeddings


def test_model_config_is_tiny():
    tok = PlanTokenizer()
    cfg = tok.model_config()
    assert cfg.vocab_size == len(tok) and cfg.eos_token_ids == (tok.eos_id,) and cfg.pad_token_id == 0
    assert cfg.num_params() <= 20_000_000
    with pytest.raises(ValueError, match="20M"):
        tok.model_config(hidden_size=1024, intermediate_size=4096, num_layers=12, num_heads=16, head_dim=64)
