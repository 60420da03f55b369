"""Evaluations that say what they evaluated (issue 36): how far a run trained, nothing stored for nothing
asked or nothing scored, bad input refused in one line before anything is computed or overwritten."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner

from conftest import ROOT, TINY_SETTINGS
from minimult.cli import main
from minimult.config import resolve
from minimult.errors import MinimultError
from minimult.evaluate import evaluate_run
from minimult.runs import Run
from minimult.train import train

QUIET = lambda s: None  # noqa: E731
TINY = ["--train-file", TINY_SETTINGS["data.train"], "--dev-file", TINY_SETTINGS["data.dev"],
        "--set", "data.vocab_size=256", "--preset", "tiny"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_run):
    """A finished tiny run with its results.json (a copy of conftest's, evaluated), and one killed at step 10
    of 50 (run.json as a killed process leaves it: status training, no steps)."""
    tmp = tmp_path_factory.mktemp("reliability")
    cfg, active = resolve("tiny", TINY_SETTINGS)
    done = copy_run(tiny_run.path, tmp)
    evaluate_run(done, log=QUIET)
    killed = Run.create(cfg, active, tmp / "killed", log=QUIET)
    train([killed], log=QUIET, stop_after=10)
    meta = killed.meta
    meta.pop("steps")
    meta["status"] = "training"
    killed.write_meta(meta)
    return done, killed.path


def copy_run(path, tmp_path):
    target = tmp_path / path.name
    shutil.copytree(path, target)
    (target / ".sweep.lock").unlink(missing_ok=True)
    return target


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_error_line(result, fragment):
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: ") and fragment in lines[-1], result.stderr
    assert "Traceback" not in result.output


@pytest.fixture
def no_evaluation(monkeypatch):
    """Any evaluation that starts fails the test: refusals must come before the work."""
    def evaluated(*a, **k):
        raise AssertionError("the evaluation ran before the input was refused")

    monkeypatch.setattr("minimult.evaluate.evaluate_model", evaluated)


# ---------------------------------------------------------------------------------------------
# 3: how far a run trained


def test_a_finished_run_records_steps_of_total_steps(runs):
    results = json.loads((runs[0] / "results.json").read_text())
    meta = json.loads((runs[0] / "run.json").read_text())
    assert results["steps"] == results["total_steps"] == meta["total_steps"] == 50
    assert results["evaluation"]["complete"] is True
    assert results["evaluations"][-1]["steps"] == 50 and results["evaluations"][-1]["total_steps"] == 50


def test_a_killed_run_is_evaluated_as_unfinished_with_its_steps(runs, tmp_path):
    run = copy_run(runs[1], tmp_path)
    lines = []
    evaluate_run(run, log=lines.append)
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 10 and results["total_steps"] == 50
    assert results["evaluation"]["complete"] is False
    said = [l for l in lines if "unfinished" in l]
    assert len(said) == 1 and "step 10 of 50" in said[0], lines


def test_a_failed_run_is_refused_and_its_results_kept(runs, tmp_path):
    run = copy_run(runs[0], tmp_path)
    meta = json.loads((run / "run.json").read_text())
    meta["status"] = "failed: loss nan at step 37"
    (run / "run.json").write_text(json.dumps(meta))
    before = (run / "results.json").read_bytes()
    with pytest.raises(MinimultError, match="failed: loss nan at step 37") as e:
        evaluate_run(run, log=QUIET)
    assert "\n" not in str(e.value)
    assert (run / "results.json").read_bytes() == before
    one_error_line(cli("probe", run), "failed")
    (run / "checkpoint.pt").unlink()  # failed before its first checkpoint: no talk of one, no --resume to try
    one_error_line(cli("eval", run), "failed: loss nan at step 37: what it kept is from before the loss diverged, "
                                     "not a trained model, so it is not evaluated; train a new run (another --out)")


# ---------------------------------------------------------------------------------------------
# 4: --only naming nothing, links without a link file


@pytest.mark.parametrize("only", [",", " , ", ""])
def test_only_naming_no_evaluator_is_one_line_and_leaves_results(runs, tmp_path, no_evaluation, only):
    run = copy_run(runs[0], tmp_path)
    before = (run / "results.json").read_bytes()
    one_error_line(cli("eval", run, "--only", only), "names no evaluator")
    assert (run / "results.json").read_bytes() == before
    for given in ((), only):  # names, or text as --only takes it (api.evaluate passes it on)
        with pytest.raises(MinimultError, match="names no evaluator"):
            evaluate_run(run, only=given, log=QUIET)
    with pytest.raises(MinimultError, match="unknown evaluator 'alignmnet' \\(did you mean 'alignment'\\?\\)"):
        evaluate_run(run, only="retrieval, alignmnet", log=QUIET)
    assert (run / "results.json").read_bytes() == before


def test_only_prints_what_it_evaluated(runs, tmp_path):
    """`eval --only X` prints X's numbers as a full evaluation does (its per-layer table, its own lines), and
    no 'n/a' for the evaluators it did not run (their numbers stay in results.json)."""
    run = copy_run(runs[0], tmp_path)
    retrieval = cli("eval", run, "--only", "retrieval")
    assert retrieval.exit_code == 0, retrieval.output
    assert "ρ en→L1" in retrieval.stdout and "align F1" not in retrieval.stdout and "n/a" not in retrieval.stdout
    assert "lang-ID probe, lowest sentence accuracy" in cli("eval", run, "--only", "probe").stdout  # no layer table
    assert json.loads((run / "results.json").read_text())["mu"] is not None


def test_only_links_without_a_link_file_is_refused(runs, tmp_path, no_evaluation):
    run = copy_run(runs[0], tmp_path)
    before = (run / "results.json").read_bytes()
    one_error_line(cli("eval", run, "--only", "links"), "--links")
    one_error_line(cli("eval", run, "--only", "retrieval,links"), "--links")
    assert (run / "results.json").read_bytes() == before


def test_evaluator_inputs_are_refused_before_the_model_loads(runs, tmp_path, monkeypatch):
    """Each evaluator's `inputs` hook checks its own input (links' file, transfer's switch) before the model
    loads; an evaluator option no evaluator declares is a TypeError, never ignored."""
    def loaded(*a, **k):
        raise AssertionError("the model loaded before the input was refused")

    monkeypatch.setattr(Run, "load_model", loaded)
    pharaoh, native = tmp_path / "dev.pharaoh", tmp_path / "dev.links"
    pharaoh.write_text("0-0 1-1\n")
    native.write_text("1\t0\t0\n")
    for options, fragment in (({"link_file": str(pharaoh)}, "--link-base 0|1"),
                              ({"link_file": str(native)}, "whole verses or lines"),  # the tiny run's verses are split
                              ({"only": ("transfer",)}, "does not enable transfer"),
                              ({"only": ("transfer",), "segment": "avg"}, "not --segment avg")):
        with pytest.raises(MinimultError, match=re.escape(fragment)):
            evaluate_run(runs[0], log=QUIET, write=False, **options)
    with pytest.raises(TypeError, match="link_fil"):
        evaluate_run(runs[0], log=QUIET, write=False, link_fil=str(native))


# ---------------------------------------------------------------------------------------------
# 5: a link file with nothing inside the model's window


def test_links_all_outside_the_window_score_none_and_say_so(tmp_path, monkeypatch):
    from test_real_languages import FIXTURE, fixture_verses

    from minimult.data import sword
    from minimult.data.run_data import RunData
    from minimult.evaluate.links import table

    monkeypatch.setattr(sword, "module_verses", fixture_verses)
    monkeypatch.setattr(sword, "module_fingerprint", lambda language: f"fixture:{FIXTURE.stat().st_size}")
    cfg, active = resolve("tiny", {"data.fake": "en-es", "data.vocab_size": 256, "data.max_len": 8}, "untrained")
    run = Run.create(cfg, active, tmp_path / "enes", log=QUIET)
    train([run], log=QUIET)
    verses = [l.split("\t") for l in (RunData(cfg, active).prepared.path / "verses-dev.tsv").read_text(
        encoding="utf-8").splitlines()]
    verse, en, es = next(v for v in verses if min(len(v[1].split()), len(v[2].split())) > 10)
    links = tmp_path / "far.links"
    links.write_text(f"{verse}\t10\t10\n{verse}\t9\t10\tP\n")  # a window of 6 pieces holds at most 6 words
    lines = []
    results = evaluate_run(run.path, log=lines.append, link_file=str(links))["links"]
    assert results["f1"] is None and results["aer"] is None and results["outside_window"] == 2
    assert all(s["f1"] is None and s["aer"] is None for s in [*results["layers"].values(), results["diagonal"]])
    assert sum("nothing to score" in l for l in lines) == 1, lines
    assert "nothing to score" in table(results)
    stored = json.loads((run.path / "results.json").read_text())["links"]
    assert stored["f1"] is None and stored["layers"]["0"]["f1"] is None


# ---------------------------------------------------------------------------------------------
# 7: budget presets


@pytest.mark.parametrize("presets", ["", ",", " , "])
def test_budget_without_a_preset_is_refused_and_the_readme_kept(tmp_path, presets):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- BEGIN budget -->\n| preset | ... |\n| quick | 1 |\n<!-- END budget -->\n")
    before = readme.read_bytes()
    one_error_line(cli("budget", "--preset", presets, "--readme", readme), "names no preset")
    assert readme.read_bytes() == before


def test_budget_readme_with_fewer_presets_than_its_table_lists_is_refused(tmp_path):
    """`budget --preset paper --readme README.md` would replace the README's four preset rows with one: refused,
    naming the presets to give, before anything is computed (issue 63, minor)."""
    readme = tmp_path / "README.md"
    readme.write_bytes((ROOT / "README.md").read_bytes())
    before = readme.read_bytes()
    one_error_line(cli("budget", "--preset", "paper", "--readme", readme),
                   "lists quick, paper-b256, quick-b256 too; give --preset paper,quick,paper-b256,quick-b256")
    assert readme.read_bytes() == before


def test_budget_takes_the_data_options_a_run_takes(tmp_path):
    """`budget --source en-es` counts the budget of the en-es corpus, as `pretrain --source en-es` would train it
    (issue 63, minor: budget had --set only, so --source and --files were 'no such option')."""
    rows = {}
    corpora = {"bbe": [], "en-es": ["--source", "en-es"], "tiny": ["--train-file", TINY_SETTINGS["data.train"]]}
    for name, args in corpora.items():
        result = cli("budget", "--preset", "paper", *args, "--json", tmp_path / f"{name}.json")
        assert result.exit_code == 0, result.output
        rows[name] = json.loads((tmp_path / f"{name}.json").read_text())["rows"][0]
    assert rows["bbe"]["updates"] == 14_100  # BBE's New Testament in batches of 128 (README's table)
    assert len({r["updates"] for r in rows.values()}) == 3  # each corpus its own number of updates


# ---------------------------------------------------------------------------------------------
# 9: a device that is not there leaves no run folder


def test_an_unavailable_device_leaves_no_run_folder(tmp_path):
    out = tmp_path / "run"
    result = cli("pretrain", *TINY, "--device", "cuda:7", "--out", out)
    one_error_line(result, "cuda:7")
    assert not out.exists()


def test_a_cuda_index_beyond_the_devices_is_refused(monkeypatch):
    import torch

    from minimult.model import pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(MinimultError, match="cuda:7.*1 CUDA device"):
        pick_device("cuda:7")
    assert pick_device("cuda:0") == torch.device("cuda:0")


# ---------------------------------------------------------------------------------------------
# 10: one line instead of a traceback


@pytest.mark.parametrize("digit", ["\u00b9", "\u0663", "\uff13", "9" * 5000],
                         ids=["superscript-1", "arabic-indic-3", "fullwidth-3", "5000-digits"])
def test_link_files_take_ascii_digits_only(tmp_path, digit):
    from minimult.data.links import read_links

    bad = tmp_path / "bad.links"
    bad.write_text(f"40001001\t0\t0\n40001001\t{digit}\t1\n", encoding="utf-8")
    with pytest.raises(MinimultError, match=f"bad link at {re.escape(str(bad))}:2:.*ASCII digits"):
        read_links(bad, {40001001: 19}, {40001001: 15})


def test_a_native_link_file_splits_lines_only_at_newlines(tmp_path):
    """U+2028, NEL and form feed are characters of a line, not line ends (as `wc -l` counts): a comment holding
    one stays a comment, and an error names the line `wc -l` would."""
    from minimult.data.links import read_links

    links = tmp_path / "sep.links"
    links.write_text("# gold\u2028 made by hand\x85 and checked\x0c twice\n40001001\t0\t0\n40001001\t1\t1\tP\n",
                     encoding="utf-8")
    got = read_links(links, {40001001: 19}, {40001001: 15})
    assert len(got) == 2 and got.sure.tolist() == [True, False] and got.a.tolist() == [0, 1]
    links.write_text("# a\u2028b\n40001001\t0\tx\n", encoding="utf-8")
    with pytest.raises(MinimultError, match=f"bad link at {re.escape(str(links))}:2:"):
        read_links(links, {40001001: 19}, {40001001: 15})


@pytest.mark.parametrize("value", ["rand:18446744073709551616", "rand:99999999999999999999999", "rand:" + "9" * 5000,
                                   "rand:\u00b9"], ids=["2**64", "23-digits", "5000-digits", "superscript-1"])
def test_segment_seeds_out_of_range_are_refused(value):
    from minimult.evaluate.segments import parse_segments

    with pytest.raises(MinimultError, match="rand:SEED"):
        parse_segments(value)
    assert parse_segments("rand:18446744073709551615") == ["rand:18446744073709551615"]


def test_results_with_a_non_number_are_one_line_before_evaluating(runs, tmp_path, no_evaluation):
    from minimult.evaluate.results import read_results, results_problem

    run = copy_run(runs[0], tmp_path)
    results = json.loads((run / "results.json").read_text())
    assert results_problem(results) is None
    for key, damage in (("mu", lambda r: r.update(mu="x")),
                        ("align_f1", lambda r: r["layers"]["0"].update(align_f1=[1])),
                        ("perplexity", lambda r: r.update(perplexity="high")),
                        ("dev", lambda r: r["perplexity"].update(dev=True)),
                        ("layers", lambda r: r.update(layers=[])),
                        ("evaluations", lambda r: r.update(evaluations={}))):
        damaged = json.loads(json.dumps(results))
        damage(damaged)
        assert key in results_problem(damaged)
    damaged = {**results, "mu": "x"}
    (run / "results.json").write_text(json.dumps(damaged))
    before = (run / "results.json").read_bytes()
    with pytest.raises(MinimultError, match="'mu'"):
        read_results(run / "results.json")
    one_error_line(cli("eval", run), "'mu'")
    assert (run / "results.json").read_bytes() == before
    (run / "results.json").write_text('{"layers": {"0": ')  # cut short: not JSON at all, the same way out
    one_error_line(cli("eval", run), "results.json: Expecting value: line 1 column 18 (char 17); fix it or move it away")


def test_probe_with_a_figure_it_cannot_draw_is_refused_before_evaluating(runs, tmp_path, no_evaluation):
    run = copy_run(runs[0], tmp_path)
    before = (run / "results.json").read_bytes()
    one_error_line(cli("probe", run, "--png", tmp_path / "out.xyz"), "out.xyz")
    one_error_line(cli("probe", run, "--png", tmp_path / "nodir" / "out.png"), "nodir")
    assert (run / "results.json").read_bytes() == before


# ---------------------------------------------------------------------------------------------
# Minor


@pytest.mark.parametrize("mods", ["inv-order=", "permute=", "lang-pos=", "inv-order= ,lang-pos"])
def test_a_mod_with_an_empty_value_is_refused(mods):
    from minimult.mods import parse_mods

    with pytest.raises(MinimultError, match="empty value"):
        parse_mods(mods)


def test_ppl_sentences_zero_is_refused(runs, tmp_path, no_evaluation):
    run = copy_run(runs[0], tmp_path)
    before = (run / "results.json").read_bytes()
    one_error_line(cli("eval", run, "--ppl-sentences", "0"), "--ppl-sentences 0")
    assert (run / "results.json").read_bytes() == before


def test_eval_refuses_a_corrupt_results_json_or_a_json_path_without_folder_first(runs, tmp_path, no_evaluation):
    run = copy_run(runs[0], tmp_path)
    before = (run / "results.json").read_bytes()
    one_error_line(cli("eval", run, "--json", tmp_path / "nodir" / "x.json"), "nodir")
    assert (run / "results.json").read_bytes() == before
    (run / "results.json").write_text('{"layers": ')
    one_error_line(cli("eval", run), "results.json")
    assert (run / "results.json").read_text() == '{"layers": '
    (run / "results.json").unlink()
    (run / "results.json").mkdir()
    result = cli("eval", run)
    one_error_line(result, "results.json")
    assert ".results.json." not in result.stderr  # never an internal temporary file's name


def test_resume_of_a_huggingface_export_is_refused_and_writes_nothing(tmp_path):
    export = tmp_path / "hf"
    export.mkdir()
    (export / "config.json").write_text(json.dumps({"architectures": ["BertForMaskedLM"], "model_type": "bert",
                                                    "hidden_size": 16, "num_hidden_layers": 2}))
    (export / "model.safetensors").write_bytes(b"")
    with pytest.raises(MinimultError, match="HuggingFace"):
        Run.open(export)
    one_error_line(cli("pretrain", "--resume", export), "HuggingFace")
    assert sorted(p.name for p in export.iterdir()) == ["config.json", "model.safetensors"]
    one_error_line(cli("eval", export), "--hf")


def test_links_are_refused_only_when_the_scored_language_is_reordered(tmp_path):
    """A link file scores English against language 1: a 3-language run whose only reordering is of
    language 2 (`inv-order=fake2`) can be scored; `inv-order=fake` (language 1) cannot."""
    from minimult.evaluate.links import checked_file

    links = tmp_path / "gold.links"
    links.write_text("1001001\t0\t0\n")
    for mods, refused in (("inv-order=fake2", False), ("inv-order=fake", True), ("inv-order", True)):
        cfg, _ = resolve("tiny", {**TINY_SETTINGS, "data.n_langs": 3}, mods)
        run = Run(tmp_path / mods, cfg)
        if refused:
            with pytest.raises(MinimultError, match=f"--mods {re.escape(mods)} reorders them"):
                checked_file(run, str(links))
        else:
            assert checked_file(run, str(links)) == str(links)


def test_evals_first_line_says_how_many_dev_sentences_it_reads_and_perplexity_only_when_it_runs(runs):
    """The tiny corpus has fewer dev sentences than asked for: the line says how many are read; under `--only`
    without perplexity it says nothing about perplexity (issue 63, minor)."""
    done, _ = runs
    lines = []
    evaluate_run(done, log=lines.append, write=False, only=["retrieval"], dev_sentences=5000)
    first = next(l for l in lines if l.startswith("eval: ") and "dev sentences" in l)
    n = int(first.split()[1].replace(",", ""))
    assert n < 5000 and "perplexity" not in first, first
    lines.clear()
    evaluate_run(done, log=lines.append, write=False, only=["retrieval", "perplexity"], ppl_sentences=20)
    assert any(l.startswith(f"eval: {n:,} dev sentences") and "perplexity on 20 sequences" in l for l in lines), lines
