"""Command line: parses arguments and calls the stage modules; nothing else happens here.

Each command imports the stage modules it calls inside its own body: all of them at the top would add
~0.5 s to the start of every command (`minimult --help` included)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import click

from minimult import cli_help
from minimult.cli_help import DerivedHelp
from minimult.errors import Interrupted, MinimultError, fail_cleanly as _fail_cleanly, terminate_as_interrupt


def note(line: str) -> None:
    """A progress line: to stderr, so that stdout holds only the command's results."""
    click.echo(line, err=True)


def mods_option(help: str, default: str | None = None):
    """--mods, comma-separated; given twice, the lists join (`--mods a --mods b` is `--mods a,b`), where click alone
    would keep the last."""
    return click.option("--mods", multiple=True, default=(default,) if default else (), show_default=bool(default),
                        callback=lambda ctx, param, given: ",".join(given) or None, help=help)


def data_options(f, preset: bool = True):
    """Options that choose the data (shared by prepare, pretrain, neighbours and, without --preset, budget); a
    command takes those it does not use itself as `**_data`: `_overrides` reads them all from click's context."""
    from minimult.data.sources import REGISTRY
    from minimult.data.vocab import TOKENIZERS

    for option in reversed([
        click.option("--train-file", "train", default=None, metavar="PATH|NAME",
                     help="Training corpus: one sentence per line, or a built-in name (default bbe-nt)."),
        click.option("--dev-file", "dev", default=None, metavar="PATH|NAME",
                     help="Development corpus (default kjv-ot-10k: first 10,000 KJV Old Testament sentences)."),
        click.option("--source", "--fake", "source", type=click.Choice(list(REGISTRY)), default=None, cls=DerivedHelp,
                     derived_help=cli_help.sources),
        click.option("--files", default=None, metavar="NAME=PATH,...|MANIFEST.toml",
                     help="The parallel source's files (data.parallel.files; implies --source parallel): "
                          "line-aligned or keyed (ID<TAB>text), the first name the first language, or a TOML manifest "
                          "with dev files, tokenization, dictionaries and link files (docs/corpora.md)."),
        click.option("--langs", "n_langs", type=int, default=None, metavar="N",
                     help="Languages in the run, English included (data.n_langs, default 2): shift gives N-1 "
                          "Fake-Englishes, en-es with 3 adds Fake-English to English and Spanish."),
        click.option("--shared-vocab", "shared_vocab", is_flag=True, default=None, cls=DerivedHelp,
                     derived_help=lambda: f"One vocabulary learned over every language's text, one id block "
                                          f"(data.shared_vocab; --source {cli_help.shared_option_sources()}), instead "
                                          f"of each language's own at its own id offset."),
        click.option("--tokenizer", type=click.Choice(list(TOKENIZERS)), default=None,
                     help="The units: wordpiece (default), char (every character of the training corpus) or "
                          "word (the most frequent words up to data.vocab_size, [UNK] for the rest)."),
        click.option("--preset", default="paper", show_default=True, cls=DerivedHelp,
                     derived_help=lambda: cli_help.presets("see `minimult budget`")) if preset else None,
        click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
                     help="Override any setting, e.g. --set train.lr=1e-3 (repeatable)."),
    ]):
        if option is None:
            continue
        f = option(f)
    return f


def _overrides(train_options: bool = False) -> dict:
    """The settings the running command's options give, each option setting the setting of its name: the data
    options (--tokenizer: data.tokenizer; --files implies --source parallel), then --set, then with
    `train_options` the options named as a train setting (pretrain's --seed: train.seed), later ones winning."""
    from minimult.config import parse_overrides, valid_keys
    from minimult.data.corpus import DEFAULT_DEV, DEFAULT_TRAIN

    params = dict(click.get_current_context().params)
    if params["files"] is not None:  # made absolute where settings are applied (the parallel source's `derive`)
        params["source"] = params["source"] or "parallel"
    keys = set(valid_keys())
    named = lambda section: {f"{section}.{name}": v for name, v in params.items()  # noqa: E731
                             if v is not None and f"{section}.{name}" in keys}
    overrides = {**named("data"), **named("data.parallel"), **parse_overrides(params["settings"]),
                 **(named("train") if train_options else {})}
    if overrides.get("data.train", DEFAULT_TRAIN) != DEFAULT_TRAIN and not {"data.dev", "data.source"} & set(overrides):
        note(f"note: your training text is evaluated on the built-in {DEFAULT_DEV} (the default --dev-file); give "
             f"--dev-file for a development text of your own")
    return overrides


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="minimult")
def main():
    """minimult: pretrain small BERTs on English + a second language and measure multilinguality."""
    cache = os.environ.get("MINIMULT_CACHE")
    if cache:  # else "File exists" or "Not a directory" from the first folder made under it, naming no variable
        blocked = next((p for p in (Path(cache), *Path(cache).parents) if p.exists() and not p.is_dir()), None)
        if blocked is not None:
            where = "" if blocked == Path(cache) else f" ({blocked} is a file)"
            click.echo(f"error: MINIMULT_CACHE={cache} names a file, not a folder{where}: point it at a folder "
                       f"(the prepared-data cache)", err=True)
            sys.exit(2)


@main.command()
@data_options
@mods_option("Mods whose data effects to preview (comma-separated).")
@click.option("--examples", default=3, show_default=True, help="Example sentences to show.")
@_fail_cleanly
def prepare(preset, mods, examples, **_data):
    """Build corpora, vocabulary and language views (cached) and print corpus statistics."""
    from minimult.config import resolve
    from minimult.data.prepare import summary
    from minimult.data.run_data import RunData

    cfg, active = resolve(preset, _overrides(), mods)
    data = RunData(cfg, active, log=note)
    click.echo(summary(data.prepared, cfg.data.max_len))
    if examples:
        sides = data.train_views
        names = data.source.names(cfg.data)
        click.echo(f"\nexamples ({cfg.mods}):")
        for i in range(min(examples, sides[0].num_sentences)):
            for lang, side in enumerate(sides):
                click.echo(f"  {names[lang]}: " + " ".join(data.source.display(data.prepared, cfg.data,
                                                                                side.sentence(i))))


@main.command()
@lambda f: data_options(f, preset=False)
@click.option("--preset", "presets", default="paper,quick,paper-b256,quick-b256", show_default=True,
              metavar="P,P,...", help="The presets to show (comma-separated).")
@mods_option("Comma-separated mods (no-parallel, for one, changes the budget).")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="Also write the rows here.")
@click.option("--readme", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Rewrite the table between this file's <!-- BEGIN budget --> and <!-- END budget --> lines.")
@_fail_cleanly
def budget(presets, mods, json_path, readme, **_data):
    """Each preset's optimisation budget (updates, words and pieces per update) next to the paper's."""
    from minimult import budget as b
    from minimult.config import PRESETS, resolve
    from minimult.report.readme import update_readme
    from minimult.runs import check_writable_file, write_json

    names = [p.strip() for p in presets.split(",") if p.strip()]
    if not names:  # an empty table would replace the README's rows
        raise MinimultError(f"--preset {presets!r} names no preset: give one or more of {', '.join(PRESETS)}, "
                            f"comma-separated")
    if json_path:
        check_writable_file(json_path, "--json")
    if readme:  # the README's table keeps every preset it lists: a narrower --preset would drop rows
        from minimult.data.corpus import text_lines
        from minimult.report.readme import markers

        begin, end = markers(b.MARKER)
        lines = text_lines(Path(readme).read_text(encoding="utf-8"))
        block = lines[lines.index(begin) + 1:lines.index(end)] if begin in lines and end in lines else []
        listed = [row.split("|")[1].strip() for row in block[2:] if row.startswith("|")]
        dropped = [p for p in listed if p in PRESETS and p not in names]
        if dropped:
            every = ",".join(dict.fromkeys(p for p in listed + names if p in PRESETS))
            raise MinimultError(f"--readme {readme}: its budget table lists {', '.join(dropped)} too; give --preset "
                                f"{every} (or leave --readme out to print the table only)")
    rows = []
    for preset in names:
        cfg, active = resolve(preset, _overrides(), mods)
        rows.append(b.budget(cfg, active, log=note))
    table = b.markdown(rows)
    click.echo(table)
    if json_path:
        write_json(Path(json_path), {"rows": rows, "paper": b.PAPER})
    if readme and update_readme(readme, table, b.MARKER):
        click.echo(f"updated the budget table in {readme}")


@main.command()
@data_options
@mods_option("Comma-separated mods, e.g. lang-pos,shift-special (see `minimult mods`).")
@click.option("--seed", type=int, default=None, help="Random seed (default 0).")
@click.option("--epochs", type=int, default=None, help="Training epochs (default: the preset's).")
@click.option("--mask-probs", default=None, metavar="M,K,R,N",
              help="Replacement mix (mask, keep, random, knn) of selected tokens, e.g. 0.9,0.1,0,0 "
                   "(the published code's no-random). Overrides the mods' mix.")
@click.option("--device", default=None, help="auto (default) | cpu | cuda | cuda:N.")
@click.option("--precision", type=click.Choice(["auto", "fp32", "bf16"]), default=None,
              help="auto (default: bf16 autocast on CUDA, fp32 on CPU) | fp32 | bf16 (~1.6x faster on CPUs "
                   "with AVX512-BF16 or AMX).")
@click.option("--eval-every", type=int, default=None, metavar="STEPS",
              help="Evaluate multilinguality every N steps into metrics.jsonl (the paper's Fig. 6/7 curves).")
@click.option("--nproc", type=click.IntRange(min=1), default=None, metavar="N",
              help="Train on N processes of one thread each, each a share of every batch (train.nproc; "
                   "torch.distributed, gloo on CPU): ~N x faster on N idle cores; at most one per core unless "
                   "MINIMULT_MAX_NPROC allows more. Also with --resume.")
@click.option("--stop-after", type=click.IntRange(min=1), default=None, metavar="STEPS",
              help="Stop once the run has trained this many updates in all, with its checkpoint (the learning-rate "
                   "schedule stays the whole run's); --resume continues it as if never stopped, and takes it too.")
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Run folder (default runs/<mods>-s<seed>-<time>).")
@click.option("--resume", "resume", default=None, type=click.Path(file_okay=False),
              help="Continue the interrupted run in this folder.")
@_fail_cleanly
def pretrain(preset, settings, mods, epochs, mask_probs, device, nproc, stop_after, out, resume, **_data):
    """Pretrain a BERT on English + a second language (--source) with the given mods into a new run folder.

    Started by torchrun (`torchrun --nproc-per-node N --no-python minimult pretrain ...`), the N processes
    train the one run together: rank 0 makes the run folder, holds its lock and writes."""
    from contextlib import nullcontext

    from minimult import ranks
    from minimult.config import resolve
    from minimult.data.masking import parse_probs
    from minimult.runs import Run

    launched = ranks.from_env()  # one of torchrun's ranks, or None
    if nproc is not None:
        ranks.check_nproc(nproc, launched)
    echo = click.echo if launched is None or launched.main else (lambda *a, **k: None)
    if resume:  # a resume takes how the run executes (--device, --nproc, --set of one); anything else is refused
        from minimult.config import EXECUTION_SETTINGS, override, parse_overrides

        ctx = click.get_current_context()
        execution = {**parse_overrides(settings), **({"train.device": device} if device else {})}
        given = [p.opts[0] for p in ctx.command.params if p.name not in ("resume", "nproc", "stop_after", "settings",
                                                                           "device")
                 and ctx.get_parameter_source(p.name) is not click.core.ParameterSource.DEFAULT]
        given += [f"--set {key}" for key in execution if key not in EXECUTION_SETTINGS]
        if given:
            raise MinimultError(f"--resume continues a run with its own config.json; {', '.join(given)} "
                                f"would be ignored, so it is refused (a resume takes --nproc, --stop-after, "
                                f"--device and --set of {', '.join(EXECUTION_SETTINGS)})")
        run = Run.open(resume)
        run.cfg = override(run.cfg, execution)  # how it executes this time; config.json keeps the first
        echo(_stopped_text(run, _train_one(run, echo, resume=True, nproc=nproc, stop_after=stop_after)))
        return
    overrides = _overrides(train_options=True)
    if launched is not None:
        overrides["train.nproc"] = launched.size  # config.json says how many processes trained it
    if mask_probs is not None:
        overrides["mask.probs"] = parse_probs(mask_probs)
    if epochs is not None and epochs < 1:
        raise MinimultError(f"--epochs must be at least 1 (got {epochs}); for a never-trained baseline use "
                            f"--mods untrained")
    if out is not None:  # never a run inside a run or an export
        from minimult.runs import check_own_folder

        check_own_folder(out, f"--out {out}", run_ok=True)
    cfg, active = resolve(preset, overrides, mods)
    from minimult import distributed

    if launched is None:  # the processes this machine can run, before the run folder is made
        distributed.check_devices(cfg.train.device, cfg.train.nproc)
    with distributed.session(launched, cfg.train.device):  # torchrun: rank 0 makes the folder, the others open it
        run = distributed.created_once(launched, lambda: Run.create(cfg, active, out, log=note), Run.open)
        echo(f"run folder: {run.path}")
        with run.removed_if_untrained() if launched is None else nullcontext():
            meta = _train_one(run, echo, stop_after=stop_after)
    echo(_stopped_text(run, meta))


def _train_one(run, echo, **options) -> dict:
    """train([run]) under the run's lock (rank 0's alone under torchrun): its run.json; a Ctrl-C says what the
    run keeps and how to go on."""
    from minimult import ranks
    from minimult.train import train  # torch loads here, after the arguments were checked (seconds)

    if ranks.from_env() is None and (options.get("nproc") or run.cfg.train.nproc or 1) == 1:
        terminate_as_interrupt()  # one process (the launcher of several ends them as SIGTERM ends it)
    try:
        with run.locked():
            return train([run], log=echo, **options)[0]
    except KeyboardInterrupt:
        meta = run.meta  # where training wrote it stopped
        kept = (f"{run.path} keeps step {meta['steps']:,} of {meta['total_steps']:,}"
                if meta.get("status") == "interrupted" else f"{run.path} is kept")
        raise Interrupted(f"{kept} (continue with: minimult pretrain --resume {shlex.quote(str(run.path))})") from None


def _stopped_text(run, meta: dict) -> str:
    """The last line of pretrain: done, or where --stop-after ended the run before its last update. A results.json
    that scores fewer steps than the run has now trained (evaluated before a resume) is named on stderr first."""
    try:
        scored = json.loads((run.path / "results.json").read_text()).get("steps")
    except (OSError, ValueError, AttributeError):  # none yet, or one that eval and report will name
        scored = None
    if isinstance(scored, int) and scored < meta.get("steps", 0):
        note(f"note: results.json scores step {scored:,} of the {meta['steps']:,} trained now: `minimult eval "
             f"{shlex.quote(str(run.path))}` scores the run as it is")
    if meta.get("status") == "complete":
        return f"done: {run.path}"
    return (f"stopped at step {meta.get('steps')} of {meta.get('total_steps')}: {run.path} "
            f"(continue with: minimult pretrain --resume {shlex.quote(str(run.path))})")


def _hf_evaluation(run, hf_dir, pair, shift, layers, dev_sentences, ppl_sentences, device, precision, langs,
                   link_file, only, link_base):
    """`eval --hf DIR --pair A B`'s options, checked, as a function that evaluates one segment alternation
    and prints its line."""
    from minimult.evaluate.hf import evaluate_hf
    from minimult.evaluate.registry import summary_parts

    if run or not hf_dir or not pair:
        raise MinimultError("--hf DIR --pair A B evaluates a HuggingFace checkpoint (no RUN); --pair, --shift and "
                            "--langs go with --hf")
    if dev_sentences or ppl_sentences:
        raise MinimultError("--dev-sentences and --ppl-sentences apply to runs; with --hf the pair's lines are used")
    if link_file == "silver":
        raise MinimultError("--links silver names a run's own silver links; with --hf give a link file whose verse "
                            "id is the pair's line number (1-based), or a Pharaoh file (one line per pair)")
    names = None
    if langs is not None:
        names = [l.strip() for l in langs.split(",") if l.strip()]
        if len(names) != 2:
            raise MinimultError(f"--langs {langs!r}: name the pair's two languages, e.g. --langs en,es")

    def evaluate_segment(value) -> dict:
        results = evaluate_hf(hf_dir, *pair, shift=shift, layers=layers, segment=value,
                              precision=precision, device=device, log=note, langs=names, link_file=link_file,
                              only=only, link_base=link_base)
        parts = summary_parts(results)
        click.echo(f"{hf_dir} (segment {value}, {results['dev_sentences']:,} pairs)"
                   + (": " + ", ".join(parts) if parts else ""))
        return results

    return evaluate_segment


@main.command()
@click.argument("run", type=click.Path(file_okay=False))
@click.option("--hf", "hf_dir", required=True, type=click.Path(file_okay=False),
              help="Output folder for transformers.BertForMaskedLM.from_pretrained: new or empty, not inside a run.")
@click.option("--force", is_flag=True, help="Also export into a folder that holds other files (they are kept, "
                                            "nothing is deleted; never a folder that holds run folders).")
@_fail_cleanly
def export(run, hf_dir, force):
    """Export a run's model as a HuggingFace BertForMaskedLM folder (holding the run's lock; an unfinished or
    failed run is exported with a note, and the export records how far it trained)."""
    from minimult.api import export as export_run

    out = export_run(run, hf_dir, force=force, log=note)
    click.echo(f"exported {Path(run)} to {out}")


@main.command(name="eval")
@click.argument("run", required=False, type=click.Path(file_okay=False))
@click.option("--layer", "layers", default=None,
              help="Comma-separated layers (0 = embeddings); default µ's pair: 0 and round(2/3 x depth), 0,8 for "
                   "12 layers.")
@click.option("--dev-sentences", type=int, default=None,
              help="Use the first N dev sentences (default: the run's, 10,000); --links scores every verse "
                   "its file names whatever N (its block records the dev sentences it read).")
@click.option("--ppl-sentences", type=int, default=None,
              help="Sequences per split for perplexity (default all; a fixed random subset when smaller).")
@click.option("--device", default="auto", show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="CPU threads for torch (default: torch's, one per core).")
@click.option("--precision", type=click.Choice(["fp32", "bf16"]), default="fp32", show_default=True,
              help="Of the representations: fp32 gives the same numbers on every device; bf16 autocast is faster "
                   "on a GPU and moves scores in the third decimal (such an evaluation is not 'complete').")
@click.option("--segment", "segments", default="original", show_default=True, metavar="V,V,...",
              help="Segment alternations (van der Goot et al. 2022): original | 0s | 1s | avg | null | rand:SEED, "
                   "comma-separated; one results block each. original: as trained (under lang-pos language k "
                   "reads row k).")
@click.option("--attention", type=click.Choice(["masked", "attend-padding"]), default=None,
              help="Encode the dev data with padding masked, or attended to in the published code's batches "
                   "(default: as the run trained, train.attention; another choice is not 'complete').")
@click.option("--hf", "hf_dir", default=None, type=click.Path(file_okay=False),
              help="Instead of a run: a local HuggingFace BERT checkpoint folder with its own tokenizer "
                   "(needs --pair).")
@click.option("--pair", nargs=2, default=None, type=click.Path(dir_okay=False), metavar="A B", cls=DerivedHelp,
              derived_help=lambda: f"With --hf: line-aligned parallel text files ({cli_help.text_evaluators()}; every "
                                   f"evaluator with --shift).")
@click.option("--shift", is_flag=True,
              help="With --hf: B is A's Fake-English (ids shifted by the tokenizer's size; identity gold alignment).")
@click.option("--langs", default=None, metavar="A,B",
              help="With --hf on a minimult export: the languages A and B are written in (e.g. en,es), each read "
                   "with its own tokenizer, ids and layout as in training; needed when they have tokenizers of "
                   "their own.")
@click.option("--only", default=None, metavar="NAME,...", cls=DerivedHelp,
              derived_help=lambda: f"Only these evaluators ({cli_help.evaluator_names()}); at the default settings "
                                   f"their numbers are filled into the run's results, e.g. a probe for a run evaluated "
                                   f"before it.")
@click.option("--links", "link_file", default=None, metavar="FILE|silver",
              help="Word alignment P, R, F1 and AER against a link file: verse_id<TAB>index_in_A<TAB>index_in_B"
                   "[<TAB>S|P] (0-based words), or Pharaoh (one line per pair, with --link-base; docs/corpora.md); "
                   "`silver` = the en-es source's Strong's links; a parallel run's pair id is its line number or key, "
                   "with --hf the pair's line number (1-based). Runs only this evaluator unless --only names others.")
@click.option("--link-base", "link_base", type=click.IntRange(0, 1), default=None,
              help="With a Pharaoh link file (i-j, i?j, i-j-P per pair line): whether its word indices count from 0 "
                   "or from 1 (required for Pharaoh files: both conventions are in use).")
@click.option("--link-lang", "link_lang", default=None, metavar="NAME",
              help="The language a link file links the first one to, in a run of three or more languages (default: "
                   "the second).")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="Also write the results here.")
@_fail_cleanly
def evaluate(run, layers, dev_sentences, ppl_sentences, device, threads, precision, segments, attention, hf_dir, pair,
             shift, langs, only, link_file, link_base, link_lang, json_path):
    """Measure multilinguality of a run (default: the most recent run under runs/), or of any local
    HuggingFace BERT checkpoint on a parallel text pair (--hf DIR --pair A B)."""
    from contextlib import nullcontext

    from minimult.runs import Run, check_run_dir, check_writable_file, latest_run, write_json

    names = tuple(n.strip() for n in only.split(",") if n.strip()) if only is not None else None
    if names == ():  # '' or ',': not every evaluator, and never an empty evaluation over the results
        raise MinimultError(f"--only {only!r} names no evaluator: give one or more of {cli_help.evaluator_names()}, "
                            f"comma-separated")
    if json_path:
        check_writable_file(json_path, "--json")  # before the evaluation, not after it
    if link_file is None and (link_base is not None or link_lang is not None):  # what the file's words are
        raise MinimultError(f"{'--link-base' if link_base is not None else '--link-lang'} says what a link file's "
                            f"words are: give the file with --links")
    hf = bool(hf_dir or pair or shift or langs)
    if run is not None and not hf:
        check_run_dir(run)  # a mistyped folder is one line before torch loads (seconds)
    import torch

    if threads:
        torch.set_num_threads(threads)
    from minimult.evaluate import evaluate_run, summary_table
    from minimult.evaluate.results import incomplete_evaluation, read_results, replaces_headline
    from minimult.evaluate.segments import parse_segments
    if link_file is not None and names is not None:
        names = tuple(dict.fromkeys(names + ("links",)))
    if hf:
        if attention or link_lang:
            raise MinimultError(f"{'--attention' if attention else '--link-lang'} applies to runs of this lab, not to "
                                f"--hf checkpoints")
        values = parse_segments(segments)
        evaluate_segment = _hf_evaluation(run, hf_dir, pair, shift, layers, dev_sentences, ppl_sentences, device,
                                          precision, langs, link_file, names, link_base)
        holding = nullcontext()
    else:
        if run is None:
            run = latest_run()
            click.echo(f"evaluating the most recent run: {run}")
        values = parse_segments(segments)
        if link_file is not None:
            names = names or ("links",)
        opened = Run.open(run)
        holding = opened.locked()

        def evaluate_segment(value) -> dict:
            before = read_results(opened.path / "results.json") if (opened.path / "results.json").is_file() else {}
            results = evaluate_run(opened, layers, dev_sentences, ppl_sentences, device,
                                   log=note, precision=precision, segment=value, only=names, link_file=link_file,
                                   attention=attention, link_base=link_base, link_lang=link_lang)
            if len(values) > 1:
                click.echo(f"segment {value}:")
            click.echo(summary_table(results, names))
            if layers and not names:
                click.echo(_layers_note(opened, results, before))
            elif not names and (other := incomplete_evaluation(results)):  # not the run's result: say so
                headline = ("are the run's headline (the top of results.json) until a complete evaluation replaces "
                            "them" if replaces_headline(before, results) else "leave its headline as it was")
                click.echo(f"an evaluation at {other}: these numbers are no result of the run (report leaves it "
                           f"out) and {headline}")
            return results
    every = []
    with holding:
        for value in values:
            every.append(evaluate_segment(value))
            if link_file is not None and hf:  # a run's printout has it among the links evaluator's lines
                from minimult.evaluate.links import table as links_table

                click.echo(links_table(every[-1]["links"]))
    if json_path:
        write_json(Path(json_path), every[0] if len(every) == 1 else {"segments": values, "results": every})
    if not hf:
        click.echo(f"results: {Path(run) / 'results.json'} ({sum(r['eval_seconds'] for r in every):.1f} s)")


def _layers_note(run, results: dict, before: dict) -> str:
    """What `eval --layer` did: the layers it computed, whether µ came with them (how to get it if not), and
    whether the run's headline results (the top of results.json, which report and sweep read) are now these
    (`results.replaces_headline`, given `before`, the results.json before this evaluation)."""
    from minimult.evaluate.multilinguality import mu_layers
    from minimult.evaluate.results import replaces_headline

    pair = mu_layers(run.cfg.model.layers)
    done = ", ".join(sorted(results["layers"], key=int))
    if results.get("mu") is not None:
        mu = f"µ {results['mu']:.3f} (layers {pair[0]} and {pair[1]})"
    elif {str(l) for l in pair} <= set(results["layers"]):
        mu = "no µ: no τ on this run's data (no dictionary)"
    else:
        mu = (f"no µ: it averages layers {pair[0]} and {pair[1]}, so give both (--layer {pair[0]},{pair[1]}, or no "
              f"--layer)")
    if replaces_headline(before, results):
        complete = results["evaluation"]["complete"]
        where = ("they are now the run's headline results (the top of results.json)" if complete
                 else "they are the run's headline results (the top of results.json) until a complete evaluation "
                      "(µ's layers, default settings) replaces them")
        return f"layers {done} computed; {mu}; {where}"
    old = before.get("evaluation", {})
    layers = f" (layers {', '.join(map(str, old['layers']))})" if old.get("layers") else ""
    headline = (f"its complete evaluation of {old.get('time', 'an earlier time')}" if old.get("complete") else
                f"its first evaluation{layers}"
                + (", itself not complete, until a complete one replaces it" if "complete" in old else ""))
    return (f"layers {done} computed; {mu}; the run's headline results (the top of results.json, which report and "
            f"sweep read) are unchanged, {headline}; these numbers are the last block of its evaluations")


def _check_figure(path: str) -> None:
    """A figure path matplotlib can write (by its suffix) in a folder that exists, checked before the work."""
    from matplotlib.backend_bases import FigureCanvasBase

    from minimult.runs import check_writable_file

    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in kinds:
        raise MinimultError(f"--png {path}: matplotlib cannot write a {'.' + suffix if suffix else 'suffix-less'} "
                            f"file; name it .png (or one of {', '.join('.' + k for k in sorted(kinds))})")
    check_writable_file(path, "--png")


@main.command()
@click.argument("run", required=False, type=click.Path(file_okay=False))
@click.option("--device", default="auto", show_default=True)
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="Also write the curve here.")
@click.option("--png", default=None, type=click.Path(dir_okay=False), help="Also draw the curve here.")
@_fail_cleanly
def probe(run, device, json_path, png):
    """Language identification per layer (Wu & Dredze 2019): held-out accuracy of a logistic-regression probe on
    sentence and on word-piece vectors of the first 2,000 dev pairs, layers 0..L (chance 1/N for N languages). The curve
    goes into the run's results.json (report overlays runs)."""
    from minimult.evaluate import evaluate_run
    from minimult.report.probe import probe_figure, probe_table
    from minimult.runs import Run, check_writable_file, latest_run, write_json

    if json_path:
        check_writable_file(json_path, "--json")
    if png:
        _check_figure(png)
    opened = Run.open(run or latest_run())
    with opened.locked():
        results = evaluate_run(opened, device=device, log=note, only=("probe",))
    click.echo(probe_table({opened.path.name: results["probe"]}))
    if json_path:
        write_json(Path(json_path), results["probe"])
    if png:
        probe_figure({opened.path.name: [results["probe"]]}, Path(png))
        click.echo(f"figure: {png}")
    click.echo(f"results: {opened.path / 'results.json'} ({results['eval_seconds']:.1f} s)")


@main.command()
@click.argument("run", required=False, type=click.Path(file_okay=False))
@click.option("--modes", default=None, metavar="M,M,...",
              help="full | frozen | freeze:N (layers 0..N fixed, 0 = embeddings), comma-separated "
                   "(default: the run's transfer.modes, full,frozen).")
@click.option("--layer", type=int, default=None,
              help="The frozen mode's layer (default µ's upper layer: round(2/3 x depth), 8 of 12).")
@click.option("--task", "task_dir", default=None, metavar="DIR",
              help="A labelled task of your own (transfer.task): DIR/train.tsv and dev.tsv in the first language, "
                   "DIR/test.<lang>.tsv for each language, label<TAB>text per line (default: the New Testament "
                   "part task).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Transfer settings only, e.g. --set transfer.seeds=5 --set transfer.epochs=4 (repeatable).")
@click.option("--device", default="auto", show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="CPU threads for torch (default: torch's, one per core).")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="Also write the results here.")
@_fail_cleanly
def transfer(run, modes, layer, task_dir, settings, device, threads, json_path):
    """Zero-shot transfer: fine-tune a run (default: the most recent) on which part of the New Testament an
    English training sentence is from (or on --task DIR), test on the first language and on every other;
    ∆ = first language - zero-shot, per language."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    from minimult.config import override, parse_overrides
    from minimult.evaluate.transfer import table, transfer_run
    from minimult.runs import Run, check_writable_file, latest_run, write_json

    if json_path:
        check_writable_file(json_path, "--json")  # before minutes of fine-tuning

    overrides = parse_overrides(settings)
    other = [k for k in overrides if not k.startswith("transfer.")]
    if other:
        raise MinimultError(f"--set {other[0]}: transfer takes transfer.* settings only; the run's others are its own")
    for key, value in (("transfer.modes", modes), ("transfer.layer", layer),
                       ("transfer.task", task_dir and str(Path(task_dir).resolve()))):
        if value is not None:
            overrides[key] = value
    if run is None:
        run = latest_run()
        click.echo(f"transfer on the most recent run: {run}")
    opened = Run.open(run)
    cfg = override(opened.cfg, overrides).transfer
    with opened.locked():
        results = transfer_run(opened, cfg, device, log=note)
    click.echo(f"{opened.path} (mods: {opened.cfg.mods}, seed {opened.cfg.train.seed})")
    click.echo(table(results["transfer"]))
    if json_path:
        write_json(Path(json_path), results)
    click.echo(f"results: {opened.path / 'results.json'} ({results['eval_seconds']:.1f} s)")


@main.command()
@data_options
@mods_option("Mods of the training data the table is built for (knn-replace[=k] is added if missing).",
             "knn-replace")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--words", default="God,Jesus,love,said,house,water,the,##s", show_default=True,
              help="Comma-separated English pieces whose neighbours to show.")
@_fail_cleanly
def neighbours(preset, mods, seed, words, **_data):
    """Build (or reuse) knn-replace's neighbour table and show how good the mapping is."""
    from minimult.config import resolve
    from minimult.data.run_data import RunData
    from minimult.knn.neighbours import table_info
    from minimult.mods.masking import with_knn_replace

    overrides = {**_overrides(), "train.seed": seed}
    cfg, active = resolve(preset, overrides, with_knn_replace(mods))
    data = RunData(cfg, active, log=note)
    prepared, sides = data.prepared, data.train_views
    knn = next(a for a in active if a.mod.build is not None)
    table = knn.mod.build(data, sides, cfg, knn.value, click.echo)["neighbours"]
    info = table_info(prepared, cfg, knn.value, sides)  # its P@1: in the line the build logged above
    click.echo(f"mapping: {info.get('iterations')} iterations, dictionary {info.get('dict_size')}, "
               f"{info.get('seconds_total', 0):.0f} s to build")
    covered = int((table[:, 0] >= 0).sum())
    click.echo(f"{covered:,} of {len(table):,} ids have neighbours (the rest fall back to random replacement)")
    vocab = prepared.vocab
    for w in (x.strip() for x in words.split(",") if x.strip()):
        if w not in vocab.index:
            click.echo(f"  {w}: not in the vocabulary")
            continue
        row = table[vocab.index[w]]
        shown = data.source.display(prepared, cfg.data, [int(i) for i in row if i >= 0]) or ["(no vector)"]
        click.echo(f"  {w} -> {' '.join(shown)}")


@main.command(name="corpus-stats")
@click.option("--testament", type=click.Choice(["new", "old", "both"]), default="both", show_default=True)
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="Also write the rows here.")
@_fail_cleanly
def corpus_stats(testament, json_path):
    """Statistics of the real-language Bibles (SWORD modules KJV and RV1909): verses, sentences, words and
    types per language, and the verses aligned between them (the en-es source's pairs)."""
    from minimult.data.sword import corpus_stats as stats
    from minimult.runs import write_json

    rows = stats(("new", "old") if testament == "both" else (testament,))
    click.echo("| testament | language (module) | verses | sentences | words | types |")
    click.echo("|---|---|---:|---:|---:|---:|")
    for r in rows:
        for lang, d in r["languages"].items():
            click.echo(f"| {r['testament']} | {lang} ({d['module']}) | {d['verses']:,} | {d['sentences']:,} | "
                       f"{d['words']:,} | {d['types']:,} |")
    for r in rows:
        out = r["left_out"]
        click.echo(f"{r['testament']} testament: {r['aligned']:,} aligned verses ({out['both']:,} with words in both; "
                   f"left out: {out['near_empty']} next to a verse empty in one language, "
                   f"{out['in_shifted_chapters']} in renumbered chapters"
                   + (f" ({', '.join(out['shifted_chapters'])}))" if out["shifted_chapters"] else ")"))
    if json_path:
        write_json(Path(json_path), {"rows": rows})


# the fewest training verses whose silver dictionary has a pair (the first 19 aligned New Testament verses of KJV
# and RV1909 have none, the first 20 one, 40 have 19): fewer would write a corpus.toml naming an empty dictionary
MIN_DICTIONARY_VERSES = 20


@main.command()
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--train-verses", type=int, default=0, show_default=True,
              help=f"The first N aligned New Testament verses (0 = all; at least {MIN_DICTIONARY_VERSES}, the "
                   f"fewest whose silver dictionary has a pair).")
@click.option("--dev-verses", type=int, default=10_000, show_default=True,
              help="The first N aligned Old Testament verses (en-es's data.dev_sentences).")
@click.option("--force", is_flag=True, help="Write into OUT although it holds files (its corpus.toml, dictionary and "
                                            "the other files written here are replaced); never into a run or export.")
@_fail_cleanly
def verses(out, train_verses, dev_verses, force):
    """Write the English and Spanish verses --source en-es reads (SWORD modules KJV and RV1909) into OUT as
    files the parallel source reads: keyed training verses, line-aligned dev verses, the silver dictionary,
    the silver links of the dev verses (Pharaoh) and corpus.toml naming them (--files OUT/corpus.toml), and
    OUT/gospels, a task directory (which Gospel a verse is from) for minimult transfer --task."""
    from minimult.data.sources.en_es import write_files
    from minimult.runs import check_own_folder

    if train_verses < 0 or dev_verses < 2:
        raise MinimultError("--train-verses must be >= 0 (0 = all) and --dev-verses >= 2")
    if 0 < train_verses < MIN_DICTIONARY_VERSES:
        raise MinimultError(f"--train-verses {train_verses} gives no silver dictionary pair (a pair needs 3 sure "
                            f"links), so corpus.toml would name an empty dictionary: give at least "
                            f"{MIN_DICTIONARY_VERSES} (0 = all)")
    folder = Path(out)  # checked before anything is read or written
    if folder.exists() and not folder.is_dir():
        raise MinimultError(f"verses: {folder} is a file, not a folder")
    check_own_folder(folder, f"verses: {folder}")
    if not force and folder.is_dir() and any(folder.iterdir()):
        raise MinimultError(f"verses: {folder} is not empty (a corpus.toml or dictionary edited by hand would be "
                            f"overwritten): give a new folder, or --force to replace what verses writes there")
    counts = write_files(folder, train_verses or None, dev_verses, progress=note)
    task = (f"a task of {counts['gospel_verses']:,} Gospel verses" if counts["gospel_verses"] else
            f"no gospels/ task (its training verses are all from {', '.join(counts['gospel_labels']) or 'no Gospel'}: "
            f"a task needs two; more --train-verses, or 0 for all, give one)")
    click.echo(f"wrote {counts['train_verses']:,} training and {counts['dev_verses']:,} dev verse pairs, "
               f"{counts['dictionary_pairs']:,} dictionary pairs, {counts['silver_dev_links']:,} silver dev links and "
               f"{task} to {out}; train with --files {shlex.quote(str(folder / 'corpus.toml'))}"
               + (f", transfer with --task {folder / 'gospels'}" if counts["gospel_verses"] else ""))


@main.command(name="mods")
def list_mods():
    """List the registered mods with their versions, and the mods each cannot be combined with."""
    from minimult.mods import clash, registered

    for m in registered():
        click.echo(f"{m.spec(m.default) if m.parse else m.name:<16} v{m.version}  {m.description}")
        if others := [o.name for o in registered() if o is not m and clash(m, o)]:
            click.echo(f"{'':<16}     not with: {', '.join(others)}")


from minimult.cli_sweep import report, sweep  # noqa: E402  (commands defined in their own module)

main.add_command(sweep)
main.add_command(report)


if __name__ == "__main__":  # pragma: no cover
    main()
