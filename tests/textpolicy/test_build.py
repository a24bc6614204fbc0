"""The text policy's checkpoint: its size bound (against transformers' own parameter count), the tokenizer
trained on rendered demonstrations, and the tool-call format surviving tokenisation through the agent's
parser."""

from __future__ import annotations

import json

import numpy as np
import pytest

from research.agent import tool_specs
from research.agent.policies.chat import TINY_TEMPLATE, ChatFormat, parse_tool_calls
from research.textpolicy import MAX_CHECKPOINT_BYTES, TextPolicySpec, build_checkpoint, tokenizer_texts

SMALL = TextPolicySpec(
    vocab_size=600,
    hidden_size=64,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    intermediate_size=128,
    max_position_embeddings=1024,
)
KERNEL = """import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
"""


def _demo(tmp_path):
    call = {
        "id": "c0",
        "type": "function",
        "function": {"name": "write_file", "arguments": json.dumps({"path": "k.py", "content": KERNEL})},
    }
    rec = {
        "task": "t1",
        "messages": [
            {"role": "system", "content": "You write kernels."},
            {"role": "user", "content": "Task t1: make relu faster."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": "wrote model_new.py (9 lines)"},
        ],
        "verdict": {"status": "correct", "reward": 1.0},
    }
    path = tmp_path / "trajectories.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    return path


@pytest.mark.parametrize("spec", [SMALL, TextPolicySpec()])
def test_parameter_count_matches_transformers(spec):
    import transformers

    model = transformers.Qwen2ForCausalLM(spec.qwen2_config(eos_token_id=2, pad_token_id=0))
    assert spec.num_params() == sum(p.numel() for p in model.parameters())


def test_default_spec_ships_under_the_bound_and_a_larger_one_is_refused(tmp_path):
    assert TextPolicySpec().checkpoint_bytes() <= MAX_CHECKPOINT_BYTES
    big = TextPolicySpec(hidden_size=512, num_layers=8, intermediate_size=2048)
    with pytest.raises(ValueError, match="MiB > the 16 MiB"):
        build_checkpoint(tmp_path / "big", big, texts=["x"])
    with pytest.raises(ValueError, match="num_kv_heads"):
        TextPolicySpec(num_heads=4, num_kv_heads=3)


def test_built_checkpoint_loads_and_keeps_tool_calls(tmp_path):
    import models

    demos = _demo(tmp_path)
    texts = tokenizer_texts([demos], library=False)
    assert any("\\n    offs = tl.program_id(0)" in t for t in texts)  # the kernel as the template renders it
    report = build_checkpoint(tmp_path / "ckpt", SMALL, texts=texts)
    path = tmp_path / "ckpt"
    assert report.num_params == SMALL.num_params()
    assert report.checkpoint_bytes <= SMALL.checkpoint_bytes() + 64 * 1024  # header only on top of weights
    assert json.loads((path / "text_policy.json").read_text())["spec"] == SMALL.to_dict()

    tok = models.load_tokenizer(path)
    assert tok.chat_template == TINY_TEMPLATE and tok.eos_token == "<|im_end|>"
    chat = ChatFormat(tok, None)
    args = {"path": "model_new.py", "content": KERNEL}
    reply = '<tool_call>\n{"name": "write_file", "arguments": ' + json.dumps(args) + "}\n</tool_call>"
    ids = chat.encode(reply)
    text, calls = parse_tool_calls(chat.decode(ids), turn=0)
    assert [c.name for c in calls] == ["write_file"] and calls[0].parsed() == (args, None)
    prompt = chat.prompt_ids([{"role": "user", "content": "hi"}], tool_specs(False))
    assert max(prompt) < SMALL.vocab_size

    model, cfg = models.load_hf(path, dtype="float32")
    assert (cfg.vocab_size, cfg.num_layers, cfg.hidden_size) == (600, 2, 64)
    assert cfg.eos_token_ids == (tok.convert_tokens_to_ids("<|im_end|>"),)
    logits = np.asarray(model(np.asarray([prompt[:16]], np.int32)))
    assert logits.shape == (1, 16, 600) and np.isfinite(logits).all()


def test_tokenizer_corpus_names_a_bad_demo_line(tmp_path):
    bad = _demo(tmp_path)
    bad.write_text(bad.read_text() + '\n{"no": "messages"}\n')
    with pytest.raises(ValueError, match=r"trajectories.jsonl:3: not a research.agent trajectory"):
        tokenizer_texts([bad], library=False)


def test_corpus_main_builds_the_default_spec_and_corpus_config():
    """conf/corpus.yaml repeats no default differently from the dataclasses it fills."""
    from hydra import compose, initialize_config_dir

    from experiments._hydra import CONF
    from experiments.corpus import to_config
    from research.data.transcripts import CorpusConfig

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="corpus", overrides=["data_dir=/d", "text_policy.build=true"])
    corpus, _, spec = to_config(cfg)
    assert spec == TextPolicySpec()
    assert corpus == CorpusConfig(judge=corpus.judge)


def test_corpus_main_with_a_protocol_uses_its_train_tasks_only(tmp_path, monkeypatch, capsys):
    """`experiments.corpus protocol=P`: no dev or test task reaches the corpus (nor its tokenizer)."""
    import contextlib

    import research.data.transcripts as transcripts
    from research.data import read_jsonl
    from tests.evaluation.study_fixtures import write_pool, write_pool_protocol
    from tests.hydra_mains import run_main

    pool = write_pool(tmp_path / "data")
    (tmp_path / "data" / "pool.jsonl").rename(tmp_path / "data" / "tasks.jsonl")
    protocol, manifest = write_pool_protocol(tmp_path / "data" / "tasks.jsonl", tmp_path / "protocol.json")
    seen = []

    def fake(tasks, cfg, out_dir, client):
        seen.extend(t.id for t in tasks)
        return {"kept": 0, "episodes": 0, "tasks_covered": 0, "tasks_given": len(tasks)}

    monkeypatch.setattr(transcripts, "generate_corpus", fake)
    monkeypatch.setattr("kernels_env.client.SandboxClient", lambda *a, **k: contextlib.nullcontext())
    argv = [
        f"data_dir={tmp_path / 'data'}",
        f"out_dir={tmp_path / 'c'}",
        f"protocol={manifest}",
        f"hydra.run.dir={tmp_path / 'h'}",
    ]
    assert run_main("corpus", argv, monkeypatch) is None
    assert sorted(seen) == sorted(protocol.splits["train"]) and len(
        read_jsonl(pool.parent / "tasks.jsonl")
    ) > len(seen)


def test_checkpoint_is_transformers_qwen2_of_the_spec(tmp_path):
    """config.json and the weights are what transformers writes for a Qwen2 with the spec's fields spelled
    out by hand here (seeded as the spec says, saved in its dtype)."""
    import safetensors.numpy
    import torch
    import transformers

    import models

    report = build_checkpoint(tmp_path / "ckpt", SMALL, texts=["def f(x):\n    return x + 1\n"] * 4)
    tok = models.load_tokenizer(tmp_path / "ckpt")
    ref = transformers.Qwen2Config(
        vocab_size=600,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=1024,
        rope_theta=10_000.0,
        rms_norm_eps=1e-6,
        hidden_act="silu",
        tie_word_embeddings=True,
        use_sliding_window=False,
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
        initializer_range=0.02,
    )
    torch.manual_seed(SMALL.seed)
    transformers.Qwen2ForCausalLM(ref).to(torch.bfloat16).save_pretrained(str(tmp_path / "ref"))
    got, want = (json.loads((tmp_path / d / "config.json").read_text()) for d in ("ckpt", "ref"))
    assert got == want and got["architectures"] == ["Qwen2ForCausalLM"] and got["model_type"] == "qwen2"
    a, b = (safetensors.numpy.load_file(tmp_path / d / "model.safetensors") for d in ("ckpt", "ref"))
    assert sorted(a) == sorted(b) and report.num_params == SMALL.num_params()
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(
            a[name].view(np.uint16), b[name].view(np.uint16)
        )
