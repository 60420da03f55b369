"""Dev perplexity of a trained run as the lab scores it and as the published code's run script did.

    python experiments/analyses/ppl_mix.py RUN [--sentences N]

The lab (docs/metrics.md): of each sequence's ordinary pieces exactly max(1, round(0.15 n)) are
selected and all become [MASK]; batches of 256 length-sorted sequences; exp of the mean NLL over every
selected piece.

The paper's Table 1 perplexities come from the published `run.sh`, which calls
`run_language_modeling.py --do_eval --replacement_probs 1.0,0.0,0.0` on the dev file: every selected
piece becomes [MASK] too (the paper's text says the same), but each ordinary piece is selected on its
own with probability 0.15 (Bernoulli), the dev sequences run in their file order (every English one,
then every second-language one) in batches of 256 padded to the batch's longest and without an attention
mask, and the perplexity is exp of the mean over batches of each batch's mean NLL. That is measured here
twice, with the run's own attention (only the selection and the averaging differ from the lab's) and
with padding attended as the published code did.

The training mix (80% [MASK], 10% left as they were, 10% a random id; loss on all of them) is printed as
well: a piece left as it was can be copied, so it scores lower. It is NOT what the paper reported (an
earlier version of this script said it was). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch

from minimult.data.batching import SequenceSet
from minimult.evaluate.perplexity import PPL_SEED, mlm_perplexity
from minimult.runs import Run


@torch.inference_mode()
def published_measure(model, sides, layouts, attend_padding: bool, batch_size: int = 256, rate: float = 0.15) -> dict:
    """Bernoulli(rate) selection of ordinary pieces, all to [MASK], sequences in file order, batches of
    `batch_size`, exp(mean over batches of the batch's mean NLL)."""
    seqs = SequenceSet.from_sides(list(sides), layouts, "cpu")
    gen = torch.Generator().manual_seed(PPL_SEED)
    batch_means, pooled_nll, pooled_n = [], 0.0, 0
    for i in range(0, len(seqs), batch_size):
        b = seqs.batch(np.arange(i, min(i + batch_size, len(seqs))))
        selected = (torch.rand(b.input_ids.shape, generator=gen) < rate) & b.maskable
        if not selected.any():
            continue
        ids = torch.where(selected, seqs.mask_id[b.lang][:, None], b.input_ids)
        hidden = model(ids, b.position_ids, b.token_type_ids, None if attend_padding else b.attention_mask)
        nll = torch.nn.functional.cross_entropy(model.mlm_logits(hidden[selected]).float(), b.input_ids[selected],
                                                reduction="none").double()
        batch_means.append(float(nll.mean()))
        pooled_nll, pooled_n = pooled_nll + float(nll.sum()), pooled_n + len(nll)
    return {"perplexity": math.exp(sum(batch_means) / len(batch_means)),
            "pooled over pieces": math.exp(pooled_nll / pooled_n), "batches": len(batch_means), "masked_tokens": pooled_n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--sentences", type=int, default=None, help="the lab's measures on a fixed random subset of N dev sequences")
    args = ap.parse_args()
    torch.set_num_threads(1)
    run = Run.open(args.run)
    model = run.load_model("cpu", log=lambda s: None)
    model.eval()
    sides, layouts, random_ids = run.data.views("dev"), run.data.layouts, run.data.random_ids()
    out = {"run": str(run.path), "sequences": args.sentences or "all", "trained with attention": run.cfg.train.attention}
    lab = dict(attention=run.cfg.train.attention)
    out["lab (exact 15%, all [MASK], per piece)"] = mlm_perplexity(model, sides, layouts, random_ids, torch.device("cpu"),
                                                                   args.sentences, **lab)["perplexity"]
    out["training mix (0.8 mask, 0.1 keep, 0.1 random; not the paper's measure)"] = mlm_perplexity(
        model, sides, layouts, random_ids, torch.device("cpu"), args.sentences, probs=(0.8, 0.1, 0.1, 0.0), **lab)["perplexity"]
    out["published run.sh (Bernoulli 15%, all [MASK], file order, batch means), run's attention"] = \
        published_measure(model, sides, layouts, attend_padding=run.cfg.train.attention == "attend-padding")
    out["published run.sh, padding attended"] = published_measure(model, sides, layouts, attend_padding=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
