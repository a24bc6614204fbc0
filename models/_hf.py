"""Hugging Face checkpoint directories (config.json + safetensors, optionally sharded) <-> our models.

Conversion is reshapes and stacking only, so a save then load is bit-exact in the parameter dtype.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from . import _safetensors as st
from ._config import DTYPES, ModelConfig, config_from_hf, config_to_hf, dtype_name
from ._model import CausalLM, abstract_model

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# Tensors some checkpoints carry that hold no learned state.
_IGNORED = re.compile(r"(^|\.)rotary_emb\.inv_freq$")


class CheckpointError(ValueError):
    """A checkpoint directory that is missing, incomplete or does not match its config."""


def _layer_spec(cfg: ModelConfig) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
    """Our per-layer parameter -> the HF tensors (suffix after ``model.layers.{i}.``) and their shapes.
    Several HF tensors are stacked on a new leading axis (k/v, gate/up)."""
    d, n, k, h, f = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
    spec = {
        "input_norm": [("input_layernorm.weight", (d,))],
        "q_proj": [("self_attn.q_proj.weight", (n * h, d))],
        "kv_proj": [("self_attn.k_proj.weight", (k * h, d)), ("self_attn.v_proj.weight", (k * h, d))],
        "o_proj": [("self_attn.o_proj.weight", (d, n * h))],
        "post_norm": [("post_attention_layernorm.weight", (d,))],
        "gate_up": [("mlp.gate_proj.weight", (f, d)), ("mlp.up_proj.weight", (f, d))],
        "down": [("mlp.down_proj.weight", (d, f))],
    }
    if cfg.qkv_bias:
        spec["q_bias"] = [("self_attn.q_proj.bias", (n * h,))]
        spec["kv_bias"] = [("self_attn.k_proj.bias", (k * h,)), ("self_attn.v_proj.bias", (k * h,))]
    if cfg.out_bias:
        spec["o_bias"] = [("self_attn.o_proj.bias", (d,))]
    if cfg.qk_norm:
        spec["q_norm"] = [("self_attn.q_norm.weight", (h,))]
        spec["k_norm"] = [("self_attn.k_norm.weight", (h,))]
    return spec


def expected_tensors(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor name a transformers checkpoint of ``cfg`` holds, with its shape."""
    out = {
        "model.embed_tokens.weight": (cfg.vocab_size, cfg.hidden_size),
        "model.norm.weight": (cfg.hidden_size,),
    }
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = (cfg.vocab_size, cfg.hidden_size)
    for i in range(cfg.num_layers):
        for parts in _layer_spec(cfg).values():
            out.update({f"model.layers.{i}.{name}": shape for name, shape in parts})
    return out


def read_config(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory {path} does not exist")
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise CheckpointError(f"{path} has no config.json (not a Hugging Face checkpoint directory)")
    try:
        return json.loads(cfg_file.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{cfg_file} is not valid JSON: {exc}") from None


def _tensor_files(path: Path) -> dict[str, Path]:
    """Tensor name -> file holding it, from the sharded index or the single file."""
    index = path / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise CheckpointError(f"{index} is malformed: {exc!r}") from None
        files = {name: path / fname for name, fname in weight_map.items()}
        absent = sorted({str(p.name) for p in files.values() if not p.is_file()})
        if absent:
            raise CheckpointError(f"{index} names shard files that do not exist: {absent}")
        return files
    single = path / SINGLE_FILE
    if single.is_file():
        header, _ = st.read_header(single)
        return {name: single for name in header}
    others = sorted(p.name for p in path.glob("*.bin")) + sorted(p.name for p in path.glob("*.pt*"))
    hint = f" (found {others}: convert pickled PyTorch weights to safetensors first)" if others else ""
    raise CheckpointError(f"{path} has neither {SINGLE_FILE} nor {INDEX_FILE}{hint}")


def _read_tensors(path: Path, cfg: ModelConfig) -> dict[str, np.ndarray]:
    files = _tensor_files(path)
    expected = expected_tensors(cfg)
    tied_extra = {"lm_head.weight"} if cfg.tie_word_embeddings else set()
    unexpected = sorted(
        n for n in files if n not in expected and n not in tied_extra and not _IGNORED.search(n)
    )
    missing = sorted(n for n in expected if n not in files)
    if missing or unexpected:
        raise CheckpointError(
            f"{path}: tensors do not match config.json ({cfg.family}, {cfg.num_layers} layers): "
            f"missing {missing[:8]}{'...' if len(missing) > 8 else ''} "
            f"unexpected {unexpected[:8]}{'...' if len(unexpected) > 8 else ''}"
        )
    by_file: dict[Path, list[str]] = {}
    for name in expected:
        by_file.setdefault(files[name], []).append(name)
    tensors = {}
    for file, names in by_file.items():
        tensors.update(st.load(file, set(names)))
    bad = [
        f"{n}: checkpoint {tuple(t.shape)} vs config {expected[n]}"
        for n, t in tensors.items()
        if tuple(t.shape) != expected[n]
    ]
    if bad:
        raise CheckpointError(f"{path}: tensor shapes do not match config.json: {bad[:8]}")
    return tensors


def _to_pure_state(cfg: ModelConfig, tensors: dict[str, np.ndarray], dtype) -> dict:
    """HF tensors -> our nested parameter dict (numpy, ``dtype``)."""
    d, n, k, h, f = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
    shapes = {
        "q_proj": (n, h, d),
        "kv_proj": (2, k, h, d),
        "o_proj": (d, n, h),
        "gate_up": (2, f, d),
        "q_bias": (n, h),
        "kv_bias": (2, k, h),
    }

    def cast(a):
        return np.asarray(a).astype(dtype)

    layers = {}
    for ours, parts in _layer_spec(cfg).items():
        per_layer = []
        for i in range(cfg.num_layers):
            arrs = [cast(tensors[f"model.layers.{i}.{name}"]) for name, _ in parts]
            a = arrs[0] if len(arrs) == 1 else np.stack(arrs)
            per_layer.append(a.reshape(shapes.get(ours, a.shape)))
        layers[ours] = np.stack(per_layer)
    state = {
        "model": {
            "embed": cast(tensors["model.embed_tokens.weight"]),
            "final_norm": cast(tensors["model.norm.weight"]),
            "layers": layers,
        }
    }
    if not cfg.tie_word_embeddings:
        state["lm_head"] = cast(tensors["lm_head.weight"])
    return state


def _from_pure_state(cfg: ModelConfig, state: dict, dtype) -> dict[str, np.ndarray]:
    """Our nested parameter dict -> HF tensors."""
    out = {
        "model.embed_tokens.weight": state["model"]["embed"],
        "model.norm.weight": state["model"]["final_norm"],
    }
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = state["lm_head"]
    layers = state["model"]["layers"]
    for ours, parts in _layer_spec(cfg).items():
        stacked = np.asarray(layers[ours])
        for i in range(cfg.num_layers):
            a = stacked[i]
            for j, (name, shape) in enumerate(parts):
                out[f"model.layers.{i}.{name}"] = (a if len(parts) == 1 else a[j]).reshape(shape)
    return {name: np.asarray(a).astype(dtype) for name, a in out.items()}


def place(model_cls, cfg: ModelConfig, pure: dict, shardings=None):
    """A model of ``model_cls`` whose parameters are ``pure`` (numpy), put on devices (optionally sharded)."""
    graphdef, abstract = nnx.split(abstract_model(cfg, model_cls))
    if shardings is None:
        arrays = jax.tree.map(jnp.asarray, pure)
    else:
        arrays = jax.tree.map(lambda a, s: jax.device_put(a, s), pure, shardings)
    nnx.replace_by_pure_dict(abstract, arrays)
    return nnx.merge(graphdef, abstract)


def load_hf(path, dtype=None, *, mesh=None, rules=None, **runtime) -> tuple[CausalLM, ModelConfig]:
    """Load a local Hugging Face checkpoint directory (Qwen2 / Qwen3 / Llama 3).

    ``dtype``: parameter dtype (default: the checkpoint's). ``runtime``: other :class:`ModelConfig` runtime
    fields (``compute_dtype``, ``attention_impl``, ``remat``, ``scan_layers``). With ``mesh`` the
    parameters are placed sharded by ``rules`` (default :data:`models.DEFAULT_RULES`).
    Returns ``(model, config)``; ``model(tokens [B, T]) -> logits [B, T, V]``."""
    path = Path(path)
    hf = read_config(path)
    if dtype is not None:
        runtime["param_dtype"] = dtype_name(dtype)
    cfg = config_from_hf(hf, **runtime)
    pure = _to_pure_state(cfg, _read_tensors(path, cfg), DTYPES[cfg.param_dtype])
    shardings = None
    if mesh is not None:
        from ._sharding import state_shardings

        shardings = state_shardings(pure, mesh, rules)
    model = place(CausalLM, cfg, pure, shardings)
    model.hf_config_json = json.dumps(hf)
    return model, cfg


def hf_state(model) -> dict:
    """The model's parameters as a nested dict of host numpy arrays."""
    return jax.tree.map(
        lambda a: np.asarray(jax.device_get(a)), nnx.to_pure_dict(nnx.state(model, nnx.Param))
    )


def save_hf(model: CausalLM, path, *, dtype=None, tokenizer=None, max_shard_bytes: int = 4 << 30) -> Path:
    """Write ``model`` as a Hugging Face checkpoint directory that transformers loads.

    Parameters are stored in ``dtype`` (default: the parameter dtype); files above ``max_shard_bytes`` are
    split into shards with a ``model.safetensors.index.json``. ``tokenizer`` (a transformers tokenizer) is
    saved alongside."""
    cfg: ModelConfig = model.config
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    name = dtype_name(dtype or cfg.param_dtype)
    base = json.loads(getattr(model, "hf_config_json", None) or "{}")
    tensors = _from_pure_state(cfg, hf_state(model), DTYPES[name])
    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for tname in sorted(tensors):
        nbytes = tensors[tname].nbytes
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][tname] = tensors[tname]
        size += nbytes
    for stale in [path / SINGLE_FILE, path / INDEX_FILE, *path.glob("model-*-of-*.safetensors")]:
        stale.unlink(missing_ok=True)
    if len(shards) == 1:
        st.save(path / SINGLE_FILE, shards[0])
    else:
        weight_map, total = {}, 0
        for i, shard in enumerate(shards):
            fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            total += st.save(path / fname, shard)
            weight_map.update({t: fname for t in shard})
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (path / INDEX_FILE).write_text(json.dumps(index, indent=2, sort_keys=True))
    (path / "config.json").write_text(json.dumps(config_to_hf(cfg, base, name), indent=2, sort_keys=True))
    if tokenizer is not None:
        tokenizer.save_pretrained(str(path))
    return path
