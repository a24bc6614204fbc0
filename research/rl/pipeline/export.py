"""The run's final policy, written where serving stacks and ``experiments.agent`` read it.

``<out_dir>/final_policy/``: a Hugging Face checkpoint (safetensors, config.json, the tokenizer with its chat
template) when the run's tokenizer is a Hugging Face one (every ``env=agent`` run: from a checkpoint or a
random init with the bundled tokenizer, whose tool-call template is written into the export), so vLLM,
SGLang and transformers serve it and ``python -m experiments.agent policy=flax policy.model=OUT/final_policy``
plays it; a ``models`` checkpoint for the toy environment (its 91-token plan tokenizer is not a Hugging
Face one). ``EXPORTED.json`` beside it names the stage and checkpoint it came from.

Several JAX processes: the ``models`` checkpoint is written by all (Orbax: each its shards); the Hugging
Face one by process 0 from a copy gathered into each process (``research.rl.local_model``: the full
model passes through every host's memory once, leaf by leaf).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import models

from .._distributed import is_primary, local_model, sync
from .manifest import Manifest


def export_policy(rt, manifest: Manifest, name: str = "final_policy") -> Path:
    """Write ``manifest``'s actor to ``<out_dir>/<name>`` (replaced atomically: a half-written export never
    stands under the final name)."""
    out = rt.out / name
    tmp = out.with_name(out.name + ".tmp")
    primary = is_primary()
    if primary:
        shutil.rmtree(tmp, ignore_errors=True)
    sync(f"export:start:{out}")
    model = rt.restore_actor(manifest.actor)
    if rt.cfg.env == "agent":
        source = rt.cfg.model.checkpoint
        if source and (Path(source) / "config.json").is_file():
            # the source's config.json is the base: fields models does not model (e.g. architectures,
            # torch_dtype, generation ids) carry over unchanged
            model.hf_config_json = (Path(source) / "config.json").read_text()
        tok = rt.tokenizer
        if rt.template is not None:
            tok.chat_template = rt.template
        model = local_model(model, rt.local_mesh)  # itself in one process; else gathered (collective)
        if primary:
            models.save_hf(model, tmp, tokenizer=tok)
        kind = "hf"
    else:
        models.save_checkpoint(tmp, model)  # collective with several processes
        kind = "models"
    if primary:
        meta = {"format": kind, "stage": manifest.stage, "step": manifest.step, "actor": manifest.actor}
        (tmp / "EXPORTED.json").write_text(json.dumps(meta, indent=2))
        shutil.rmtree(out, ignore_errors=True)
        tmp.replace(out)
    sync(f"export:done:{out}")
    return out
