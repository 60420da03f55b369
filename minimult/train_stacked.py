"""Pretraining several runs of one model shape at once as one `StackedBert`.

Public entry: `pretrain_stacked(cfgs, mods, run_dirs, resume=False, log=print) -> list[dict]`.
Every run keeps what `train.pretrain` would give it: its own data, batch plan, masking and dropout
draws from its own seed, its own loss, gradient clipping and AdamW state, its own run folder with
`run.json`, `metrics.jsonl` and a standard checkpoint (evaluate, export or resume it like any run).
The runs must share the model configuration and the training schedule (epochs, steps, batch size,
lr, warm-up, weight decay, clipping); seeds and mods may differ. Settings that change the model's
shape (lang-pos's taller position table, overparam) stack only with settings of the same shape.
"""

from __future__ import annotations

import json
import math
import time
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import torch

from . import precision
from .batching import plan_epoch, steps_per_epoch
from .errors import MinimultError
from .masking import mask_batch
from .runs import write_json
from .stacked import StackedBert, pack
from .train import (CHECKPOINT, build, eval_line, evaluate_during_training, fmt_time, load_checkpoint, lr_at,
                    pick_device, save_checkpoint, start_meta, step_seed, truncate_log)

SHARED_TRAIN = ("epochs", "batch_size", "lr", "weight_decay", "adam_eps", "warmup_steps", "clip", "device",
                "threads", "precision", "checkpoint_every", "eval_every", "eval_sentences")


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


def _split_optimizer_state(state: dict, m: int) -> dict:
    """Model m's share of the stacked AdamW state, as `torch.optim.AdamW` of one `Bert` saves it."""
    return {"state": {i: {k: (v[m].clone() if k != "step" else v.clone()) for k, v in st.items()}
                      for i, st in state["state"].items()},
            "param_groups": [dict(g) for g in state["param_groups"]]}


def _stack_optimizer_states(states: list[dict]) -> dict:
    first = states[0]
    return {"state": {i: {k: (torch.stack([s["state"][i][k] for s in states]) if k != "step" else v)
                          for k, v in st.items()} for i, st in first["state"].items()},
            "param_groups": first["param_groups"]}


def pretrain_stacked(cfgs, mods, run_dirs, resume: bool = False, log: Callable[[str], None] = print,
                     stop_after: int | None = None) -> list[dict]:
    """Train (or continue) every run in `run_dirs` (configs `cfgs`, parsed mods `mods`) together."""
    if not (len(cfgs) == len(mods) == len(run_dirs) >= 1):
        raise MinimultError("pretrain_stacked needs one config, mod list and run folder per run")
    run_dirs = [Path(d) for d in run_dirs]
    check_stackable(cfgs)
    tc = cfgs[0].train
    if tc.threads:
        torch.set_num_threads(tc.threads)
    device = pick_device(tc.device)
    setups = [build(cfg, ms, device, log) for cfg, ms in zip(cfgs, mods)]
    spes = [steps_per_epoch(len(s.train_set), tc.batch_size) for s in setups]
    if len(set(spes)) != 1:
        raise MinimultError(f"cannot stack runs with different steps per epoch ({spes}): their data differ in size")
    spe = spes[0]
    total = tc.epochs * spe
    M = len(cfgs)
    step = 0
    paths = [d / CHECKPOINT for d in run_dirs]
    opt_states = None
    if resume:
        ckpts = [load_checkpoint(p, map_location=device) for p in paths]
        steps = {c["step"] for c in ckpts}
        if len(steps) != 1:
            raise MinimultError(f"cannot resume stacked runs saved at different steps ({sorted(steps)}); "
                                "resume them one by one with `minimult pretrain --resume`")
        step = steps.pop()
        for s, c in zip(setups, ckpts):
            s.model.load_state_dict(c["model"])
        if all(c["optimizer"] is not None for c in ckpts):
            opt_states = [c["optimizer"] for c in ckpts]
        if all(c.get("complete") for c in ckpts):
            log(f"runs {', '.join(d.name for d in run_dirs)} are already complete ({step} steps)")
            return [json.loads((d / "run.json").read_text()) for d in run_dirs]
        for d in run_dirs:
            truncate_log(d / "metrics.jsonl", step)
        log(f"resuming {M} stacked runs from step {step}")

    model = StackedBert([s.model for s in setups]).to(device)
    optimizer = torch.optim.AdamW(model.param_groups(tc.weight_decay), lr=tc.lr, betas=(0.9, 0.999),
                                  eps=tc.adam_eps, fused=True)
    if opt_states is not None:
        optimizer.load_state_dict(_stack_optimizer_states(opt_states))
    metas = [start_meta(d, cfg, ms, s, spe, total, stacked_with=[x.name for x in run_dirs])
             for d, cfg, ms, s in zip(run_dirs, cfgs, mods, setups)]
    tokens_per_epoch = sum(int(s.train_set.lengths_np.sum() + 2 * len(s.train_set)) for s in setups)
    log(f"device {device} ({precision.describe(tc.precision, device)}) | {M} stacked models × "
        f"{setups[0].model.num_parameters():,} parameters | batch "
        f"{tc.batch_size} sequences each | {spe} steps/epoch, {tc.epochs} epochs = {total} steps | runs: "
        + ", ".join(f"{d.name} ({cfg.mods}, seed {cfg.train.seed})" for d, cfg in zip(run_dirs, cfgs)))

    def save(at: int, complete: bool) -> None:
        model.unstack_into([s.model for s in setups])
        state = optimizer.state_dict()
        for m, (s, cfg, p) in enumerate(zip(setups, cfgs, paths)):
            one = _split_optimizer_state(state, m)
            save_checkpoint(p, s.model, SimpleNamespace(state_dict=lambda one=one: one), at, cfg, complete)

    if total == 0 or step >= total:
        save(step, True)
        for d, meta in zip(run_dirs, metas):
            meta.update(status="complete", steps=step)
            write_json(d / "run.json", meta)
        return metas

    autocast = precision.autocast(tc.precision, device)
    mask_gens = [torch.Generator(device=device) for _ in range(M)]
    model.generators = [torch.Generator() for _ in range(M)] if device.type == "cpu" else None
    every = tc.checkpoint_every or spe
    log_every = max(1, min(50, spe // 4))
    model.train()
    t0 = window_t = time.time()
    window_tokens, window_loss, window_steps = 0, torch.zeros(M, device=device), 0
    start_step, end = step, min(total, stop_after) if stop_after else total
    plans: dict[int, list] = {}
    with ExitStack() as files:
        metrics = [files.enter_context(open(d / "metrics.jsonl", "a")) for d in run_dirs]
        while step < end:
            epoch, within = divmod(step, spe)
            if epoch not in plans:
                plans = {epoch: [plan_epoch(s.train_set.lengths_np, tc.batch_size, cfg.train.seed, epoch)
                                 for s, cfg in zip(setups, cfgs)]}
            items = []
            for m, (s, cfg) in enumerate(zip(setups, cfgs)):
                seed = step_seed(cfg.train.seed, step)
                if model.generators is not None:
                    model.generators[m].manual_seed(seed)  # dropout, as train.pretrain's torch.manual_seed
                mask_gens[m].manual_seed(seed + 1)  # masking
                index = plans[epoch][m][within]
                batch = s.train_set.batch(index)
                masked = mask_batch(batch.input_ids, batch.maskable, s.train_set.mask_id[batch.lang],
                                    s.random_ids, cfg.mask, mask_gens[m], s.neighbours)
                items.append({"input_ids": masked.input_ids, "position_ids": batch.position_ids,
                              "token_type_ids": batch.token_type_ids, "attention_mask": batch.attention_mask,
                              "selected": masked.selected, "targets": masked.targets})
                window_tokens += int(s.train_set.lengths_np[index].sum()) + 2 * len(index)
            lr = lr_at(step, total, tc.lr, tc.warmup_steps)
            for g in optimizer.param_groups:
                g["lr"] = lr
            with autocast:
                losses = model.mlm_losses(pack(items))
            optimizer.zero_grad(set_to_none=True)
            losses.sum().backward()
            model.clip_grad_norm_per_model(tc.clip)
            optimizer.step()
            step += 1
            window_loss += losses.detach().float()
            window_steps += 1
            if tc.eval_every and (step % tc.eval_every == 0 or step == total):
                model.unstack_into([s.model for s in setups])
                for m, (s, cfg, ms) in enumerate(zip(setups, cfgs, mods)):
                    row = evaluate_during_training(s.model, s, cfg, ms, step, spe)
                    metrics[m].write(json.dumps(row) + "\n")
                    log(f"{run_dirs[m].name}: {eval_line(row)}")
            last = step == end
            if step % log_every == 0 or last or step % every == 0:
                mean = (window_loss / window_steps).tolist()
                bad = [(d.name, x) for d, x in zip(run_dirs, mean) if not math.isfinite(x)]
                if bad:
                    for d, meta in zip(run_dirs, metas):
                        meta.update(status=f"failed: loss {dict(bad)} at step {step}")
                        write_json(d / "run.json", meta)
                    raise MinimultError(f"loss became {bad[0][1]} in {bad[0][0]} at step {step}; stopped all "
                                        f"{M} stacked runs: the last good checkpoints are kept "
                                        f"(try a lower --set train.lr)")
                now = time.time()
                rate = window_tokens / max(now - window_t, 1e-9)
                eta = (now - t0) / (step - start_step) * (total - step)
                for m in range(M):
                    metrics[m].write(json.dumps({"step": step, "epoch": step / spe, "loss": mean[m], "lr": lr,
                                                 "tokens_per_s": rate / M, "elapsed_s": now - t0}) + "\n")
                    metrics[m].flush()
                log(f"step {step:>6}/{total} | epoch {step / spe:6.2f} | loss "
                    + " ".join(f"{x:.4f}" for x in mean)
                    + f" | lr {lr:.2e} | {rate:8,.0f} tok/s ({M} models) | {fmt_time(now - t0)} elapsed, "
                    f"{fmt_time(eta)} left")
                window_t, window_tokens, window_steps = now, 0, 0
                window_loss = torch.zeros(M, device=device)
            if step % every == 0 or last:
                save(step, step == total)
    elapsed = time.time() - t0
    for d, meta in zip(run_dirs, metas):
        meta.update(status="complete" if step == total else "interrupted", steps=step,
                    train_seconds=meta.get("train_seconds", 0) + elapsed,
                    tokens_per_s=(step - start_step) * tokens_per_epoch / M / spe / max(elapsed, 1e-9))
        write_json(d / "run.json", meta)
    return metas
