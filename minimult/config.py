"""Typed, frozen configuration: one dataclass per stage and one per component that has settings (`settings`
of a mod, source or evaluator), composed into `RunConfig` (`with_sections`), plus presets.

Overrides use dotted keys (`train.lr=1e-3`); an unknown key or a value of the wrong type is an
error naming the valid keys. Mods are applied last (`apply_mods`), so `overparam`'s sizes
win over a preset's; the model's vocabulary, position and segment tables are then sized from the
language source and the languages' layouts (`minimult.data.layout`), and last, with
`model.target_params`, hidden and intermediate are solved for that whole-model parameter count
(`model_config.solve_sizes`) and stored, solved, in the resolved config.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import typing
from dataclasses import dataclass, field

from minimult import precision
from minimult.errors import MinimultError, check_at_least, did_you_mean
from minimult.data import sources
from minimult.data.corpus import DEFAULT_DEV, DEFAULT_TRAIN
from minimult.data.layout import layouts, model_sizes
from minimult.data.masking import MaskConfig
from minimult.data.vocab import TOKENIZERS
from minimult.model_config import ModelConfig, solve_sizes
from minimult.mods import canonical, parse_mods, registered
from minimult.registry import Registry


@dataclass(frozen=True)
class DataConfig:
    train: str = DEFAULT_TRAIN  # built-in corpus name (bbe-nt) or a one-sentence-per-line file
    dev: str = DEFAULT_DEV  # kjv-ot-10k
    train_sentences: int = 0  # 0 = all
    dev_sentences: int = 10_000
    vocab_size: int = 2048  # per language, specials included
    # the language source (minimult.data.sources): shift | unicode | en-es | parallel. Named `fake` before
    # real languages came (still read: OLD_KEYS); the stored form keeps that name (`comparable`)
    source: str = "shift"
    n_langs: int = 2  # languages in the run, the first language first; the source names them (Source.languages)
    # pieces per sequence incl. [CLS]/[SEP]; positions per language. Longer sentences are cut to fit and
    # the cut is reported, never silent: `prepare`'s summary and the training log count the sentences cut,
    # results.json's `dev_sentences_cut` those of the evaluation (characters need a larger max_len)
    max_len: int = 128
    tokenizer: str = "wordpiece"  # the units: wordpiece | char | word (minimult.data.vocab.TOKENIZERS)
    # one vocabulary trained over every language's text, one id block for all (K et al.'s word-piece
    # overlap); false: each language its own vocabulary at its own id offset (what the source supports)
    shared_vocab: bool = False
    # A source with settings of its own brings them as a section of `data` (`Source.settings`), added below by
    # `with_sections`: data.parallel.files, the parallel source's files.

    # keys of older versions -> their names now (`legacy`; `comparable` writes them back for hashes): the source
    # was `fake` before real languages came, the parallel source's files `files` before sources had sections
    OLD_KEYS: typing.ClassVar = {"fake": "source", "files": "parallel.files"}

    @classmethod
    def legacy(cls, values: dict) -> dict:
        """`values` (this section's, from a config.json, a grid file or --set) with old keys under their names
        now (`OLD_KEYS`; where both are given, the name now wins)."""
        return _nested(_renamed(flat(values, keep_empty=True), cls.OLD_KEYS))

    @property
    def fake(self) -> str:
        """The source's name under its old key (`data.fake`), for code written before the rename."""
        return self.source

    def __post_init__(self):
        if self.n_langs < 2:
            raise MinimultError(f"data.n_langs {self.n_langs}: a run needs English and at least one more language")
        source = sources.get(self.source)  # an unknown source is an error naming the valid ones
        source.check_languages(self)
        source.check(self)
        TOKENIZERS[self.tokenizer]  # an unknown tokenizer is one error line naming the valid ones
        if self.max_len < 3:
            raise MinimultError(f"max_len {self.max_len} leaves no room for a word between [CLS] and [SEP]")
        if self.vocab_size <= 5:  # the five special tokens [PAD] [UNK] [CLS] [SEP] [MASK]
            raise MinimultError(f"vocab_size {self.vocab_size} leaves no room: it must exceed the 5 special tokens")
        if self.train_sentences < 0 or self.dev_sentences < 0:
            raise MinimultError("train_sentences and dev_sentences must be >= 0 (0 = all)")


# train.batching: how an epoch's sentences are cut into batches (minimult.data.batching.plan_epoch)
BATCHINGS = ("bucket", "random", "spread", "paired")

# the metadata of a setting that says how a run executes, not which run it is (EXECUTION_SETTINGS)
EXECUTION = {"execution": True}

# What attention sees of a padded batch (`train.attention`): masked, padding keys take no part (the
# default); attend-padding, every key of the padded (B, T) batch is attended to, [PAD] included, as the
# paper's published code ran its model (it never passed an attention mask), so a row's vectors depend
# on the batch's longest row. docs/attention.md says what it was measured to do.
ATTENTIONS = ("masked", "attend-padding")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 100
    batch_size: int = 256  # sentences per update
    # bucket (length-bucketed, faster) | random (the paper's code) | spread | paired (see batching)
    batching: str = "bucket"
    lr: float = 2e-3
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    warmup_steps: int = 50
    clip: float = 1.0
    seed: int = 0
    # the initial weights as a run with this seed draws them, everything else (batch order, masking,
    # dropout) from `seed`: tells the initialisation's part in a seed's outcome from the rest's; -1 = seed
    init_seed: int = -1
    device: str = field(default="auto", metadata=EXECUTION)  # auto | cpu | cuda | cuda:N
    # torch intra-op threads on CPU; 0 = torch's default (with nproc > 1: 1 per process)
    threads: int = field(default=0, metadata=EXECUTION)
    # processes that train this run together, each a share of every batch (minimult.distributed); it may
    # change between resumes
    nproc: int = field(default=1, metadata=EXECUTION)
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU) | fp32 | bf16: see minimult.precision
    checkpoint_every: int = 0  # steps; 0 = once per epoch
    eval_every: int = 0  # steps between multilinguality evaluations during training; 0 = never
    eval_sentences: int = 1000  # dev sentences used by those evaluations
    # masked: padding keys take no part in attention (BERT's usual recipe); attend-padding: no attention
    # mask at all, in training and in the Table 1 evaluators, as the paper's published code ran (see
    # docs/attention.md); ATTENTIONS above
    attention: str = "masked"
    # each batch trained as this many groups of rows of similar length, each padded only to its own longest
    # row, their gradients summed (minimult.data.microbatches): the same gradient as one pass with padding
    # masked, at less padded compute (random batches: ~half); dropout draws differ
    microbatches: int = field(default=1, metadata=EXECUTION)
    # > 0: every batch padded to batch_size rows, a multiple of this many columns and a fixed number of
    # selected tokens (minimult.data.microbatches.pad): at most ⌈max_len / pad_multiple⌉ shapes a run, what a
    # step captured once and replayed (a CUDA graph) needs; the same loss and gradient, other dropout draws
    pad_multiple: int = field(default=0, metadata=EXECUTION)

    def __post_init__(self):
        if self.epochs < 0 or self.batch_size < 1 or not self.lr > 0 or not math.isfinite(self.lr):
            raise MinimultError(f"epochs must be >= 0, batch_size >= 1 and lr a finite number > 0 "
                                f"(got {self.epochs}, {self.batch_size}, {self.lr})")
        for name in ("weight_decay", "adam_eps", "clip"):
            if not math.isfinite(getattr(self, name)) or getattr(self, name) < 0:
                raise MinimultError(f"train.{name} must be a finite number >= 0, got {getattr(self, name)}")
        check_at_least("train", self, 0, "warmup_steps", "threads", "checkpoint_every", "eval_every")
        check_at_least("train", self, 1, "nproc", "microbatches")
        check_at_least("train", self, 2, "eval_sentences")
        if not 0 <= self.seed < 2**32:
            raise MinimultError(f"seed must be a whole number from 0 to {2**32 - 1}, got {self.seed}")
        if not -1 <= self.init_seed < 2**32:
            raise MinimultError(f"train.init_seed must be -1 (train.seed's) or a whole number from 0 to {2**32 - 1}, "
                                f"got {self.init_seed}")
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device):
            raise MinimultError(f"unknown device {self.device!r}: use auto, cpu, cuda or cuda:N")
        precision.check(self.precision)
        if self.batching not in BATCHINGS:
            raise MinimultError(f"unknown train.batching {self.batching!r}; valid: {', '.join(BATCHINGS)}")
        if self.attention not in ATTENTIONS:
            raise MinimultError(f"unknown train.attention {self.attention!r}; valid: {', '.join(ATTENTIONS)}")
        check_at_least("train", self, 0, "pad_multiple")
        for name in ("microbatches", "pad_multiple"):
            if getattr(self, name) > 1 and self.attention != "masked":
                raise MinimultError(f"train.{name} > 1 needs train.attention=masked: with padding attended, a "
                                    "row's vectors depend on the width of its whole batch")
        if self.pad_multiple and (self.microbatches > 1 or self.nproc > 1):
            raise MinimultError("train.pad_multiple pads every batch to a fixed shape, which train.microbatches "
                                "and train.nproc would cut again: use it with neither")


# settings that say how a run executes, not which run it is (their fields' metadata is EXECUTION): left out
# where a sweep matches run folders, a resume matches checkpoints and the report groups runs (and of a run's
# fingerprint, which they would otherwise change for every run made before they existed)
EXECUTION_SETTINGS = tuple(f"train.{f.name}" for f in dataclasses.fields(TrainConfig) if f.metadata.get("execution"))


def without_execution(config: dict) -> dict:
    """A config dict (`RunConfig.to_dict()`) without the EXECUTION_SETTINGS (a copy)."""
    return _nested({k: v for k, v in flat(config, keep_empty=True).items() if k not in EXECUTION_SETTINGS})


@dataclass(frozen=True)
class TransferConfig:
    """Zero-shot transfer on the New Testament part task or a task directory (`minimult transfer`,
    evaluate/transfer.py): fine-tune on the first language, test on it and on every other language.

    Modes: `full` (every encoder weight trains), `freeze:N` (as Wu & Dredze 2019: layers 0..N stay fixed,
    layer 0 being the embeddings, so freeze:0 fixes the embeddings only) and `frozen` (no fine-tuning:
    logistic regression on the mean-pooled vectors of `layer`). The fine-tuning defaults follow their
    recipe (AdamW, weight decay 0.01, 10% warmup then linear decay, 3 epochs, batches of 32); the learning
    rate is a quarter of our pretraining's 2e-3, about the ratio of their 2e-5..5e-5 to BERT's 1e-4
    (chosen by that reasoning, not tuned)."""

    enabled: bool = False  # also run by `minimult eval` and sweeps (minutes of fine-tuning per run on a CPU)
    # "" = the New Testament part task; a directory: a task of the user's own (train.tsv, dev.tsv in the first
    # language, test.<lang>.tsv per language; data.tasks.file_task)
    task: str = ""
    modes: str = "full,frozen"  # comma-separated: full | frozen | freeze:N
    layer: int = -1  # the frozen mode's layer; -1: µ's upper layer, round(2/3 x depth) (8 of 12)
    seeds: int = 3  # fine-tuning seeds 0..seeds-1 (mean ± std); the frozen mode's fit is deterministic
    epochs: int = 3
    batch_size: int = 32
    lr: float = 5e-4
    weight_decay: float = 0.01
    warmup: float = 0.1  # share of the fine-tuning steps

    def __post_init__(self):
        self.mode_list()  # a malformed mode is an error naming the valid forms
        if self.layer < -1 or self.seeds < 1 or self.epochs < 1 or self.batch_size < 1:
            raise MinimultError(f"transfer.layer must be >= 0 (or -1: the default), transfer.seeds, epochs and "
                                f"batch_size >= 1 (got {self.layer}, {self.seeds}, {self.epochs}, {self.batch_size})")
        if not (self.lr > 0 and math.isfinite(self.lr)) or not 0 <= self.warmup < 1 or self.weight_decay < 0:
            raise MinimultError(f"transfer.lr must be a finite number > 0, transfer.warmup in [0, 1) and "
                                f"transfer.weight_decay >= 0 (got {self.lr}, {self.warmup}, {self.weight_decay})")

    def mode_list(self) -> list[tuple[str, int | None]]:
        """[(mode, N)]: N the last frozen layer of `freeze:N`, None for `full` and `frozen`."""
        out = []
        for mode in (m.strip() for m in self.modes.split(",") if m.strip()):
            head, _, n = mode.partition(":")
            if mode in ("full", "frozen"):
                out.append((mode, None))
            elif head == "freeze" and n.isdigit():
                out.append((f"freeze:{int(n)}", int(n)))
            else:
                raise MinimultError(f"unknown transfer mode {mode!r}; valid: full, frozen, freeze:N "
                                    f"(layers 0..N fixed)")
        if not out or len({m for m, _ in out}) < len(out):
            raise MinimultError(f"transfer.modes {self.modes!r} must name each mode once, at least one")
        return out


# sections that say how a finished run is evaluated, not how it trains (a sweep matches run folders, a resume
# checkpoints and the report groups runs without them): evaluators' own settings (`Evaluator.settings`), listed
# here as config cannot import the evaluators (they import torch, and config); test_registries checks the two
EVALUATION = {"transfer": TransferConfig}
EVALUATION_SECTIONS = tuple(EVALUATION)


def with_sections(cls, sections, *more):
    """`cls` (a frozen settings dataclass) extended by a section per (name, frozen dataclass) in `sections` (the
    settings components bring: `Source.settings`, `Mod.settings`), each at its defaults, then by the fields
    `more` ((name, type, default)): a run config's sections composed from the registered components."""
    fields = [(name, tp, field(default_factory=tp)) for name, tp in sections]
    fields += [(name, tp, field(default=default)) for name, tp, default in more]
    return dataclasses.make_dataclass(cls.__name__, fields, bases=(cls,), frozen=True,
                                      namespace={"__module__": __name__, "__doc__": cls.__doc__})


DataConfig = with_sections(DataConfig, [s.settings for s in sources.REGISTRY.values() if s.settings])


@dataclass(frozen=True)
class RunConfig:
    """The run's settings: the stages' sections, then (`with_sections`, below) the sections the registered mods
    bring (knn-replace's `knn`) and the evaluation sections (`transfer`), the canonical mods and the preset."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    mask: MaskConfig = field(default_factory=MaskConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """A stored config (config.json, a checkpoint's): old keys read through each section's `legacy`; a key
        this version does not know (from a newer or older one) is ignored rather than failing to load."""
        def build(tp, values):
            values = tp.legacy(values) if hasattr(tp, "legacy") else values
            hints = typing.get_type_hints(tp)
            return tp(**{f.name: build(hints[f.name], values[f.name]) if dataclasses.is_dataclass(hints[f.name])
                         else tuple(values[f.name]) if isinstance(values[f.name], list) else values[f.name]
                         for f in dataclasses.fields(tp) if f.name in values})

        return build(cls, d)


RunConfig = with_sections(RunConfig, [*(m.settings for m in registered() if m.settings), *EVALUATION.items()],
                          ("mods", str, "original"),  # canonical mod list, filled in by `resolve`
                          ("preset", str, "paper"))


def comparable(config: dict) -> dict:
    """A config dict (`RunConfig.to_dict()`) in the form it had before `data.source`, `data.parallel.files` and
    `mask.mixes`: keys under their old names (`DataConfig.OLD_KEYS`), `files` and `mixes` left out while at their
    default (how runs made before them trained). What hashes of a run's settings read, so a run made before these
    changes keeps its fingerprint (the report's setting names): tests/test_config_hashes.py checks the committed
    runs'."""
    old = {f"data.{new}": f"data.{old}" for old, new in DataConfig.OLD_KEYS.items()}
    values = _renamed(flat(json.loads(json.dumps(config)), keep_empty=True), old)
    for key, default in (("data.files", ""), ("mask.mixes", "text")):
        if values.get(key, default) == default:
            values.pop(key, None)
    return _nested(values)


def _renamed(flat: dict, names: dict[str, str]) -> dict:
    """`flat` (dotted keys) with the keys `names` renames under their new names (a setting given under both
    names: the new name's value)."""
    for old, new in names.items():
        if old in flat:
            flat.setdefault(new, flat.pop(old))
    return flat


def flat(values: dict, prefix: str = "", keep_empty: bool = False) -> dict:
    """{"train": {"lr": 1e-3}} -> {"train.lr": 1e-3}: nested sections as the dotted keys `--set` takes (an empty
    section: left out, or with `keep_empty` kept as {}, so that `_nested` gives the same sections back)."""
    return {key: v for k, value in values.items() for key, v in
            (flat(value, f"{prefix}{k}.", keep_empty).items() if isinstance(value, dict) and (value or not keep_empty)
             else [(prefix + k, value)])}


def _nested(flat: dict) -> dict:
    """{"parallel.files": x} -> {"parallel": {"files": x}}"""
    out: dict = {}
    for key, value in flat.items():
        *path, name = key.split(".")
        d = out
        for k in path:
            d = d.setdefault(k, {})
        d[name] = value
    return out


# Presets: overrides applied to the defaults before the user's own and before the mods.
# The paper's budget (docs/pipeline.md): 17,178 sentences x 2 languages in batches of 256 = ~135 updates per
# epoch, ~13,500 updates in 100 epochs. BBE NT has about half as many sentences, twice as long, so the
# same text in batches of 128 sentences gives about the paper's updates and words per update
# (`minimult budget` prints both). The `-b256` presets are the batches of 256 the committed Table 1
# quick results (experiments/results/quick) were trained with.
PRESETS = Registry("preset", unknown="unknown preset {name!r}; valid presets: {valid}")
PRESETS.update({
    "paper": {"train.batch_size": 128},
    # Meaningful on a 2-core CPU in well under an hour: BERT-small, a quarter of the epochs.
    "quick": {"train.batch_size": 128, "train.epochs": 25},
    "paper-b256": {},
    "quick-b256": {"train.epochs": 25},
    # The paper's budget trained as the paper's published code trained (docs/published-recipe.md cites
    # the code line by line): random batches, padding attended in training and evaluation,
    # each piece selected with p = 0.15, the masking mods' mixes of the code rather than the text, and fp32
    # (the lab's default, auto, would train in bf16 on a GPU).
    "published": {"train.batch_size": 128, "train.batching": "random", "train.attention": "attend-padding",
                  "mask.selection": "bernoulli", "mask.mixes": "code", "train.precision": "fp32"},
    # Exercises the whole pipeline in seconds: for tests and dry runs.
    "tiny": {"model.hidden": 16, "model.intermediate": 32, "model.heads": 1, "model.layers": 2,
             "train.epochs": 2, "train.batch_size": 32, "train.warmup_steps": 5,
             "data.train_sentences": 400, "data.dev_sentences": 200, "train.eval_sentences": 100},
})


def _coerce(value, tp, key: str):
    origin = typing.get_origin(tp)
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if tp in (int, float, str):
            if isinstance(value, bool):  # True is no number of epochs (a grid's or the API's value)
                raise ValueError(value)
            if tp is int and isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return tp(value)
        if origin is tuple:
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(float(x) for x in items)
    except (TypeError, ValueError):
        pass
    raise MinimultError(f"bad value for {key}: {value!r} is not a valid {getattr(tp, '__name__', tp)}")


def valid_keys() -> list[str]:
    """Every key `--set` takes: `section.name`, and `data.parallel.files` in a source's section within `data`."""
    return [key for key in flat(RunConfig().to_dict(), keep_empty=True) if "." in key]


def override(cfg: RunConfig, overrides: dict[str, object]) -> RunConfig:
    """Apply dotted-key overrides (old keys read through the sections' `legacy`), checking every key and value."""
    changes = _nested(overrides)
    if "data" in changes:  # its old keys, then what a source derives from its settings (parallel: n_langs from files)
        data = DataConfig.legacy(changes["data"])
        changes["data"] = sources.get(data.get("source", cfg.data.source)).derive(cfg.data, data)
    valid = valid_keys()
    unknown = [key for key in flat(changes, keep_empty=True) if key not in valid]
    if unknown:  # the nearest name in its own section (train.learning_rate: none, not train.batching)
        section, _, name = unknown[0].rpartition(".")
        peers = {v.rpartition(".")[2]: v for v in valid if v.rpartition(".")[0] == section}
        hint = did_you_mean(name, peers, peers) if peers else did_you_mean(unknown[0], valid)
        raise MinimultError(f"unknown setting {unknown[0]!r}{hint}; valid settings: {', '.join(valid)}")
    return _replaced(cfg, changes)


def _replaced(obj, changes: dict, prefix: str = ""):
    """`obj` (a settings dataclass) with `changes` ({name: value, or {name: ...} for a section}) applied: one
    replace per section, so its checks see all of its new values at once, in whatever order they came."""
    hints = typing.get_type_hints(type(obj))
    return dataclasses.replace(obj, **{
        name: _replaced(getattr(obj, name), value, f"{prefix}{name}.") if isinstance(value, dict)
        else _coerce(value, hints[name], prefix + name) for name, value in changes.items()})


def parse_overrides(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise MinimultError(f"bad --set {item!r}: use section.key=value, e.g. train.lr=1e-3")
        out[key.strip()] = value.strip()
    return out


# the model settings `resolve` sizes from the layouts, and what they follow
DERIVED_MODEL = {"model.vocab_size": "data.vocab_size (times data.n_langs)", "model.max_positions": "data.max_len",
                 "model.padding_idx": "train.attention"}


def resolve(preset: str = "paper", overrides: dict | None = None, mods: str | None = None) -> tuple[RunConfig, tuple]:
    """Defaults -> preset -> user overrides -> mods -> the user's overrides of keys a mod declares
    overridable (its masking mix) -> the tables sized from the layouts -> with `model.target_params`,
    hidden and intermediate solved for it (`model_config.solve_sizes`). Returns (config, active mods)."""
    preset_values = PRESETS[preset]  # an unknown preset is one error line naming the valid ones
    active = parse_mods(mods)
    cfg = override(RunConfig(preset=preset), preset_values)
    cfg = override(cfg, overrides or {})
    derived = next((k for k in DERIVED_MODEL if k in (overrides or {})), None)
    if derived:  # sized below from the layouts: a value given would be dropped without a word
        raise MinimultError(f"{derived} is sized from {DERIVED_MODEL[derived]}; set that instead")
    if cfg.train.epochs < 1:  # before the mods: `untrained` is how a run gets 0 epochs
        raise MinimultError(f"train.epochs must be at least 1 (got {cfg.train.epochs}); for a never-trained "
                            f"baseline use --mods untrained")
    before = cfg
    cfg = apply_mods(cfg, active, explicit=overrides)
    lays = layouts(cfg, sources.get(cfg.data.source), active)
    sizes = model_sizes(lays)
    padding_idx = lays[0].pad if cfg.train.attention == "attend-padding" else -1  # as HF BERT's padding_idx
    model = dataclasses.replace(cfg.model, vocab_size=cfg.data.n_langs * cfg.data.vocab_size,
                                max_positions=sizes["max_positions"], padding_idx=padding_idx,
                                type_vocab_size=sizes["segments"] and max(cfg.model.type_vocab_size,
                                                                          cfg.data.n_langs, sizes["segments"]))
    if model.target_params:
        model = _solve_sizes(model, before, overrides or {}, active)
    return dataclasses.replace(cfg, model=model, mods=canonical(active)), active


def apply_mods(cfg: RunConfig, mods: tuple, explicit: dict | None = None) -> RunConfig:
    """Each mod's `configure`, then the user's explicit settings of the keys a mod declared
    `overridable` (so `--set mask.probs=0.9,0.1,0,0` wins over no-random's mix), then each mod's `check`."""
    for a in mods:
        if a.mod.configure is not None:
            cfg = a.mod.configure(cfg, a.value)
    yielded = {key for a in mods for key in a.mod.overridable}
    cfg = override(cfg, {k: v for k, v in (explicit or {}).items() if k in yielded})
    for a in mods:
        if a.mod.check is not None:
            a.mod.check(cfg, a.value)
    return cfg


def _solve_sizes(model: ModelConfig, before: RunConfig, overrides: dict, active) -> ModelConfig:
    """hidden and intermediate solved for model.target_params once every table is sized. A preset's sizes
    are replaced; sizes the user or a mod sets contradict the target (one error line)."""
    fixed = [k for k in ("model.hidden", "model.intermediate") if k in overrides]
    if fixed:
        raise MinimultError(f"contradictory settings: model.target_params solves model.hidden and "
                            f"model.intermediate (= 4 x hidden); drop {' and '.join(fixed)} or the target")
    sizes = lambda m: (m.hidden, m.intermediate)  # noqa: E731
    by_mods = [a.spec for a in active if a.mod.configure is not None
               and sizes(a.mod.configure(before, a.value).model) != sizes(before.model)]
    if by_mods:
        raise MinimultError(f"contradictory settings: --mods {by_mods[0]} sets the model's sizes and "
                            f"model.target_params solves them; use one of the two")
    return solve_sizes(model)
