"""Pretraining: MLM on English + the other languages, resumable, with honest progress.

Public entries: `train(runs, resume=False, log=print) -> [run.json dicts]` trains one run, or K runs
of one model shape and schedule together as one stacked model (K > 1: `minimult.stacked`), in one loop;
`pretrain(cfg, mods, run_dir, ...)` is the one-run shorthand. Every run keeps what training it alone
would give it: its own data, batch plan, masking and dropout draws from its own seed, its own loss,
gradient clipping and AdamW state, its own folder with `run.json`, `metrics.jsonl` and checkpoint.
Evaluation during training, progress logging and checkpointing are callbacks of the loop.

Every step's randomness (batch order, masking, dropout) is derived from (seed, epoch, step), and
checkpoints hold model + optimizer state, so a resumed run ends bit-identical to an uninterrupted
one on CPU.

`train.nproc` > 1 (`--nproc`, or torchrun's ranks) trains on several processes, each its share of
every batch's rows with the whole batch's masking, their gradients summed before clipping: see
minimult.distributed (what equals one process and what differs: dropout is drawn per rank).
`train.microbatches` > 1 trains every batch as groups of rows of similar length, each padded only to its
own longest row, weighted the same way (minimult.data.microbatches): for random batches on a CPU.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from minimult import distributed, precision, ranks
from minimult.data import microbatches
from minimult.data.batching import PADDED_BATCHINGS, SequenceSet, attention_mask, plan_epoch, steps_per_epoch
from minimult.data.pairs import PairSet
from minimult.data.masking import mask_batch
from minimult.data.vocab import cut_to_fit
from minimult.ranks import SINGLE, World
from minimult.errors import MinimultError
from minimult.evaluate import context, evaluate_model, evaluators, mu_layers, summary_parts
from minimult.knn.neighbours import table_sha256
from minimult.config import TrainConfig
from minimult.model import Bert
from minimult.stacked import StackedBert, pack, stack
from minimult.mods import check_masking, versions
from minimult.runs import Run, cpu_name, environment, logged_seconds, truncate_log

# The train settings each run of a stack keeps its own (its randomness); all others are one schedule for the stack
PER_RUN_TRAIN = ("seed", "init_seed")
SHARED_TRAIN = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name not in PER_RUN_TRAIN)


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up to `peak` over `warmup` steps, then linear decay to 0 at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * max(0.0, (total - step) / max(1, total - warmup))


def step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step * 7919 + 1) % (2**63 - 1)


def dropout_seed(seed: int, rank: int) -> int:
    """Rank `rank`'s dropout seed at a step whose seed is `seed` (`step_seed`): the step's own seed on rank
    0 (and on one process), so rank 0's rows get the masks one process gives them; a seed of its own on
    every other rank, so that no two ranks draw the same masks for their rows."""
    if rank == 0:
        return seed
    return int(np.random.SeedSequence([seed, rank]).generate_state(1, np.uint64)[0] % (2**63 - 1))


def fmt_time(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def check_stackable(cfgs) -> None:
    """Refuse runs that cannot share one stacked model and one schedule (one line naming the field)."""
    first = cfgs[0]
    for cfg in cfgs[1:]:
        if cfg.model != first.model:
            raise MinimultError(f"cannot stack {first.mods!r} with {cfg.mods!r}: model configurations differ "
                                f"({first.model} vs {cfg.model})")
        for name in SHARED_TRAIN:
            a, b = getattr(first.train, name), getattr(cfg.train, name)
            if a != b:
                raise MinimultError(f"cannot stack runs whose train.{name} differs ({a} vs {b})")


# ---------------------------------------------------------------------------------------------
# One run in the loop.


@dataclass
class Member:
    """A run being trained: its data on the device, its freshly initialised model and what its
    masking needs (the mods' `build` hooks, e.g. knn-replace's neighbour table)."""

    run: Run
    train_set: SequenceSet
    model: Bert
    random_ids: torch.Tensor
    masking_inputs: dict
    generator: torch.Generator  # masking draws
    meta: dict = field(default_factory=dict)

    @property
    def cfg(self):
        return self.run.cfg

    @property
    def epoch_tokens(self) -> int:
        """Real tokens of one epoch ([CLS] and [SEP] included)."""
        return self.train_set.tokens(np.arange(len(self.train_set)))

    def masked_batch(self, index) -> dict:
        """The batch `index` with MLM corruption, as `Bert.mlm_loss` / `stacked.pack` take it (with
        `train.pad_multiple`, padded to its fixed shape: `microbatches.pad`)."""
        batch = self.train_set.batch(index)
        cfg = self.cfg
        masked = mask_batch(batch.input_ids, batch.maskable, self.train_set.mask_id[batch.lang], self.random_ids,
                            cfg.mask, self.generator, **self.masking_inputs)
        out = {"input_ids": masked.input_ids, "position_ids": batch.position_ids,
               "token_type_ids": batch.token_type_ids, "attention_mask": attention_mask(batch, cfg.train.attention),
               "selected": masked.selected, "targets": masked.targets, "nsp_labels": batch.nsp_labels}
        if not cfg.train.pad_multiple:
            return out
        return microbatches.pad(out, microbatches.fixed_shape(out["input_ids"].shape[1], cfg.train.batch_size,
                                cfg.train.pad_multiple, cfg.data.max_len, cfg.mask.rate, cfg.mask.selection))


def initial_model(cfg) -> Bert:
    """A fresh model from `train.seed`, leaving torch's generator where that leaves it; with `train.init_seed`
    its weights are those `init_seed` draws instead, and the generator is still where `seed` leaves it, so
    the run differs from a plain one at `seed` in its initial weights alone."""
    torch.manual_seed(cfg.train.seed)
    model = Bert(cfg.model)
    if cfg.train.init_seed not in (-1, cfg.train.seed):
        state = torch.get_rng_state()
        torch.manual_seed(cfg.train.init_seed)
        model.load_state_dict(Bert(cfg.model).state_dict())
        torch.set_rng_state(state)
    return model


def setup(run: Run, device: torch.device, log: Callable[[str], None]) -> Member:
    """Data on the device and a freshly initialised model (seeded)."""
    check_masking(run.cfg, run.mods)
    data = run.data
    data.prepare(log)
    sides = data.train_views
    cut = cut_to_fit(sides, run.cfg.data.max_len)
    if cut:
        log(f"note: {cut:,} of {sum(s.num_sentences for s in sides):,} training sequences have more than "
            f"data.max_len - 2 = {run.cfg.data.max_len - 2} pieces and are cut to fit")
    if run.cfg.model.nsp:  # two-sentence sequences with next-sentence labels
        train_set = PairSet.from_sides(sides, data.layouts, device, run.cfg.train.seed)
    else:
        train_set = SequenceSet.from_sides(sides, data.layouts, device)
    model = initial_model(run.cfg).to(device)
    inputs = {}
    for a in run.mods:
        if a.mod.build is not None:
            inputs.update({k: v.to(device) for k, v in a.mod.build(data, sides, run.cfg, a.value, log).items()})
    return Member(run, train_set, model, data.random_ids().to(device), inputs, torch.Generator(device=device))


# ---------------------------------------------------------------------------------------------
# How one optimisation step runs: one model, or K models stacked.


class Stepper:
    """How one optimisation step computes its loss, the same for one model and for K stacked ones (one
    `StackedBert`): every member's dropout and masking seeded from (seed, step), its masked batch, and the
    losses of the model (`step_losses`). One model draws dropout from torch's default generator, reseeded
    every step; K stacked ones each from a generator of its own reseeded the same way (CPU), or on CUDA
    from torch's generator (another stream per rank)."""

    def __init__(self, members: list[Member], world: World = SINGLE):
        self.members, self.world, self.stacked = members, world, len(members) > 1
        self.model = stack([m.model for m in members]) if self.stacked else members[0].model
        if self.stacked:
            cpu = self.model.embeddings.ln.weight.is_cpu
            self.model.context.generators = [torch.Generator() for _ in members] if cpu else None
            if not cpu and world.rank > 0:
                torch.cuda.manual_seed(dropout_seed(step_seed(members[0].cfg.train.seed, 0), world.rank))

    def losses(self, step: int, indices: list) -> torch.Tensor:
        """(K,) losses of the step, one per member."""
        batches = []
        for k, (m, index) in enumerate(zip(self.members, indices)):
            seed = step_seed(m.cfg.train.seed, step)
            if not self.stacked:
                torch.manual_seed(dropout_seed(seed, self.world.rank))
            elif self.model.context.generators is not None:
                self.model.context.generators[k].manual_seed(dropout_seed(seed, self.world.rank))
            m.generator.manual_seed(seed + 1)  # masking
            batches.append(m.masked_batch(index))
        return step_losses(self.model, batches, self.world, self.members[0].cfg.train.microbatches)

    def clip(self, max_norm: float) -> None:
        if self.stacked:
            self.model.clip_grad_norm_per_model(max_norm)
        else:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)

    def states(self) -> list[dict]:
        """Every member's weights, as a single `Bert` holds them."""
        if not self.stacked:
            return [self.model.state_dict()]
        return [{k: v.clone() for k, v in self.model.unstacked_state(k).items()} for k in range(len(self.members))]

    def models(self) -> list[Bert]:
        """The members' own models holding the trained weights (for evaluation)."""
        for k, m in enumerate(self.members if self.stacked else []):
            m.model.load_state_dict(self.model.unstacked_state(k))
        return [m.model for m in self.members]


def step_losses(model: Bert, batches: list[dict], world: World = SINGLE, parts: int = 1) -> torch.Tensor:
    """(K,) losses of `model` (a `Bert`, K = 1, or a `StackedBert` of K) on the K masked batches `batches`
    (`Member.masked_batch`'s), each through `Bert.mlm_loss`: on one process in one pass, each batch's mean
    loss; else this process's share of every batch's rows (`world`), in `parts` groups of rows by length
    (minimult.data.microbatches), each group's sums over the whole batch's counts, added up."""
    if world.size == 1 and parts == 1:  # each whole batch in one pass: its mean loss
        return _losses(model, batches)
    device = batches[0]["input_ids"].device
    totals = [(int(b["selected"].numel()), int(b["input_ids"].shape[0])) for b in batches]  # whole batches
    if world.size > 1:  # this process's rows; each loss over its whole batch's counts
        batches = [microbatches.take(b, distributed.share(rows, world)) for b, (_, rows) in zip(batches, totals)]
    groups = [microbatches.by_length(b, parts) for b in batches]
    losses = torch.zeros(len(batches), device=device)
    for g in range(max(len(gs) for gs in groups)):  # the g-th group of every batch (none: no rows)
        chunk = [gs[g] if g < len(gs) else microbatches.take(b, slice(0, 0)) for gs, b in zip(groups, batches)]
        if all(c["input_ids"].shape[0] == 0 for c in chunk):  # fewer rows than processes: nothing here
            continue
        losses = losses + _losses(model, chunk, totals)
    return losses


def _losses(model: Bert, batches: list[dict], totals: list[tuple[int, int]] | None = None) -> torch.Tensor:
    """(K,) `Bert.mlm_loss` of each model on its batch: the mean, or with `totals` (masked tokens, rows of each
    whole batch) its sums over those; K stacked models through one `pack`ed batch."""
    if isinstance(model, StackedBert):
        whole = None if totals is None else tuple(
            torch.tensor(t, dtype=torch.float32, device=batches[0]["input_ids"].device) for t in zip(*totals))
        return model.stacked_losses(pack(batches), whole)
    (b,), total = batches, None if totals is None else totals[0]
    return model.mlm_loss(b["input_ids"], b["position_ids"], b["token_type_ids"], b["attention_mask"], b["selected"],
                          b["targets"], b.get("nsp_labels"), totals=total).view(1)


def split_optimizer_state(state: dict, k: int, K: int) -> dict:
    """Model k's share of a (possibly stacked) AdamW state, as AdamW of one `Bert` saves it."""
    if K == 1:
        return state
    return {"state": {i: {n: (v[k].clone() if n != "step" else v.clone()) for n, v in st.items()}
                      for i, st in state["state"].items()},
            "param_groups": [dict(g) for g in state["param_groups"]]}


def stack_optimizer_states(states: list[dict]) -> dict:
    if len(states) == 1:
        return states[0]
    first = states[0]
    return {"state": {i: {n: (torch.stack([s["state"][i][n] for s in states]) if n != "step" else v)
                          for n, v in st.items()} for i, st in first["state"].items()},
            "param_groups": first["param_groups"]}


# ---------------------------------------------------------------------------------------------
# The loop and its callbacks.


@dataclass
class Loop:
    """What callbacks see: the members, the stepper (model), the optimizer and where training is."""

    members: list[Member]
    stepper: Stepper
    optimizer: torch.optim.Optimizer
    spe: int
    total: int
    start_step: int
    end: int
    log: Callable[[str], None]
    metrics: list = field(default_factory=list)  # open metrics.jsonl files, one per member (rank 0's)
    step: int = 0
    t0: float = field(default_factory=time.time)
    seconds_before: float = 0.0  # training seconds of the steps before start_step (earlier stretches of a resumed run)
    lr: float = 0.0
    world: World = SINGLE  # several processes: only rank 0 (`world.main`) writes and evaluates
    saved: int | None = None  # the step of the run's last checkpoint (None: none yet)

    def seconds(self) -> float:
        """Training seconds of the steps up to now, over every stretch of a resumed run."""
        return self.seconds_before + time.time() - self.t0

    def write(self, k: int, row: dict) -> None:
        if self.world.main:
            self.metrics[k].write(json.dumps(row) + "\n")

    def save(self, complete: bool) -> None:
        if not self.world.main:
            return
        state = self.optimizer.state_dict()
        K = len(self.members)
        for k, (m, weights) in enumerate(zip(self.members, self.stepper.states())):
            m.run.save_checkpoint(weights, split_optimizer_state(state, k, K), self.step, complete,
                                  seconds=self.seconds())
        self.saved = self.step


class EvaluateEvery:
    """Multilinguality on the first `eval_sentences` dev sentences (µ's layers: 0 and round(2/3 x depth),
    8 of 12) and dev perplexity on as many sequences, every `eval_every` steps and at the end;
    training randomness is untouched (every step reseeds)."""

    def __init__(self, every: int):
        self.every = every

    def __call__(self, loop: Loop) -> None:
        if not self.every or not (loop.step % self.every == 0 or loop.step == loop.total) or not loop.world.main:
            return
        periodic = [e.name for e in evaluators() if e.periodic]  # the final-only ones (probe) wait for the end
        for k, (m, model) in enumerate(zip(loop.members, loop.stepper.models())):
            cfg = m.cfg
            model.eval()
            try:
                ctx = context(m.run, model, mu_layers(cfg.model.layers), dev_sentences=cfg.train.eval_sentences,
                              ppl_sentences=cfg.train.eval_sentences, ppl_splits=("dev",))
                row = {"step": loop.step, "epoch": loop.step / loop.spe,
                       "eval": evaluate_model(ctx, only=periodic)}
            finally:
                model.train()
            loop.write(k, row)
            who = f"{m.run.name}: " if len(loop.members) > 1 else ""
            loop.log(f"{who}step {loop.step:>6} | eval: " + ", ".join(summary_parts(row["eval"])))


class Progress:
    """Every few steps: the mean loss of each run (a NaN stops training, keeping the last good
    checkpoint), a metrics row and one progress line with tokens/s and time left."""

    def __init__(self, log_every: int, checkpoint_every: int):
        self.log_every, self.checkpoint_every = log_every, checkpoint_every
        self.window_t, self.tokens, self.steps, self.loss = time.time(), 0, 0, None

    def add(self, losses: torch.Tensor, tokens: int) -> None:
        self.loss = losses.detach().float() if self.loss is None else self.loss + losses.detach().float()
        self.tokens += tokens
        self.steps += 1

    def __call__(self, loop: Loop) -> None:
        step = loop.step
        if not (step % self.log_every == 0 or step == loop.end or step % self.checkpoint_every == 0):
            return
        K = len(loop.members)
        # one model: the float32 sum divided in float64; stacked: the float32 mean (as logged so far)
        mean = [float(self.loss[0]) / self.steps] if K == 1 else (self.loss / self.steps).tolist()
        bad = [(m.run, x) for m, x in zip(loop.members, mean) if not math.isfinite(x)]
        if bad:  # every rank holds the summed losses: all stop at this step
            self._fail(loop, bad)
        now = time.time()
        if not loop.world.main:
            self.window_t, self.tokens, self.steps, self.loss = now, 0, 0, None
            return
        rate = self.tokens / max(now - self.window_t, 1e-9)
        eta = (now - loop.t0) / (step - loop.start_step) * (loop.total - step)
        for k, x in enumerate(mean):
            loop.write(k, {"step": step, "epoch": step / loop.spe, "loss": x, "lr": loop.lr,
                           "tokens_per_s": rate / K, "elapsed_s": loop.seconds()})
            loop.metrics[k].flush()
        losses = "/".join(f"{x:.4f}" for x in mean) if K > 1 else f"{mean[0]:7.4f}"
        loop.log(f"step {step:>6}/{loop.total} | epoch {step / loop.spe:6.2f} | loss {losses} | lr {loop.lr:.2e} | "
                 f"{rate:8,.0f} tok/s | {fmt_time(now - loop.t0)} elapsed, {fmt_time(eta)} left")
        self.window_t, self.tokens, self.steps, self.loss = now, 0, 0, None

    @staticmethod
    def _fail(loop: Loop, bad) -> None:
        """Stop on a non-finite loss. Only the runs that diverged are marked failed: the other runs of a stack
        keep their last good checkpoints and status, so they resume on their own (a sweep does so)."""
        run, x = bad[0]
        diverged = {id(r): loss for r, loss in bad}
        for m in loop.members if loop.world.main else []:
            if id(m.run) in diverged:
                m.meta.update(status=f"failed: loss {diverged[id(m.run)]} at step {loop.step}")
                m.run.write_meta(m.meta)
        if len(loop.members) == 1:
            kept = (f"the last good checkpoint is kept at {run.checkpoint_path}" if run.has_checkpoint()
                    else "no checkpoint had been written yet")
        else:
            names = ", ".join(r.name for r, _ in bad)
            kept = (f"stopped all {len(loop.members)} stacked runs ({names} diverged; the others keep their last "
                    f"good checkpoints and resume on their own)")
        raise MinimultError(f"loss became {x} at step {loop.step}; stopped: {kept} (train a new run, another --out, "
                            f"with e.g. a lower --set train.lr)")


class CheckpointEvery:
    def __init__(self, every: int):
        self.every = every

    def __call__(self, loop: Loop) -> None:
        if loop.step % self.every == 0 or loop.step == loop.end:
            loop.save(complete=loop.step == loop.total)


def _resume(members: list[Member], device, log) -> tuple[int, list | None, bool, float]:
    """Load every member's checkpoint: (step, optimizer states or None, all complete, training seconds so far)."""
    ckpts = [m.run.checkpoint(map_location=device) for m in members]
    for m, c in zip(members, ckpts):
        m.run.check_checkpoint_config(c)
        m.run.check_data(m.run.data.prepared)  # first: an edited corpus file changes the vocabulary too
        m.run.check_vocabulary(m.run.data.prepared)
        m.run.check_mod_versions()
    steps = {c["step"] for c in ckpts}
    if len(steps) != 1:
        raise MinimultError(f"cannot resume stacked runs saved at different steps ({sorted(steps)}); "
                            "resume them one by one with `minimult pretrain --resume`")
    step = steps.pop()
    for m, c in zip(members, ckpts):
        m.model.load_state_dict(c["model"])
    states = [c["optimizer"] for c in ckpts] if all(c["optimizer"] is not None for c in ckpts) else None
    seconds = max(_seconds_at(m.run, c, step) for m, c in zip(members, ckpts))
    return step, states, all(c.get("complete") for c in ckpts), seconds


def _seconds_at(run: Run, ckpt: dict, step: int) -> float:
    """Training seconds up to the checkpoint: saved in it; for a checkpoint from before they were, the
    metrics log's, up to its step."""
    if ckpt.get("train_seconds") is not None:
        return float(ckpt["train_seconds"])
    return logged_seconds(run.metrics_path, up_to_step=step) or 0.0


def _knn_tables(m: Member, log) -> dict:
    """run.json's `knn_tables`: the content hashes of the neighbour tables the run trained with, in order
    (one unless it was resumed with a table built differently, e.g. on another machine: said in a line)."""
    if "neighbours" not in m.masking_inputs:
        return {}
    used, sha = list(m.run.meta.get("knn_tables", [])), table_sha256(m.masking_inputs["neighbours"])
    if used and used[-1] != sha:
        log(f"note: {m.run.name} resumes with neighbour table {sha}, not the {used[-1]} it trained with so far (built "
            f"under the same cache key on another machine or version); run.json's knn_tables records both")
    return {"knn_tables": used if used and used[-1] == sha else [*used, sha]}


def _execution(m: Member, step: int, processes: int, device) -> dict:
    """run.json's `processes`, `microbatches`, `pad_multiple` and `execution`: how the run trains now, and from
    which step each way it trained, on which device and machine (`machine`: the CPU's or GPU's name) and, on a
    CPU, how many threads (they change fp32 sums in the last bit). EXECUTION_SETTINGS may change between resumes:
    a run may begin on a GPU and end on a CPU, or resume on another machine; a run from before this record began
    trained on its recorded processes and device, in one pass, unpadded."""
    tc = m.cfg.train
    now = {"processes": processes, "microbatches": tc.microbatches, "pad_multiple": tc.pad_multiple}
    history = list(m.run.meta.get("execution", []))
    if not history and step > 0:
        history = [{"from_step": 0, "processes": m.run.meta.get("processes", 1), "microbatches": 1,
                    "device": m.run.meta.get("device", str(device))}]
    on_cpu = device.type == "cpu"
    entry = {**now, "device": str(device), "machine": cpu_name() if on_cpu else torch.cuda.get_device_name(device),
             **({"threads": torch.get_num_threads()} if on_cpu else {})}
    last = {**entry, "pad_multiple": 0, **history[-1]} if history else {}  # what a stretch predates: entry's, pad 0
    if not history or any(last[k] != v for k, v in entry.items()):
        history.append({"from_step": step, **entry})
    return {**now, "execution": history}


def _begin(members: list[Member], spe: int, total: int, device, log, world: World = SINGLE, step: int = 0) -> None:
    """run.json of every member at the start, and the one line saying what will train where (rank 0)."""
    if not world.main:
        return
    tc, K = members[0].cfg.train, len(members)
    parameters = members[0].model.num_parameters()
    extra = {"stacked_with": [m.run.name for m in members]} if K > 1 else {}
    for m in members:  # run.json: what the run is and where it runs
        cfg, prepared, m.meta = m.cfg, m.run.data.prepared, m.run.meta
        m.meta.pop("steps", None)  # an earlier stretch's (where it was interrupted): training now, set at its end
        m.meta.update({"name": m.run.name, "mods": cfg.mods, "seed": cfg.train.seed, "preset": cfg.preset,
                       "mod_versions": versions(m.run.mods), "vocab_sha256": prepared.vocab_hash,
                       "data_sha256": prepared.data_hash, "prepared": str(prepared.path), "environment": environment(),
                       "status": "training", "device": str(device),
                       "precision": precision.resolve(cfg.train.precision, device), "parameters": parameters,
                       "steps_per_epoch": spe, "total_steps": total, "unigram_entropy": m.run.data.unigram_entropy,
                       **_execution(m, step, world.size, device), **extra, **_knn_tables(m, log)})
        m.run.write_meta(m.meta)
    tokens_per_step = sum(m.epoch_tokens for m in members) / K / spe
    who = (", ".join(f"{m.run.name} ({m.cfg.mods}, seed {m.cfg.train.seed})" for m in members) if K > 1
           else f"mods: {members[0].cfg.mods}")
    ranks = (f" | {world.size} processes ({'nccl' if device.type == 'cuda' else 'gloo'}), each a share of every "
             f"batch" if world.size > 1 else "")
    ranks += f" | each batch in {tc.microbatches} groups of rows by length" if tc.microbatches > 1 else ""
    ranks += (f" | batches padded to {tc.batch_size} rows and a multiple of {tc.pad_multiple} columns"
              if tc.pad_multiple else "")
    log(f"device {device} ({precision.describe(tc.precision, device)}){ranks} | "
        + (f"{K} stacked models × " if K > 1 else "") + f"{parameters:,} parameters | batch {tc.batch_size} "
        f"sequences (~{tokens_per_step:,.0f} tokens/step) | {len(members[0].train_set):,} sequences, "
        f"{spe} steps/epoch, {tc.epochs} epoch{'s' if tc.epochs != 1 else ''} = {total} steps | {who}")
    padded = tc.batching in PADDED_BATCHINGS and tc.attention == "masked"
    if device.type == "cpu" and padded and tc.microbatches == 1 and not tc.pad_multiple:
        log("note: random batches are mostly padding on a CPU; --set train.microbatches=4 trains each as groups of "
            "rows by length: the same gradient, ~1.8x faster (only dropout draws differ)")


def _run(loop: Loop, device) -> None:
    """The steps from loop.step to loop.end, each followed by the callbacks. On several processes each
    rank's gradients (and losses) are summed into the whole batch's before clipping and the step."""
    members, optimizer, tc, world = loop.members, loop.optimizer, loop.members[0].cfg.train, loop.world
    progress = Progress(max(1, min(50, loop.spe // 4)), tc.checkpoint_every or loop.spe)
    callbacks = [EvaluateEvery(tc.eval_every), progress, CheckpointEvery(tc.checkpoint_every or loop.spe)]
    autocast = precision.autocast(tc.precision, device)
    params = list(loop.stepper.model.parameters())
    loop.stepper.model.train()
    loop.t0 = time.time()
    plans: dict[int, list] = {}
    with ExitStack() as files:
        loop.metrics = [files.enter_context(open(m.run.metrics_path, "a")) for m in members] if world.main else []
        while loop.step < loop.end:
            epoch, within = divmod(loop.step, loop.spe)
            if epoch not in plans:
                for m in members:
                    m.train_set.start_epoch(epoch)  # pairs (nsp) redraw their partners
                plans = {epoch: [plan_epoch(m.train_set.lengths_np, tc.batch_size, m.cfg.train.seed, epoch,
                                            tc.batching, languages=m.cfg.data.n_langs) for m in members]}
            indices = [p[within] for p in plans[epoch]]
            loop.lr = lr_at(loop.step, loop.total, tc.lr, tc.warmup_steps)
            for g in optimizer.param_groups:
                g["lr"] = loop.lr
            with autocast:
                losses = loop.stepper.losses(loop.step, indices)
            optimizer.zero_grad(set_to_none=True)
            if losses.requires_grad:  # always on one process; a rank without rows this step has no graph
                losses.sum().backward()
            if world.size > 1:
                losses = distributed.all_reduce(params, losses)
            loop.stepper.clip(tc.clip)
            optimizer.step()
            loop.step += 1
            progress.add(losses, sum(m.train_set.tokens(i) for m, i in zip(members, indices)))
            for callback in callbacks:
                callback(loop)


def train(runs: list[Run] | Run, resume: bool = False, log: Callable[[str], None] = print,
          stop_after: int | None = None, nproc: int | None = None) -> list[dict]:
    """Train (or continue) `runs` together; see the module docstring. `stop_after` ends early after that
    many steps in total, with a checkpoint (`pretrain --stop-after`; a resume goes on as if never stopped).
    `nproc` (default: train.nproc) processes share every step (minimult.distributed), started here, each
    with train.threads threads (default 1); in a process that torchrun started (RANK, WORLD_SIZE, ...) this
    one is one of torchrun's ranks instead. One process trains with train.threads threads, else, resuming, with
    those of the run's last stretch on a CPU (run.json's `execution`), else with the process's own."""
    runs = [runs] if isinstance(runs, Run) else list(runs)
    if not runs:
        raise MinimultError("nothing to train: no runs given")
    if stop_after is not None and (isinstance(stop_after, bool) or not isinstance(stop_after, int) or stop_after < 1):
        raise MinimultError(f"--stop-after (stop_after) must be a whole number of updates, at least 1 (got "
                            f"{stop_after!r})")
    check_stackable([r.cfg for r in runs])
    tc = runs[0].cfg.train
    launched = ranks.from_env()
    if nproc is not None:
        ranks.check_nproc(nproc, launched)
    if launched is not None:  # one of torchrun's ranks
        torch.set_num_threads(tc.threads or 1)
        with distributed.session(launched, tc.device):
            return _train(runs, resume, log if launched.main else (lambda s: None), stop_after, launched)
    nproc = tc.nproc if nproc is None else nproc
    if nproc > 1:
        distributed.check_devices(tc.device, nproc)
        specs = [(str(r.path), r.cfg) for r in runs]
        ranks.launch(nproc, tc.threads or 1, _train_rank, (specs, resume, stop_after), log,
                           lambda: ranks.kept_checkpoints([r.checkpoint_path for r in runs]))
        return [r.meta for r in runs]
    kept = (runs[0].meta.get("execution") or [{}])[-1].get("threads") if resume else None
    if tc.threads or kept:  # a resumed run keeps the threads it last trained with: others change fp32 sums
        torch.set_num_threads(tc.threads or kept)
    return _train(runs, resume, log, stop_after, SINGLE)


def _train_rank(world: World, log, specs: list, resume: bool, stop_after: int | None) -> None:
    """One of the processes `train` started (minimult.ranks.launch): the same runs, from their folders."""
    runs = [Run(Path(path), cfg) for path, cfg in specs]
    with distributed.session(world, runs[0].cfg.train.device):
        _train(runs, resume, log, stop_after, world)


def _setup_all(runs: list[Run], device, log, world: World) -> list[Member]:
    """Every run's data and model; on several processes rank 0 first (it builds what the cache lacks:
    e.g. knn-replace's neighbour table), then the others, which read what it built."""
    members = [setup(r, device, log) for r in runs] if world.main else None
    if world.size > 1:
        distributed.barrier()
    return members or [setup(r, device, log) for r in runs]


def _train(runs: list[Run], resume: bool, log, stop_after: int | None, world: World) -> list[dict]:
    tc = runs[0].cfg.train
    device = distributed.device_for(tc.device, world)
    members = _setup_all(runs, device, log, world)
    spes = [steps_per_epoch(len(m.train_set), tc.batch_size, tc.batching, languages=m.cfg.data.n_langs)
            for m in members]
    if len(set(spes)) != 1:
        raise MinimultError(f"cannot stack runs with different steps per epoch ({spes}): their data differ in size")
    spe, K = spes[0], len(members)
    total, step, opt_states, seconds = tc.epochs * spe, 0, None, 0.0
    if resume and not any(m.run.has_checkpoint() for m in members):  # failed before its first checkpoint
        for m in members:
            m.run.check_vocabulary(m.run.data.prepared)
            if world.main:
                m.run.metrics_path.unlink(missing_ok=True)
        log(f"no checkpoint yet in {', '.join(m.run.name for m in members)}: training from step 0")
    elif resume:
        names = ", ".join(m.run.name for m in members)
        step, opt_states, complete, seconds = _resume(members, device, log)
        if complete:
            log(f"run{'s' if K > 1 else ''} {names} {'are' if K > 1 else 'is'} already complete ({step} steps)")
            return [m.run.meta for m in members]
        if stop_after is not None and stop_after <= step:
            raise MinimultError(f"--stop-after {stop_after}: {names} has trained {step} steps already")
        for m in members if world.main else []:
            truncate_log(m.run.metrics_path, step)
        log(f"resuming {names} from step {step}")
    stepper = Stepper(members, world)
    optimizer = torch.optim.AdamW(stepper.model.param_groups(tc.weight_decay), lr=tc.lr, betas=(0.9, 0.999),
                                  eps=tc.adam_eps, fused=True)  # fused: ~4% faster per step on CPU too
    if opt_states is not None:
        optimizer.load_state_dict(stack_optimizer_states(opt_states))
    if world.size > 1:
        distributed.broadcast_parameters(list(stepper.model.parameters()))
    _begin(members, spe, total, device, log, world, step)
    loop = Loop(members, stepper, optimizer, spe, total, step, min(total, stop_after or total), log, step=step,
                world=world, seconds_before=seconds, saved=step or None)
    if total == 0 or step >= total:
        loop.save(complete=True)
        _finish(loop, 0.0)
        log(f"no training steps ({'0 epochs' if total == 0 else 'done'}); checkpoint written")
    else:
        try:
            _run(loop, device)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C, or a sweep worker's (`sweep.worker._stop_quietly`)
            _interrupted(loop)
            raise
        _finish(loop, time.time() - loop.t0)
    return [m.meta for m in members]


def _interrupted(loop: Loop) -> None:
    """run.json of a run stopped mid-training: `interrupted` at the step its last checkpoint kept, where a resume
    goes on (as `--stop-after` leaves it; 0 before its first checkpoint)."""
    for m in loop.members if loop.world.main else []:
        m.meta.update(status="interrupted", steps=loop.saved or 0)
        try:
            m.run.write_meta(m.meta)
        except OSError:  # a full disk: the interrupt, not this, is what the caller must see
            pass


def _finish(loop: Loop, elapsed: float) -> None:
    if not loop.world.main:
        return
    done = loop.step - loop.start_step
    tokens_per_epoch = sum(m.epoch_tokens for m in loop.members)
    for m in loop.members:
        m.meta.update(status="complete" if loop.step == loop.total else "interrupted", steps=loop.step)
        if elapsed:
            m.meta.update(train_seconds=loop.seconds_before + elapsed,
                          tokens_per_s=done * tokens_per_epoch / len(loop.members) / loop.spe / max(elapsed, 1e-9))
        m.run.write_meta(m.meta)


def pretrain(cfg, mods, run_dir: Path, resume: bool = False, log: Callable[[str], None] = print,
             stop_after: int | None = None, nproc: int | None = None) -> dict:
    """Train (or continue) the one run in `run_dir` (which holds its config.json)."""
    return train([Run(Path(run_dir), cfg, mods)], resume=resume, log=log, stop_after=stop_after, nproc=nproc)[0]
