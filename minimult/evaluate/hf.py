"""Any local HuggingFace BERT checkpoint under the lab's evaluators: `minimult eval --hf DIR --pair A B`.

The folder must load with `transformers` as a BERT masked LM, every weight of it from the checkpoint
(missing or unexpected weights beyond the known tied and optional ones, such as the pooler and the NSP
head, are one error line: a GPT-2 folder or a BERT with a layer cut out would otherwise run on random
weights), and hold its own tokenizer (tokenizer.json or vocab.txt). A and B are line-aligned parallel
text; each line is tokenized without specials, and the sequences are written `[CLS] s [SEP]` with the
tokenizer's special ids, positions from 0 and segment 0, as minimult writes its own runs.

- `shift=True`: B is A's shifted copy (Fake-English): the gold alignment is the identity and the
  dictionary every non-special id against its shifted copy, so every evaluator runs. On a minimult
  export every language the run had is written exactly as in its evaluation, from what the export
  records (`minimult_languages`: each language's ids, specials, positions, segment and window, and its
  word order, reversed under inv-order; `minimult_training`: train.attention), so the numbers are the
  run's own; an export whose languages are not id-shifted copies of English (a tokenizer of their own,
  a shifted script), or whose word order a mod drew at random (permute), is refused in one line. On
  any other checkpoint B's ids are A's plus the tokenizer's size (`minimult_id_block` when recorded),
  which the model's vocabulary must have room for.
- `langs=(A_NAME, B_NAME)`: a minimult export that records its languages (`minimult_languages`: en-es's
  Spanish has a tokenizer of its own in `es/` and ids at its own offset; a lang-pos run's second language
  has positions of its own): each side is written as that language was in training, so an exported run
  reads Spanish text as it trained on it. An export whose languages have tokenizers of their own needs it.
- otherwise B is tokenized as text with the folder's tokenizer, at the same ids as A.

Without `shift` there is no gold alignment and no dictionary, so the evaluators that need nothing else run
(`registry.text_evaluators`, which `eval --help` lists: retrieval, word order, the language-ID probe,
perplexity); `link_file` adds word alignment against a link file (the
`minimult.data.links` formats: the lab's, whose verse id is the pair's 1-based line number, or Pharaoh's,
whose line k is line k of the pair, its word indices from `link_base`). A word is a
whitespace-separated word of a line (as link files count them; per-word perplexity counts them too),
whatever the tokenizer's pre-tokenizer splits further.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

from minimult.data.corpus import text_lines
from minimult.data.languages import Side, positions_within
from minimult.data.layout import Layout
from minimult.data.sources.shift import one_piece_sides
from minimult.data.sources.unicode import shift_text
from minimult.errors import MinimultError
from minimult.evaluate.links import LinkFile, words_per_sentence
from minimult.evaluate.registry import text_evaluators
from minimult.evaluate.representations import Context
from minimult.evaluate.segments import with_segment
from minimult.export import quiet_transformers
from minimult.model import pick_device

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")


class HFBert(nn.Module):
    """A transformers `BertForMaskedLM` behind the interface the evaluators call on minimult's `Bert`."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf
        c = hf.config
        self.cfg = SimpleNamespace(hidden=c.hidden_size, layers=c.num_hidden_layers, init_std=c.initializer_range)
        self.embeddings = SimpleNamespace(lookups={"segment": hf.bert.embeddings.token_type_embeddings})

    def _run(self, input_ids, position_ids, token_type_ids, attention_mask, hidden: bool):
        mask = None if attention_mask is None else attention_mask.long()
        return self.hf.bert(input_ids=input_ids, attention_mask=mask, token_type_ids=token_type_ids,
                            position_ids=position_ids, output_hidden_states=hidden)

    def forward(self, input_ids, position_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        return self._run(input_ids, position_ids, token_type_ids, attention_mask, False).last_hidden_state

    def hidden_states(self, input_ids, position_ids, token_type_ids=None, attention_mask=None, layers=None):
        states = self._run(input_ids, position_ids, token_type_ids, attention_mask, True).hidden_states
        return list(states[: (max(layers) + 1 if layers else len(states))])

    def mlm_logits(self, hidden_selected: torch.Tensor) -> torch.Tensor:
        return self.hf.cls(hidden_selected)


# weights a BERT checkpoint may lack or carry beyond BertForMaskedLM's without changing what it computes:
# the decoder tied to the word embeddings, buffers, and the pooler and NSP head of BertForPreTraining
TIED_OR_BUFFERS = re.compile(r"^(bert\.)?(cls\.predictions\.decoder\.(weight|bias)"
                             r"|embeddings\.(position_ids|token_type_ids))$")
OPTIONAL_EXTRA = re.compile(r"^(bert\.)?(pooler\.|cls\.seq_relationship\.|embeddings\.(position_ids|token_type_ids)$)")


def check_weights(d: Path, model, info: dict) -> None:
    """One error line when the checkpoint's weights do not fill a BERT masked LM: weights transformers
    would leave at their random initialisation, or weights of another architecture."""
    missing = sorted(k for k in info.get("missing_keys", ()) if not TIED_OR_BUFFERS.match(k))
    missing += sorted(k[0] if isinstance(k, (tuple, list)) else str(k) for k in info.get("mismatched_keys", ()))
    extra = sorted(k for k in info.get("unexpected_keys", ()) if not OPTIONAL_EXTRA.match(k))
    errors = [str(e).splitlines()[0] for e in info.get("error_msgs", ()) if str(e).strip()]
    if not (missing or extra or errors):
        return
    kind = getattr(model.config, "model_type", None)
    try:
        kind = json.loads((d / "config.json").read_text()).get("model_type", kind)
    except (OSError, ValueError, AttributeError):
        pass
    parts = [f"{len(missing):,} weight(s) missing or of another shape (e.g. {missing[0]}), which would run at "
             f"random" if missing else "", f"{len(extra):,} unexpected (e.g. {extra[0]})" if extra else "",
             errors[0] if errors else ""]
    what = f" (its config says model_type {kind!r})" if kind and kind != "bert" else ""
    raise MinimultError(f"{d} is not a BERT masked LM whose weights all load{what}: "
                        + "; ".join(p for p in parts if p))


def load(directory) -> tuple[object, HFBert]:
    """(tokenizer, model) from a local checkpoint folder; one clear error when it is not one, or when its
    weights do not fill a BERT masked LM (`check_weights`)."""
    d = Path(directory)
    if not (d / "config.json").is_file():
        raise MinimultError(f"{d} is not a HuggingFace checkpoint folder (no config.json)")
    if not any((d / f).is_file() for f in TOKENIZER_FILES):
        raise MinimultError(f"{d} has no tokenizer ({' or '.join(TOKENIZER_FILES)}): --hf evaluates a checkpoint "
                            f"with its own tokenizer")
    from transformers import AutoTokenizer, BertForMaskedLM  # lazy: an optional dependency (the test extra), ~1.3 s

    try:
        with quiet_transformers(reports=True):  # its load report: check_weights says what matters in one line
            tokenizer = AutoTokenizer.from_pretrained(str(d))
            model, info = BertForMaskedLM.from_pretrained(str(d), attn_implementation="eager",
                                                          output_loading_info=True)
    except (OSError, ValueError, KeyError) as e:
        raise MinimultError(f"cannot load {d} with transformers: {str(e).splitlines()[0]}") from None
    except Exception as e:  # safetensors' SafetensorError (named, not imported: it comes with transformers)
        if type(e).__name__ != "SafetensorError":
            raise
        raise MinimultError(f"cannot load {d}: its weights file is truncated or corrupt ({str(e).splitlines()[0]}); "
                            f"copy or export it again") from None
    check_weights(d, model, info)
    if not tokenizer.is_fast:
        raise MinimultError(f"{d}: --hf needs a fast tokenizer (tokenizer.json) for word boundaries")
    return tokenizer, HFBert(model.eval())


def read_pair(a, b) -> tuple[list[str], list[str]]:
    lines = []
    for path in (a, b):
        if Path(path).is_dir():
            raise MinimultError(f"--pair: {path} is a folder, not a file")
        try:
            lines.append(text_lines(Path(path).read_bytes().decode("utf-8-sig")))
        except (OSError, UnicodeDecodeError) as e:
            raise MinimultError(f"cannot read {path}: {e}") from None
    if len(lines[0]) != len(lines[1]):
        raise MinimultError(f"--pair: {a} has {len(lines[0]):,} lines and {b} {len(lines[1]):,}; line-aligned "
                            f"parallel text has as many in both")
    if len(lines[0]) < 2:
        raise MinimultError(f"--pair: {a} has {len(lines[0])} line(s); retrieval needs at least 2")
    for path, text in zip((a, b), lines):
        blank = next((k for k, line in enumerate(text, 1) if not line.strip()), None)
        if blank is not None:
            raise MinimultError(f"--pair: line {blank:,} of {path} is empty: line-aligned parallel text has a "
                                f"sentence on every line of both files")
    return lines[0], lines[1]


def whitespace_word_starts(line: str, spans) -> list[bool]:
    """Whether each piece (character `spans` from the tokenizer) begins a whitespace-separated word."""
    starts = [m.start() for m in re.finditer(r"\S+", line)]
    words = [bisect.bisect_right(starts, a) - 1 for a, _ in spans]
    return [j == 0 or w != words[j - 1] for j, w in enumerate(words)]


def _side(tokenizer, lines: list[str], lang: int, offset: int, gold: bool, unicode_shift: bool = False) -> Side:
    if unicode_shift:  # English written in the shifted script (K et al.'s Fake-English)
        lines = [" ".join(shift_text(w) for w in line.split()) for line in lines]
    enc = tokenizer(lines, add_special_tokens=False, return_offsets_mapping=True)
    pieces = [np.asarray(ids, dtype=np.int64) + offset for ids in enc["input_ids"]]
    starts = [whitespace_word_starts(line, spans) for line, spans in zip(lines, enc["offset_mapping"])]
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64)
    return Side(lang, np.concatenate(pieces).astype(np.int32), offsets, np.concatenate(starts).astype(bool),
                np.arange(len(lines)), positions_within(offsets) if gold else np.full(offsets[-1], -1))


def check_words(side: Side, lines: list[str], path) -> None:
    """Link files count whitespace words: refuse a line where the tokenizer leaves a word without pieces."""
    have = words_per_sentence(side)
    for i, line in enumerate(lines):
        if have[i] != len(line.split()):
            raise MinimultError(f"{path}:{i + 1}: the tokenizer gives pieces to {have[i]} of the line's "
                                f"{len(line.split())} words, so link indices cannot address them")


def recorded(model: HFBert, key: str) -> dict:
    """What a minimult export records in its config under `key` ({} for any other checkpoint):
    `minimult_languages` (each language's tokenizer, layout and word order) or `minimult_training` (how far and
    how its run trained). The languages come in the run's order (their layouts' `lang`): config.json holds them
    with its keys sorted."""
    value = getattr(model.hf.config, key, None) or {}
    if key == "minimult_languages":
        value = dict(sorted(value.items(), key=lambda kv: kv[1].get("layout", {}).get("lang", 0)))
    return value


def recorded_layout(spec: dict, lang: int) -> Layout:
    """A language's recorded layout as language `lang` of the pair (fields this version does not know are
    left out)."""
    known = {f.name for f in dataclasses.fields(Layout)}
    return Layout(**{**{k: v for k, v in spec["layout"].items() if k in known}, "lang": lang})


def in_order(side: Side, name: str, spec: dict, directory) -> Side:
    """`side` in the word order its language had in the run (`order` in the export's record): reversed
    under inv-order; a mod whose order the export could not record is one error line naming it."""
    order = spec.get("order", "original")
    if order == "original":
        return side
    if order == "reversed":
        return side.reordered([np.arange(n)[::-1].copy() for n in side.lengths])
    raise MinimultError(f"{directory}: its run's mod {spec.get('order_mod') or '(unnamed)'} reordered the words of "
                        f"{name!r} in a way eval --hf cannot write again (only original and reversed orders are "
                        f"recorded), so its numbers would not be the run's; evaluate the run itself "
                        f"(minimult eval RUN)")


def language_tokenizers(directory, record: dict, langs) -> list:
    """The tokenizers of the named languages (`check_langs` first; an export keeps a language's own in its
    sub-folder)."""
    from transformers import AutoTokenizer  # lazy: an optional dependency (the test extra), ~1.3 s to import

    out = []
    for lang in langs:
        sub = Path(directory) / record[lang]["tokenizer"]
        try:
            out.append(AutoTokenizer.from_pretrained(str(sub)))
        except (OSError, ValueError) as e:
            raise MinimultError(f"cannot load language {lang!r}'s tokenizer from {sub}: "
                                f"{str(e).splitlines()[0]}") from None
    return out


def _written(spec: dict) -> dict:
    """How a recorded language's sequences are written, its own index aside (ids, specials, positions, segment)."""
    return {k: v for k, v in (spec.get("layout") or {}).items() if k != "lang"}


def check_langs(directory, record: dict, langs) -> None:
    """Refuse `--langs` that contradict the export's record: a language it does not have, one language twice, or a
    first file named other than the export's first language (the one the run's others were read against); each
    error names the --langs to give."""
    names = list(record)
    if not names:
        raise MinimultError(f"--langs {','.join(langs)}: {directory} records no languages (not a minimult export, or "
                            f"one made before exports recorded them): leave --langs out (both files are read with "
                            f"its tokenizer) or export the run again")
    others = names[1:] or names
    suggest = f"--langs {names[0]},{next((l for l in langs[1:] if l in others), others[0])}"
    unknown = [l for l in langs if l not in record]
    if unknown:
        raise MinimultError(f"--langs {','.join(langs)}: {directory} has no language {unknown[0]!r}; its languages: "
                            f"{', '.join(names)} (first: {names[0]}): give e.g. {suggest}")
    if len(set(langs)) < len(langs):
        raise MinimultError(f"--langs {','.join(langs)} names {langs[0]!r} twice: the pair is two languages of "
                            f"{directory} ({', '.join(names)}); give e.g. {suggest}")
    if langs[0] != names[0]:
        raise MinimultError(f"--langs {','.join(langs)}: the first file is the export's first language, "
                            f"{names[0]!r}, the one its run read the others against; give {suggest}"
                            + (" and swap the files" if names[0] in langs else ""))


def pair_data(tokenizer, model: HFBert, a_lines, b_lines, shift: bool, langs=None, directory=None, log=None):
    """(sides, layouts, dictionary sides or None, language names) for the pair; with `shift` on a minimult
    export, every language the run had (`shifted_languages`)."""
    record = recorded(model, "minimult_languages")
    if langs:
        if shift:
            raise MinimultError("--shift and --langs: --shift makes B the id-shifted copy of A; --langs names the "
                                "languages the two files are written in (en,fake reads B as Fake-English too)")
        check_langs(directory, record, langs)
        tokenizers = language_tokenizers(directory, record, langs)
        layouts = [recorded_layout(record[name], k) for k, name in enumerate(langs)]
        sides = [in_order(_side(t, lines, k, layout.id_offset, False, record[name].get("unicode_shift", False)), name,
                          record[name], directory)
                 for k, (t, lines, name, layout) in enumerate(zip(tokenizers, (a_lines, b_lines), langs, layouts))]
        return sides, layouts, None, tuple(langs)
    own = [l for l, spec in record.items() if spec["tokenizer"]]
    if own and shift:
        raise MinimultError(f"--shift: {directory}'s second language is {own[0]!r} with a tokenizer of its own, not "
                            f"an id-shifted copy of English; use --langs")
    if own:
        raise MinimultError(f"{directory} holds languages {', '.join(record)} with tokenizers of their own "
                            f"({', '.join(own)}): say which two the pair is written in, e.g. --langs "
                            f"{next(iter(record))},{own[0]}")
    if not shift and len(record) > 1 and log is not None:
        names = list(record)
        unlike = [n for n in names[1:] if _written(record[n]) != _written(record[names[0]])]
        if unlike:  # both files are read as the first language: B is not read as the run read its second
            log(f"note: {directory} is a minimult export of languages {', '.join(names)}, written differently (ids, "
                f"positions, segments); without --langs or --shift both files are read as {names[0]}, so B is not "
                f"read as the run read {unlike[0]!r}: give --langs {names[0]},{unlike[0]} (or --shift for an "
                f"id-shifted copy of A)")
    V = len(tokenizer)
    block = getattr(model.hf.config, "minimult_id_block", None) or V  # ids per language
    if shift and block < V:
        raise MinimultError(f"--shift: the model's id block per language ({block:,}, minimult_id_block in its "
                            f"config) is smaller than its tokenizer ({V:,} ids)")
    if shift and record:
        return shifted_languages(tokenizer, model, record, a_lines, directory)
    if shift and model.hf.config.vocab_size < block + V:
        raise MinimultError(f"--shift: the model's vocabulary ({model.hf.config.vocab_size:,}) has no room for a "
                            f"shifted copy of the tokenizer's ({V:,} ids)")
    offset = block if shift else 0
    sides = [_side(tokenizer, a_lines, 0, 0, shift), _side(tokenizer, a_lines if shift else b_lines, 1, offset, shift)]
    max_len = model.hf.config.max_position_embeddings
    layouts = [Layout(k, k * offset, pad=tokenizer.pad_token_id, cls=tokenizer.cls_token_id,
                      sep=tokenizer.sep_token_id, mask=tokenizer.mask_token_id, max_len=max_len) for k in range(2)]
    dictionary = shifted_dictionary(tokenizer, [0, offset]) if shift else None
    return sides, layouts, dictionary, ("en", "fake")


def shifted_languages(tokenizer, model: HFBert, record: dict, lines, directory):
    """`pair_data` of `--shift` on a minimult export: every recorded language as an id-shifted copy of A's
    lines, each written as the run wrote it (its recorded layout: ids, specials, positions, segment,
    window; its word order), with the gold alignment and dictionary of id-shifted copies; one error line
    for a language that is not one (a shifted script, English's own ids)."""
    names = list(record)
    for name in names[1:]:
        if record[name].get("unicode_shift"):
            raise MinimultError(f"--shift: {directory}'s language {name!r} is English written in a shifted script, "
                                f"not an id-shifted copy of English; use --langs {names[0]},{name}")
    layouts = [recorded_layout(record[name], k) for k, name in enumerate(names)]
    shared = [name for name, layout in zip(names[1:], layouts[1:]) if layout.id_offset == 0]
    if shared:
        raise MinimultError(f"--shift: {directory}'s language {shared[0]!r} shares English's ids (one vocabulary), so "
                            f"it is no id-shifted copy of English; use --langs {names[0]},{shared[0]}")
    V, size = len(tokenizer), model.hf.config.vocab_size
    if max(l.id_offset for l in layouts) + V > size:
        raise MinimultError(f"--shift: the model's vocabulary ({size:,}) has no room for {len(layouts)} copies of the "
                            f"tokenizer's {V:,} ids at the recorded offsets")
    sides = [in_order(_side(tokenizer, lines, k, layout.id_offset, True), name, record[name], directory)
             for k, (name, layout) in enumerate(zip(names, layouts))]
    return sides, layouts, shifted_dictionary(tokenizer, [l.id_offset for l in layouts]), tuple(names)


def shifted_dictionary(tokenizer, offsets) -> list[Side]:
    """The dictionary of id-shifted copies: every non-special id of the tokenizer, one entry per id, at each
    language's id offset."""
    special = set(tokenizer.all_special_ids)
    en = np.array([i for i in range(len(tokenizer)) if i not in special], dtype=np.int32)
    return one_piece_sides([en + offset for offset in offsets])


def evaluate_hf(directory, a, b, shift: bool = False, layers=None, segment: str = "original",
                precision: str = "fp32", device: str = "auto", log=print, langs=None, link_file=None,
                only=None, link_base: int | None = None) -> dict:
    """The evaluators on a checkpoint folder and a line-aligned pair (see the module docstring); `only`
    names evaluators (default: every one the pair can give; with `link_file`, word alignment alone)."""
    # lazy: the package imports this module before defining them
    from minimult.evaluate import checked_layers, evaluate_model

    tokenizer, model = load(directory)
    a_lines, b_lines = read_pair(a, b)
    if shift and a_lines != b_lines:
        raise MinimultError(f"--shift: {b} must hold {a}'s lines (its shifted copy is made from the same text)")
    sides, layouts, dictionary, names = pair_data(tokenizer, model, a_lines, b_lines, shift, langs, directory, log)
    rows = model.hf.config.vocab_size
    top = max((int(s.ids.max()) for s in sides if len(s.ids)), default=-1)
    if top >= rows:  # would be an IndexError deep in the embedding lookup
        raise MinimultError(f"{directory}: the tokenizer writes id {top:,} but the model's embedding table has "
                            f"{rows:,} rows: this tokenizer does not belong to these weights")
    record, training = recorded(model, "minimult_languages"), recorded(model, "minimult_training")
    if training and not training.get("complete"):
        status = str(training.get("status") or "")
        total = training.get("total_steps")
        log(f"note: {directory} holds the weights of {'a failed' if status.startswith('failed') else 'an unfinished'} "
            f"run, step {training.get('steps')} of {total if total is not None else 'an unknown total'}")
    if record and (not training or any("order" not in spec for spec in record.values())):
        log(f"note: {directory} was exported before exports recorded word orders and train.attention: every language "
            f"is read in its original order with padding masked (an inv-order or attend-padding run was not; export "
            f"the run again)")
    if link_file is not None:
        reordered = [name for name in names if record.get(name, {}).get("order", "original") != "original"]
        if reordered:
            raise MinimultError(f"--links needs the words of both languages in their original order; {directory}'s "
                                f"run reordered the words of {reordered[0]!r} "
                                f"({record[reordered[0]].get('order_mod')})")
        for side, lines, path in zip(sides, (a_lines, b_lines), (a, b)):
            check_words(side, lines, path)
    if segment != "original" and any(l.segment < 0 for l in layouts):
        raise MinimultError(f"--segment {segment}: this model has no segment table (no-segment); only 'original' "
                            f"applies")
    depth = model.cfg.layers
    layers = checked_layers(layers, depth)
    attention = training.get("attention", "masked")  # as the run encoded (train.attention)
    dev = pick_device(device)
    model = with_segment(model, segment).to(dev)
    # links' link file names a pair's lines as its verses (1-based)
    inputs = {} if link_file is None else {"links": LinkFile(str(link_file), link_base,
                                                             lambda: np.arange(1, len(a_lines) + 1))}
    ctx = Context(model, lambda split: sides, lambda: dictionary, layouts, min(l.max_len for l in layouts), layers,
                  dev, ppl_splits=("dev",), random_ids=torch.arange(len(tokenizer)), precision=precision, log=log,
                  languages=names, attention=attention, inputs=inputs)
    possible = None if shift else text_evaluators() + ("links",)
    if only is None:
        only = ("links",) if link_file is not None else possible
    elif possible is not None and set(only) - set(possible):
        raise MinimultError(f"--only {','.join(only)}: without --shift a pair has no gold alignment or dictionary; "
                            f"it gives {', '.join(possible)}")
    scores = evaluate_model(ctx, log, only=only)
    return {"hf": str(directory), "pair": [str(a), str(b)], "shift": shift, "langs": list(langs or ()) or None,
            "dev_sentences": len(a_lines), "training": training or None,
            "evaluation": {"layers": list(layers), "precision": precision, "segment": segment,
                           "attention": attention, "max_len": ctx.max_len}, **scores}
