"""Pretraining the toy policy from scratch on the corpus of correct, unoptimised plans (the stand-in for a
base model): next-token NLL of the plan tokens given ``<bos> task <sep>`` (prompt tokens are context, not
targets), AdamW with warmup + cosine decay (``research.rl.make_optimizer``), optional label smoothing, each
step the learner's (``Learner.actor_update``: the one jitted training step of research.rl).

Label smoothing is off by default: it puts its mass on every token of the vocabulary at every position, so
a policy sampled at temperature 1 writes a non-plan token (an observation token, ``<sep>``, a block size
after an op name) with that probability at each of a plan's ~20 tokens. At 0.02, 22% of the pretrained
policy's sampled plans were invalid for it (CPU, 64 episodes), and PPO's entropy bonus raised that further;
exploration comes from the corpus's own spread of tiles instead (``research/toyenv/corpus.py``).

``grammar_smoothing`` is label smoothing that knows the plan language: its mass goes to the *legal* next
moves for the task (``research.toyenv.legal``: the next op fused into the open kernel, a new kernel, a setting
not yet given, ``<eos>``), uniformly over moves and then over each move's tokens. The corpus never fuses and
never leaves its tiles, so without it the pretrained policy gives fusion, large blocks, vector widths, more
warps or rows per program no probability at all, and RL, which samples from the policy, can never try them
(docs/results/toy_rl_gpu.md, fourth run: 0% of final plans used any). With it the stand-in base model
knows every legal plan without having seen an optimised one, as a pretrained LLM knows the syntax of code it
has never been shown fast; every sampled plan stays a plan (no junk tokens, unlike plain smoothing).

``detour_rate`` is its other half: a policy sampled with that smoothing leaves the corpus at some token of
most plans, then stands on a prefix no corpus plan has, and a model trained on corpus prefixes alone loses
count of its ops there (40% of sampled plans did not render, mostly an op written out of turn). With
detours each plan token of a training sequence is, with that probability, a smoothed policy's draw
(``research.toyenv.legal.detour``), and every position is labelled with the corpus's next token after the
inputs so far: 0.8% (test tasks, H200; docs/results/data/toy_pretrain_detours_2026-12-02_h200.json). The
labels never hold an optimisation; validation NLL is on the corpus as written.

``multi_turn_share`` of the sequences teach the interaction format (what an instruction-tuned base model
knows about tool calls, and nothing about optimisation): a corpus plan, an observation and another corpus
plan of the same task. The observation is drawn (by the sequence's index) from the whole observation
vocabulary: any status, and for a correct plan any speedup buckets, as a GPU judge reports them. The second
plan does not depend on it, so the corpus teaches only that a plan follows any observation. Without these
sequences the policy never saw an observation and wrote no plan after one; with only the CPU-mode
observation (``st_correct e_na c_na``) 37.5% of the GPU run's second turns, after timed observations it had
never seen, were invalid (docs/results/toy_rl_gpu.md, second run).

A held-out slice of the corpus tasks (``val_fraction``) reports ``val_nll``; metrics go to
``metrics.jsonl`` through ``research.rl.MetricsWriter``.
"""

from __future__ import annotations

import functools
import time
import zlib
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import models
from research.toyenv import (
    CorpusConfig,
    PlanPrefix,
    PlanTokenizer,
    corpus_plans,
    detour,
    format_plan,
    smoothing_target,
    toy_tokenizer,
)
from research.toyenv.observations import BASELINES, SPEED_EDGES, STATUSES, observation_tokens
from research.toyenv.tokenizer import EOS

from .._config import LearnerConfig, OptimConfig
from .._distributed import agree, is_primary
from .._learner import Learner
from .._loop import _NoWriter
from .._metrics import MetricsWriter


@dataclass
class PretrainConfig:
    steps: int = 1500
    batch_size: int = 64
    lr: float = 1e-3
    warmup_steps: int = 50
    weight_decay: float = 0.01
    label_smoothing: float = 0.0
    grammar_smoothing: float = 0.0  # mass on the legal next moves (research.toyenv.legal)
    detour_rate: float = 0.0  # share of plan tokens replaced by a smoothed policy's draw (legal.detour)
    multi_turn_share: float = 0.5  # sequences with a second turn after an observation (the format)
    num_corpus_tasks: int = 512
    val_fraction: float = 0.05
    seq_len: int = 80  # <bos> task <sep> plan <eos> [observation plan <eos>], right-padded
    log_every: int = 25
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("label_smoothing", "grammar_smoothing", "detour_rate"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise ValueError(f"pretrain.{name} must be in [0, 1), got {v}")


def encode_corpus(
    pairs, tok: PlanTokenizer, seq_len: int, multi_turn_share: float = 0.0, detour_rate: float = 0.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """[N, L] ids, [N, L] target mask (1 on plan tokens and their <eos>, 0 on prompt and observation) and
    [N, L] labels: the token each position is trained to predict (``ids`` but where a detour replaced a
    plan token). Sequence i gets a second turn (the next corpus plan of its task) when ``i * share`` crosses
    an integer, so exactly ``share`` of them do, spread evenly. With ``detour_rate`` each plan is
    ``research.toyenv.legal.detour``'s (drawn with ``seed``): a smoothed policy's detours as input, the
    corpus's next token as label."""
    rng = np.random.default_rng(seed)
    by_task: dict[str, list] = {}
    for task, plan in pairs:
        by_task.setdefault(task.id, []).append(plan)

    def plan_ids(task, plan) -> tuple[list[int], list[int]]:
        toks = [*format_plan(plan), EOS]
        inputs, labels = detour(task, toks, detour_rate, rng) if detour_rate > 0 else (toks, toks)
        return tok.encode(inputs), tok.encode(labels)

    ids = np.full((len(pairs), seq_len), tok.pad_id, np.int32)
    labels = np.full((len(pairs), seq_len), tok.pad_id, np.int32)
    mask = np.zeros((len(pairs), seq_len), np.float32)
    for i, (task, plan) in enumerate(pairs):
        p = tok.encode_prompt(task)
        q, lq = plan_ids(task, plan)
        seq, lab, m = p + q, p + lq, [0] * len(p) + [1] * len(q)
        others = [x for x in by_task[task.id] if x != plan]
        if others and int((i + 1) * multi_turn_share) > int(i * multi_turn_share):
            q2, lq2 = plan_ids(task, others[i % len(others)])
            obs = tok.encode(format_observation(i))
            seq, lab, m = seq + obs + q2, lab + obs + lq2, m + [0] * len(obs) + [1] * len(q2)
        if len(seq) > seq_len:
            raise ValueError(f"corpus sequence of {len(seq)} tokens > seq_len {seq_len}")
        ids[i, : len(seq)] = seq
        labels[i, : len(seq)] = lab
        mask[i, : len(seq)] = m
    return ids, mask, labels


def legal_targets(
    pairs, tok: PlanTokenizer, ids: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Grammar-aware smoothing targets for ``encode_corpus``'s ``ids``/``mask``: ``[N, L]`` row ids into a
    ``[S, V]`` table of distributions (``research.toyenv.legal.smoothing_target`` of the plan prefix before
    each target token; row 0, all zeros, where a position is not a target). A plan's prefix restarts after
    every non-target token (the prompt, an observation)."""
    table: dict[tuple, int] = {(): 0}
    rows: list[np.ndarray] = [np.zeros(len(tok.vocab), np.float32)]
    qid = np.zeros(ids.shape, np.int32)
    for i, (task, _) in enumerate(pairs):
        prefix = PlanPrefix(task)
        for t in range(ids.shape[1]):
            if not mask[i, t]:
                prefix = PlanPrefix(task)
                continue
            target = smoothing_target(prefix.moves())
            key = tuple(sorted(target.items()))
            if key not in table:
                table[key] = len(rows)
                row = np.zeros(len(tok.vocab), np.float32)
                row[tok.encode(list(target))] = list(target.values())
                rows.append(row)
            qid[i, t] = table[key]
            prefix.push(tok.vocab[ids[i, t]])
    return qid, np.stack(rows)


def format_observation(i: int) -> list[str]:
    """The observation of interaction-format sequence ``i``: 3 in 4 correct with speedup buckets drawn over
    every bucket (``na`` included), else another status (untimed), chosen by a hash of ``i``."""
    h = zlib.crc32(f"obs{i}".encode())
    # a speedup inside each bucket (below the first edge, between two, past the last), then None: ``na``
    values = [e / 2 for e in SPEED_EDGES[:1]] + [(a + b) / 2 for a, b in zip(SPEED_EDGES, SPEED_EDGES[1:])]
    values += [2 * SPEED_EDGES[-1], None]
    if h % 4:
        picks = [values[(h >> (4 + 4 * j)) % len(values)] for j in range(len(BASELINES))]
        return observation_tokens("correct", dict(zip(BASELINES, picks)))
    others = [st for st in STATUSES if st != "correct"]
    return observation_tokens(others[(h >> 4) % len(others)], {})


def _nll(model, ids, mask, smoothing, legal=None, grammar=0.0, labels=None):
    """Mean NLL over target tokens; ``smoothing`` towards uniform over the vocabulary, ``grammar`` towards
    ``legal`` (``[B, L, V]`` distributions over the legal next moves, ``legal_targets``). The targets are
    ``labels`` shifted (``ids`` without them)."""
    logits = model(ids[:, :-1]).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits, axis=-1)
    target = (ids if labels is None else labels)[:, 1:]
    nll = -jnp.take_along_axis(logp, target[..., None], axis=-1)[..., 0]
    loss = (1.0 - smoothing) * nll - smoothing * logp.mean(-1)
    if legal is not None:
        loss = (1.0 - grammar) * loss - grammar * (legal[:, 1:] * logp).sum(-1)
    m = mask[:, 1:]
    den = jnp.maximum(m.sum(), 1.0)
    acc = (jnp.argmax(logits, -1) == target).astype(jnp.float32)
    return (loss * m).sum() / den, ((nll * m).sum() / den, (acc * m).sum() / den)


def optimizer(cfg: PretrainConfig) -> OptimConfig:
    """The actor's optimizer: AdamW, global-norm clipping at 1, linear warm-up (at least one step, short of
    the last) then cosine decay to a tenth of ``lr`` at ``steps``."""
    warmup = min(max(cfg.warmup_steps, 1), max(cfg.steps - 1, 1))
    return OptimConfig(
        lr=cfg.lr,
        schedule="cosine",
        warmup_steps=warmup,
        total_steps=max(cfg.steps, warmup + 1),
        min_lr_ratio=0.1,
        weight_decay=cfg.weight_decay,
        max_grad_norm=1.0,
    )


def _loss(model, batch, *, cfg: PretrainConfig, q_table):
    """``Learner.actor_update``'s loss: ``_nll`` of a batch (ids, mask, legal-target rows, labels)."""
    ids, mask, qid, labels = batch
    legal = q_table[qid] if cfg.grammar_smoothing > 0 else None
    loss, (nll, acc) = _nll(model, ids, mask, cfg.label_smoothing, legal, cfg.grammar_smoothing, labels)
    return loss, {"nll": nll, "token_acc": acc}


def pretrain(
    model,
    corpus_tasks,
    cfg: PretrainConfig,
    out_dir,
    *,
    corpus: CorpusConfig | None = None,
    tokenizer: PlanTokenizer | None = None,
    deadline: float | None = None,
    progress: bool = True,
    mesh=None,
):
    """Train ``model`` on the corpus plans of ``corpus_tasks``; returns (model, last metrics). With
    ``mesh`` the returned model is a copy placed by ``models.shard_model`` (``models.DEFAULT_RULES``),
    trained with its optimizer moments sharded alike and batches sharded over rows (data, fsdp), as
    ``research.rl.Learner`` does; without, ``model`` itself is updated in place."""
    tok = tokenizer or toy_tokenizer()
    tasks = list(corpus_tasks)
    n_val = max(1, int(len(tasks) * cfg.val_fraction)) if len(tasks) > 1 else 0
    share = cfg.multi_turn_share
    train_pairs = corpus_plans(tasks[n_val:], corpus)
    train_ids, train_mask, train_labels = encode_corpus(
        train_pairs, tok, cfg.seq_len, share, cfg.detour_rate, cfg.seed
    )
    if cfg.grammar_smoothing > 0:
        train_q, q_table = legal_targets(train_pairs, tok, train_ids, train_mask)
    else:  # never read (the step skips the smoothing term); keeps the step's signature one
        train_q, q_table = np.zeros(train_ids.shape, np.int32), np.zeros((1, len(tok.vocab)), np.float32)
    q_table = jnp.asarray(q_table)
    # Validation: the corpus as written (no detours).
    val = encode_corpus(corpus_plans(tasks[:n_val], corpus), tok, cfg.seq_len, share)[:2] if n_val else None
    learner = Learner(LearnerConfig(actor=optimizer(cfg), seed=cfg.seed), actor=model, mesh=mesh)
    loss_fn = functools.partial(_loss, cfg=cfg, q_table=q_table)
    put_batch = jnp.asarray
    if mesh is not None:
        rows = models.batch_sharding(mesh)
        put_batch = lambda x: jax.device_put(np.asarray(x), rows)

    @jax.jit
    def evaluate(params, ids, mask):
        return _nll(nnx.merge(learner.actor_def, params), ids, mask, 0.0)[1]

    rng = np.random.default_rng(cfg.seed)
    primary = is_primary()  # several processes: every one trains, process 0 alone logs
    writer = MetricsWriter(out_dir, tensorboard=False) if primary else _NoWriter()
    writer.truncate(0)
    last: dict = {}
    bar = None
    if progress and primary:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, desc="pretrain", leave=False)
    t0 = time.perf_counter()
    try:
        for s in range(1, cfg.steps + 1):
            idx = rng.integers(0, len(train_ids), cfg.batch_size)
            batch = tuple(put_batch(a[idx]) for a in (train_ids, train_mask, train_q, train_labels))
            m = learner.actor_update(loss_fn, batch)
            if bar is not None:
                bar.update(1)
            stop = deadline is not None and agree(time.monotonic() > deadline)  # process 0's clock
            if s % cfg.log_every == 0 or s == cfg.steps or stop:
                last = {k: float(v) for k, v in m.items()}
                if val is not None:
                    vn, va = evaluate(learner.state.actor, jnp.asarray(val[0]), jnp.asarray(val[1]))
                    last.update(val_nll=float(vn), val_token_acc=float(va))
                last["time/elapsed_s"] = time.perf_counter() - t0
                writer.write(s, last)
                last["step"] = s
            if stop:
                break
    finally:
        writer.close()
        if bar is not None:
            bar.close()
    if mesh is None:
        nnx.update(model, learner.state.actor)
    else:
        model = learner.actor_model()
    last.setdefault("step", 0)
    last["corpus_sequences"] = int(len(train_ids))
    return model, last
