"""Word alignment against a link file (`eval --links FILE`): precision, recall, F1 and AER per layer.

The file names verses (pairs) and word indices, in the lab's format or Pharaoh's (`minimult.data.links`). The
evaluation is at word level: a word's vector is the mean of its pieces' vectors, each verse pair is aligned by
mutual argmax of cosine similarity between word vectors, and the predicted word links are scored against the
file's sure and possible links (`metrics.link_scores`); a model-free diagonal aligner is scored
beside the layers (`diagonal`) as the level word order alone reaches. Only the verses the file names are encoded,
from the whole development split (independent of --dev-sentences: the block records `dev_sentences`, the
dev sentences it read, and `verses`, those it scored; `--only links --dev-sentences N` is refused); words cut off
by the model's window are left out, and the links on them are counted as `outside_window` and not scored; when that
leaves no link at all, every score is null ("nothing to score", said in one line), never F1 0 / AER 1; a file
with possible (P) links only has no sure link to recall: recall and F1 are null (one line says so), precision
and AER are scored against the possible links. A file
whose comments say `silver` (the en-es source's `silver-dev.links`) is labelled silver in the results.

Standalone: gives nothing unless a link file is asked for; needs a run whose sentences are whole verses or
lines (`Source.verse_sentences`: en-es, parallel) in their original word order. A is the first language, B
language 1 (en-es: Spanish, also in a three-language run, whose Fake-English the file does not address), or the
language `link_lang` names (`eval --link-lang NAME`: any but the first of a run of three or more).
Its inputs (`LinkFile`: the file, its index base, the dev sentences' verse ids, language B) come from the evaluator
options `link_file`, `link_base` and `link_lang` through `inputs`, which refuses a bad request before the model loads;
`eval --hf` builds them for its pair of texts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from minimult.data.links import link_format, read_links, word_first_pieces
from minimult.errors import MinimultError
from minimult.evaluate import metrics
from minimult.evaluate.registry import Column, Evaluator, register
from minimult.evaluate.representations import group_means, truncate


def words_per_sentence(side) -> np.ndarray:
    """(S,) int64: how many words (pieces that begin one) each of `side`'s S sentences has."""
    if not len(side.ids):
        return np.zeros(side.num_sentences, np.int64)
    counts = np.add.reduceat(side.word_starts.astype(np.int64), side.offsets[:-1])
    counts[side.lengths == 0] = 0  # reduceat gives an empty sentence its neighbour's count
    return counts


def word_vectors(vectors: torch.Tensor, side) -> list[torch.Tensor]:
    """vectors (P, H), the pieces of `side` -> per sentence, (W, H): the mean of each word's piece vectors (the
    words inside the window)."""
    pooled = group_means(vectors, np.cumsum(side.word_starts) - 1, int(side.word_starts.sum()))
    cuts = np.concatenate([[0], np.cumsum(words_per_sentence(side))])
    return [pooled[cuts[i]:cuts[i + 1]] for i in range(side.num_sentences)]


def diagonal_links(chosen, words_a: dict[int, int], words_b: dict[int, int]) -> set[tuple[int, int, int]]:
    """A model-free reference: word i of a verse's n_A words linked to word floor((i + 1/2) n_B / n_A) of
    its n_B (the diagonal of the verse pair), so a layer's F1 can be read against word order alone."""
    out = set()
    for v in chosen:
        n_a, n_b = words_a.get(int(v), 0), words_b.get(int(v), 0)
        out.update((int(v), i, int((i + 0.5) * n_b / n_a)) for i in range(n_a) if n_b)
    return out


# the scores of a link file none of whose links lies inside the model's window
NOTHING = dict(precision=None, recall=None, f1=None, aer=None, predicted=None, sure=0, possible=0)


def _scores(predicted: set, sure: set, possible: set) -> dict:
    """`metrics.link_scores`, with recall and F1 null (not 0) when there is no sure link to recall."""
    scores = metrics.link_scores(predicted, sure, possible)
    return scores if sure else {**scores, "recall": None, "f1": None}


@dataclass(frozen=True)
class LinkFile:
    """What the evaluator scores against (its `ctx.inputs["links"]`): a link file, where a Pharaoh file's word
    indices start (0 or 1; `data.links`), the verse ids of the dev sentences, which the file's lines name, and
    language B's place among the run's languages (1: the second)."""

    path: str
    base: int | None
    verse_ids: Callable[[], np.ndarray]
    lang: int = 1


def inputs(run, options: dict) -> LinkFile | None:
    """The evaluator's inputs: the link file `options` asks for (`link_file`, `link_base`, `link_lang`: language B's
    name), checked against `run` before the model loads (`checked_file`); None without one, an error if `--only
    links` asked for it anyway."""
    path = options.get("link_file")
    if path is None:
        if "links" in (options.get("only") or ()):
            raise MinimultError("--only links scores against a link file: give one with --links FILE (or --links "
                                "silver for the en-es source's silver links); without it there is nothing to score")
        return None
    base, names, wanted = options.get("link_base"), run.data.source.names(run.cfg.data), options.get("link_lang")
    if wanted is not None and wanted not in names[1:]:
        raise MinimultError(f"--link-lang {wanted!r}: the link file's second language is one of this run's languages "
                            f"but the first ({names[0]}): {', '.join(names[1:])}")
    lang = 1 if wanted is None else names.index(wanted)
    path = checked_file(run, path, base, lang)
    if not run.data.source.verse_sentences:
        raise MinimultError("--links needs a run whose sentences are whole verses or lines (--source en-es or "
                            "parallel); this run's language source splits verses into sentences")
    return LinkFile(path, base, lambda: run.data.prepared.dev.verse_ids, lang)


def checked_file(run, path: str, base: int | None = None, lang: int = 1) -> str:
    """The link file to score against (`silver`: the source's silver development links), refused for runs
    that reorder the words of the language it scores against the first (language `lang`, 1 unless `--link-lang`
    names another; a mod that reorders another language of a 3-language run, `inv-order=fake`, is no reason),
    or a Pharaoh file whose index base is not declared."""
    names = run.data.source.names(run.cfg.data)
    reordering = [a.spec for a in run.data.mods if a.mod.reorder is not None
                  and (a.mod.reorders is None or a.mod.reorders(names[lang], a.value))]
    if reordering:
        raise MinimultError(f"--links needs the words of both languages in their original order; --mods "
                            f"{reordering[0]} reorders them")
    if path == "silver":
        if lang != 1:
            raise MinimultError(f"--links silver links the first language to the second "
                                f"({names[1]}), not to the one --link-lang names")
        silver = run.data.prepared.path / "silver-dev.links"
        if not silver.is_file():
            raise MinimultError(f"--links silver: the language source {run.cfg.data.source!r} has no silver links "
                                f"(--source en-es does); give a link file")
        return str(silver)
    if link_format(path) == "pharaoh" and base not in (0, 1):
        raise MinimultError(f"{path} is a Pharaoh link file (i-j per pair): say whether its word indices count "
                            f"from 0 or from 1 (--link-base 0|1)")
    return path


def run(ctx) -> dict:
    scored = ctx.inputs.get("links")
    if scored is None:
        return {}
    with ctx.phase("data"):
        views, verse_ids = ctx.views("dev"), scored.verse_ids()
        sides = [views[0], views[scored.lang]]  # the first language and language B: the file's A and B
        firsts = [word_first_pieces(s.word_starts, s.offsets) for s in sides]
        counts = [{int(v): len(f) for v, f in zip(verse_ids, fs)} for fs in firsts]
        links = read_links(scored.path, counts[0], counts[1], scored.base)
        chosen = np.unique(links.verse_ids)
        row_of = {int(v): i for i, v in enumerate(verse_ids)}
        index = np.array([row_of[int(v)] for v in chosen])
        cut = [truncate(s.subset(index), ctx.max_len - 2) for s in sides]
        kept = [{int(v): int(n) for v, n in zip(chosen, words_per_sentence(c))} for c in cut]
    inside = np.array([a < kept[0].get(int(v), 0) and b < kept[1].get(int(v), 0)
                       for v, a, b in zip(links.verse_ids, links.a, links.b)], dtype=bool)
    sure = {(int(v), int(a), int(b))
            for v, a, b, s, i in zip(links.verse_ids, links.a, links.b, links.sure, inside) if s and i}
    possible = {(int(v), int(a), int(b)) for v, a, b, i in zip(links.verse_ids, links.a, links.b, inside) if i}
    if not possible:  # every link on a word cut off by the window: no score, not a score of 0
        if ctx.log is not None:
            ctx.log(f"note: links: all {len(links):,} links of {scored.path} fall on words outside the model's "
                    f"window ({ctx.max_len - 2} pieces per sentence): nothing to score, stored as null")
        layers = {str(l): dict(NOTHING) for l in ctx.layers}
        diagonal = dict(NOTHING)
    else:
        if not sure and ctx.log is not None:  # only possible (P) links: nothing for recall (|A∩S|/|S|) to count
            ctx.log(f"note: links: {scored.path} has no sure links inside the model's window (only possible ones, "
                    f"P): recall and F1 have nothing to score, stored as null; precision and AER are scored")
        with ctx.phase("forward_links"):
            vectors = ctx.encode(cut)
        layers = {}
        for l in ctx.layers:
            with ctx.phase("links"):
                en, other = word_vectors(vectors[0][l], cut[0]), word_vectors(vectors[1][l], cut[1])
                predicted = {(int(v), a, b) for v, x, y in zip(chosen, en, other)
                             for a, b in metrics.mutual_argmax_links(x, y)}
                layers[str(l)] = _scores(predicted, sure, possible)
        diagonal = _scores(diagonal_links(chosen, *kept), sure, possible)
    top = str(max(ctx.layers))
    return {"links": {"pair": f"{ctx.languages[0]}-{ctx.languages[scored.lang]}", "file": str(Path(scored.path)),
                      "sha256": hashlib.sha256(Path(scored.path).read_bytes()).hexdigest(),
                      "kind": "silver" if links.silver else "gold", "format": links.format,
                      **({"base": links.base} if links.format == "pharaoh" else {}),
                      "unit": "word (mean of its pieces), mutual argmax",
                      "dev_sentences": int(len(verse_ids)), "verses": int(len(chosen)), "links": int(len(links)),
                      "outside_window": int((~inside).sum()),
                      "layers": layers, "diagonal": diagonal, "layer": int(top), "f1": layers[top]["f1"],
                      "aer": layers[top]["aer"]}}


def table(results: dict) -> str:
    r = results

    def row(name, s):
        specs = {"precision": ".3f", "recall": ".3f", "f1": ".3f", "aer": ".3f", "predicted": ","}
        return (name, *("-" if s.get(k) is None else format(s[k], spec) for k, spec in specs.items()))

    rows = [("layer", "precision", "recall", "F1", "AER", "predicted")]
    rows += [row(l, s) for l, s in sorted(r["layers"].items(), key=lambda kv: int(kv[0]))]
    rows += [row("diagonal", r["diagonal"])] if "diagonal" in r else []
    widths = [max(len(x[i]) for x in rows) for i in range(len(rows[0]))]
    pair = f" of {r['pair']}" if "pair" in r else ""  # results from before it was recorded: en and language 1
    head = (f"word alignment{pair} against {r['kind']} links {r['file']} ({r['verses']:,} sentence pairs, "
            f"{r['links']:,} links, {r['outside_window']:,} outside the model's window; words = mean of their "
            f"pieces, mutual argmax):")
    if r.get("f1") is None and r["outside_window"] == r["links"]:
        return head[:-1] + ": nothing to score (every link falls outside the window)"
    if r.get("f1") is None:
        head += "\n  no sure links inside the window (only possible ones): recall and F1 have nothing to score (-)"
    return "\n".join([head] + ["  ".join(c.rjust(w) for c, w in zip(x, widths)) for x in rows])


register(Evaluator(
    "links", "word alignment P, R, F1 and AER against a link file (eval --links), words pooled from pieces",
    version=3, order=25, run=run, periodic=False, standalone=True, inputs=inputs,
    options=("link_file", "link_base", "link_lang"),
    columns=(Column("f1", "links F1", group="links"),
             Column("aer", "links AER", group="links")),
    describe=lambda results: [table(results["links"])] if "links" in results else []))
