"""What is derived from the registries (mods, evaluators, sources, presets): a throwaway evaluator's numbers
reach every list that names evaluators without a line elsewhere. And every list that mirrors another by hand
(units per word of each tokenizer, the grid file's keys, the settings memory reads) is checked against what it
mirrors, generically: a new tokenizer, grid field or mod fails here until its list follows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import cli
from minimult.config import DataConfig, resolve
from minimult.data.sources import REGISTRY as SOURCES
from minimult.evaluate import summary_table
from minimult.errors import MinimultError
from minimult.evaluate.registry import REGISTRY as EVALUATORS, Column, Evaluator
from minimult.evaluate.results import block_keys, read_results, write_results
from minimult.mods import REGISTRY as MODS
from minimult.runs import Run

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def toy_evaluator(monkeypatch):
    """A registered evaluator of one per-layer and one scalar column, for this test only."""
    toy = Evaluator("toy", "a throwaway evaluator", 1, order=50, run=lambda ctx: {},
                    columns=(Column("toy_layer", "toy per layer", per_layer=True), Column("toy_score", "toy score")),
                    keys=("toy_count",))
    monkeypatch.setitem(EVALUATORS, "toy", toy)
    return toy


def test_eval_printout_shows_a_new_evaluators_columns(toy_evaluator):
    results = {"run": "runs/x", "mods": "original", "seed": 0, "dev_sentences": 2,
               "layers": {"0": {"toy_layer": 0.5, "retrieval": None}, "2": {"toy_layer": 0.25, "retrieval": 0.75}},
               "toy_score": 0.125}
    lines = summary_table(results).splitlines()
    assert lines[1].split() == ["layer", "ρ", "toy", "per", "layer"]  # registry order; absent columns left out
    assert lines[2].split() == ["0", "-", "0.500"] and lines[3].split() == ["2", "0.750", "0.250"]
    assert lines[4:] == ["toy score 0.125"]  # evaluators whose part is missing print nothing


def test_evaluation_blocks_keep_what_the_evaluators_declare(toy_evaluator, tmp_path):
    run = Run(tmp_path, resolve("tiny")[0])
    for complete in (True, False):
        write_results(run.path, {"evaluation": {"complete": complete}, "run": "runs/x", "steps": 1, "layers": {},
                                  "toy_score": 0.5, "toy_count": 3, "toy_note": "top only", "eval_seconds": 1.0})
    blocks = json.loads((tmp_path / "results.json").read_text())["evaluations"]
    assert [set(b) for b in blocks] == [{"evaluation", "steps", "layers", "toy_score", "toy_count", "eval_seconds"}] * 2


def test_committed_evaluation_blocks_hold_only_derived_keys():
    """A results key dropped from the evaluators' declarations would vanish from every later evaluation block."""
    kept = set(block_keys())
    for path in sorted(ROOT.glob("experiments/results/*/*/results.json")):
        for block in json.loads(path.read_text()).get("evaluations", []):
            assert set(block) <= kept, (path, set(block) - kept)


@pytest.mark.parametrize("command, option", [("pretrain", "--source"), ("prepare", "--preset"), ("sweep", "--preset"),
                                             ("eval", "--only"), ("eval", "--pair")])
def test_help_lists_what_the_registries_hold(toy_evaluator, command, option):
    from click.testing import CliRunner

    from minimult.cli import main
    from minimult.config import PRESETS
    from minimult.evaluate.registry import text_evaluators

    default = DataConfig.source
    expected = {"--source": [f"{n}{' (default)' if n == default else ''}: {s.description}" for n, s in SOURCES.items()],
                "--preset": [" | ".join(PRESETS)], "--only": [e for e in EVALUATORS],
                "--pair": [", ".join(text_evaluators())]}[option]
    assert "toy" in text_evaluators()  # needs nothing: runs on any pair of texts
    out = CliRunner().invoke(main, [command, "--help"], terminal_width=10_000).output  # no line wrapped
    help = " ".join(out.split(f"\n  {option}", 1)[1].split("\n  -", 1)[0].split())  # the option's help text
    assert all(x in help for x in expected), (help, expected)


def test_one_registry_helper_for_every_kind():
    from minimult import config
    from minimult.data import corpus, masking, vocab
    from minimult.registry import Registry

    for registry in (SOURCES, EVALUATORS, MODS, config.PRESETS, masking.PRESETS, masking.MIXES, vocab.TOKENIZERS,
                     corpus.BUILTIN):
        assert isinstance(registry, Registry) and registry, registry
        with pytest.raises(MinimultError) as e:
            registry["nope"]
        assert "'nope'" in str(e.value) and "\n" not in str(e.value) and next(iter(registry)) in str(e.value)
        first = next(iter(registry))
        with pytest.raises(MinimultError, match=f"did you mean '{first}'"):  # a name one letter off
            registry[first[:-1] + ("x" if first[-1] != "x" else "y")]
        with pytest.raises(MinimultError, match="registered twice"):
            registry.add(next(iter(registry)), None)


def test_a_components_own_settings_are_a_section_of_the_run_config():
    """Each component's `settings` (section, dataclass) is a section of the run config at its defaults, whose
    keys --set takes: a source's within `data` (data.parallel.files), a mod's and an evaluator's at the top (knn,
    transfer). The evaluation sections config lists (it cannot import the evaluators) are the evaluators'."""
    from minimult.config import EVALUATION, RunConfig, valid_keys

    cfg, keys = RunConfig(), set(valid_keys())
    owners = [(cfg.data, "data.", s) for s in SOURCES.values()] + [(cfg, "", c) for c in (*MODS.values(),
                                                                                          *EVALUATORS.values())]
    for within, prefix, component in owners:
        if component.settings:
            section, settings = component.settings
            assert getattr(within, section) == settings(), component.name
            assert {f"{prefix}{section}.{f.name}" for f in dataclasses.fields(settings)} <= keys, component.name
    assert {e.settings for e in EVALUATORS.values() if e.settings} == set(EVALUATION.items())


def test_units_per_word_covers_every_tokenizer():
    """The sweep's cost model measures every tokenizer's units per word (an unknown one would count as wordpiece)."""
    from minimult.data.vocab import TOKENIZERS
    from minimult.sweep.progress import UNITS_PER_WORD

    assert set(UNITS_PER_WORD) == set(TOKENIZERS)


def test_every_grid_key_is_read(tmp_path):
    """Each key a grid file may hold (`TOP_KEYS`, `SETTING_KEYS`: the fields of `Grid` and `Setting`) reaches its
    field: a file giving every key loads into fields that all differ from a file giving none but the id."""
    from minimult.sweep.grid import SETTING_KEYS, TOP_KEYS, Grid, Setting, load_grid

    top = {"title": '"T"', "description": '"free text"', "preset": '"tiny"', "seeds": "[1, 2]", "paper_source": '"p"',
           "overrides": '{ "train.lr" = 1e-3 }', "preset_overrides": '{ tiny = { "train.epochs" = 1 } }'}
    setting = {"id": '"a"', "name": '"N"', "mods": '"lang-pos"', "overrides": '{ "train.seed" = 3 }',
               "note": '"free text"', "needs_gpu": "true", "paper": "{ mu = 0.5 }"}
    assert (set(top) | {"settings"}, set(setting)) == (TOP_KEYS, SETTING_KEYS)  # a new key: give it a value here
    (tmp_path / "full.toml").write_text("".join(f"{k} = {v}\n" for k, v in top.items()) + "[[settings]]\n"
                                        + "".join(f"{k} = {v}\n" for k, v in setting.items()))
    (tmp_path / "bare.toml").write_text('[[settings]]\nid = "b"\n')
    full, bare = load_grid(tmp_path / "full.toml"), load_grid(tmp_path / "bare.toml")
    for f in dataclasses.fields(Grid):
        assert f.name == "path" or getattr(full, f.name) != getattr(bare, f.name), f.name
    for f in dataclasses.fields(Setting):
        assert getattr(full.settings[0], f.name) != getattr(bare.settings[0], f.name), f.name


class Strict(dict):
    """A config dict whose `.get` of a key it does not hold is an error, not a default."""

    def get(self, key, default=None):
        return self[key]


@pytest.mark.parametrize("name", list(MODS))
def test_memory_reads_only_settings_a_mods_config_has(name):
    """sweep/memory.py's lines for what a mod changes (nsp's pairs) read settings every run's config has: a
    renamed setting would otherwise be read as absent, and the mod's runs packed side by side as if it were."""
    from minimult.sweep.memory import peak_bytes

    mod = MODS[name]
    config = resolve("tiny", {"knn.dim": 16}, mod.spec(mod.default))[0].to_dict()
    strict = Strict({k: Strict(v) if isinstance(v, dict) else v for k, v in config.items()})
    assert peak_bytes(strict) == peak_bytes(config) and peak_bytes(strict, 20) == peak_bytes(config, 20)


def test_resume_refuses_every_option_it_would_ignore(tmp_path):
    """Every option of pretrain but those saying how the run executes (--nproc, --stop-after, --device, --set of an
    execution setting) is refused with --resume (derived from the command's options: a new option is refused
    without a line of its own); --set of any other setting is refused too."""
    from minimult.cli import pretrain

    takes = {"nproc": "1", "stop_after": "1", "device": "cpu", "settings": "train.threads=1"}
    for p in pretrain.params:
        if p.name == "resume":
            continue
        value = [] if p.is_flag else [takes.get(p.name) or (p.type.choices[0] if hasattr(p.type, "choices") else "1")]
        out = cli("pretrain", "--resume", tmp_path / "missing", p.opts[0], *value)
        refused = "would be ignored" in out.stderr
        assert out.returncode == 2 and refused == (p.name not in takes), (p.opts, out.stderr)
    out = cli("pretrain", "--resume", tmp_path / "missing", "--set", "train.lr=1")
    assert out.returncode == 2 and "--set train.lr would be ignored" in out.stderr


# ---------------------------------------------------------------------------------------------
# Every registered source and every registered mod through prepare -> a short training -> eval: a new
# one is tested here without a line of its own (its own test says what it does; this one, that the
# pipeline runs with it and evaluation gives its numbers).

# 8 updates on 64 tiny sentences, 40 dev sentences; fastText vectors of 16 dimensions (knn-replace's
# mapping needs more words than dimensions, and the tiny corpus has a few hundred)
SHORT = {"data.vocab_size": 256, "data.train_sentences": 64, "data.dev_sentences": 40, "train.epochs": 1,
         "train.batch_size": 16, "train.eval_sentences": 20, "knn.dim": 16}


def language_files(tmp_path) -> str:
    """data.files for a source that reads the user's files: the tiny corpus and its words spelled backwards."""
    from conftest import TINY_TRAIN

    lines = TINY_TRAIN.read_text(encoding="utf-8").splitlines()[:200]
    files = {"en": lines, "xx": [" ".join(w[::-1] for w in line.split()) for line in lines]}
    for name, text in files.items():
        (tmp_path / f"{name}.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    return ",".join(f"{name}={tmp_path / f'{name}.txt'}" for name in files)


def short_run(tmp_path, source_name: str, mods: str | None = None):
    """(config, active mods, results) of a short run of `source_name` with `mods`, evaluated at the defaults.
    A source that reads texts of its own (it overrides `Source.corpora`) gets no data.train / data.dev; one
    that reads the user's files (`reads_files`) gets `language_files`."""
    from conftest import TINY_DEV, TINY_TRAIN
    from minimult.data import sources
    from minimult.evaluate import evaluate_run
    from minimult.train import train

    source = sources.REGISTRY[source_name]
    settings = {**SHORT, "data.source": source_name}
    if type(source).corpora is sources.Source.corpora:
        settings.update({"data.train": str(TINY_TRAIN), "data.dev": str(TINY_DEV)})
    if source.reads_files:
        settings["data.files"] = language_files(tmp_path)
    cfg, active = resolve("tiny", settings, mods)
    run = Run.create_at(tmp_path / "run", cfg, log=lambda s: None)
    train([run], log=lambda s: None)
    return cfg, active, evaluate_run(Run.open(run.path), log=lambda s: None)


def check_pipeline(tmp_path, cfg, active, results) -> None:
    from minimult.evaluate.registry import layer_table
    from minimult.evaluate.registry import evaluators
    from minimult.evaluate.multilinguality import mu_layers
    from minimult.mods import versions

    assert results["steps"] == results["total_steps"] and results["evaluation"]["complete"]
    assert results["mods"] == cfg.mods and results["mod_versions"] == versions(active)
    assert read_results(tmp_path / "run" / "results.json")["evaluation"] == results["evaluation"]
    assert sorted(results["layers"], key=int) == [str(l) for l in mu_layers(cfg.model.layers)]
    for e in evaluators():  # one that needs nothing but the texts and a model gives numbers for any run
        if not e.needs and not e.standalone:
            values = [c.value(results, l) for c in e.columns for l in (results["layers"] if c.per_layer else [None])]
            assert any(v is not None and np.isfinite(v) for v in values), e.name
    assert len(layer_table(results)) == 1 + len(results["layers"]) and summary_table(results)


@pytest.mark.parametrize("name", list(SOURCES))
def test_every_registered_source_trains_and_evaluates(name, tmp_path, sword_fixture):
    check_pipeline(tmp_path, *short_run(tmp_path, name))


@pytest.mark.parametrize("name", list(MODS))
def test_every_registered_mod_trains_and_evaluates(name, tmp_path):
    import torch

    mod = MODS[name]
    if mod.needs_gpu and not torch.cuda.is_available():
        pytest.skip(f"{name} wants a GPU: {mod.needs_gpu}")
    check_pipeline(tmp_path, *short_run(tmp_path, DataConfig.source, mod.spec(mod.default)))
