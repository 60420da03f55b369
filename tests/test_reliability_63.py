"""Issue 63: nothing silently wrong on your own data (one test per item; the item's number in its name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hf_eval import exported  # noqa: F401  (a fixture: a trained tiny run and its HF export)

from minimult.errors import MinimultError
from minimult.runs import load_checkpoint

# Characters str.splitlines splits at and `wc -l` does not: U+2028, NEL, form feed, a lone carriage return.
ODD = ("\u2028", "\x85", "\x0c", "\r", "\u2029", "\x1c")


def _odd_lines(n: int) -> str:
    return "".join(f"line {i} with {ODD[i % len(ODD)]} inside\n" for i in range(n))


def test_item3_text_lines_splits_as_wc_l():
    from minimult.data.corpus import text_lines

    assert text_lines("a\nb\n") == ["a", "b"]
    assert text_lines("a\r\nb") == ["a", "b"]
    assert text_lines("a\u2028b\x85c\x0cd\re\n") == ["a\u2028b\x85c\x0cd\re"]
    assert text_lines("") == []
    assert text_lines("a\n\n") == ["a", ""]


def test_item3_eval_hf_pair_reads_lines_as_wc_l(tmp_path):
    from minimult.evaluate.hf import read_pair

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\ufeff" + _odd_lines(200), encoding="utf-8")
    b.write_text(_odd_lines(200).replace("\n", "\r\n"), encoding="utf-8")
    left, right = read_pair(a, b)
    assert len(left) == len(right) == 200  # was 201+ pairs: split at U+2028, NEL, form feed
    assert not left[0].startswith("\ufeff")  # the byte-order mark does not stick to the first word


def test_item3_corpus_and_task_files_read_lines_as_wc_l(tmp_path):
    from minimult.data.corpus import read_lines
    from minimult.data.tasks import _task_lines

    f = tmp_path / "c.txt"
    f.write_text(_odd_lines(12), encoding="utf-8")
    assert len(read_lines(f)) == 12
    t = tmp_path / "train.tsv"
    t.write_text("".join(f"{'ab'[i % 2]}\tline {i} {ODD[i % len(ODD)]} more\n" for i in range(12)), encoding="utf-8")
    labels, sentences = _task_lines(t, str.split)
    assert len(labels) == 12


def test_item3_parallel_files_and_link_files_share_the_helper(tmp_path):
    import minimult.data.links as links
    import minimult.data.parallel as parallel
    from minimult.data.corpus import text_lines

    assert links.text_lines is text_lines and parallel.text_lines is text_lines
    assert not hasattr(links, "_lines")  # one helper, no copy
    f = tmp_path / "en.txt"
    f.write_text(_odd_lines(7), encoding="utf-8")
    assert len(parallel._lines(f, "en")) == 7


# ---------------------------------------------------------------------------------------------
# item 4: a link file with possible links only


QUIET = lambda s: None  # noqa: E731


@pytest.fixture(scope="module")
def enes_run(tmp_path_factory):
    """An untrained en-es run on the fixture Bibles (module-scoped: several items score link files on it)."""
    from test_real_languages import FIXTURE, fixture_verses

    from minimult.config import resolve
    from minimult.data import sword
    from minimult.data.run_data import RunData
    from minimult.runs import Run
    from minimult.train import train

    mp = pytest.MonkeyPatch()
    mp.setattr(sword, "module_verses", fixture_verses)
    mp.setattr(sword, "module_fingerprint", lambda language: f"fixture:{FIXTURE.stat().st_size}")
    cfg, active = resolve("tiny", {"data.fake": "en-es", "data.vocab_size": 256}, "untrained")
    run = Run.create(cfg, active, tmp_path_factory.mktemp("enes") / "run", log=QUIET)
    train([run], log=QUIET)
    verses = [l.split("\t") for l in (RunData(cfg, active).prepared.path / "verses-dev.tsv").read_text(
        encoding="utf-8").splitlines()]
    yield run, verses
    mp.undo()


def test_item4_possible_links_only_score_recall_and_f1_null_and_say_so(enes_run, tmp_path):
    from minimult.evaluate import evaluate_run
    from minimult.evaluate.links import table

    run, verses = enes_run
    verse = verses[0][0]
    links = tmp_path / "possible.links"
    links.write_text(f"{verse}\t0\t0\tP\n{verse}\t1\t1\tP\n")
    lines = []
    results = evaluate_run(run.path, log=lines.append, link_file=str(links))["links"]
    assert results["f1"] is None  # was 0.0: recall 0 of no sure link
    assert results["layers"] and all(s["recall"] is None and s["f1"] is None
                                     for s in [*results["layers"].values(), results["diagonal"]])
    assert all(s["precision"] is not None for s in results["layers"].values())
    assert sum("no sure links" in l for l in lines) == 1, lines
    assert "nothing to score" in table(results)
    stored = json.loads((run.path / "results.json").read_text())["links"]
    assert stored["f1"] is None and stored["layers"]["0"]["recall"] is None


# ---------------------------------------------------------------------------------------------
# item 5: --dev-sentences with --links


def test_item5_links_record_the_dev_sentences_they_read_not_the_limit(enes_run, tmp_path):
    from minimult.evaluate import evaluate_run

    run, verses = enes_run
    links = tmp_path / "sure.links"
    links.write_text("".join(f"{v}\t0\t0\n" for v, *_ in verses))  # every dev verse
    lines = []
    results = evaluate_run(run.path, log=lines.append, link_file=str(links), dev_sentences=5)
    assert results["dev_sentences"] == 5  # what the other evaluators read
    assert results["links"]["dev_sentences"] == len(verses) and results["links"]["verses"] == len(verses)
    assert sum("--dev-sentences 5 limits every evaluator but links" in l for l in lines) == 1, lines
    with pytest.raises(MinimultError, match="leave --dev-sentences out"):
        evaluate_run(run.path, log=QUIET, link_file=str(links), dev_sentences=5, only={"links"})


# ---------------------------------------------------------------------------------------------
# item 7: `minimult verses` never overwrites a folder's files unasked, never writes into a run or export


def one_error_line(result, fragment):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: ") and fragment in lines[-1], result.stderr
    assert "Traceback" not in result.stderr


def fake_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model": {}, "data": {}, "train": {}}))
    (folder / "checkpoint.pt").write_bytes(b"weights")
    return folder


def fake_export(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]}))
    return folder


@pytest.fixture
def no_sword(monkeypatch):
    """Any read of the SWORD modules fails the test: refusals come before the work."""
    from minimult.data import sword

    def read(*a, **k):
        raise AssertionError("the verses were read")

    monkeypatch.setattr(sword, "module_verses", read)


def test_item7_verses_refuses_a_folder_with_files_unless_forced_and_any_run_or_export(tmp_path, no_sword):
    from conftest import cli

    out = tmp_path / "v"
    out.mkdir()
    (out / "corpus.toml").write_text("# edited by hand\n")
    one_error_line(cli("verses", out, "--train-verses", 400, "--dev-verses", 200), "is not empty")
    assert (out / "corpus.toml").read_text() == "# edited by hand\n"
    run = fake_run(tmp_path / "run")
    one_error_line(cli("verses", run, "--force"), "is a run folder")
    one_error_line(cli("verses", run / "v", "--force"), f"lies inside {run}, which is a run folder")
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.pt", "config.json"]
    hf = fake_export(tmp_path / "hf")
    one_error_line(cli("verses", hf / "v"), "which is a HuggingFace export")
    assert not (hf / "v").exists()


def test_item7_verses_force_rewrites_its_own_files(tmp_path, monkeypatch):
    from conftest import cli
    from test_real_languages import fixture_verses

    from minimult.data import sword

    monkeypatch.setattr(sword, "module_verses", fixture_verses)
    out = tmp_path / "v"
    first = cli("verses", out, "--dev-verses", 2)
    assert first.returncode == 0, first.stderr
    (out / "corpus.toml").write_text("# edited by hand\n")
    one_error_line(cli("verses", out, "--dev-verses", 2), "--force")
    again = cli("verses", out, "--dev-verses", 2, "--force")
    assert again.returncode == 0, again.stderr
    assert (out / "corpus.toml").read_text() != "# edited by hand\n"


def test_minor_pretrain_out_inside_a_run_or_an_export_is_refused(tmp_path):
    from conftest import cli

    run, hf = fake_run(tmp_path / "run"), fake_export(tmp_path / "hf")
    one_error_line(cli("pretrain", "--preset", "tiny", "--out", run / "inner"), f"lies inside {run}, which is a run folder")
    one_error_line(cli("pretrain", "--preset", "tiny", "--out", hf), "is a HuggingFace export")
    assert not (run / "inner").exists() and sorted(p.name for p in hf.iterdir()) == ["config.json"]


def test_minor_report_into_a_run_or_export_is_refused_and_readme_markers_are_checked_first(tmp_path):
    """`report --out/--html` into (or inside) a run or an export is refused; `report --site S --readme X` without
    X's claims markers is refused before the site is built (nothing written)."""
    from conftest import ROOT, cli

    run, hf = fake_run(tmp_path / "run"), fake_export(tmp_path / "hf")
    folder = ROOT / "experiments" / "results" / "selection-quick-b256"
    one_error_line(cli("report", folder, "--out", run / "report"), f"{run} is a run folder")
    one_error_line(cli("report", folder, "--html", hf), "is a HuggingFace export")
    readme = tmp_path / "notes.md"
    readme.write_text("no markers here\n")
    one_error_line(cli("report", "--site", tmp_path / "site", "--readme", readme), "has no line <!-- BEGIN claims -->")
    assert not (run / "report").exists() and not (tmp_path / "site").exists()


# ---------------------------------------------------------------------------------------------
# minor: "done" lines only for evaluators that ran


def test_minor_eval_says_done_only_for_evaluators_that_ran(enes_run):
    from minimult.evaluate import evaluate_run

    run, _ = enes_run
    lines = []
    evaluate_run(run.path, log=lines.append, write=False)
    done = [l.split()[1] for l in lines if l.startswith("eval: ") and " done (" in l]
    assert "retrieval" in done and "perplexity" in done, lines
    assert not {"links", "nsp", "transfer"} & set(done), done  # no link file, no NSP head, transfer not asked


# ---------------------------------------------------------------------------------------------
# minor: a folder given as a file; an empty link file


def test_minor_a_folder_given_as_a_file_says_so(tmp_path):
    from minimult.data.corpus import read_lines
    from minimult.data.links import link_format
    from minimult.data.parallel import _lines
    from minimult.data.tasks import file_task
    from minimult.evaluate.hf import read_pair

    d = tmp_path / "a-folder.txt"
    d.mkdir()
    f = tmp_path / "f.txt"
    f.write_text("one line\nanother\n")
    for call in (lambda: read_lines(d), lambda: link_format(d), lambda: _lines(d, "xx"), lambda: read_pair(d, f),
                 lambda: read_pair(f, d)):
        with pytest.raises(MinimultError, match="is a folder, not a file"):
            call()
    task = tmp_path / "task"
    task.mkdir()
    (task / "train.tsv").mkdir()
    with pytest.raises(MinimultError, match="train.tsv is a folder, not a file"):
        file_task(task, ("en", "xx"), str.split)


@pytest.mark.parametrize("text, why", [("", "it is empty"), ("# silver\n\n", "only comments"), ("\n\n", "it is empty")])
def test_minor_an_empty_link_file_says_it_holds_no_links(tmp_path, text, why):
    from minimult.data.links import link_format

    f = tmp_path / "empty.links"
    f.write_text(text)
    with pytest.raises(MinimultError, match=f"holds no links \\({why}\\)"):  # was: say whether its indices count from 0 or 1
        link_format(f)


@pytest.mark.parametrize("below", ["", "sub"])
def test_minor_minimult_cache_naming_a_file_says_so(tmp_path, monkeypatch, below):
    from conftest import cli

    f = tmp_path / "cache-file"
    f.write_text("")
    monkeypatch.setenv("MINIMULT_CACHE", str(f / below) if below else str(f))
    result = cli("prepare", "--preset", "tiny")
    one_error_line(result, "names a file, not a folder")  # was: "error: File exists (...)"
    assert "MINIMULT_CACHE" in result.stderr


def test_minor_a_run_evaluated_before_a_resume_is_named_stale_with_what_rescores_it(tmp_path):
    """A run stopped at step 5, evaluated, then resumed to its end: pretrain names results.json's step on stderr
    with the command that scores the run as it is, and the report's note says the same (was: the report said
    only "evaluated unfinished", pretrain nothing)."""
    from conftest import TINY_SETTINGS, cli
    from minimult.evaluate.results import headline_problem

    run = tmp_path / "run"
    tiny = ["--preset", "tiny", "--train-file", TINY_SETTINGS["data.train"], "--dev-file", TINY_SETTINGS["data.dev"],
            "--set", "data.vocab_size=256"]
    assert cli("pretrain", *tiny, "--stop-after", "5", "--out", str(run)).returncode == 0
    assert cli("eval", str(run), "--only", "perplexity").returncode == 0
    resumed = cli("pretrain", "--resume", str(run))
    assert resumed.returncode == 0 and resumed.stdout.splitlines()[-1] == f"done: {run}"
    assert "results.json scores step 5 of the" in resumed.stderr and f"minimult eval {run}" in resumed.stderr
    results, meta = (json.loads((run / name).read_text()) for name in ("results.json", "run.json"))
    assert headline_problem(results, meta, run).endswith(f"it has trained on since, `minimult eval {run}` scores it")
    assert "since" not in headline_problem(results, {**meta, "status": "interrupted"}, run)
    transferred = {"transfer": results.get("transfer", {}), "steps": results["steps"]}  # transfer alone: no layers
    assert headline_problem(transferred, meta, run) == ("results.json has no per-layer results (transfer and probe "
                                                        f"alone write none: `minimult eval {run}` does)")


# ---------------------------------------------------------------------------------------------
# item 10: a manifest's [dictionary] is checked every time, not only when the prepared entry is built


@pytest.mark.parametrize("broken, fragment", [("missing", "dictionary file not found"),
                                              ("malformed", "is not word<TAB>word")])
def test_item10_a_dictionary_broken_after_the_entry_was_built_fails_prepare_and_pretrain(tmp_path, broken, fragment):
    from conftest import cli
    from test_parallel import three_languages

    files = three_languages(tmp_path)
    first = cli("prepare", "--preset", "tiny", "--files", files, "--set", "data.vocab_size=256")
    assert first.returncode == 0, first.stderr
    dictionary = tmp_path / "en-xx.dict"
    if broken == "missing":
        dictionary.unlink()
    else:
        dictionary.write_text("a\tb\tc\n")
    one_error_line(cli("prepare", "--preset", "tiny", "--files", files, "--set", "data.vocab_size=256"), fragment)
    one_error_line(cli("pretrain", "--preset", "tiny", "--files", files, "--set", "data.vocab_size=256",
                       "--out", tmp_path / "run"), fragment)
    assert not (tmp_path / "run" / "checkpoint.pt").exists()  # refused before any training


def test_item10_manifests_without_a_dictionary_keep_their_cache_keys(tmp_path):
    """The dictionary is checked, not keyed: a manifest's key is the same with or without one."""
    from test_parallel import three_languages

    from minimult.config import resolve
    from minimult.data.cache import key_hash
    from minimult.data.prepare import cache_key

    files = three_languages(tmp_path)
    with_dictionary = key_hash(cache_key(resolve("tiny", {"data.files": files, "data.source": "parallel"})[0].data))
    Path(files).write_text(Path(files).read_text().replace('[dictionary]\nxx = "en-xx.dict"\n', ""))
    without = key_hash(cache_key(resolve("tiny", {"data.files": files, "data.source": "parallel"})[0].data))
    assert with_dictionary == without


# ---------------------------------------------------------------------------------------------
# item 11: every way of naming the parallel files stores them absolute


@pytest.mark.parametrize("key", ["data.files", "data.parallel.files"])
@pytest.mark.parametrize("kind", ["manifest", "inline"])
def test_item11_set_data_files_stores_absolute_paths(tmp_path, monkeypatch, key, kind):
    from test_parallel import three_languages

    from minimult.config import resolve

    three_languages(tmp_path)
    monkeypatch.chdir(tmp_path)
    given = "corpus.toml" if kind == "manifest" else "en=en.train.txt,xx=xx.train.txt"
    cfg, _ = resolve("tiny", {"data.source": "parallel", key: given})
    want = (str(tmp_path / "corpus.toml") if kind == "manifest"
            else f"en={tmp_path / 'en.train.txt'},xx={tmp_path / 'xx.train.txt'}")
    assert cfg.data.parallel.files == want
    assert cfg.data.n_langs == (3 if kind == "manifest" else 2)


def test_item11_a_run_trained_with_a_relative_set_evaluates_from_another_folder(tmp_path, monkeypatch):
    from conftest import cli
    from test_parallel import three_languages

    (tmp_path / "data").mkdir()
    three_languages(tmp_path / "data")
    trained = cli("pretrain", "--preset", "tiny", "--source", "parallel", "--set", "data.files=data/corpus.toml",
                  "--set", "data.vocab_size=256", "--set", "train.epochs=1", "--out", "run", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    stored = json.loads((tmp_path / "run" / "config.json").read_text())["data"]["parallel"]["files"]
    assert stored == str(tmp_path / "data" / "corpus.toml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    evaluated = cli("eval", tmp_path / "run", "--only", "perplexity", cwd=elsewhere)
    assert evaluated.returncode == 0, evaluated.stderr


# ---------------------------------------------------------------------------------------------
# item 13: one line, not a traceback


@pytest.mark.parametrize("value", ['["en"]', "1", "{ en = 1 }"])
def test_item13_a_manifest_first_that_is_not_a_name_is_one_line(tmp_path, value):
    from minimult.data.parallel import parse_spec

    (tmp_path / "a.txt").write_text("x\n")
    path = tmp_path / "corpus.toml"
    path.write_text(f'first = {value}\n[languages]\nen = "a.txt"\nxx = "a.txt"\n')
    with pytest.raises(MinimultError, match="is not one of its languages"):  # was: TypeError (unhashable list)
        parse_spec(str(path))


@pytest.mark.parametrize("cut", ["empty", "header", "half the tensors", "last byte"])
def test_item13_a_truncated_safetensors_under_eval_hf_is_one_line(exported, tmp_path, cut):
    import shutil
    import struct

    from conftest import cli

    _, hf_dir, text = exported
    data = (hf_dir / "model.safetensors").read_bytes()
    header = struct.unpack("<Q", data[:8])[0]
    size = {"empty": 0, "header": 8 + header // 2, "half the tensors": 8 + header + (len(data) - 8 - header) // 2,
            "last byte": len(data) - 1}[cut]
    broken = tmp_path / "hf"
    shutil.copytree(hf_dir, broken)
    (broken / "model.safetensors").write_bytes(data[:size])
    one_error_line(cli("eval", "--hf", broken, "--pair", text, text), "weights file is truncated or corrupt")


# ---------------------------------------------------------------------------------------------
# item 15: `minimult verses` with too few training verses for a dictionary pair


def test_item15_verses_too_few_for_a_dictionary_are_refused_and_the_fewest_enough_train(tmp_path, monkeypatch):
    from conftest import cli
    from test_real_languages import fixture_verses

    from minimult.data import sword
    from minimult.data.parallel import parse_spec, read_dictionary

    monkeypatch.setattr(sword, "module_verses", fixture_verses)  # the modules' first verses, as installed
    for n in (1, 10, 19):  # the first 19 verses give no dictionary pair (the fixture's as the installed modules')
        one_error_line(cli("verses", tmp_path / f"v{n}", "--train-verses", n, "--dev-verses", 5),
                       "gives no silver dictionary pair")
        assert not (tmp_path / f"v{n}").exists()
    out = tmp_path / "v"
    result = cli("verses", out, "--train-verses", 20, "--dev-verses", 5)
    assert result.returncode == 0, result.stderr
    spec = parse_spec(str(out / "corpus.toml"))
    assert read_dictionary(spec.dictionary["es"], "es", spec)  # was: an empty dictionary --files then refused
    prepared = cli("prepare", "--preset", "tiny", "--files", out / "corpus.toml", "--set", "data.vocab_size=256")
    assert prepared.returncode == 0, prepared.stderr


def test_item13_ctrl_c_of_a_sweep_from_a_terminal_is_one_line(tmp_path):
    """Ctrl-C in a terminal reaches the sweep and its workers (one process group): the workers stop quietly
    (was: 159 lines of KeyboardInterrupt tracebacks from them), the sweep says in one line that it was
    interrupted and how to resume, exits 130, and the runs keep their checkpoints."""
    import os
    import signal
    import subprocess
    import time

    from test_sweep import CLI, GRID

    grid = tmp_path / "tiny.toml"
    grid.write_text(GRID.replace('"train.eval_every" = 13', '"train.epochs" = 1000'))  # long enough to be stopped
    proc = subprocess.Popen(CLI + ["sweep", str(grid), "--root", str(tmp_path / "runs"), "--jobs", "2", "--only", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True,  # its own process group, as a terminal's foreground job
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while len(list(tmp_path.glob("runs/0-original-s*/checkpoint.pt"))) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["interrupted: checkpointed work is kept; run the same sweep command again "
                                        "to resume"], err
    assert len(list(tmp_path.glob("runs/0-original-s*/checkpoint.pt"))) == 2
    for run in tmp_path.glob("runs/0-original-s*"):  # each worker wrote where its run stopped: its checkpoint
        meta = json.loads((run / "run.json").read_text())
        assert (meta["status"], meta["steps"]) == ("interrupted", load_checkpoint(run / "checkpoint.pt")["step"])


@pytest.mark.parametrize("dev, why", [("a\tone\x00two\nb\tx\n", "dev.tsv:1: a NUL byte"),
                                      ("a\t" + "word " * 32_000 + "\nb\tx\n", "dev.tsv:1: 160,002 characters on one line")])
def test_minor_task_files_refuse_nul_bytes_and_lines_no_sentence_has(tmp_path, dev, why):
    from minimult.data.tasks import file_task

    for name in ("train", "test.en", "test.xx"):
        (tmp_path / f"{name}.tsv").write_text("a\tone two\nb\tthree four\n")
    (tmp_path / "dev.tsv").write_text(dev)
    with pytest.raises(MinimultError, match=why):  # was: accepted, the NUL a word, the line cut to the window
        file_task(tmp_path, ("en", "xx"), str.split)


def test_minor_a_task_line_of_the_longest_length_is_read_and_one_more_character_refused(tmp_path):
    from minimult.data.tasks import MAX_LINE_CHARS, file_task

    for name in ("train", "test.en", "test.xx"):
        (tmp_path / f"{name}.tsv").write_text("a\tone two\nb\tthree four\n")
    longest = "a\t" + "x" * (MAX_LINE_CHARS - 2)
    (tmp_path / "dev.tsv").write_text(longest + "\nb\tx\n")
    assert file_task(tmp_path, ("en", "xx"), str.split).texts["dev"][0] == ["x" * (MAX_LINE_CHARS - 2)]
    (tmp_path / "dev.tsv").write_text(longest + "x\nb\tx\n")
    with pytest.raises(MinimultError, match=f"dev.tsv:1: {MAX_LINE_CHARS + 1:,} characters on one line"):
        file_task(tmp_path, ("en", "xx"), str.split)


def test_minor_a_task_of_one_label_is_refused(tmp_path):
    from minimult.data.tasks import file_task

    for name in ("train", "dev", "test.en", "test.xx"):
        (tmp_path / f"{name}.tsv").write_text("a\tone two\na\tthree four\n")
    with pytest.raises(MinimultError, match=r"train.tsv has 1 label \(a\): classification needs at least two"):
        file_task(tmp_path, ("en", "xx"), str.split)


def test_minor_a_dev_label_train_tsv_lacks_is_refused_at_its_line(tmp_path):
    """dev.tsv is checked as every test file is; the line counts blank lines, as an editor shows them."""
    from minimult.data.tasks import file_task

    for name in ("train", "test.en", "test.xx"):
        (tmp_path / f"{name}.tsv").write_text("a\tone two\nb\tthree four\n")
    (tmp_path / "dev.tsv").write_text("a\tone\n\nz\ttwo\n")
    with pytest.raises(MinimultError, match=r"dev.tsv:3: label 'z' is not among train.tsv's labels \(a, b\)"):
        file_task(tmp_path, ("en", "xx"), str.split)


def test_minor_the_default_task_needs_every_split_even_with_two_parts_in_training():
    import numpy as np

    from minimult.data.tasks import nt_parts, verse_split

    ids = np.array([b * 1_000_000 + 1000 + v for b in (40, 44) for v in range(1, 200)])
    no_dev = ids[verse_split(ids) != 1]  # gospels and acts in train and test, nothing in dev
    with pytest.raises(MinimultError, match="needs sentences in every split.* 0 dev, "):
        nt_parts(no_dev, "c")
    assert nt_parts(ids, "c").sizes()["dev"] > 0


def test_minor_the_default_task_on_a_run_of_part_of_the_corpus_says_what_to_give():
    import numpy as np

    from minimult.data.tasks import nt_parts

    matthew = np.array([40_001_001 + k for k in range(30)])  # the tiny preset's first sentences: one part
    with pytest.raises(MinimultError, match="give --task DIR, a task of your own"):
        nt_parts(matthew, "bbe-nt")
