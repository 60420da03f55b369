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
and its layout as the run wrote it (id offset, special ids, first position, segment, window), so an
exported lang-pos or shift-special run reads its second language as it trained. Each language's word order
goes with it (`order`: "original", or "reversed" under inv-order); a mod whose order is not one of those
(permute's random swaps) is named in `order_mod` with `order` "unrecorded", and `eval --hf` refuses it.

How the run trained travels as `minimult_training`: its mods and seed, the checkpoint's step of the run's
total steps (`complete` false for an unfinished run), run.json's status (a diverged run's "failed: ...")
and `train.attention`, which `eval --hf` encodes with. `minimult export` holds the run's lock while it
exports (never the weights of a run another process is training), and says in one line when the run is
unfinished or failed.

Writing: a new folder appears whole (built in `.NAME.tmp-PID-*` beside it, then renamed); `--force` into
an existing folder renames the export's files into place one by one, creating the sub-folders it needs and
deleting nothing (a user's `es/mydata.txt` stays). A temp folder whose process is gone (`kill -9`) is
removed by the next export to the same name. A folder that holds run folders (a sweep root, `.`) is never
a destination.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from minimult.errors import MinimultError
from minimult.model import Bert, ModelConfig
from minimult.runs import Run


# the run's tokenizer.json as transformers' PreTrainedTokenizerFast, with minimult's special tokens
TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "cls_token": "[CLS]",
                    "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]", "model_max_length": 512}


# HF BertForMaskedLM's modules -> ours, each a weight and a bias: outside the blocks, then in block i
MODULES = {"bert.embeddings.LayerNorm": "embeddings.ln", "cls.predictions.transform.dense": "head.dense",
           "cls.predictions.transform.LayerNorm": "head.ln"}
BLOCK_MODULES = {"attention.output.dense": "attn.proj", "attention.output.LayerNorm": "ln_attn",
                 "intermediate.dense": "fc_in", "output.dense": "fc_out", "output.LayerNorm": "ln_ffn"}


def _hf_state_dict(model: Bert, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our parameter names -> HF BertForMaskedLM names (fused QKV split back into query/key/value)."""
    sd = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    H = cfg.hidden
    token = sd["embeddings.lookups.token.weight"]
    out = {
        "bert.embeddings.word_embeddings.weight": token,
        "bert.embeddings.position_embeddings.weight": sd["embeddings.lookups.position.weight"],
        # no table: one zero row
        "bert.embeddings.token_type_embeddings.weight": sd.get("embeddings.lookups.segment.weight", torch.zeros(1, H)),
        "cls.predictions.decoder.weight": token,  # tied
        "cls.predictions.decoder.bias": sd["head.bias"],
        "cls.predictions.bias": sd["head.bias"],
    }
    modules = dict(MODULES)
    for i in range(cfg.layers):
        ours, hf = f"blocks.{i}.", f"bert.encoder.layer.{i}."
        for part, w, b in zip(("query", "key", "value"), sd[ours + "attn.qkv.weight"].split(H),
                              sd[ours + "attn.qkv.bias"].split(H)):
            out[f"{hf}attention.self.{part}.weight"], out[f"{hf}attention.self.{part}.bias"] = w, b
        modules.update({hf + theirs: ours + mine for theirs, mine in BLOCK_MODULES.items()})
    for theirs, mine in modules.items():
        out[f"{theirs}.weight"], out[f"{theirs}.bias"] = sd[f"{mine}.weight"], sd[f"{mine}.bias"]
    return {k: v.clone() for k, v in out.items()}


@contextlib.contextmanager
def quiet_transformers(reports: bool = False):
    """transformers without its progress bars and, with `reports`, without its log lines below errors (such as
    its load report), restored after the block: the caller says what matters in one line."""
    from transformers.utils import logging as hf_logging  # lazy: an optional dependency (the test extra)

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    if reports:
        hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def to_hf(model: Bert, cfg: ModelConfig, attn_implementation: str = "eager", id_block: int | None = None,
          languages: dict | None = None, training: dict | None = None):
    """A `transformers.BertForMaskedLM` (float32, CPU, eval mode) holding a copy of `model`'s weights;
    `id_block`: the ids per language (data.vocab_size), kept in its config as `minimult_id_block`;
    `languages`: {name: {tokenizer, unicode_shift, layout, order}}, kept as `minimult_languages`;
    `training`: how far and how the run trained (`training_record`), kept as `minimult_training`."""
    # lazy: an optional dependency (the test extra), ~1.3 s to import
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
        **{key: value for key, value in (("minimult_id_block", id_block), ("minimult_languages", languages),
                                         ("minimult_training", training)) if value},
    )
    hf = BertForMaskedLM(hf_cfg)
    hf.load_state_dict(_hf_state_dict(model, cfg), strict=True)
    return hf.eval()


def is_run_folder(d: Path) -> bool:
    """Whether `d` is a run folder: a config.json beside a run's files, or a config.json of a run's settings
    (a sweep's folder before its first step); an HF export's config.json is not one."""
    if not (d / "config.json").is_file():
        return False
    if any((d / f).is_file() for f in ("run.json", "checkpoint.pt", "results.json", "metrics.jsonl")):
        return True
    try:
        config = json.loads((d / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and {"data", "model", "train"} <= set(config)


def run_folder_under(d: Path) -> Path | None:
    """The first run folder below `d` (any depth; hidden folders such as .git or .venv are not searched)."""
    for root, dirs, _ in os.walk(d):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
        for x in dirs:
            if is_run_folder(Path(root) / x):
                return Path(root) / x
    return None


def check_destination(out_dir: Path, force: bool = False) -> None:
    """An export goes into a new or empty folder, never into (or under) a run folder, nor into a folder that
    holds run folders (its config.json would make `report` take it for a run); `force` allows a folder
    holding other files, which are kept."""
    out_dir = Path(out_dir).resolve()
    run = next((d for d in (out_dir, *out_dir.parents) if (d / "config.json").is_file() and
                ((d / "run.json").is_file() or (d / "checkpoint.pt").is_file())), None)
    if run is not None:
        where = "is the run folder" if run == out_dir else f"is inside the run folder {run}"
        raise MinimultError(f"{out_dir} {where}: export into a folder of its own")
    if out_dir.exists() and not out_dir.is_dir():
        raise MinimultError(f"{out_dir} exists and is not a folder")
    if out_dir.is_dir():
        inner = run_folder_under(out_dir)
        if inner is not None:
            raise MinimultError(f"{out_dir} holds run folders (e.g. {inner}): an export there would make `minimult "
                                f"report` take the folder for a run; export into a folder of its own")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force:
        raise MinimultError(f"{out_dir} is not empty: export into a new or empty folder (or --force to add the "
                            f"model's files beside the ones there, which are kept)")


def word_order(acting, max_len: int) -> str | None:
    """The order the reorder hooks of `acting` (active mods, applied in turn as `build_sides` applies them)
    give a language's sentences, when `eval --hf` can write it: "original" or "reversed" for every length
    up to twice the window and whatever the random draws; None otherwise (permute's random swaps)."""
    kinds = {"original", "reversed"}
    rngs = [np.random.default_rng(seed) for seed in (0, 1)]
    for n in range(2 * max_len + 1):
        for rng in rngs:
            perm = np.arange(n)
            for a in acting:
                perm = perm[np.asarray(a.mod.reorder(n, rng, a.value), dtype=np.int64)]
            if not np.array_equal(perm, np.arange(n)):
                kinds.discard("original")
            if not np.array_equal(perm, np.arange(n)[::-1]):
                kinds.discard("reversed")
            if not kinds:
                return None
    return "original" if "original" in kinds else "reversed"


def language_record(source, data_cfg, layouts, mods=()) -> dict:
    """`minimult_languages` of a run: its source's `text_inputs` with each language's layout and word order
    (`mods`: the run's active mods; English keeps its order)."""
    inputs = source.text_inputs(data_cfg)
    out = {}
    for k, (lang, layout) in enumerate(zip(inputs, layouts)):
        acting = [a for a in mods if a.mod.reorder is not None and k > 0
                  and (a.mod.reorders is None or a.mod.reorders(lang, a.value))]
        order = {"order": "original"}
        if acting:
            kind = word_order(acting, data_cfg.max_len)
            order = {"order": kind or "unrecorded", "order_mod": ",".join(a.spec for a in acting)}
        out[lang] = {**inputs[lang], "layout": asdict(layout), **order}
    return out


def training_record(cfg, meta: dict, ckpt: dict) -> dict:
    """`minimult_training`: the run's mods and seed, how far it trained (the checkpoint's step of run.json's
    total steps; `complete` as the checkpoint says), run.json's status and `train.attention`."""
    complete = bool(ckpt.get("complete"))
    return {"mods": cfg.mods, "seed": cfg.train.seed, "steps": ckpt.get("step"), "total_steps": meta.get("total_steps"),
            "complete": complete, "status": meta.get("status") or ("complete" if complete else "unknown"),
            "attention": cfg.train.attention}


def training_note(run_dir, training: dict) -> str | None:
    """One line when the exported weights are not a finished run's: unfinished, or a run that failed."""
    steps, total = training.get("steps"), training.get("total_steps")
    of = f"step {steps:,}" + (f" of {total:,}" if isinstance(total, int) else " (total unknown)")
    status = str(training.get("status") or "")
    if status.startswith("failed"):
        why = status.partition(":")[2].strip() or "failed"
        return (f"note: run {run_dir} failed ({why}): exporting its last good checkpoint, {of} "
                f"(minimult_training in the export's config.json says so)")
    if not training.get("complete"):
        return (f"note: run {run_dir} is unfinished: exporting its checkpoint at {of} (minimult_training in the "
                f"export's config.json says so)")
    return None


TMP_INFIX = ".tmp-"
STALE_SECONDS = 3600  # a temp folder without a process id in its name (older exports) counts as stale after this


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def clean_stale_temps(out_dir: Path) -> list[Path]:
    """Remove the `.NAME.tmp-PID-*` folders beside `out_dir` whose process is gone (an export killed with
    kill -9 leaves its temp folder); one without a process id is removed once an hour old. Returns them."""
    out_dir = Path(os.path.abspath(out_dir))
    pattern = re.compile(re.escape(f".{out_dir.name}{TMP_INFIX}") + r"(?:(\d+)-)?")
    removed = []
    if not out_dir.parent.is_dir():
        return removed
    for p in out_dir.parent.glob(f".{glob.escape(out_dir.name)}{TMP_INFIX}*"):
        m = pattern.match(p.name)
        if m is None or not p.is_dir() or p.is_symlink():
            continue
        pid = m.group(1)
        stale = not _alive(int(pid)) if pid else time.time() - p.stat().st_mtime > STALE_SECONDS
        if stale:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def _merge_into(tmp: Path, out_dir: Path) -> None:
    """Each file of `tmp` renamed to its place under the existing `out_dir` (sub-folders made as needed);
    nothing else there is touched. A folder where the export writes a file (or a file where it needs a
    folder) is refused before anything moves."""
    dirs = sorted(d.relative_to(tmp) for d in tmp.rglob("*") if d.is_dir())
    files = sorted(f.relative_to(tmp) for f in tmp.rglob("*") if not f.is_dir())
    for rel in dirs:
        target = out_dir / rel
        if (target.exists() or target.is_symlink()) and not target.is_dir():
            raise MinimultError(f"{target} is a file where the export writes the folder {rel}/: move it away; "
                                f"nothing was written")
    for rel in files:
        target = out_dir / rel
        if target.is_dir() and not target.is_symlink():
            raise MinimultError(f"{target} is a folder where the export writes the file {rel}: move it away; "
                                f"nothing was written")
    for rel in dirs:
        if not (out_dir / rel).is_dir():
            (out_dir / rel).mkdir()
            (out_dir / rel).chmod(0o755)
    for rel in files:
        os.replace(tmp / rel, out_dir / rel)


def save_hf(model: Bert, cfg: ModelConfig, out_dir: Path, vocab_file: Path | None = None, force: bool = False,
            id_block: int | None = None, languages: dict | None = None, training: dict | None = None) -> Path:
    """Write a folder that `BertForMaskedLM.from_pretrained(out_dir)` loads (`id_block`, `languages`,
    `training` as `to_hf`'s; a language's tokenizer sub-folder is copied from beside `vocab_file`). A new
    folder appears whole (built aside in `.NAME.tmp-PID-*`, then renamed); into an existing one (empty, or
    any with `force`) each file is renamed into place, and nothing else in it is touched or deleted. Temp
    folders of exports killed before they finished are removed first. Files 0644, folders 0755."""
    given = Path(out_dir)
    out_dir = Path(os.path.abspath(given))  # "." has a name and a parent this way
    check_destination(out_dir, force)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(out_dir)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}{TMP_INFIX}{os.getpid()}-"))
    try:
        with quiet_transformers():  # its "Writing model shards" bar: the export says what it did in one line
            to_hf(model, cfg, id_block=id_block, languages=languages, training=training).save_pretrained(tmp)
        if vocab_file is not None:
            subs = sorted({spec["tokenizer"] for spec in (languages or {}).values()} - {""})
            # the run's own tokenizer (so AutoTokenizer gives the run's ids), then each language's
            for sub in ["", *subs]:
                source, target = Path(vocab_file).parent / sub, tmp / sub
                vocab = source / "vocab.txt" if sub else Path(vocab_file)
                if not vocab.is_file():
                    raise MinimultError(f"{vocab} is missing: the export needs the {sub!r} language's vocabulary")
                target.mkdir(exist_ok=True)
                shutil.copyfile(vocab, target / "vocab.txt")
                if (source / "tokenizer.json").is_file():
                    try:
                        json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
                    except ValueError as e:
                        raise MinimultError(f"{source / 'tokenizer.json'} is damaged ({e}): copy it back from the "
                                            f"run's cache entry") from None
                    shutil.copyfile(source / "tokenizer.json", target / "tokenizer.json")
                    (target / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2) + "\n")
        for f in tmp.rglob("*"):
            f.chmod(0o755 if f.is_dir() else 0o644)
        tmp.chmod(0o755)
        if not out_dir.exists():
            os.replace(tmp, out_dir)
        else:
            _merge_into(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return given


def export_run(run, hf_dir, force: bool = False, log=print) -> Path:
    """A run's model as a HuggingFace BertForMaskedLM folder (`minimult export`, `api.export`), holding the run's
    lock (never the weights of a run another process is training); an unfinished or failed run is exported with
    a note (`log`), and the export records how far it trained. Returns the folder."""
    opened = Run.open(run)
    check_destination(Path(hf_dir), force)  # before loading anything
    block = opened.data.source.id_offset(1, opened.cfg.data)  # 0: the languages share one block
    languages = language_record(opened.data.source, opened.cfg.data, opened.data.layouts, opened.mods)
    subs = sorted({spec["tokenizer"] for spec in (languages or {}).values()} - {""})
    opened.check_own_vocabulary([opened.path / sub / "vocab.txt" for sub in ["", *subs]], "the run's cache entry")
    with opened.locked():
        ckpt = opened.checkpoint()
        model = Bert(opened.cfg.model)
        model.load_state_dict(ckpt["model"])
        training = training_record(opened.cfg, opened.meta, ckpt)
        note = training_note(opened.path, training)
        if note:
            log(note)
        return save_hf(model, opened.cfg.model, Path(hf_dir), vocab_file=opened.path / "vocab.txt", force=force,
                       id_block=block or None, languages=languages, training=training)
