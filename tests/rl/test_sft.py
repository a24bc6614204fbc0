"""Cold-start SFT on demonstrations (research.rl.pipeline.sft) with the bundled tokenizer and TINY_TEMPLATE:
a demo renders into exactly the tokens the Flax agent loop holds for the same turns (policy turns decode to
the template's hand-written rendering of each assistant message, ``<|im_end|>`` included; observations
masked out), the demos file's errors name file and line, drops are counted by reason, and NLL steps of
``Learner.rft_step`` over ``sft_batches`` start at a float64 reference NLL of the assistant tokens and
lower it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import models
from research import rl
from research.agent.episode import NO_TOOL_CALL
from research.agent.policies.chat import TINY_TEMPLATE, ChatFormat, TemplateError, parse_tool_calls
from research.agent.policies.flax_policy import FlaxEpisode
from research.agent.tools import tool_specs
from research.rl.pipeline.sft import (
    DemoFileError,
    SFTConfig,
    demo_trajectories,
    render_demo,
    sft_batches,
)

WRITE_ARGS = json.dumps({"path": "model_new.py", "content": 'import torch\n# {braces} "quotes"\n'})
CONV = [
    {"role": "system", "content": "You write CUDA kernels."},
    {"role": "user", "content": "Make ReLU fast."},
    {
        "role": "assistant",
        "content": "I will write the kernel.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": WRITE_ARGS}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "write_file", "content": "wrote 40 bytes"},
    {"role": "assistant", "content": "Written; thinking."},
    {"role": "user", "content": NO_TOOL_CALL},
    {
        "role": "assistant",
        "content": "Check and submit.",
        "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "verify", "arguments": "{}"}},
            {"id": "c3", "type": "function", "function": {"name": "submit", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "name": "verify", "content": "status: correct"},
    {"role": "tool", "tool_call_id": "c3", "name": "submit", "content": "submitted"},
]
ASSISTANT = [i for i, m in enumerate(CONV) if m["role"] == "assistant"]


def tiny_turn(msg) -> str:
    """TINY_TEMPLATE's rendering of one assistant message after the generation prompt, written by hand."""
    calls = "".join(
        f'\n<tool_call>\n{{"name": "{c["function"]["name"]}", "arguments": {c["function"]["arguments"]}}}'
        "\n</tool_call>"
        for c in msg.get("tool_calls") or []
    )
    return (msg["content"] or "") + calls + "<|im_end|>"


def tiny_observation(msgs) -> str:
    """TINY_TEMPLATE's rendering of what follows an assistant turn, up to the next generation prompt."""
    out = "\n"
    for j, m in enumerate(msgs):
        if m["role"] == "user":
            out += f"<|im_start|>user\n{m['content']}<|im_end|>\n"
        else:
            first = j == 0 or msgs[j - 1]["role"] != "tool"
            last = j == len(msgs) - 1 or msgs[j + 1]["role"] != "tool"
            out += (
                "<|im_start|>user" if first else ""
            ) + f"\n<tool_response>\n{m['content']}\n</tool_response>"
            out += "<|im_end|>\n" if last else ""
    return out + "<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def chat():
    return ChatFormat(models.default_tokenizer(), TINY_TEMPLATE)


@pytest.fixture(scope="module")
def tools():
    return tool_specs(False)


def decode(chat, ids) -> str:
    return chat.tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def demo(messages=CONV, reward=1.0, status="correct", task="level1/19_ReLU"):
    return {
        "task": task,
        "messages": messages,
        "reward": reward,
        "verdict": {"status": status, "reward": reward},
        "end_reason": "submitted",
    }


def write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_render_matches_template_and_mask(chat, tools):
    t = render_demo(chat, CONV, tools, task_id="relu", reward=-0.5)
    assert t.reward == -0.5 and t.task_id == "relu" and t.verdict is None
    assert t.prompt_ids == chat.prompt_ids(CONV[:2], tools)
    assert decode(chat, t.prompt_ids).endswith(
        "<|im_start|>user\nMake ReLU fast.<|im_end|>\n<|im_start|>assistant\n"
    )
    # (a) each policy turn is exactly its assistant message as the template renders it, stop token included
    assert len(t.turns) == 3
    for turn, i in zip(t.turns, ASSISTANT):
        ids = t.response_ids[turn.start : turn.end]
        assert decode(chat, ids) == tiny_turn(CONV[i]) and ids[-1] == chat.eot_id
        assert ids.count(chat.eot_id) == 1
    # the turns parse back to the demonstrator's tool calls
    _, calls = parse_tool_calls(chat.decode(t.response_ids[t.turns[0].start : t.turns[0].end]), 1)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("write_file", json.loads(WRITE_ARGS))]
    # (b) prompt + response == the whole rendered conversation tokenised at once (up to the last turn's end)
    full = chat.render(CONV[: ASSISTANT[-1] + 1], tools)
    assert full.endswith("<|im_end|>\n")
    assert t.prompt_ids + t.response_ids == chat.encode(full[: -len("\n")])
    # (c) mask 1 exactly on the assistant turns, the observations between them rendered as the template does
    spans = rl.turn_spans(t.response_mask)
    assert spans == [(u.start, u.end) for u in t.turns] and t.turn_ids == [
        next((k for k, (a, b) in enumerate(spans) if a <= j < b), -1) for j in range(len(t.response_ids))
    ]
    gaps = [(spans[k][1], spans[k + 1][0]) for k in range(len(spans) - 1)]
    expect = [tiny_observation(CONV[ASSISTANT[k] + 1 : ASSISTANT[k + 1]]) for k in range(2)]
    assert [decode(chat, t.response_ids[a:b]) for a, b in gaps] == expect
    assert spans[-1][1] == len(t.response_ids)  # the trailing tool results (after submit) are not kept
    assert t.logprobs == [0.0] * len(t.response_ids)


class _ScriptedBatcher:
    """Stands in for the Flax policy's GenerationBatcher: returns the demo's turns as sampled tokens."""

    def __init__(self, outs):
        self.outs, self.contexts = list(outs), []

    def register(self):
        pass

    def unregister(self, cache=None):
        pass

    def generate(self, context, cache=None, key=0):
        self.contexts.append(list(context))
        out = self.outs.pop(0)
        return out, [0.0] * len(out), "stop", None


def test_tokens_equal_the_flax_agent_loop(chat, tools):
    """(d) FlaxEpisode (research.agent's token policy) driven through the same turns holds the same ids."""
    t = render_demo(chat, CONV, tools)
    sampled = [chat.encode(tiny_turn(CONV[i])) for i in ASSISTANT]  # what a sampler emitted, independently
    batcher = _ScriptedBatcher(sampled)
    ep = FlaxEpisode(
        SimpleNamespace(chat=chat, batcher=batcher, keep_cache=False, record=None),
        chat.prompt_ids(CONV[:2], tools),
        tools,
    )
    for k, i in enumerate(ASSISTANT):
        action = ep.act(CONV[:i])
        assert [c.name for c in action.tool_calls] == [
            c["function"]["name"] for c in CONV[i].get("tool_calls", [])
        ]
        if k + 1 < len(ASSISTANT):
            ep.observe(CONV[i + 1 : ASSISTANT[k + 1]])  # as run_episode does after each turn's tool results
    got = ep.tokens().build().to_dict()
    assert got["prompt_ids"] == t.prompt_ids
    assert got["response_ids"] == t.response_ids and got["response_mask"] == t.response_mask
    assert [(u["start"], u["end"]) for u in got["turns"]] == [(u.start, u.end) for u in t.turns]
    # every generation context was the demo trajectory's prefix up to that turn
    assert batcher.contexts == [t.prompt_ids + t.response_ids[: u.start] for u in t.turns]


def test_empty_content_turn_is_tokenised_as_the_sampler_continues(chat, tools):
    """A turn with no text before its call renders "assistant\\n" + "\\n<tool_call>": the generation prompt's
    newline is already in the context, so the turn is its own encoding (the whole conversation tokenised at
    once would merge the two newlines, a token no sampler could emit there); the text is still exact."""
    msgs = CONV[:2] + [{**CONV[2], "content": None}]
    t = render_demo(chat, msgs, tools)
    assert t.response_ids == chat.encode(tiny_turn({**CONV[2], "content": None}))
    assert decode(chat, t.prompt_ids + t.response_ids) == chat.render(msgs, tools)[: -len("\n")]
    assert t.prompt_ids + t.response_ids != chat.encode(chat.render(msgs, tools)[: -len("\n")])


def test_tool_arguments_rendered_as_the_template_wants(chat, tools):
    """A Qwen2.5-style template applies ``tojson`` to the arguments: they are given as an object, so the turn
    holds the JSON object the model should write (not a quoted string of it)."""
    text_args = "call.function.arguments + '}' }}"
    assert text_args in TINY_TEMPLATE
    tojson = TINY_TEMPLATE.replace(text_args, "'' }}{{ call.function.arguments | tojson }}{{ '}' }}")
    qchat = ChatFormat(chat.tok, tojson)
    t = render_demo(qchat, CONV[:4], tools)
    text = decode(chat, t.response_ids)
    assert '"arguments": {"path": "model_new.py"' in text
    _, calls = parse_tool_calls(qchat.decode(t.response_ids), 1)
    assert json.loads(calls[0].arguments) == json.loads(WRITE_ARGS)


def test_template_that_rewrites_earlier_turns(chat, tools, tmp_path):
    bad = ChatFormat(
        chat.tok, TINY_TEMPLATE.replace("{{ system }}", "{{ system }} ({{ messages | length }})")
    )
    with pytest.raises(TemplateError, match="append-only"):
        render_demo(bad, CONV, tools)
    # append-only, but a user turn's rendering depends on its position: the observation tokens (rendered
    # after ChatFormat's probe conversation, as the agent loop does) would not spell the conversation
    user = "{{ message['content'] }}<|im_end|>"
    assert TINY_TEMPLATE.count(user) == 1
    numbered = ChatFormat(chat.tok, TINY_TEMPLATE.replace(user, "#{{ loop.index0 }} " + user))
    render_demo(numbered, CONV[:5], tools)  # tool results only: rendered the same after the probe
    with pytest.raises(TemplateError, match="do not spell the rendered conversation"):
        render_demo(numbered, CONV, tools)  # the user note after turn 2 is message 5, not the probe's 3
    path = write(tmp_path / "d.jsonl", [demo(), demo()])
    with pytest.raises(TemplateError, match=f"{path}:1: "):
        demo_trajectories(SFTConfig(demos=str(path)), bad, tools)


def test_demo_file_errors(chat, tools, tmp_path):
    cases = {
        "not_set": (None, DemoFileError, "sft.demos is not set"),
        "missing": (str(tmp_path / "nope.jsonl"), FileNotFoundError, "no such demonstrations file"),
        "empty_dir": (str(tmp_path), FileNotFoundError, "holds no trajectories.jsonl"),
    }
    for demos, exc, msg in cases.values():
        with pytest.raises(exc, match=msg):
            demo_trajectories(SFTConfig(demos=demos), chat, tools)
    bad_lines = {
        "{not json": "d.jsonl:3: not a JSON line",
        "[1, 2]": "d.jsonl:3: a JSON list",
        json.dumps({"task": "x"}): "d.jsonl:3: no 'messages' list",
        json.dumps({"messages": ["hi"]}): "d.jsonl:3: message 0 is not a chat message",
        json.dumps({**demo(), "reward": "high"}): "d.jsonl:3: reward 'high' is not a number",
        json.dumps({**demo(), "verdict": "ok"}): "d.jsonl:3: verdict is not an object",
        json.dumps(demo(messages=[*CONV[:2], {"role": "assistant", "content": "x", "tool_calls": [{}]}])): (
            "d.jsonl:3: the chat template cannot render this demo"
        ),
    }
    for line, msg in bad_lines.items():
        write(tmp_path / "d.jsonl", [demo(), "", line])
        with pytest.raises(DemoFileError, match=msg):
            demo_trajectories(SFTConfig(demos=str(tmp_path / "d.jsonl")), chat, tools)
    write(tmp_path / "d.jsonl", [""])
    with pytest.raises(DemoFileError, match="no demonstrations"):
        demo_trajectories(SFTConfig(demos=str(tmp_path / "d.jsonl")), chat, tools)


def test_drops_counted(chat, tools, tmp_path):
    long = CONV[:2] + [{"role": "assistant", "content": "word " * 3000}]
    records = [
        demo(),  # kept
        demo(reward=None, status="correct"),  # kept without min_reward (reward 0.0)
        demo(messages=CONV[:2]),  # no assistant turn
        demo(messages=long),  # too long
        demo(reward=-1.0, status="incorrect"),  # below min_reward
        demo(reward=None, status="judge_error"),  # not the demonstrator's doing
        demo(reward=None, status="sandbox_error"),
        demo(messages=CONV[:2] + [{"role": "assistant", "content": "a<|im_end|>b"}]),
        demo(reward=float("nan")),
    ]
    run = tmp_path / "run"
    run.mkdir()
    write(run / "trajectories.jsonl", records)
    kept, drops = demo_trajectories(SFTConfig(demos=str(run), max_len=2048), chat, tools)  # a run directory
    assert [t.reward for t in kept] == [1.0, 0.0, -1.0]
    assert [t.info["source"] for t in kept] == [f"{run / 'trajectories.jsonl'}:{n}" for n in (1, 2, 5)]
    assert kept[0].info["verdict"] == records[0]["verdict"] and kept[0].end_reason == "submitted"
    assert dict(drops) == {
        "no_assistant_turn": 1,
        "too_long": 1,
        "judge_error": 1,
        "sandbox_error": 1,
        "end_of_turn_in_text": 1,
        "non_finite_reward": 1,
    }
    kept, drops = demo_trajectories(
        SFTConfig(demos=str(run / "trajectories.jsonl"), min_reward=0.0, max_len=2048), chat, tools
    )
    assert [t.reward for t in kept] == [1.0]
    assert drops["below_min_reward"] == 1 and drops["no_reward"] == 1 and drops["too_long"] == 1


def test_sft_steps_lower_the_nll(chat, tmp_path):
    tools = []  # a short prompt (T = 256): the tool list would make it 1.5k tokens and the test slow
    second = [CONV[0], {"role": "user", "content": "Make GELU fast."}] + CONV[2:5]
    path = write(tmp_path / "d.jsonl", [demo(), demo(messages=second, reward=None)])
    cfg = SFTConfig(demos=str(path), batch_size=2, learner=rl.LearnerConfig(actor=rl.OptimConfig(lr=1e-3)))
    assert SFTConfig().learner.actor.lr == 1e-5
    trajs, drops = demo_trajectories(cfg, chat, tools)
    assert len(trajs) == 2 and not drops
    pad = chat.tok.pad_token_id
    (batch,) = sft_batches(trajs, cfg, pad, rows_multiple=4)
    tokens, mask = np.asarray(batch.tokens), np.asarray(batch.response_mask)
    assert tokens.shape[0] == 4 and tokens.shape[1] % 256 == 0 and mask[2:].sum() == 0
    for row in range(2):
        t = next(t for t in trajs if tokens[row, : len(t.prompt_ids)].tolist() == t.prompt_ids)
        n = len(t.prompt_ids) + len(t.response_ids)
        assert tokens[row, :n].tolist() == t.prompt_ids + t.response_ids and (tokens[row, n:] == pad).all()
        assert mask[row, len(t.prompt_ids) : n].tolist() == t.response_mask and mask[row, n:].sum() == 0
    model = models.init_model(
        models.tiny_config(
            num_layers=2, hidden_size=64, head_dim=16, intermediate_size=128, compute_dtype="float32"
        ),
        seed=0,
    )
    # float64 reference: mean -log p(token | prefix) over the assistant tokens, from the model's logits
    logits = np.asarray(model(batch.tokens[:2]), np.float64)[:, :-1]
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    tgt = np.take_along_axis(logp, tokens[:2, 1:, None], -1)[..., 0]
    ref = -(tgt * mask[:2, 1:]).sum() / mask.sum()
    learner = rl.Learner(cfg.learner, model, None)
    first = learner.rft_step(batch)
    np.testing.assert_allclose(first["nll_token_mean"], ref, rtol=1e-5)
    nll = [learner.rft_step(batch)["nll_token_mean"] for _ in range(4)]
    print("nll", first["nll_token_mean"], nll)
    assert all(b < a for a, b in zip([first["nll_token_mean"], *nll], nll))  # each step lowers it
    assert nll[-1] < first["nll_token_mean"] - 0.5


def test_a_protocol_keeps_demos_of_train_tasks_only(chat, tools, tmp_path):
    """With tasks.protocol, SFT never clones a demo of a dev or test task (Runtime.train_tasks)."""
    records = [demo(task="train/a"), demo(task="train/b"), demo(task="test/c"), demo(task="dev/d")]
    path = write(tmp_path / "d.jsonl", records)
    kept, drops = demo_trajectories(SFTConfig(demos=str(path)), chat, tools, {"train/a", "train/b"})
    assert [t.task_id for t in kept] == ["train/a", "train/b"] and dict(drops) == {"not_a_train_task": 2}
    kept, drops = demo_trajectories(SFTConfig(demos=str(path)), chat, tools)  # no protocol: every demo
    assert len(kept) == 4 and not dict(drops)


def test_sft_packed_batches_hold_every_demo_in_bucketed_shapes(chat, tmp_path):
    """``packing=true``: each batch's demos packed in rows of max_len (B a bucket of rows_multiple, a table
    of batch_size trajectories), each demo's tokens and loss mask those of the padded batch's row."""
    second = [CONV[0], {"role": "user", "content": "Make GELU fast."}] + CONV[2:5]
    path = write(tmp_path / "d.jsonl", [demo(), demo(messages=second, reward=None)] * 3)
    cfg = SFTConfig(demos=str(path), batch_size=4, max_len=1024)
    trajs, _ = demo_trajectories(cfg, chat, [])
    pad = chat.tok.pad_token_id
    padded = sft_batches(trajs, cfg, pad, rows_multiple=4)
    packed = sft_batches(trajs, cfg, pad, rows_multiple=2, packing=True)
    assert len(trajs) == 6 and len(packed) == len(padded) == 2
    for a, b in zip(padded, packed):
        index = np.asarray(b.segments.index)
        assert b.tokens.shape == (2, 1024) and index.shape == (4, 1024)  # short demos: the least bucket
        n = int((index < b.tokens.size).any(1).sum())
        flat = lambda x, at=index[:n]: np.append(np.asarray(x).reshape(-1), 0)[at]
        t = np.asarray(a.tokens).shape[1]
        np.testing.assert_array_equal(flat(b.response_mask)[:, :t], np.asarray(a.response_mask)[:n])
        real = np.asarray(a.segment_ids)[:n] > 0
        np.testing.assert_array_equal(flat(b.tokens)[:, :t][real], np.asarray(a.tokens)[:n][real])
        assert b.response_mask.sum() == a.response_mask.sum() > 0
