"""Configs (dataclasses, HF conversion, conf/model/*.yaml), the bundled tokenizer, and clear errors on bad
checkpoints and bad settings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from model_fixtures import FAMILIES, build_torch_model, hf_config

import models
from models import _safetensors as st

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def qwen2_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen2")
    build_torch_model("qwen2").save_pretrained(path)
    return path


@pytest.fixture
def broken(qwen2_dir, tmp_path):
    """A fresh copy of the checkpoint to damage."""
    dst = tmp_path / "ckpt"
    shutil.copytree(qwen2_dir, dst)
    return dst


def _edit_config(path: Path, **changes):
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(changes)
    (path / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("family", FAMILIES)
def test_parameter_count_matches_transformers(family):
    torch_model = build_torch_model(family)
    cfg = models.config_from_hf(hf_config(family).to_dict())
    assert cfg.num_params() == sum(p.numel() for p in torch_model.parameters())


def test_qwen2_0_5b_shape():
    cfg = models.qwen2_0_5b_config()
    assert 490e6 < cfg.num_params() < 500e6  # Qwen2.5-0.5B: 494M


def test_model_yaml_configs_fill_the_spec():
    from omegaconf import OmegaConf

    from experiments._hydra import to_dataclass

    files = sorted((ROOT / "conf" / "model").glob("*.yaml"))
    assert {f.stem for f in files} >= {"tiny", "hf", "qwen2_0_5b_random"}
    for f in files:
        node = OmegaConf.load(f)
        if OmegaConf.is_missing(node, "checkpoint"):
            node.checkpoint = "/some/dir"
        spec = to_dataclass(models.ModelSpec, node, where=str(f))
        assert isinstance(spec.arch, models.ModelConfig)
    tiny = to_dataclass(models.ModelSpec, OmegaConf.load(ROOT / "conf/model/tiny.yaml"))
    assert tiny.arch == models.tiny_config()
    big = to_dataclass(models.ModelSpec, OmegaConf.load(ROOT / "conf/model/qwen2_0_5b_random.yaml"))
    assert big.arch == models.qwen2_0_5b_config()
    hash(big.arch)  # usable as a static jit argument


def test_bundled_tokenizer():
    files = list(models.TOKENIZER_DIR.iterdir())
    assert sum(f.stat().st_size for f in files) < 3_000_000
    tok = models.default_tokenizer()
    assert len(tok) == models.tiny_config().vocab_size
    assert tok.eos_token_id == tok.pad_token_id == models.tiny_config().eos_token_ids[0] == 0
    text = "__global__ void axpy(float a, const float* x, float* y, int n) {\n  y[i] += a * x[i]; // π\n}"
    ids = tok.encode(text)
    assert tok.decode(ids) == text and len(ids) < len(text) / 2
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_invalid_model_config():
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        models.ModelConfig(num_heads=6, num_kv_heads=4)
    with pytest.raises(ValueError, match="attention_impl"):
        models.ModelConfig(attention_impl="flash")
    with pytest.raises(ValueError, match="remat"):
        models.ModelConfig(remat="sometimes")
    with pytest.raises(ValueError, match="dtype"):
        models.ModelConfig(param_dtype="int8")


def test_missing_directory_and_config(tmp_path):
    with pytest.raises(models.CheckpointError, match="does not exist"):
        models.load_hf(tmp_path / "nope")
    with pytest.raises(models.CheckpointError, match="no config.json"):
        models.load_hf(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(models.CheckpointError, match="not valid JSON"):
        models.load_hf(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a models checkpoint"):
        models.restore_checkpoint(tmp_path)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}, "unsupported architecture.*gpt2"),
        ({"model_type": "qwen3_moe"}, "unsupported architecture"),
        (
            {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}, "rope_parameters": None},
            "rope scaling 'yarn'",
        ),
        ({"use_sliding_window": True}, "sliding-window"),
        ({"hidden_act": "gelu"}, "hidden_act"),
    ],
)
def test_unsupported_architectures(broken, changes, match):
    _edit_config(broken, **changes)
    with pytest.raises(models.UnsupportedModelError, match=match):
        models.load_hf(broken)


def test_mismatched_shapes(broken):
    _edit_config(broken, intermediate_size=128)
    with pytest.raises(
        models.CheckpointError, match=r"shapes do not match.*mlp.*\(96, 64\) vs config \(128, 64\)"
    ):
        models.load_hf(broken)


def test_missing_and_unexpected_tensors(broken):
    tensors = {k: np.array(v) for k, v in st.load(broken / "model.safetensors").items()}
    victim = "model.layers.1.self_attn.k_proj.bias"
    st.save(broken / "model.safetensors", {k: v for k, v in tensors.items() if k != victim})
    with pytest.raises(models.CheckpointError, match=f"missing.*{victim}"):
        models.load_hf(broken)
    st.save(broken / "model.safetensors", {**tensors, "model.layers.1.extra.weight": np.zeros(3, np.float32)})
    with pytest.raises(models.CheckpointError, match="unexpected.*extra"):
        models.load_hf(broken)
    _edit_config(broken, num_hidden_layers=3)
    with pytest.raises(models.CheckpointError, match="missing.*layers.2"):
        models.load_hf(broken)


def test_corrupt_and_absent_weights(broken):
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[:100])
    with pytest.raises(st.SafetensorsError):
        models.load_hf(broken)
    (broken / "model.safetensors").unlink()
    (broken / "pytorch_model.bin").write_bytes(b"\0")
    with pytest.raises(models.CheckpointError, match="pytorch_model.bin.*safetensors"):
        models.load_hf(broken)
    (broken / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "gone.safetensors"}})
    )
    with pytest.raises(models.CheckpointError, match="gone.safetensors"):
        models.load_hf(broken)


def test_failed_load_leaves_the_directory_untouched(broken):
    _edit_config(broken, intermediate_size=128)
    before = {p.name: p.read_bytes() for p in broken.iterdir()}
    with pytest.raises(models.CheckpointError):
        models.load_hf(broken)
    assert {p.name: p.read_bytes() for p in broken.iterdir()} == before
