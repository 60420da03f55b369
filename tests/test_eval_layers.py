"""`minimult eval RUN --layer L` says what it did (issue 35, item 6): the layers it computed, whether µ came
with them and how to get it, and whether the run's headline results (the top of results.json) are now these,
which must be what `results.write_results` did."""

from __future__ import annotations

import json

from minimult.cli import _layers_note
from minimult.config import resolve
from minimult.evaluate.results import write_results
from minimult.runs import Run


def test_eval_layer_note_says_what_write_results_did(tmp_path):
    run = Run(tmp_path, resolve("tiny")[0])  # 2 layers: µ averages layers 0 and 1
    path = tmp_path / "results.json"

    def evaluate(layers, complete, mu=None, tau=0.5):
        before = json.loads(path.read_text()) if path.is_file() else {}
        time = f"T{len(before.get('evaluations', []))}"
        results = {"evaluation": {"layers": layers, "complete": complete, "time": time}, "steps": 10,
                   "layers": {str(l): {"translation": tau} for l in layers}, "mu": mu}
        write_results(run.path, results)
        note = _layers_note(run, results, before)
        top = json.loads(path.read_text())
        assert (top["evaluation"] == results["evaluation"]) == ("headline results (the top of results.json)" in note
                                                               and "unchanged" not in note), note
        return note

    assert evaluate([1], False) == (
        "layers 1 computed; no µ: it averages layers 0 and 1, so give both (--layer 0,1, or no --layer); they are the "
        "run's headline results (the top of results.json) until a complete evaluation (µ's layers, default settings) "
        "replaces them")
    assert evaluate([0], False).endswith(
        "the run's headline results (the top of results.json, which report and sweep read) are unchanged, its first "
        "evaluation (layers 1), itself not complete, until a complete one replaces it; these numbers are the last "
        "block of its evaluations")
    assert evaluate([0, 1], True, mu=0.25) == ("layers 0, 1 computed; µ 0.250 (layers 0 and 1); they are now the "
                                                "run's headline results (the top of results.json)")
    assert "are unchanged, its complete evaluation of T2;" in evaluate([1], False)
    assert json.loads(path.read_text())["evaluations"][-1]["layers"] == {"1": {"translation": 0.5}}
    assert evaluate([0, 1], True, tau=None).startswith("layers 0, 1 computed; no µ: no τ on this run's data "
                                                       "(no dictionary); they are now")


def test_eval_at_other_than_the_default_settings_says_its_numbers_are_no_result_of_the_run(tmp_path):
    """`eval --ppl-sentences N` scores perplexity on N sequences: one line says that this is no result of the
    run, and whether results.json's headline is now these numbers (nothing evaluated before) or stays."""
    from conftest import TINY_SETTINGS, cli

    run = tmp_path / "run"
    tiny = ["--preset", "tiny", "--train-file", TINY_SETTINGS["data.train"], "--dev-file", TINY_SETTINGS["data.dev"],
            "--set", "data.vocab_size=256"]
    assert cli("pretrain", *tiny, "--out", str(run)).returncode == 0
    said = "an evaluation at perplexity on 20 sequences: these numbers are no result of the "\
           "run (report leaves it out) and "
    first = cli("eval", run, "--ppl-sentences", "20")
    assert first.returncode == 0 and said + "are the run's headline (the top of results.json) until a complete " \
                                           "evaluation replaces them" in first.stdout, first.stdout
    complete = cli("eval", run)
    assert complete.returncode == 0 and "no result of the run" not in complete.stdout
    again = cli("eval", run, "--ppl-sentences", "20")
    assert again.returncode == 0 and said + "leave its headline as it was" in again.stdout, again.stdout
    assert json.loads((run / "results.json").read_text())["evaluation"]["complete"]
    stopped = tmp_path / "stopped"  # at the default settings, but unfinished: that is why, not its layers
    assert cli("pretrain", *tiny, "--out", str(stopped), "--stop-after", "3").returncode == 0
    total = json.loads((stopped / "run.json").read_text())["total_steps"]
    unfinished = cli("eval", stopped)
    want = f"an evaluation at step 3 of {total} (training unfinished): these numbers are no result of the run"
    assert unfinished.returncode == 0 and want in unfinished.stdout, unfinished.stdout
