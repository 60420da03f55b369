"""What the evaluators measure on: the run's dev views and dictionary, and the model's vectors of them.

`Context` holds the model and the run's data for one evaluation and computes every representation
lazily, once: the dev sentences of both languages (truncated to the model's window, with their gold
links), the translation dictionary, and the piece vectors of each at the layers asked for. Each
phase's wall and CPU seconds go into `timings` (experiments/bench_eval.py). What one evaluator alone
needs (links' link file, transfer's task) is no field of it: the evaluator's `inputs` hook reads it from
the run, and the context holds it under `inputs[name]`.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np
import torch

from minimult import precision
from minimult.data.batching import SequenceSet, attention_mask
from minimult.data.languages import Side, positions_within, truncate
from minimult.data.vocab import cut_to_fit
from minimult.errors import MinimultError
from minimult.model import Bert


def tokens_per_batch(device: torch.device) -> int:
    """Padded tokens per forward pass. On CPU ~2k tokens keep a block's activations (2k x 256 floats in
    the feed-forward layer) inside a core's L2 cache: ~1.5x the throughput of whole 512-sentence
    batches (experiments/bench_eval.py)."""
    return 2048 if device.type == "cpu" else 65536


def row_slices(rows: int, T: int, tokens: int) -> list[slice]:
    """Consecutive row slices of a (rows, T) batch of at most `tokens` tokens each (at least one row).

    The model computes every row on its own, so running a batch slice by slice (with its padding and
    attention mask) gives the numbers of running it whole, bit for bit on CPU.
    """
    step = max(1, tokens // T)
    return [slice(r, min(r + step, rows)) for r in range(0, rows, step)]


@torch.inference_mode()
def piece_vectors(model: Bert, side: Side, layouts, layers, device, batch_size: int = 512,
                  tokens: int | None = None, precision_: str = "fp32") -> dict[int, torch.Tensor]:
    """{layer: (P, H)} vectors of every piece of `side`, in the side's order (float32, on device).

    Batches of `batch_size` length-sorted sentences fix the padding; each runs through the blocks up
    to max(layers) in row slices of at most `tokens` tokens. `precision_` is fp32 (the default: the
    same numbers on every device) or bf16 (autocast, faster on a GPU; moves scores in the 3rd decimal).
    """
    seqs = SequenceSet.from_sides([side], layouts, device)
    order = np.argsort(side.lengths, kind="stable")
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return _encode(model, seqs, batches, layers, device, "masked", tokens, precision_)


PUBLISHED_BATCH = 256  # the published evaluate.py's --eval_batch_size


def unmasked_piece_vectors(model: Bert, sides: list[Side], layouts, layers, device, batch_size: int = PUBLISHED_BATCH,
                           tokens: int | None = None, precision_: str = "fp32") -> list[dict[int, torch.Tensor]]:
    """`piece_vectors` of every side as the paper's published evaluation encoded them (train.attention =
    attend-padding): all sides' sentences in their order, English first then the next language, cut into
    consecutive batches of `batch_size` (one batch may hold two languages), each padded to its longest
    row and run without an attention mask, so [PAD] keys take part and a row's vectors depend on its
    batch. Row slices keep the batch's width, so they change only the speed."""
    seqs = SequenceSet.from_sides(sides, layouts, device)
    batches = [np.arange(i, min(i + batch_size, len(seqs))) for i in range(0, len(seqs), batch_size)]
    flat = _encode(model, seqs, batches, layers, device, "attend-padding", tokens, precision_)
    parts = {l: flat[l].split([len(s.ids) for s in sides]) for l in layers}
    return [{l: parts[l][k] for l in layers} for k in range(len(sides))]


@torch.inference_mode()
def _encode(model: Bert, seqs: SequenceSet, batches, layers, device, attention: str, tokens, precision_):
    """{layer: (P, H)} vectors of every piece of `seqs` (in their flat order), running `batches` (index
    arrays) under `attention` in row slices of at most `tokens` tokens."""
    out = {l: torch.zeros(len(seqs.ids), model.cfg.hidden, device=device) for l in layers}
    autocast = precision.autocast(precision_, device)
    for index in batches:
        b = seqs.batch(index)
        mask = attention_mask(b, attention)
        starts = seqs.starts[torch.as_tensor(index, device=device)]
        for r in row_slices(len(index), b.input_ids.shape[1], tokens or tokens_per_batch(device)):
            with autocast:
                hs = model.hidden_states(b.input_ids[r], b.position_ids[r], b.token_type_ids[r],
                                         None if mask is None else mask[r], layers=layers)
            rows, cols = b.maskable[r].nonzero(as_tuple=True)  # word pieces only, row-major
            flat = starts[r][rows] + cols - 1
            for l in layers:
                out[l][flat] = hs[l][rows, cols].float()
    return out


def encode_sides(model: Bert, sides: list[Side], layouts, layers, device, attention: str = "masked",
                 precision_: str = "fp32") -> list[dict[int, torch.Tensor]]:
    """Per side {layer: (P, H) float32}: piece vectors of every side under `attention` (train.attention): masked,
    each side on its own in length-sorted batches (`piece_vectors`); attend-padding, as the published code
    (`unmasked_piece_vectors`)."""
    if attention == "attend-padding":
        return unmasked_piece_vectors(model, list(sides), layouts, layers, device, precision_=precision_)
    return [piece_vectors(model, s, layouts, layers, device, precision_=precision_) for s in sides]


def group_means(vectors: torch.Tensor, group: np.ndarray, n: int) -> torch.Tensor:
    """vectors (P, H) float32, group (P,) int in 0..n-1 -> (n, H): the mean of each group's rows (zeros for an
    empty group)."""
    index = torch.as_tensor(group, device=vectors.device)
    sums = torch.zeros(n, vectors.shape[1], device=vectors.device).index_add_(0, index, vectors)
    return sums / torch.bincount(index, minlength=n).clamp(min=1)[:, None]


def sentence_vectors(vectors: torch.Tensor, side: Side) -> torch.Tensor:
    """vectors (P, H) float, the pieces of `side`'s S sentences in order -> (S, H): each sentence's mean."""
    return group_means(vectors, np.repeat(np.arange(side.num_sentences), side.lengths), side.num_sentences)


def gold_links(second: Side) -> np.ndarray:
    """(K, 3) gold links (sentence, English position, second-language position) of every sentence at
    once: row by row what `second.alignment(i)` gives for sentence i, with i in front."""
    keep = second.gold >= 0
    sentence = np.repeat(np.arange(second.num_sentences), second.lengths)
    return np.stack([sentence[keep], second.gold[keep], positions_within(second.offsets)[keep]], 1).astype(np.int64)


@contextmanager
def phase(timings: dict | None, name: str):
    """Add the block's wall and process CPU seconds to timings[name] = [wall, cpu] (nothing without a
    dict); on a shared machine CPU seconds are the steadier of the two."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        if timings is not None:
            spent = timings.setdefault(name, [0.0, 0.0])
            spent[0] += time.perf_counter() - wall
            spent[1] += time.process_time() - cpu


@dataclass
class Context:
    """One evaluation: a model, the run's data (`views(split) -> [English, language 1, ...]`,
    `dictionary() -> [English, language 1, ...]`, `layouts`), the layers to measure, the evaluation's
    options and each evaluator's own `inputs`. With more than two languages, pairwise evaluators see
    `pair(k)`: English and language k."""

    model: Bert
    views: Callable[[str], list[Side]]
    dictionary: Callable[[], list[Side]]
    layouts: list
    max_len: int
    layers: tuple[int, ...]
    device: torch.device
    dev_sentences: int | None = None  # the first N dev sentences (None: all)
    ppl_sentences: int | None = None  # sequences per split for perplexity (None: all)
    ppl_splits: tuple[str, ...] = ("train", "dev")
    precision: str = "fp32"  # of the representations (piece_vectors); perplexity always runs in fp32
    random_ids: torch.Tensor | None = None  # ids a random replacement may draw (perplexity's masking)
    timings: dict | None = None
    log: Callable[[str], None] | None = None  # progress lines of long evaluators (transfer's fine-tuning)
    alignment_gold: str = "exact"  # what the views' gold alignment is (the source's `alignment_gold`: exact | silver)
    # evaluator name -> its own inputs (`Evaluator.inputs`: links' link file, transfer's task); an evaluator
    # absent here gives nothing that needs them. Kept here, not as fields, so a new evaluator adds no field
    inputs: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)  # what the evaluators have computed so far
    dev_sentences_cut: int = 0  # dev sentences (of every language) longer than the window, set by `dev`
    languages: tuple[str, ...] = ("en", "fake")  # the languages' names (the source's), for per-pair results
    # each language's `alignment_gold` where they differ (en-es + Fake-English); () = `alignment_gold`
    alignment_golds: tuple[str, ...] = ()
    attention: str = "masked"  # how the dev and dictionary sides are encoded (train.attention; `encode_sides`)
    # k -> [first language, language k] dictionary sides, for a source with a dictionary per language pair
    # (parallel); None: every pair reads its two languages' entries of `dictionary`
    pair_dictionary: Callable[[int], list[Side]] | None = None

    def phase(self, name: str):
        """`phase(self.timings, name)`: the block's wall and CPU seconds go to timings[name]."""
        return phase(self.timings, name)

    def encode(self, sides: list[Side]) -> list[dict[int, torch.Tensor]]:
        """Per side {layer: (P, H) float32}: `encode_sides` of `sides` with this evaluation's model, layers,
        device, attention and precision."""
        return encode_sides(self.model, sides, self.layouts, self.layers, self.device, self.attention, self.precision)

    @cached_property
    def dev(self) -> list[Side]:
        """The dev sentences of both languages, cut to the model's window; how many were cut is counted
        in `dev_sentences_cut` (results.json) and logged, never silent."""
        with self.phase("data"):
            sides = self.views("dev")
            if self.dev_sentences:
                index = np.arange(min(self.dev_sentences, sides[0].num_sentences))
                sides = [s.subset(index) for s in sides]
            if sides[0].num_sentences < 2:
                raise MinimultError(f"the dev set has {sides[0].num_sentences} sentence(s): retrieval needs at least 2")
            self.dev_sentences_cut = cut_to_fit(sides, self.max_len)
            if self.dev_sentences_cut and self.log is not None:
                self.log(f"note: {self.dev_sentences_cut:,} of {sum(s.num_sentences for s in sides):,} dev "
                         f"sentences have more than max_len - 2 = {self.max_len - 2} pieces and are cut to fit")
            return [truncate(s, self.max_len - 2) for s in sides]

    @cached_property
    def links(self) -> np.ndarray:
        """(K, 3) int: the gold links of the dev sentences (sentence, English position, language 1's position)."""
        with self.phase("data"):
            return gold_links(self.dev[1])

    @cached_property
    def dictionary_sides(self) -> list[Side]:
        """The translation dictionary, one Side per language (entry i translates entry i)."""
        with self.phase("data"):
            return self.dictionary()

    @cached_property
    def dev_vectors(self) -> list[dict[int, torch.Tensor]]:
        """Per language {layer: (P, H) float32}: piece vectors of the dev sides at every layer asked for (shared by
        alignment, retrieval and word order)."""
        sides = self.dev
        with self.phase("forward_dev"):
            return self.encode(sides)

    def pair(self, k: int) -> "PairContext":
        """English and language k: what a pairwise evaluator sees when the run has more than two languages."""
        return PairContext(self, k)

    @cached_property
    def dictionary_vectors(self) -> list[dict[int, torch.Tensor]]:
        """Per language {layer: (D, H) float32}: each dictionary entry's vector, as `dev_vectors`'."""
        sides = self.dictionary_sides
        with self.phase("forward_dictionary"):
            return self.encode(sides)


def _english_and_k(name: str) -> property:
    """A PairContext property: the parent's list `name` (one entry per language) as [English, language k]."""
    return property(lambda self: [getattr(self.parent, name)[0], getattr(self.parent, name)[self.k]])


class PairContext:
    """English and language k of a Context with more languages: its dev sides, their vectors, gold links and
    dictionary are the parent's (computed once for all languages) restricted to [English, k]; `results`
    are the pair's own (µ reads them); everything else, the evaluators' `inputs` too, is the parent's."""

    def __init__(self, parent: Context, k: int):
        self.parent, self.k = parent, k
        self.name = f"{parent.languages[0]}-{parent.languages[k]}"
        self.results: dict = {"layers": {}}
        self.alignment_gold = parent.alignment_golds[k] if parent.alignment_golds else parent.alignment_gold

    def __getattr__(self, name):  # only for what is not defined here: the model, layers, options, phase
        return getattr(self.parent, name)

    # the parent's per-language lists restricted to [English, language k]
    dev = _english_and_k("dev")
    dev_vectors = _english_and_k("dev_vectors")
    links = Context.links  # the gold links of the pair's dev sentences: language k's against English

    @cached_property
    def dictionary_sides(self) -> list[Side]:
        """[English, language k] dictionary sides (the pair's own where the source has one per pair)."""
        if self.parent.pair_dictionary is None:
            return [self.parent.dictionary_sides[0], self.parent.dictionary_sides[self.k]]
        with self.phase("data"):
            return self.parent.pair_dictionary(self.k)

    @cached_property
    def dictionary_vectors(self) -> list[dict[int, torch.Tensor]]:
        """[English, language k] of {layer: (D, H) float32} dictionary vectors."""
        if self.parent.pair_dictionary is None:
            return [self.parent.dictionary_vectors[0], self.parent.dictionary_vectors[self.k]]
        with self.phase("forward_dictionary"):
            return self.encode(self.dictionary_sides)


def context(run, model, layers, **options) -> Context:
    """An evaluation context for `model` (of `run`'s shape) on `run`'s data; `options` as `Context`'s
    (`inputs`: the evaluators' own, from their hooks)."""
    d, dc = run.data, run.cfg.data
    options = {"attention": run.cfg.train.attention, **options}  # encoded as trained unless asked otherwise
    return Context(model, d.views, d.dictionary, d.layouts, dc.max_len, tuple(layers), next(model.parameters()).device,
                   random_ids=d.random_ids(), alignment_gold=d.source.alignment_gold_of(1, dc),
                   languages=d.source.names(dc),
                   alignment_golds=tuple(d.source.alignment_gold_of(k, dc) for k in range(dc.n_langs)),
                   pair_dictionary=d.pair_dictionary if d.source.pair_dictionaries else None, **options)
