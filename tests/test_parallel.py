"""The parallel source (`--source parallel --files ...`): the user's own files of N languages, line-aligned or
keyed, inline or by a TOML manifest; their errors (one line naming the file and the line, nothing written);
runs of three languages; Pharaoh link files; transfer on a task directory; exports read by `eval --hf --langs`;
and the source's name under its new key (`data.source`) with the old one (`data.fake`) still read.

Every file is written here: the first 120 sentences of the tiny corpus as English, and two languages made
from them, `xx` (every letter moved three places on: the same words in the same order, spelled otherwise,
so the gold links are word i to word i and the dictionary is each word's enciphered spelling) and `yy`
(every sentence's words reversed).
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import ROOT, TINY_DEV, TINY_TRAIN, cli
from minimult.cli import main
from minimult.config import RunConfig, comparable, resolve
from minimult.data.parallel import is_manifest, parse_spec, read_corpora
from minimult.data.run_data import RunData
from minimult.errors import MinimultError
from minimult.runs import Run
from test_real_languages import fixture_modules  # noqa: F401  (a fixture: the SWORD modules from the fixture)

ENGLISH = (ROOT / "corpora" / "tiny" / "train.txt").read_text(encoding="utf-8").splitlines()[:120]
_ROT = str.maketrans(string.ascii_lowercase + string.ascii_uppercase,
                     string.ascii_lowercase[3:] + string.ascii_lowercase[:3] + string.ascii_uppercase[3:]
                     + string.ascii_uppercase[:3])
quiet = lambda s: None  # noqa: E731


def cipher(text: str) -> str:
    return text.translate(_ROT)


def reverse(text: str) -> str:
    return " ".join(reversed(text.split()))


def write(path: Path, lines) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def lines(tmp_path):
    """Line-aligned en, xx, yy files: {name: path}."""
    return {name: write(tmp_path / f"{name}.txt", [f(line) for line in ENGLISH])
            for name, f in (("en", str), ("xx", cipher), ("yy", reverse))}


def inline(files: dict) -> str:
    return ",".join(f"{name}={path}" for name, path in files.items())


def settings(files: str, **more) -> dict:
    return {"data.source": "parallel", "data.files": files, "data.vocab_size": 256, **more}


def manifest(tmp_path, text: str) -> str:
    path = tmp_path / "corpus.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def three_languages(tmp_path) -> str:
    """A manifest of en, xx, yy with dev files (the last 20 sentences), a dictionary for xx (each of its 80 most
    frequent English words and its enciphered spelling) and xx's gold links of the dev pairs (Pharaoh, 1-based)."""
    train, dev = ENGLISH[:100], ENGLISH[100:]
    for name, f in (("en", str), ("xx", cipher), ("yy", reverse)):
        write(tmp_path / f"{name}.train.txt", [f(line) for line in train])
        write(tmp_path / f"{name}.dev.txt", [f(line) for line in dev])
    from collections import Counter

    common = [w for w, _ in Counter(w for line in train for w in line.split()).most_common(80)]
    write(tmp_path / "en-xx.dict", [f"{w}\t{cipher(w)}" for w in common])
    write(tmp_path / "en-xx.pharaoh", [" ".join(f"{i}-{i}" for i in range(1, len(line.split()) + 1)) for line in dev])
    return manifest(tmp_path, """
links_base = 1
[languages]
en = "en.train.txt"
xx = "xx.train.txt"
yy = "yy.train.txt"
[dev]
en = "en.dev.txt"
xx = "xx.dev.txt"
yy = "yy.dev.txt"
[dictionary]
xx = "en-xx.dict"
[links]
xx = "en-xx.pharaoh"
""")


def train_run(tmp_path, name: str, files: str, mods=None, **more) -> Run:
    from minimult.train import train

    cfg, _ = resolve("tiny", settings(files, **{"model.layers": 2, **more}), mods)
    run = Run.create_at(tmp_path / name, cfg, log=quiet)
    train([run], log=quiet)
    return Run.open(run.path)


# ---------------------------------------------------------------------------------------------
# Reading the files


def test_line_aligned_and_keyed_inputs_give_the_same_pairs(tmp_path, lines):
    ids = [40001001 + 1000 * (i // 30) + i % 30 for i in range(len(ENGLISH))]  # verse ids, BBCCCVVV
    keyed = {}
    for name, path in lines.items():
        rows = list(zip(ids, path.read_text(encoding="utf-8").splitlines()))
        if name != "en":
            rows = rows[::-1]  # another file's order: pairs follow the ids, not the lines
        keyed[name] = write(tmp_path / f"{name}.keyed.txt", [f"{i}\t{text}" for i, text in rows])
    a_train, a_dev = read_corpora(parse_spec(inline(lines)))
    b_train, b_dev = read_corpora(parse_spec(inline(keyed)))
    for a, b in ((a_train, b_train), (a_dev, b_dev)):
        assert a.sentences == b.sentences and a.others == b.others and len(a) > 1
        assert [ids[i - 1] for i in a.verse_ids] == b.verse_ids  # line k has id ids[k - 1]
    assert len(a_dev) == 12 and a_dev.verse_ids[0] == 109  # dev: the last tenth of the pairs
    assert a_train.others[0][5] == [cipher(w) for w in a_train.sentences[5]]
    # through prepare (word units: a deterministic vocabulary), the languages' ids agree too
    views = []
    for files in (lines, keyed):
        cfg, active = resolve("tiny", settings(inline(files), **{"data.tokenizer": "word"}))
        views.append(RunData(cfg, active).views("train"))
    for x, y in zip(*views):
        np.testing.assert_array_equal(x.ids, y.ids)
        np.testing.assert_array_equal(x.offsets, y.offsets)
    assert views[0][1].ids.min() >= 256 and views[0][2].ids.min() >= 512  # each language at its own offset


def test_a_word_with_several_sure_links_keeps_the_lowest_first_language_index_in_any_file_order():
    """The piece-level gold holds one link per second-language word: the lowest first-language index among its
    sure links, whatever order the link file lists them in; possible links are not used."""
    from types import SimpleNamespace

    from minimult.data.sources.en_es import silver_gold

    def encoded(pieces_per_word):  # one sentence; ids are irrelevant to the gold
        starts = np.concatenate([[True] + [False] * (n - 1) for n in pieces_per_word])
        return SimpleNamespace(ids=np.zeros(len(starts)), word_starts=starts, offsets=np.array([0, len(starts)]))

    en, xx = encoded([1, 2, 1]), encoded([1, 2])  # English pieces 0 | 1 2 | 3; xx pieces 0 | 1 2
    links = [(2, 0, "S"), (1, 0, "S"), (0, 1, "P"), (2, 1, "S")]
    for order in (links, links[::-1]):
        assert silver_gold(en, xx, [order]).tolist() == [1, 3, -1]  # word 0 -> word 1 (piece 1), word 1 -> 3


def _bad(tmp_path, lines, case: str) -> tuple[str, str]:
    """(data.files, the error's expected text) for one kind of bad input."""
    en, xx = lines["en"], lines["xx"]
    text = xx.read_text(encoding="utf-8").splitlines()
    if case == "missing line":
        keyed = [write(tmp_path / f"{n}.k.txt", [f"{i}\t{t}" for i, t in enumerate(p.read_text().splitlines(), 1)
                                                  if not (n == "xx" and i == 7)]) for n, p in (("en", en), ("xx", xx))]
        return f"en={keyed[0]},xx={keyed[1]}", f"{keyed[0]}:7: id 7 (language en) has no line in {keyed[1]}"
    if case == "empty line":
        write(xx, text[:4] + [" "] + text[5:])
        return inline(lines), f"{xx}:5: empty line (language xx)"
    if case == "duplicate id":
        keyed = [write(tmp_path / f"{n}.k.txt", [f"{i if i != 9 else 3}\t{t}" for i, t in enumerate(
            p.read_text().splitlines(), 1)]) for n, p in (("en", en), ("xx", xx))]
        return f"en={keyed[0]},xx={keyed[1]}", f"{keyed[0]}:9: id 3 again (first at line 3)"
    if case == "unequal line counts":
        write(xx, text[:-2])
        return inline(lines), f"{en} has 120 lines and {xx} 118: line-aligned files pair line k of every file, so {en}:119"
    if case == "old Mac line ends":
        xx.write_text("\r".join(text) + "\r", encoding="utf-8")
        return inline(lines), f"and {xx} 1: line-aligned files pair line k of every file, so {en}:2 has no partner " \
                              f"(languages en, xx); a file whose lines end in a lone \\r (old Mac files) reads as one line"
    if case == "non-UTF-8":
        xx.write_bytes("\n".join(text[:10]).encode() + b"\nthe caf\xe9 of Jerusalem\n" + "\n".join(text[11:]).encode())
        return inline(lines), f"{xx}:11: not UTF-8 (invalid continuation byte"
    if case in ("a header line", "an id of 19 digits"):  # keyed files that are not quite: never read as lines
        rows = lambda p: [f"{i}\t{t}" for i, t in enumerate(p.read_text().splitlines(), 1)]  # noqa: E731
        keyed = [write(tmp_path / f"{n}.k.txt", rows(p)) for n, p in (("en", en), ("xx", xx))]
        if case == "a header line":
            write(keyed[1], ["id\ttext"] + rows(xx))
            return f"en={keyed[0]},xx={keyed[1]}", f"{keyed[1]}:1: no ID<TAB> at its start, while other lines are keyed"
        write(keyed[0], rows(en)[:4] + ["1234567890123456789\tx"] + rows(en)[5:])
        return f"en={keyed[0]},xx={keyed[1]}", f"{keyed[0]}:5: id 1234567890123456789 has 19 digits (at most 18)"
    if case == "language named twice":
        return f"en={en},xx={xx},en={lines['yy']}", "language 'en' is named twice"
    if case == "file missing":
        return f"en={en},xx={tmp_path / 'nowhere.txt'}", f"file not found: {tmp_path / 'nowhere.txt'} (language xx)"
    raise AssertionError(case)


BAD = ("missing line", "empty line", "duplicate id", "unequal line counts", "old Mac line ends", "non-UTF-8",
       "language named twice", "file missing", "a header line", "an id of 19 digits")


@pytest.mark.parametrize("case", BAD)
def test_bad_files_are_one_line_naming_file_and_line_and_nothing_is_written(tmp_path, lines, case, monkeypatch):
    files, expected = _bad(tmp_path, lines, case)
    cache = tmp_path / "cache"
    monkeypatch.setenv("MINIMULT_CACHE", str(cache))
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["pretrain", "--files", files, "--preset", "tiny", "--set", "data.vocab_size=256",
                                       "--out", str(out)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()  # no run folder
    assert not cache.exists() or not [p for p in cache.iterdir()]  # no cache entry, no temp folder left


@pytest.mark.parametrize("head", [b"", b"\xef\xbb\xbf"], ids=["plain", "byte-order mark"])
def test_a_byte_that_is_not_utf8_is_named_by_its_place_in_the_file_by_both_readers(tmp_path, head):
    """The byte and line named are the file's own, a byte-order mark counted (it is dropped from the text)."""
    from minimult.data import parallel
    from minimult.data.corpus import read_lines

    path = tmp_path / "bad.txt"
    path.write_bytes(head + b"in the beginning\nthe caf\xe9 of Jerusalem\n")
    byte = len(head) + len(b"in the beginning\nthe caf")
    with pytest.raises(MinimultError, match=f"^{path}:2: not UTF-8 \\(invalid continuation byte at byte {byte}\\)"):
        parallel._lines(path, "xx")
    with pytest.raises(MinimultError, match=f"at byte {byte}\\)"):
        read_lines(path)


def test_keyed_files_may_leave_out_pairs_when_the_manifest_says_so(tmp_path, lines):
    keyed = {n: write(tmp_path / f"{n}.k.txt", [f"{i}\t{t}" for i, t in enumerate(p.read_text().splitlines(), 1)
                                                 if not (n == "xx" and i in (7, 8))]) for n, p in lines.items()}
    spec = parse_spec(manifest(tmp_path, 'missing = "drop"\n[languages]\n'
                                         + "".join(f'{n} = "{p.name}"\n' for n, p in keyed.items())))
    said = []
    train, dev = read_corpora(spec, log=said.append)
    assert 7 not in train.verse_ids and 8 not in train.verse_ids and len(train) + len(dev) == 118
    assert train.stats["dropped"] == {"en": 2, "yy": 2}
    assert len(said) == 2 and all("missing in another language's file" in s for s in said)
    from minimult.data.prepare import summary

    cfg, mods = resolve("tiny", settings(str(tmp_path / "corpus.toml")))
    assert "train: 106 pairs (keyed; left out, missing in another file: 2 of en's ids, 2 of yy's ids): " in \
        summary(RunData(cfg, mods).prepare(quiet))


def test_manifest_sets_first_language_dev_files_words_and_lowercasing(tmp_path, lines):
    write(tmp_path / "en.dev.txt", ["Who's there? The Lord, said he."] * 3)
    write(tmp_path / "xx.dev.txt", [cipher("Who's there? The Lord, said he.")] * 3)
    path = manifest(tmp_path, f"""first = "xx"
words = "nltk"
lowercase = true
[languages]
en = "{lines['en'].name}"
xx = "{lines['xx'].name}"
[dev]
en = "en.dev.txt"
xx = "xx.dev.txt"
""")
    spec = parse_spec(path)
    assert spec.languages == ("xx", "en") and spec.train[0] == lines["xx"]
    train, dev = read_corpora(spec)
    assert len(train) == 120 and len(dev) == 3
    assert dev.others[0][0] == ["who", "'s", "there", "?", "the", "lord", ",", "said", "he", "."]  # NLTK's words
    cfg, active = resolve("tiny", settings(path))
    data = RunData(cfg, active)
    assert data.source.names(cfg.data) == ("xx", "en") and cfg.data.n_langs == 2
    from minimult.data.vocab import Vocab

    en = Vocab.load(data.prepared.path / "en", 256)  # the language's own tokenizer lowercases raw text too
    assert en.tokenizer.encode("THE LORD").ids == en.tokenizer.encode("the lord").ids
    for text, fragment in (('[languages]\nen = "a.txt"\n', "names 1 language(s); a run needs at least two"),
                           ('colour = 1\n[languages]\nen = "a"\nxx = "b"\n', "unknown key 'colour'"),
                           ('first = "de"\n[languages]\nen = "a"\nxx = "b"\n', "first = 'de' is not one of"),
                           ('dev_share = 2\n[languages]\nen = "a"\nxx = "b"\n', "dev_share must be a number"),
                           ('[languages]\nen = "a"\nxx = "b"\n[dev]\nen = "c"\n', "[dev] names en; it needs a file"),
                           ('[languages]\nen = "a"\nxx = "b"\n[links]\nen = "l"\n', "[links] names 'en'"),
                           # wrong types were accepted (issue 63, minor): a number as dictionary, true as links_base
                           ('dictionary = 5\n[languages]\nen = "a"\nxx = "b"\n', "dictionary = 5: give \"identical\""),
                           ('links_base = true\n[languages]\nen = "a"\nxx = "b"\n', "links_base must be 0 or 1")):
        with pytest.raises(MinimultError, match=fragment.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")) as e:
            parse_spec(manifest(tmp_path, text))
        assert "\n" not in str(e.value)


def test_prepare_counts_what_is_cut_in_every_language(tmp_path, lines):
    """`prepare`'s summary counts the sentences cut to the window in every language's text, not only the first's:
    one xx training line made longer than the window is counted, and the table says its row is the first language's."""
    long = [cipher(line) for line in ENGLISH]
    long[0] = " ".join([long[0]] * 12)  # ~250 pieces: over data.max_len - 2 = 126
    files = inline({"en": lines["en"], "xx": write(tmp_path / "xx-long.txt", long)})
    result = CliRunner().invoke(main, ["prepare", "--preset", "tiny", "--files", files, "--set", "data.vocab_size=256"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert ": 1 training and 0 dev sentences are cut to fit" in out, out
    assert "the first language's)" in next(line for line in out.splitlines() if line.startswith("train ("))


def test_a_vocabulary_the_text_fills_less_than_half_is_named_with_the_size_that_fits(tmp_path, lines):
    """A small text gives far fewer WordPiece entries than data.vocab_size's ids (the default 2,048): prepare says
    so and names the size that fits, at which it says nothing."""
    files = inline(lines)
    said = CliRunner().invoke(main, ["prepare", "--preset", "tiny", "--files", files]).output
    counts = next(line for line in said.splitlines() if line.startswith("vocabularies:"))
    entries = max(int(n) for n in re.findall(r"(\d+) entries", counts))
    assert f"note: this text gives {entries} vocabulary entries for the 2,048 ids" in said, said
    assert f"--set data.vocab_size={entries} fits the model to this text" in said
    fitted = CliRunner().invoke(main, ["prepare", "--preset", "tiny", "--files", files, "--set",
                                       f"data.vocab_size={entries}"]).output
    assert "note: this text" not in fitted and counts in fitted, fitted  # the same entries: the text's all


def test_toml_files_saved_with_a_byte_order_mark_read_as_without(tmp_path, lines):
    """A manifest and a grid saved by an editor that writes a UTF-8 byte order mark (Windows Notepad) read as the
    same files without it, as every other file the lab reads does."""
    from minimult.sweep.grid import load_grid

    text = f'[languages]\nen = "{lines["en"]}"\nxx = "{lines["xx"]}"\n'
    plain, marked = tmp_path / "plain.toml", tmp_path / "marked.toml"
    plain.write_text(text, encoding="utf-8")
    marked.write_text(text, encoding="utf-8-sig")
    assert parse_spec(str(marked)).languages == parse_spec(str(plain)).languages == ("en", "xx")
    grid = (ROOT / "experiments" / "table1.toml").read_text(encoding="utf-8")
    (tmp_path / "grid.toml").write_text(grid, encoding="utf-8-sig")
    assert load_grid(tmp_path / "grid.toml").settings == load_grid(ROOT / "experiments" / "table1.toml").settings


def test_settings_that_do_not_fit_the_files_are_one_line(lines):
    files = inline(lines)
    for more, fragment in (({"data.n_langs": 2},
                            "data.parallel.files names 3 languages (en, xx, yy); got data.n_langs=2"),
                           ({"data.train": "x.txt"}, "--train-file and --dev-file do not apply"),
                           ({"data.files": ""}, "reads the files named by --files")):
        with pytest.raises(MinimultError, match=fragment.replace("(", r"\(").replace(")", r"\)")) as e:
            resolve("tiny", {**settings(files), **more})
        assert "\n" not in str(e.value)
    with pytest.raises(MinimultError, match="--source shift does not read them"):
        resolve("tiny", {"data.files": files})
    with pytest.raises(MinimultError, match="'e l' is not a language name"):
        parse_spec(f"e l={lines['en']},xx={lines['xx']}")


# ---------------------------------------------------------------------------------------------
# Runs


def test_three_language_run_trains_and_evaluates_every_pair(tmp_path):
    from minimult.evaluate import evaluate_run

    files = three_languages(tmp_path)
    run = train_run(tmp_path, "three", files, "lang-pos")
    assert [l.id_offset for l in run.data.layouts] == [0, 256, 512]
    assert [l.position_offset for l in run.data.layouts] == [0, 128, 256]
    said = []
    results = evaluate_run(run, log=said.append)
    pairs = results["pairs"]
    assert list(pairs) == ["en-xx", "en-yy"]
    for pair in pairs.values():
        for layer in pair["layers"].values():
            assert 0 <= layer["retrieval"] <= 1 and 0 <= layer["order_distance"] <= 1
    xx, yy = pairs["en-xx"], pairs["en-yy"]
    # xx has a dictionary and gold links; yy neither: "–" with one line each, never a 0
    assert xx["dictionary_entries"] > 20 and xx["mu"] is not None and xx["alignment_gold"] == "gold"
    assert all(0 <= l["translation"] <= 1 and 0 <= l["align_f1"] <= 1 for l in xx["layers"].values())
    assert xx["gold_links"] == sum(len(line.split()) for line in ENGLISH[100:])
    assert yy["dictionary_entries"] == 0 and yy["mu"] is None
    assert all(l["translation"] is None and l["align_f1"] is None for l in yy["layers"].values())
    assert sum("translation (en-yy) skipped" in s for s in said) == 1
    assert sum("alignment (en-yy) skipped" in s for s in said) == 1
    assert not any(s.startswith(("eval: alignment (en-yy) done", "eval: translation (en-yy) done")) for s in said)
    assert any(s.startswith("eval: alignment (en-xx) done") for s in said)  # the pair with gold: as before
    ppl = results["perplexity"]["dev_languages"]
    assert set(ppl) == {"en", "xx", "yy"} and all(x > 1 for x in ppl.values())
    assert len(results["probe"]["sentence"]) == 3  # layers 0..2, over all three languages
    from minimult.evaluate import summary_table

    table = summary_table(results)
    assert "µ (layers 0 and 1) = " in table and "n/a" not in table.split("µ (layers")[1].split("\n")[0]
    assert table.splitlines()[1] == "pair en-xx below; en-yy µ n/a (every pair's numbers: results.json's \"pairs\")"
    assert yy["dev_sentences_cut"] == 0  # recorded where alignment had no gold too


def test_links_past_a_dev_set_cut_by_dev_sentences_are_left_out_and_counted(tmp_path):
    """The manifest's link file covers its 20 dev pairs; a run that keeps the first 12 (data.dev_sentences, as the
    tiny preset keeps 200 of `minimult verses`' 400) reads the links of those and counts the rest."""
    from minimult.data.prepare import summary

    files = three_languages(tmp_path)
    cfg, mods = resolve("tiny", settings(files, **{"data.dev_sentences": 12}))
    prepared = RunData(cfg, mods).prepare(quiet)
    stats = prepared.stats["parallel"]
    words = [len(line.split()) for line in ENGLISH[100:]]
    assert stats["splits"]["dev"]["pairs"] == 12
    assert stats["links"]["xx"]["links"] == sum(words[:12]) and stats["links"]["xx"]["past_the_cut"] == sum(words[12:])
    assert f"; {sum(words[12:]):,} on pairs past the run's dev pairs (cut to data.dev_sentences) left out" in \
        summary(prepared)


def test_link_lang_scores_a_link_file_against_the_language_it_names(tmp_path, lines):
    """In a run of en, xx and zz (every English sentence after the word "so"), a file linking English word i to
    zz's word i + 1 is read against zz's words (`--link-lang zz`): its last links name a word xx does not have."""
    from minimult.evaluate import evaluate_run

    zz = write(tmp_path / "zz.txt", [f"so {line}" for line in ENGLISH])
    run = train_run(tmp_path, "three", inline({"en": lines["en"], "xx": lines["xx"], "zz": zz}))
    dev = run.data.prepared.dev.verse_ids.tolist()
    shifted = write(tmp_path / "en-zz.pharaoh", [" ".join(f"{i}-{i + 1}" for i in range(len(ENGLISH[v - 1].split())))
                                                 if v in dev else "" for v in range(1, 121)])
    scored = evaluate_run(run, log=quiet, link_file=str(shifted), link_base=0, link_lang="zz", only=("links",),
                          write=False)["links"]
    assert scored["pair"] == "en-zz" and scored["verses"] == len(dev) and scored["outside_window"] == 0
    assert scored["links"] == sum(len(ENGLISH[v - 1].split()) for v in dev)
    with pytest.raises(MinimultError, match="word index out of range"):  # xx, the default: one word short
        evaluate_run(run, log=quiet, link_file=str(shifted), link_base=0, only=("links",), write=False)
    for name, fragment in (("en", "but the first (en): xx, zz"), ("qq", "--link-lang 'qq'")):
        with pytest.raises(MinimultError, match=re.escape(fragment)):
            evaluate_run(run, log=quiet, link_file=str(shifted), link_base=0, link_lang=name, write=False)
    result = CliRunner().invoke(main, ["eval", str(run.path), "--links", str(shifted), "--link-base", "0",
                                       "--link-lang", "zz"])
    assert result.exit_code == 0 and result.stdout.count("word alignment of en-zz against gold links") == 1
    for args in (["--link-lang", "zz"], ["--hf", str(tmp_path), "--pair", str(zz), str(zz), "--links", str(shifted),
                                          "--link-base", "0", "--link-lang", "zz"]):
        result = CliRunner().invoke(main, ["eval", *args] if "--hf" in args else ["eval", str(run.path), *args])
        assert result.exit_code == 2 and "--link-lang" in result.stderr.strip().splitlines()[-1], result.output


def test_every_mod_that_works_on_en_es_works_on_parallel_files(tmp_path):
    from minimult.mods import registered

    files = three_languages(tmp_path)
    tried = []
    for mod in registered():
        spec = mod.spec(mod.default)
        try:
            resolve("tiny", {"data.source": "en-es", "data.vocab_size": 256, "data.n_langs": 3}, spec)
        except MinimultError:
            continue
        tried.append(mod.name)
        cfg, active = resolve("tiny", settings(files), "inv-order=yy" if mod.name == "inv-order" else spec)
        sides = RunData(cfg, active).views("train") if mod.name != "knn-replace" else None
        if mod.name == "inv-order":  # inv-order=NAME reverses that language only
            base = RunData(*resolve("tiny", settings(files))).views("train")
            np.testing.assert_array_equal(sides[1].ids, base[1].ids)
            np.testing.assert_array_equal(sides[2].sentence(0), base[2].sentence(0)[::-1])
    assert {"lang-pos", "shift-special", "inv-order", "no-parallel", "knn-replace", "permute", "unigram"} <= set(tried)


@pytest.mark.parametrize("seed_dictionary", ["unsupervised", "identical", "dictionary"])
def test_knn_replace_builds_its_table_from_parallel_files(tmp_path, seed_dictionary):
    files = three_languages(tmp_path)
    if seed_dictionary == "dictionary":  # every pair needs one: yy has none yet
        cfg, active = resolve("tiny", settings(files, **{"knn.dim": 16, "knn.seed_dictionary": "dictionary"}),
                              "knn-replace=2")
        data = RunData(cfg, active)
        with pytest.raises(MinimultError, match="no dictionary for en-yy"):
            active[0].mod.build(data, data.train_views, cfg, 2, quiet)
        write(tmp_path / "en-yy.dict", [f"{w}\t{w}" for w in ("God", "Word", "the", "and", "was", "he", "of")])
        Path(files).write_text(Path(files).read_text().replace('[dictionary]\n', '[dictionary]\nyy = "en-yy.dict"\n'))
    cfg, active = resolve("tiny", settings(files, **{"knn.dim": 16, "knn.seed_dictionary": seed_dictionary}),
                          "knn-replace=2")
    data = RunData(cfg, active)
    table = next(a for a in active if a.mod.build is not None).mod.build(data, data.train_views, cfg, 2, quiet)[
        "neighbours"]
    V = cfg.data.vocab_size
    en_rows = table[5:V][(table[5:V, 0] >= 0)]
    assert len(en_rows) > 50 and (en_rows >= V).all()  # an English id's neighbours are in the other languages
    xx_rows = table[V:2 * V][(table[V:2 * V, 0] >= 0)]
    assert len(xx_rows) > 50 and (xx_rows < V).all()  # and xx's in English


def test_shared_vocabulary_puts_every_language_in_one_block(tmp_path, lines):
    cfg, active = resolve("tiny", settings(inline(lines), **{"data.shared_vocab": True}))
    data = RunData(cfg, active)
    assert [l.id_offset for l in data.layouts] == [0, 0, 0] and cfg.model.vocab_size == 3 * 256
    en, xx, yy = data.views("train")
    assert set(yy.ids.tolist()) == set(en.ids.tolist())  # the same words reversed: the same pieces
    assert data.source.text_inputs(cfg.data) == {n: {"tokenizer": "", "unicode_shift": False} for n in ("en", "xx", "yy")}
    with pytest.raises(MinimultError, match="shift-special needs languages with their own ids"):
        resolve("tiny", settings(inline(lines), **{"data.shared_vocab": True}), "shift-special")


def test_a_grid_sweeps_parallel_files_with_absolute_paths(tmp_path, lines, monkeypatch):
    from minimult.sweep.grid import load_grid
    from minimult.sweep.plan import plan

    monkeypatch.chdir(tmp_path)
    (tmp_path / "g.toml").write_text("""
title = "parallel grid"
preset = "tiny"
[overrides]
"data.source" = "parallel"
"data.files" = "en=en.txt,xx=xx.txt,yy=yy.txt"
"data.vocab_size" = 256
[[settings]]
id = "0"
name = "original"
mods = ""
[[settings]]
id = "3yy"
name = "yy reversed"
mods = "inv-order=yy"
""")
    tasks = plan(load_grid(tmp_path / "g.toml"), [0], "tiny", tmp_path / "runs", {})
    assert [t.mods for t in tasks] == ["original", "inv-order=yy"]
    for t in tasks:
        assert t.config["data"]["n_langs"] == 3 and t.config["data"]["source"] == "parallel"
        assert t.config["data"]["parallel"]["files"] == ",".join(f"{n}={lines[n]}" for n in ("en", "xx", "yy"))


# ---------------------------------------------------------------------------------------------
# Link files


def test_pharaoh_and_native_link_files_give_the_same_f1(tmp_path, lines):
    from minimult.evaluate import evaluate_run

    two = {n: lines[n] for n in ("en", "xx")}
    run = train_run(tmp_path, "two", inline(two))
    dev = run.data.prepared.dev.verse_ids.tolist()  # the line numbers of the dev pairs: 109..120
    words = {i: len(ENGLISH[i - 1].split()) for i in dev}
    # the same links in four files: sure i-i, every third possible; native, Pharaoh from 0 and from 1 (both
    # spellings of a possible link), and Pharaoh with an empty line for every pair before the dev set
    native = write(tmp_path / "dev.links", [f"{v}\t{i}\t{i}\t{'P' if i % 3 == 0 else 'S'}" for v in dev
                                            for i in range(words[v])])
    pairs = {v: [(i, "P" if i % 3 == 0 else "S") for i in range(words[v])] for v in dev}
    zero = write(tmp_path / "dev0.pharaoh", [" ".join(f"{i}-{i}" + ("-P" if k == "P" else "") for i, k in pairs[v])
                                             if v in pairs else "" for v in range(1, 121)])
    one = write(tmp_path / "dev1.pharaoh", ["# silver, from the cipher"] + [
        " ".join(f"{i + 1}?{i + 1}" if k == "P" else f"{i + 1}-{i + 1}" for i, k in pairs[v]) if v in pairs else ""
        for v in range(1, 121)])
    scores = {}
    for path, base in ((native, None), (zero, 0), (one, 1)):
        r = evaluate_run(run, log=quiet, link_file=str(path), link_base=base, only=("links",), write=False)["links"]
        scores[path.name] = r
    first = scores["dev.links"]
    assert first["links"] == sum(words.values()) and first["verses"] == len(dev)
    from minimult.evaluate.links import table
    assert table(first).startswith(f"word alignment of en-xx against gold links {native} ({len(dev)} sentence pairs")
    for name, r in scores.items():
        assert r["layers"] == first["layers"] and r["diagonal"] == first["diagonal"], name
    assert first["diagonal"]["f1"] == 1.0  # the cipher keeps the words in their order
    assert (scores["dev0.pharaoh"]["format"], scores["dev1.pharaoh"]["base"]) == ("pharaoh", 1)
    assert scores["dev1.pharaoh"]["kind"] == "silver" and scores["dev0.pharaoh"]["kind"] == "gold"
    bad = [("1-1", None, "say whether its word indices count from 0 or from 1"),
           ("0-1", 1, "has index 0 but the file's indices count from 1"),
           ("1~1", 0, "'1~1': use i-j or i-j-S (sure)")]
    for link, base, fragment in bad:
        path = write(tmp_path / "bad.pharaoh", [""] * 108 + [link])
        with pytest.raises(MinimultError, match=fragment.replace("(", r"\(").replace(")", r"\)")) as e:
            evaluate_run(run, log=quiet, link_file=str(path), link_base=base, only=("links",), write=False)
        assert "\n" not in str(e.value)
    train_pair = write(tmp_path / "train-pair.pharaoh", ["0-0"])
    with pytest.raises(MinimultError, match=f"{train_pair}:1: the line addresses pair 1, which is not among the "
                                            f"run's {len(dev)} development pairs, ids {min(dev)} to {max(dev)}"):
        evaluate_run(run, log=quiet, link_file=str(train_pair), link_base=0, only=("links",), write=False)
    result = CliRunner().invoke(main, ["eval", str(run.path), "--links", str(zero)])
    assert result.exit_code == 2 and "--link-base 0|1" in result.stderr.strip().splitlines()[-1]
    result = CliRunner().invoke(main, ["eval", str(run.path), "--links", str(native)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("word alignment of en-xx against gold links") == 1 and "n/a" not in result.stdout


# ---------------------------------------------------------------------------------------------
# Transfer on a task directory


def _task(tmp_path, names=("en", "xx", "yy"), label=None) -> Path:
    """Sentences labelled by what they hold (God / him / neither): train and dev in English, test in every
    language (the English test sentences written in each language's way)."""
    label = label or (lambda line: "god" if "God" in line.split() else "him" if "him" in line.split() else "other")
    d = tmp_path / "task"
    d.mkdir(exist_ok=True)
    rows = [(label(line), line) for line in ENGLISH]
    ways = {"en": str, "xx": cipher, "yy": reverse}
    write(d / "train.tsv", [f"{y}\t{t}" for y, t in rows[:80]])
    write(d / "dev.tsv", [f"{y}\t{t}" for y, t in rows[80:100]])
    for name in names:
        write(d / f"test.{name}.tsv", [f"{y}\t{ways[name](t)}" for y, t in rows[100:]])
    return d


def test_transfer_on_a_task_directory_gives_delta_per_language(tmp_path, lines):
    from minimult.config import TransferConfig
    from minimult.evaluate.transfer import transfer_run

    # yy's text is English's itself here: under one shared vocabulary without lang-pos the model cannot tell
    # the two apart, so yy's zero-shot accuracy is English's exactly and its ∆ is 0
    same = dict(lines, yy=write(lines["yy"], ENGLISH))
    run = train_run(tmp_path, "shared", inline(same), **{"data.shared_vocab": True})
    task = _task(tmp_path, label=None)
    write(task / "test.yy.tsv", (task / "test.en.tsv").read_text().splitlines())
    cfg = TransferConfig(modes="full,frozen", seeds=2, epochs=1, task=str(task))
    results = transfer_run(run, cfg, "cpu", log=quiet)["transfer"]
    assert results["task"]["name"] == "task task" and results["task"]["classes"] == ["god", "him", "other"]
    assert results["languages"] == ["en", "xx", "yy"]
    assert results["task"]["sentences"] == {"train": 80, "dev": 20, "test.en": 20, "test.xx": 20, "test.yy": 20}
    for mode, m in results["modes"].items():
        assert set(m["languages"]) == {"xx", "yy"}
        assert m["languages"]["yy"]["zero_shot"] == m["en"] and m["languages"]["yy"]["delta"] == 0, mode
        assert m["languages"]["xx"]["delta"] == pytest.approx(m["en"] - m["languages"]["xx"]["zero_shot"])
        assert (m["zero_shot"], m["delta"]) == (m["languages"]["xx"]["zero_shot"], m["languages"]["xx"]["delta"])
    test = np.array(list(results["task"]["class_counts"]["test.en"].values()))
    assert results["baselines"]["majority"] == pytest.approx(
        test[results["task"]["classes"].index(results["baselines"]["majority_class"])] / test.sum())
    saved = json.loads((run.path / "results.json").read_text())["transfer"]
    assert saved["task"]["sha256"] == results["task"]["sha256"]
    # the New Testament part task afterwards replaces the block rather than mixing its modes with these
    from minimult.evaluate.transfer import combine

    nt = {**results, "task": {"name": "nt-part", "version": 1, "classes": ["a", "b"]},
          "modes": {"frozen": results["modes"]["frozen"]}}
    assert list(combine(results, nt)["modes"]) == ["frozen"]


@pytest.mark.parametrize("case, fragment", [
    ("unknown label", "test.xx.tsv:3: label 'angels' is not among train.tsv's labels (god, him, other)"),
    ("missing language", "has no test.yy.tsv: a task directory holds the test sentences of language 'yy'"),
    ("language the run lacks", "test.de.tsv: the run has no language 'de'"),
    ("no tab", "dev.tsv:2: 'just words' is not label<TAB>text"),
    ("a file", "task directory is a file, not a folder: "),
])
def test_a_bad_task_directory_is_one_line(tmp_path, lines, case, fragment):
    run = train_run(tmp_path, "run", inline(lines), **{"train.epochs": 1})
    d = _task(tmp_path, names=("en", "xx") if case == "missing language" else ("en", "xx", "yy"))
    if case == "unknown label":
        rows = (d / "test.xx.tsv").read_text().splitlines()
        write(d / "test.xx.tsv", rows[:2] + ["angels\t" + rows[2].split("\t")[1]] + rows[3:])
    if case == "language the run lacks":
        write(d / "test.de.tsv", ["god\tGott"])
    if case == "no tab":
        rows = (d / "dev.tsv").read_text().splitlines()
        write(d / "dev.tsv", rows[:1] + ["just words"] + rows[1:])
    given = d / "train.tsv" if case == "a file" else d
    result = CliRunner().invoke(main, ["transfer", str(run.path), "--task", str(given), "--modes", "frozen"])
    lines_out = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines_out) == 1 and lines_out[0].startswith("error: "), result.output
    assert fragment in lines_out[0]


# ---------------------------------------------------------------------------------------------
# Exports


def test_a_parallel_run_exports_and_eval_hf_langs_reads_each_language_as_trained(tmp_path, lines):
    """A lang-pos run whose corpus was lowercased: the export carries each language's tokenizer (lowercasing
    raw text as the corpus was) and layout, so eval --hf --langs on the dev pairs, in their original case,
    gives the run's own numbers. The second language is named `el`, which sorts before `en`: the export's config
    holds its languages with sorted keys, and the run's order is their layouts'."""
    from minimult.evaluate import evaluate_run
    from minimult.evaluate.hf import evaluate_hf

    path = manifest(tmp_path, f'lowercase = true\n[languages]\nen = "{lines["en"].name}"\nel = "{lines["xx"].name}"\n')
    run = train_run(tmp_path, "lower", path, "lang-pos")
    proc = cli("export", run.path, "--hf", tmp_path / "hf")
    assert proc.returncode == 0, proc.stderr
    from transformers import AutoConfig

    record = AutoConfig.from_pretrained(str(tmp_path / "hf")).minimult_languages
    assert list(record) == ["el", "en"] and record["el"]["tokenizer"] == "el" and record["el"]["layout"]["lang"] == 1
    assert record["el"]["layout"]["id_offset"] == 256 and record["el"]["layout"]["position_offset"] == 128
    assert (tmp_path / "hf" / "el" / "tokenizer.json").read_bytes() == (run.path / "el" / "tokenizer.json").read_bytes()
    dev = run.data.prepared.dev.verse_ids.tolist()
    pair = [write(tmp_path / f"dev.{n}", [p.read_text().splitlines()[i - 1] for i in dev]) for n, p in
            (("en", lines["en"]), ("xx", lines["xx"]))]
    assert any(c.isupper() for c in pair[0].read_text())  # raw text: the tokenizer lowercases it
    native = evaluate_run(run, log=quiet, write=False)
    theirs = evaluate_hf(tmp_path / "hf", *pair, langs=("en", "el"), device="cpu", log=quiet)
    for layer in native["layers"]:
        for key in ("retrieval", "retrieval_backward", "order_distance"):
            assert theirs["layers"][layer][key] == pytest.approx(native["layers"][layer][key], abs=1e-6), key
    assert theirs["perplexity"]["dev"] == pytest.approx(native["perplexity"]["dev"], rel=1e-4)
    assert theirs["perplexity"]["dev_languages"] == pytest.approx(native["perplexity"]["dev_languages"], rel=1e-4)
    with pytest.raises(MinimultError, match="tokenizers of their own"):
        evaluate_hf(tmp_path / "hf", *pair, device="cpu", log=quiet)
    # one set of links, as the run's pair ids (native) and as the pair files' lines (Pharaoh, 1-based): the same F1
    native_links = write(tmp_path / "dev.links", [f"{v}\t{i}\t{i}" for v in dev for i in range(len(ENGLISH[v - 1].split()))])
    pharaoh = write(tmp_path / "dev.pharaoh", [" ".join(f"{i}-{i}" for i in range(1, len(ENGLISH[v - 1].split()) + 1))
                                              for v in dev])
    ours = evaluate_run(run, log=quiet, link_file=str(native_links), only=("links",), write=False)["links"]
    hf_links = evaluate_hf(tmp_path / "hf", *pair, langs=("en", "el"), link_file=pharaoh, link_base=1, device="cpu",
                           log=quiet)["links"]
    for layer, scores in ours["layers"].items():
        assert hf_links["layers"][layer]["f1"] == pytest.approx(scores["f1"], abs=1e-6)
    assert hf_links["diagonal"] == ours["diagonal"]
    assert hf_links["links"] == ours["links"] > 100


# ---------------------------------------------------------------------------------------------
# The source's name: data.source, with data.fake (--fake) still read


def test_the_old_name_of_the_source_still_reads():
    assert resolve("tiny", {"data.fake": "unicode"})[0].data.source == "unicode"
    cfg = resolve("tiny", {"data.source": "unicode"})[0]
    assert cfg.data.fake == "unicode" and "fake" not in cfg.to_dict()["data"]
    old = json.loads((ROOT / "experiments/results/real-quick/0-original-s0/config.json").read_text())
    assert old["data"]["fake"] == "en-es" and "source" not in old["data"]
    loaded = RunConfig.from_dict(old)
    assert loaded.data.source == "en-es"
    # what hashes read (the report's fingerprint) is the stored form: the old key, nothing added
    assert comparable(loaded.to_dict())["data"] == old["data"]
    from minimult.report.collect import _fingerprint

    assert _fingerprint(old) == _fingerprint(loaded.to_dict())
    committed = sorted((ROOT / "experiments" / "results").glob("*/*/config.json"))
    assert len(committed) > 100
    elsewhere = []
    for path in committed:  # every committed run's config loads, its source under the new name
        stored = json.loads(path.read_text())
        files = stored["data"].get("files", "")
        if is_manifest(files) and not Path(files).is_file():  # a manifest on the machine that trained it
            elsewhere.append(path.parent.parent.name)  # (a config with files loads where they are)
            continue
        cfg = RunConfig.from_dict(stored)
        assert cfg.data.source == stored["data"].get("fake", stored["data"].get("source")), path
        data = comparable(cfg.to_dict())["data"]  # what hashes read: the stored values, no new key
        expected = {("fake" if k == "source" else k): v for k, v in stored["data"].items()}
        assert "source" not in data and ("files" in data) == bool(stored["data"].get("files")), path
        assert all(data[k] == v for k, v in expected.items() if k in data), path  # keys since dropped aside
    assert set(elsewhere) <= {"parallel-quick"}  # README's worked example: `minimult verses` output, not committed
    runner = CliRunner()
    tiny = ["--train-file", str(TINY_TRAIN), "--dev-file", str(TINY_DEV), "--preset", "tiny", "--examples", "0"]
    a = runner.invoke(main, ["prepare", "--fake", "unicode", *tiny])
    b = runner.invoke(main, ["prepare", "--source", "unicode", *tiny])
    assert a.exit_code == b.exit_code == 0 and a.stdout.splitlines()[-1].replace("built", "reused") == \
        b.stdout.splitlines()[-1]


@pytest.mark.parametrize("root, grid", [("real-quick", "real.toml"), ("structure-quick", "structure.toml")])
def test_committed_run_folders_are_still_complete_for_their_sweep(root, grid):
    """The committed runs were made with data.fake; planned again from their grid (as run_all.sh sweeps them,
    one thread per run), every folder is recognised as the same configuration and as complete."""
    from minimult.sweep.grid import load_grid
    from minimult.sweep.plan import plan, state

    folder = ROOT / "experiments" / "results" / root
    manifest_ = json.loads(next(folder.glob("*.sweep.json")).read_text())
    seeds = sorted({int(r.rsplit("-s", 1)[1]) for s in manifest_["settings"] for r in s["runs"]})
    tasks = [t for t in plan(load_grid(ROOT / "experiments" / grid), seeds, manifest_["preset"], folder,
                             {"train.threads": 1}) if Path(t.run_dir).is_dir()]
    assert len(tasks) > 10
    assert all("fake" in json.loads((Path(t.run_dir) / "config.json").read_text())["data"] for t in tasks)
    assert [state(t) for t in tasks] == ["complete"] * len(tasks)


# ---------------------------------------------------------------------------------------------
# The worked example: en-es's verses from files give en-es's data


def test_en_es_verses_written_to_files_give_en_es_s_ids_gold_and_dictionary(tmp_path, fixture_modules, monkeypatch):
    """`minimult verses` writes what --source en-es reads (here the fixture's verses); read back through the
    parallel source, with en-es's vocabularies shipped (as corpora/vocabularies ships them for its texts), every
    language's ids, the gold of the dev pairs and the dictionary are en-es's own, so runs of the two routes
    train and score alike."""
    from minimult.data import vocab as vocab_mod

    monkeypatch.setattr(vocab_mod, "SHIPPED", tmp_path / "shipped")
    enes_cfg, active = resolve("tiny", {"data.source": "en-es", "data.vocab_size": 256})
    enes = RunData(enes_cfg, active)
    train, _ = enes.source.corpora(enes_cfg.data, quiet)
    vocab_mod.ship_vocab(enes.prepared.vocab, train.sentences, "en-es", "test")
    vocab_mod.ship_vocab(enes.source.spanish_vocab(enes.prepared, enes_cfg.data), train.second, "en-es", "test es")
    result = CliRunner().invoke(main, ["verses", str(tmp_path / "files"), "--train-verses",
                                       str(enes_cfg.data.train_sentences), "--dev-verses", str(enes_cfg.data.dev_sentences)])
    assert result.exit_code == 0, result.output
    assert f"wrote {len(enes.prepared.train)} training and {len(enes.prepared.dev)} dev verse pairs" in result.stdout
    cfg, active = resolve("tiny", settings(str(tmp_path / "files" / "corpus.toml")))
    files = RunData(cfg, active)
    assert files.prepared.vocab_hash == enes.prepared.vocab_hash  # the shipped vocabularies of both languages
    assert list(files.prepared.stats["parallel"]["shipped_vocabularies"]) == ["es"]
    for split in ("train", "dev"):
        for ours, theirs in zip(files.views(split), enes.views(split)):
            np.testing.assert_array_equal(ours.ids, theirs.ids)
            np.testing.assert_array_equal(ours.offsets, theirs.offsets)
            if split == "dev":
                np.testing.assert_array_equal(ours.gold, theirs.gold)  # the silver links, from the Pharaoh file
    np.testing.assert_array_equal(files.prepared.train.verse_ids, enes.prepared.train.verse_ids)  # keyed by verse
    for ours, theirs in zip(files.dictionary(), enes.dictionary()):
        np.testing.assert_array_equal(ours.ids, theirs.ids)
    assert len(enes.dictionary()[0].ids) > 0
    np.testing.assert_array_equal(files.random_ids(), enes.random_ids())
    assert files.source.alignment_gold_of(1, cfg.data) == "silver"
    # no task directory of the Gospel verses: the fixture's are all Matthew's, and a task needs two labels (transfer
    # refuses one); the line says why and what gives one
    assert not (tmp_path / "files" / "gospels").exists() and "--task" not in result.stdout
    assert "no gospels/ task (its training verses are all from matthew: a task needs two; more --train-verses" \
        in result.stdout


def test_verses_writes_a_task_of_the_gospels_its_verses_are_from_split_by_verse(tmp_path, fixture_modules,
                                                                                  monkeypatch):
    """`minimult verses`' gospels/ task, from the fixture's Matthew verses with the later half given Mark's ids:
    two labels, each verse in one split (the New Testament part task's split), the test verses in both languages."""
    import dataclasses

    from minimult.data.sources import en_es
    from minimult.data.tasks import verse_split

    def two_gospels(*args):
        train, dev = aligned(*args)
        half = len(train.verse_ids) // 2  # the later half: book 40 (Matthew) -> 41 (Mark)
        ids = [v + 1_000_000 * (i >= half) for i, v in enumerate(train.verse_ids)]
        return dataclasses.replace(train, verse_ids=type(train.verse_ids)(ids)), dev

    aligned = en_es.aligned_corpora
    monkeypatch.setattr(en_es, "aligned_corpora", two_gospels)
    counts = en_es.write_files(tmp_path / "files", None, 5)
    task = tmp_path / "files" / "gospels"
    parts = {name: [line.split("\t") for line in (task / name).read_text().splitlines()]
             for name in ("train.tsv", "dev.tsv", "test.en.tsv", "test.es.tsv")}
    train, _ = two_gospels(None, 5, lambda s: None)
    verses = [(v, w) for v, w in zip(train.verse_ids, train.sentences) if v // 1_000_000 in (40, 41)]  # Gospels'
    split = verse_split(np.array([v for v, _ in verses], dtype=np.int64))
    assert [len(parts[n]) for n in ("train.tsv", "dev.tsv", "test.en.tsv")] == [int((split == k).sum()) for k in range(3)]
    assert counts["gospel_verses"] == len(verses) > 20 and counts["gospel_labels"] == ["mark", "matthew"]
    expected = ["mark" if v // 1_000_000 == 41 else "matthew" for v, _ in verses]
    assert [l for l, _ in parts["train.tsv"]] == [l for l, k in zip(expected, split) if k == 0]
    assert [l for l, _ in parts["test.en.tsv"]] == [l for l, _ in parts["test.es.tsv"]]
    assert [t for _, t in parts["test.en.tsv"]] == [" ".join(w) for (_, w), k in zip(verses, split) if k == 2]


def test_text_too_large_for_the_memory_available_is_refused_in_one_line_before_it_is_read(tmp_path, lines, monkeypatch):
    """prepare's pre-flight check (parallel.check_memory): MEMORY_PER_BYTE x the files' bytes against MemAvailable,
    here a monkeypatched /proc/meminfo; refused: one error line saying what to do, nothing read or written;
    with enough memory (or a meminfo without MemAvailable) the same files prepare as before."""
    from minimult.data import parallel

    files = inline({k: lines[k] for k in ("en", "xx")})
    total = sum(lines[k].stat().st_size for k in ("en", "xx"))
    meminfo = tmp_path / "meminfo"
    monkeypatch.setattr(parallel, "MEMINFO", meminfo)
    cache = tmp_path / "cache"
    monkeypatch.setenv("MINIMULT_CACHE", str(cache))
    need_kb = parallel.MEMORY_PER_BYTE * total // 1024
    meminfo.write_text(f"MemTotal: 99999999 kB\nMemAvailable: {need_kb // 2} kB\n")
    read, reader = [], parallel._read  # every file is read through it (line by line or whole)
    monkeypatch.setattr(parallel, "_read", lambda *a, **k: read.append(a) or pytest.fail("read despite the check"))
    result = cli("prepare", "--files", files, "--set", "data.vocab_size=256")
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error:"), result.stderr
    assert "GiB is available" in errors[0] and "head -n N" in errors[0] and "data.train_sentences" in errors[0]
    assert not read and "reading" not in result.stdout
    assert not cache.exists() or not list(cache.iterdir())  # no cache entry, no temp folder left
    monkeypatch.setattr(parallel, "_read", reader)
    for text in (f"MemAvailable: {need_kb * 2 + 1} kB\n", "MemTotal: 1 kB\n"):  # fits; says nothing
        meminfo.write_text(text)
        spec = parse_spec(files)
        parallel.check_memory(spec)
    result = cli("prepare", "--files", files, "--set", "data.vocab_size=256")
    assert result.returncode == 0, result.stdout + result.stderr


def test_memory_check_counts_the_token_arrays_of_line_aligned_files_and_the_words_of_keyed_ones(tmp_path, lines,
                                                                                                 monkeypatch):
    """Line-aligned files are read line by line (MEMORY_PER_BYTE a byte: the token arrays); keyed files are read
    whole (KEYED_MEMORY_PER_BYTE, as their first line shows): memory between the two passes the first, refuses
    the second in one line that says why."""
    from minimult.data import parallel

    keyed = {n: write(tmp_path / f"{n}.k.txt", [f"{i}\t{t}" for i, t in enumerate(p.read_text().splitlines(), 1)])
             for n, p in lines.items() if n != "yy"}
    meminfo = tmp_path / "meminfo"
    monkeypatch.setattr(parallel, "MEMINFO", meminfo)
    total = sum(p.stat().st_size for p in keyed.values())  # each keyed line is longer: this covers both
    meminfo.write_text(f"MemAvailable: {parallel.MEMORY_PER_BYTE * total * 2 // 1024} kB\n")
    assert parallel.MEMORY_PER_BYTE * 4 < parallel.KEYED_MEMORY_PER_BYTE
    parallel.check_memory(parse_spec(inline({n: lines[n] for n in ("en", "xx")})))
    with pytest.raises(MinimultError, match="keyed files are read whole") as e:
        parallel.check_memory(parse_spec(inline(keyed)))
    assert "\n" not in str(e.value) and "head -n N" in str(e.value)


def test_line_aligned_files_are_read_again_from_the_nearest_mark_as_they_were_checked(tmp_path, lines, monkeypatch):
    """Line-aligned files hold none of their text: `parallel.Lines` reads them again at each pass, seeking to
    where every MARK-th line starts (here every 7th). Whatever the mark, a byte-order mark, CRLF line ends and
    trailing blank lines, the pairs are the files' lines split into words, train and dev alike."""
    from minimult.data import parallel

    monkeypatch.setattr(parallel, "MARK", 7)
    texts = {n: p.read_text(encoding="utf-8").splitlines() for n, p in lines.items()}
    for n, p in lines.items():
        p.write_bytes(("\ufeff" + "".join(f"{t}\r\n" for t in texts[n]) + " \n\n").encode("utf-8"))
    train, dev = read_corpora(parse_spec(inline(lines)), train_limit=100)
    assert isinstance(train.sentences, parallel.Lines) and list(dev.verse_ids) == list(range(109, 121))
    for corpus in (train, dev):
        for k, name in enumerate(lines):
            assert list(corpus.language(k)) == [texts[name][i - 1].split() for i in corpus.verse_ids]
    assert train.take(50, 60, "part").others[1] == [texts["yy"][i].split() for i in range(50, 60)]
