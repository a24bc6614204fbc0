"""Run by test_sharding.py in a fresh interpreter with 8 fake CPU devices (XLA_FLAGS must precede jax).

Prints one JSON line of measurements; the test asserts on them."""

from __future__ import annotations

import json
import os
import sys
import tempfile

# Eight fake devices; LLVM optimisation off: these programs are tiny and compile time dominates.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    " --xla_backend_optimization_level=0"
)
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import models  # noqa: E402


def max_diff(a, b) -> float:
    return max(
        float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def loss_and_grads(model, tokens):
    """Loss, logits and gradients in one compilation."""

    def loss(m):
        logits = m(tokens)
        lp = models.token_logprobs(m, tokens, chunk_size=16)
        return jnp.mean(logits**2) - jnp.mean(lp), logits

    (value, logits), grads = nnx.jit(nnx.value_and_grad(loss, has_aux=True))(model)
    return value, logits, grads


def main() -> None:
    out: dict = {"devices": jax.device_count()}
    cfg = models.tiny_config(
        vocab_size=256,
        num_layers=2,
        hidden_size=64,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        intermediate_size=128,
        compute_dtype="float32",
        tie_word_embeddings=False,
    )
    model = models.init_model(cfg, seed=0)
    tokens = jnp.asarray(np.random.RandomState(0).randint(0, 256, (8, 24)), jnp.int32)
    ref_loss, ref_logits, ref_grads = loss_and_grads(model, tokens)

    mesh = models.make_mesh(data=2, fsdp=2, tensor=2)
    sharded = models.shard_model(model, mesh)
    q = sharded.model.layers.q_proj.get_value()
    out["q_spec"] = str(q.sharding.spec)
    out["q_shard_shape"] = list(q.addressable_shards[0].data.shape)
    sh_tokens = jax.device_put(tokens, models.batch_sharding(mesh))
    loss, logits, grads = loss_and_grads(sharded, sh_tokens)
    out["logits_sharding"] = str(logits.sharding.spec)
    out["logits_diff"] = max_diff(logits, ref_logits)
    out["loss_diff"] = abs(float(loss) - float(ref_loss))
    out["grad_diff"] = max_diff(nnx.to_pure_dict(grads), nnx.to_pure_dict(ref_grads))

    critic = models.Critic.from_policy(sharded)
    ref_critic = models.Critic.from_policy(model)
    values = nnx.jit(lambda c, t: c(t))(critic, sh_tokens)
    ref_values = nnx.jit(lambda c, t: c(t))(ref_critic, tokens)
    out["critic_diff"] = max_diff(values, ref_values)

    # Rules: axes that do not divide a dimension are dropped (2 KV heads on a tensor axis of 4).
    mesh_b = models.make_mesh(data=1, fsdp=2, tensor=4)
    out["kv_spec_t4"] = str(models.spec_for("model/layers/kv_proj", (2, 2, 2, 16, 64), mesh_b))
    out["norm_spec"] = str(models.spec_for("model/layers/input_norm", (2, 64), mesh_b))
    out["custom_rule"] = str(models.spec_for("model/embed", (256, 64), mesh, [(r"embed", P("fsdp", None))]))

    with tempfile.TemporaryDirectory() as tmp:
        models.save_checkpoint(f"{tmp}/orbax", sharded)
        on_b = models.restore_checkpoint(f"{tmp}/orbax", mesh=mesh_b)
        single = models.restore_checkpoint(f"{tmp}/orbax")
        src = nnx.to_pure_dict(nnx.state(model))
        out["restore_b_diff"] = max_diff(nnx.to_pure_dict(nnx.state(on_b)), src)
        out["restore_single_diff"] = max_diff(nnx.to_pure_dict(nnx.state(single)), src)
        out["restore_b_spec"] = str(on_b.model.layers.gate_up.get_value().sharding.spec)
        out["restore_single_devices"] = len(single.model.embed.get_value().sharding.device_set)
        models.save_checkpoint(f"{tmp}/critic", ref_critic)  # one device: the sharded save is covered above
        critic_back = models.restore_checkpoint(f"{tmp}/critic", mesh=mesh)
        out["critic_restore_diff"] = max_diff(
            nnx.to_pure_dict(nnx.state(critic_back)), nnx.to_pure_dict(nnx.state(ref_critic))
        )
        # A Hugging Face checkpoint loaded straight onto a mesh.
        models.save_hf(model, f"{tmp}/hf")
        loaded, _ = models.load_hf(f"{tmp}/hf", mesh=mesh, compute_dtype="float32")
        out["load_hf_spec"] = str(loaded.model.layers.down.get_value().sharding.spec)
        out["load_hf_diff"] = max_diff(nnx.to_pure_dict(nnx.state(loaded)), src)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
