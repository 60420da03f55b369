"""What a run on the unigram plateau has learned, layer by layer, against one that left it (issue 34,
item 3): loads each run's last checkpoint and, on masked training batches drawn as training draws them,
measures

- attention: mean entropy of each layer's attention rows as a share of the uniform one (1 = every
  key weighted alike), and the weight a query puts on its own position;
- the residual stream: how much of each block's output comes from its attention and its feed-forward
  branch (the branch's norm over the residual's norm, before the LayerNorm);
- collapse: the mean cosine of two different tokens' hidden states in one sentence (1 = every token
  carries the same vector, so a [MASK] cannot see its context);
- the output: the masked-token loss, the loss of the unigram distribution of the training pieces on
  the same targets, and how far the model's predictions at different [MASK]s differ (mean KL of each
  prediction from their average: 0 = one prediction for every position).

    python experiments/analyses/plateau_diagnose.py /work/plateau/lpns/base-s0 /work/plateau/lpns/base-s1

Prints one table per run; `--json FILE` writes the numbers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from minimult.runs import Run
from minimult.train import setup


def attention_probs(block, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(B, heads, T, T) attention weights of `block` on input `x` (the model's own arithmetic)."""
    attn = block.attn
    B, T, H = x.shape
    nh, hs = attn.heads, H // attn.heads
    q, k, _ = attn.qkv(x).split(H, dim=-1)
    q, k = (t.view(B, T, nh, hs).transpose(1, 2) for t in (q, k))
    s = q @ k.transpose(-1, -2) * hs**-0.5
    if bias is not None:
        s = s + bias
    return torch.softmax(s, -1)


@torch.no_grad()
def diagnose(run_dir: Path, batches: int, batch_size: int, seed: int) -> dict:
    run = Run.open(run_dir)
    member = setup(run, torch.device("cpu"), log=lambda s: None)
    state = run.checkpoint(map_location="cpu")
    model = member.model
    model.load_state_dict(state["model"])
    model.eval()
    counts = np.bincount(member.train_set.ids.numpy(), minlength=run.cfg.model.vocab_size).astype(np.float64)
    unigram = torch.as_tensor(np.log(np.maximum(counts, 1e-9) / counts.sum()), dtype=torch.float32)
    rng = np.random.default_rng(seed)
    member.generator.manual_seed(seed)
    layers = len(model.blocks)
    acc = {k: np.zeros(layers) for k in ("entropy", "self", "attn_share", "ffn_share")}
    acc["cosine"] = np.zeros(layers + 1)
    loss = uni = spread = 0.0
    for _ in range(batches):
        index = rng.choice(len(member.train_set), batch_size, replace=False)
        b = member.masked_batch(index)
        real = member.train_set.batch(index).attention_mask
        real = torch.ones_like(b["input_ids"], dtype=torch.bool) if real is None else real.bool()
        x, bias = model._embed(b["input_ids"], b["position_ids"], b["token_type_ids"],
                               b["attention_mask"])
        hidden = [x]
        pair = real[:, :, None] & real[:, None, :] & ~torch.eye(real.shape[1], dtype=torch.bool)
        for i, block in enumerate(model.blocks):
            p = attention_probs(block, x, bias)  # (B, nh, T, T)
            keys = real.sum(1).clamp(min=2).float()[:, None, None]
            ent = -(p * p.clamp_min(1e-12).log()).sum(-1) / keys.log()  # (B, nh, T)
            w = real[:, None, :].float()
            acc["entropy"][i] += float((ent * w).sum() / (w.sum() * p.shape[1]))
            diag = p.diagonal(dim1=-2, dim2=-1)
            acc["self"][i] += float((diag * w).sum() / (w.sum() * p.shape[1]))
            a = block.attn(x, bias)
            acc["attn_share"][i] += float(a.norm(dim=-1)[real].mean() / x.norm(dim=-1)[real].mean())
            y = block.ln_attn(x + a)
            f = block.fc_out(F.gelu(block.fc_in(y)))
            acc["ffn_share"][i] += float(f.norm(dim=-1)[real].mean() / y.norm(dim=-1)[real].mean())
            x = block.ln_ffn(y + f)
            hidden.append(x)
        for i, h in enumerate(hidden):
            n = F.normalize(h, dim=-1)
            cos = n @ n.transpose(1, 2)
            acc["cosine"][i] += float(cos[pair].mean())
        logits = model.mlm_logits(x.flatten(0, 1)[b["selected"]]).float()
        loss += float(F.cross_entropy(logits, b["targets"]))
        uni += float(-unigram[b["targets"]].mean())
        logp = logits.log_softmax(-1)
        mean = logp.exp().mean(0).clamp_min(1e-12).log()
        spread += float((logp.exp() * (logp - mean)).sum(-1).mean())
    out = {k: (v / batches).round(4).tolist() for k, v in acc.items()}
    out.update(loss=round(loss / batches, 4), unigram_loss=round(uni / batches, 4),
               prediction_spread=round(spread / batches, 4), step=int(state["step"]), run=str(run_dir))
    return out


def show(d: dict) -> None:
    print(f"{d['run']} (step {d['step']}): masked-token loss {d['loss']:.3f}, unigram {d['unigram_loss']:.3f}, "
          f"spread of predictions {d['prediction_spread']:.3f} nats")
    print("  layer | attn entropy | self weight | |attn|/|x| | |ffn|/|x| | cos(tokens)")
    print(f"      0 |              |             |           |           | {d['cosine'][0]:.3f}")
    for i in range(len(d["entropy"])):
        print(f"  {i + 1:>5} | {d['entropy'][i]:>12.3f} | {d['self'][i]:>11.3f} | {d['attn_share'][i]:>9.3f} | "
              f"{d['ffn_share'][i]:>9.3f} | {d['cosine'][i + 1]:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    results = [diagnose(Path(r), args.batches, args.batch_size, args.seed) for r in args.runs]
    for d in results:
        show(d)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
