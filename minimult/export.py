"""Export a trained `Bert` to a HuggingFace `BertForMaskedLM` (in memory or as a folder).

transformers is imported inside the functions: it is an export/test dependency, never a training one.
Every granularity of units exports (data.tokenizer wordpiece, char, word): the run's tokenizer.json is a
WordPiece model (wordpiece; char, whose entries are single characters in `a` and `##a` forms) or a
WordLevel model (word), both of which transformers' `PreTrainedTokenizerFast` loads as they are. A
character set or a small corpus's words can leave part of each language's id block unused, so the HF
tokenizer's length is not the id shift of the second language: the config records the block
(`minimult_id_block`), which `eval --hf --shift` reads.

A run's languages travel too (`minimult_languages` in the config, `eval --hf --langs` reads it): per
language name, the sub-folder whose tokenizer.json writes it ("" = the export's own; en-es's Spanish:
`es/`, copied from the run), whether it is English in the code-point-shifted script (`unicode_shift`),
and its layout as the run wrote it (id offset, special ids, first position, segment), so an exported
lang-pos or shift-special run reads its second language as it trained.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch

from minimult.errors import MinimultError
from minimult.model import Bert, ModelConfig


# the run's tokenizer.json as transformers' PreTrainedTokenizerFast, with minimult's special tokens
TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "cls_token": "[CLS]",
                    "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]", "model_max_length": 512}


def _hf_state_dict(model: Bert, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our parameter names -> HF BertForMaskedLM names (fused QKV split back into query/key/value)."""
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    H = cfg.hidden
    token = sd["embeddings.lookups.token.weight"]
    segment = sd.get("embeddings.lookups.segment.weight", torch.zeros(1, H))  # no table: one zero row
    out = {
        "bert.embeddings.word_embeddings.weight": token,
        "bert.embeddings.position_embeddings.weight": sd["embeddings.lookups.position.weight"],
        "bert.embeddings.token_type_embeddings.weight": segment,
        "bert.embeddings.LayerNorm.weight": sd["embeddings.ln.weight"],
        "bert.embeddings.LayerNorm.bias": sd["embeddings.ln.bias"],
        "cls.predictions.transform.dense.weight": sd["head.dense.weight"],
        "cls.predictions.transform.dense.bias": sd["head.dense.bias"],
        "cls.predictions.transform.LayerNorm.weight": sd["head.ln.weight"],
        "cls.predictions.transform.LayerNorm.bias": sd["head.ln.bias"],
        "cls.predictions.decoder.weight": token,  # tied
        "cls.predictions.decoder.bias": sd["head.bias"],
        "cls.predictions.bias": sd["head.bias"],
    }
    for i in range(cfg.layers):
        ours, hf = f"blocks.{i}.", f"bert.encoder.layer.{i}."
        for part, w, b in zip(("query", "key", "value"), sd[ours + "attn.qkv.weight"].split(H), sd[ours + "attn.qkv.bias"].split(H)):
            out[f"{hf}attention.self.{part}.weight"], out[f"{hf}attention.self.{part}.bias"] = w, b
        for theirs, mine in {
            "attention.output.dense": "attn.proj",
            "attention.output.LayerNorm": "ln_attn",
            "intermediate.dense": "fc_in",
            "output.dense": "fc_out",
            "output.LayerNorm": "ln_ffn",
        }.items():
            out[f"{hf}{theirs}.weight"], out[f"{hf}{theirs}.bias"] = sd[f"{ours}{mine}.weight"], sd[f"{ours}{mine}.bias"]
    return {k: v.clone() for k, v in out.items()}


def to_hf(model: Bert, cfg: ModelConfig, attn_implementation: str = "eager", id_block: int | None = None,
          languages: dict | None = None):
    """A `transformers.BertForMaskedLM` (float32, CPU, eval mode) holding a copy of `model`'s weights;
    `id_block`: the ids per language (data.vocab_size), kept in its config as `minimult_id_block`;
    `languages`: {name: {tokenizer, unicode_shift, layout}}, kept as `minimult_languages`."""
    from transformers import BertConfig, BertForMaskedLM

    model = getattr(model, "_orig_mod", model)  # accept a torch.compile'd model too
    hf_cfg = BertConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        intermediate_size=cfg.intermediate,
        hidden_act="gelu",
        hidden_dropout_prob=cfg.dropout,
        attention_probs_dropout_prob=cfg.dropout,
        max_position_embeddings=cfg.max_positions,
        type_vocab_size=max(cfg.type_vocab_size, 1),
        initializer_range=cfg.init_std,
        layer_norm_eps=cfg.layer_norm_eps,
        tie_word_embeddings=True,
        attn_implementation=attn_implementation,
        **({"minimult_id_block": id_block} if id_block else {}),
        **({"minimult_languages": languages} if languages else {}),
    )
    hf = BertForMaskedLM(hf_cfg)
    hf.load_state_dict(_hf_state_dict(model, cfg), strict=True)
    return hf.eval()


def check_destination(out_dir: Path, force: bool = False) -> None:
    """An export goes into a new or empty folder, never into (or under) a run folder; `force` allows a
    folder holding other files, which are kept."""
    out_dir = Path(out_dir).resolve()
    run = next((d for d in (out_dir, *out_dir.parents) if (d / "config.json").is_file() and
                ((d / "run.json").is_file() or (d / "checkpoint.pt").is_file())), None)
    if run is not None:
        where = "is the run folder" if run == out_dir else f"is inside the run folder {run}"
        raise MinimultError(f"{out_dir} {where}: export into a folder of its own")
    if out_dir.exists() and not out_dir.is_dir():
        raise MinimultError(f"{out_dir} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise MinimultError(f"{out_dir} is not empty: export into a new or empty folder (or --force to add the "
                            f"model's files beside the ones there, which are kept)")


def language_record(source, data_cfg, layouts) -> dict:
    """`minimult_languages` of a run: its source's `text_inputs` with each language's layout."""
    from dataclasses import asdict

    inputs = source.text_inputs(data_cfg)
    return {lang: {**inputs[lang], "layout": asdict(layout)} for lang, layout in zip(inputs, layouts)}


def save_hf(model: Bert, cfg: ModelConfig, out_dir: Path, vocab_file: Path | None = None, force: bool = False,
            id_block: int | None = None, languages: dict | None = None) -> Path:
    """Write a folder that `BertForMaskedLM.from_pretrained(out_dir)` loads (`id_block`, `languages` as
    `to_hf`'s; a language's tokenizer sub-folder is copied from beside `vocab_file`). A new folder appears whole
    (built aside, then renamed); into an existing one (empty, or any with `force`) each file is
    renamed into place, and nothing else in it is touched. Files 0644, folders 0755."""
    out_dir = Path(out_dir)
    check_destination(out_dir, force)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp-"))
    try:
        to_hf(model, cfg, id_block=id_block, languages=languages).save_pretrained(tmp)
        if vocab_file is not None:
            subs = sorted({spec["tokenizer"] for spec in (languages or {}).values()} - {""})
            for sub in ["", *subs]:  # the run's own tokenizer (so AutoTokenizer gives the run's ids), then each language's
                source, target = Path(vocab_file).parent / sub, tmp / sub
                vocab = source / "vocab.txt" if sub else Path(vocab_file)
                if not vocab.is_file():
                    raise MinimultError(f"{vocab} is missing: the export needs the {sub!r} language's vocabulary")
                target.mkdir(exist_ok=True)
                shutil.copyfile(vocab, target / "vocab.txt")
                if (source / "tokenizer.json").is_file():
                    shutil.copyfile(source / "tokenizer.json", target / "tokenizer.json")
                    (target / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2) + "\n")
        for f in tmp.rglob("*"):
            f.chmod(0o755 if f.is_dir() else 0o644)
        tmp.chmod(0o755)
        if not out_dir.exists():
            os.replace(tmp, out_dir)
        else:
            for f in sorted(tmp.iterdir()):
                if f.is_dir() and (out_dir / f.name).is_dir():  # a language's tokenizer folder of an earlier export
                    shutil.rmtree(out_dir / f.name)
                os.replace(f, out_dir / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir
