"""The Flax policy, token-in-token-out, two episodes at once (one batched sampler call per step): the
trajectory's tokens equal a reconstruction from the chat format (first prompt, then per turn the sampled
tokens and the template delta of the observation), ``response_mask`` marks exactly the sampled tokens, and
the sampler's log-probs equal a recomputing forward pass (``models.token_logprobs``) of the whole
trajectory, with the KV cache kept across turns."""

from __future__ import annotations

import threading

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import models
from kernels_env.session import WorkspaceSession
from research.agent import Budgets, run_episode
from research.agent.policies.chat import TINY_TEMPLATE
from research.agent.policies.flax_policy import FlaxPolicy
from research.agent.tools import tool_specs

from .conftest import FAST

SMALL = dict(num_layers=2, hidden_size=64, head_dim=16, intermediate_size=128, compute_dtype="float32")
# fp32: the sampler (cached decode) and the full forward differ only in summation order; the sampler's
# own log-prob test uses the same 2e-5.
ATOL = 2e-5


@pytest.fixture(scope="module")
def policy():
    model = models.init_model(models.tiny_config(**SMALL), seed=1)
    p = FlaxPolicy(
        model,
        models.default_tokenizer(),
        template=TINY_TEMPLATE,
        temperature=1.0,
        max_tokens=12,
        batch_buckets=(2,),
        max_wait_s=5.0,
        seed=3,
    )
    yield p
    p.close()


def test_token_in_token_out_two_concurrent_episodes(policy, relu_problem, sandbox):
    results = [None, None]

    def one(i):
        with WorkspaceSession(relu_problem, client=sandbox) as ws:
            results[i] = run_episode(
                f"t{i}", relu_problem.read_text(), policy, ws, Budgets(max_turns=3), FAST
            )

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert any(c["batch"] == 2 for c in policy.batcher.calls)  # the two episodes shared sampler calls
    assert any(c["new_tokens"] < c["prefill_tokens"] for c in policy.batcher.calls[1:])  # cache continued
    model = nnx.merge(policy.sampler.graphdef, policy.sampler.state)
    chat, tools = policy.chat, tool_specs(False)
    for res in results:
        assert res.end_reason == "max_turns" and res.verdict["status"] == "no_solution"
        tok = res.trajectory.to_dict()
        prompt, resp, mask, lps = (
            tok["prompt_ids"],
            tok["response_ids"],
            tok["response_mask"],
            tok["logprobs"],
        )
        assert len(resp) == len(mask) == len(lps) and len(tok["turns"]) == 3
        # reconstruction without re-tokenising any generated text
        assert prompt == chat.prompt_ids(res.messages[:2], tools)
        rebuilt, expect_mask = [], []
        msgs = res.messages[2:]
        for turn in tok["turns"]:
            sampled = resp[turn["start"] : turn["end"]]
            assert turn["start"] == len(rebuilt)
            rebuilt += sampled
            expect_mask += [1] * len(sampled)
            a = next(j for j, m in enumerate(msgs) if m["role"] == "assistant")
            new = []
            for m in msgs[a + 1 :]:
                if m["role"] == "assistant":
                    break
                new.append(m)
            msgs = msgs[a + 1 + len(new) :]
            obs = chat.observation_ids(new, tools, sampled[-1])  # every turn's results are appended
            rebuilt += obs
            expect_mask += [0] * len(obs)
        # the observation after the last turn is not part of the trajectory (nothing learns from it)
        while expect_mask[-1] == 0:
            rebuilt.pop(), expect_mask.pop()
        assert rebuilt == resp and expect_mask == mask
        spans = [k for k, t in enumerate(tok["turns"]) for _ in range(t["end"] - t["start"])]
        assert [i for i in tok["turn_ids"] if i >= 0] == spans
        assert all(t["invalid"] for t in tok["turns"])  # a random model writes no valid tool call
        # sampler log-probs == a recomputing forward pass over the whole trajectory
        ids = jnp.asarray([prompt + resp])
        ref = np.asarray(models.token_logprobs(model, ids))[0, len(prompt) - 1 :]
        got = np.asarray(lps)
        on = np.asarray(mask, bool)
        np.testing.assert_allclose(got[on], ref[on], atol=ATOL, rtol=0)
        assert (got[~on] == 0).all()


def test_tool_call_parsing_and_observation_tokens(policy):
    from research.agent.policies.chat import parse_tool_calls

    text, calls = parse_tool_calls(
        'plan <tool_call>\n{"name": "verify", "arguments": {}}\n</tool_call><tool_call>{"nam</tool_call>', 1
    )
    assert text == "plan" and calls[0].name == "verify" and calls[0].parsed() == ({}, None)
    assert calls[1].error.startswith("malformed tool call")
    _, calls = parse_tool_calls('<tool_call>{"name": "submit"', 2)
    assert calls[0].error == "unterminated <tool_call> block"
    chat = policy.chat
    tool = [{"role": "tool", "tool_call_id": "a", "name": "verify", "content": "status: correct"}]
    ids = chat.observation_ids(tool, [], chat.eot_id)
    assert chat.tok.decode(ids) == (
        "\n<|im_start|>user\n<tool_response>\nstatus: correct\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert chat.observation_ids(tool, [], 123)[0] == chat.eot_id  # a cut-off turn is closed first


def test_a_models_checkpoint_plays_as_a_flax_policy(tmp_path):
    """policy=flax policy.model=DIR also takes a ``models`` checkpoint (what a toy-shaped or custom run
    saves): same weights, the bundled tokenizer and TINY_TEMPLATE unless tokenizer files sit beside it."""
    from research.agent.policies.flax_policy import load_policy_model

    cfg = models.tiny_config(
        hidden_size=64,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        head_dim=32,
        intermediate_size=128,
        compute_dtype="float32",
    )
    saved = models.init_model(cfg, seed=3)
    models.save_checkpoint(tmp_path / "ck", saved)
    model, tok, template = load_policy_model(str(tmp_path / "ck"), dtype="float32")
    assert template == TINY_TEMPLATE and len(tok) == len(models.default_tokenizer())
    ids = jnp.asarray([[1, 2, 3, 4]])
    np.testing.assert_array_equal(np.asarray(model(ids)), np.asarray(saved(ids)))
    models.default_tokenizer().save_pretrained(str(tmp_path / "ck"))
    assert load_policy_model(str(tmp_path / "ck"), dtype="float32")[2] is None  # its own tokenizer files
    with pytest.raises(FileNotFoundError, match="neither"):
        load_policy_model(str(tmp_path / "missing"))
