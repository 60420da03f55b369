"""Command line: parses arguments and calls the stage modules; nothing else happens here."""

from __future__ import annotations

import sys
from functools import wraps

import click

from .errors import MinimultError


def _fail_cleanly(f):
    """A MinimultError becomes one line on stderr and exit code 2, never a traceback."""
    @wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except MinimultError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted: checkpointed work is kept; rerun with --resume to continue", err=True)
            sys.exit(130)
    return wrapper


def data_options(f):
    """Options that choose the data (shared by prepare and pretrain)."""
    for option in reversed([
        click.option("--train-file", "train", default=None, metavar="PATH|NAME",
                     help="Training corpus: one sentence per line, or a built-in name (default bbe-nt)."),
        click.option("--dev-file", "dev", default=None, metavar="PATH|NAME",
                     help="Development corpus (default kjv-ot-10k: first 10,000 KJV Old Testament sentences)."),
        click.option("--fake", type=click.Choice(["shift", "unicode"]), default=None,
                     help="Fake-English by id shift (default) or by unicode code-point shift (K et al.)."),
        click.option("--preset", default="paper", show_default=True, help="paper | quick | tiny."),
        click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
                     help="Override any setting, e.g. --set train.lr=1e-3 (repeatable)."),
    ]):
        f = option(f)
    return f


def _overrides(train, dev, fake, settings) -> dict:
    from .config import parse_overrides

    out = {k: v for k, v in (("data.train", train), ("data.dev", dev), ("data.fake", fake)) if v is not None}
    out.update(parse_overrides(settings))
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="minimult")
def main():
    """minimult: pretrain small BERTs on English + a second language and measure multilinguality."""


@main.command()
@data_options
@click.option("--mods", default=None, help="Mods whose data effects to preview (comma-separated).")
@click.option("--examples", default=3, show_default=True, help="Example sentences to show.")
@_fail_cleanly
def prepare(train, dev, fake, preset, settings, mods, examples):
    """Build corpora, vocabulary and language views (cached) and print corpus statistics."""
    from .config import resolve
    from .languages import build_sides
    from .prepare import prepare as run_prepare, summary

    cfg, active = resolve(preset, _overrides(train, dev, fake, settings), mods)
    prepared = run_prepare(cfg.data, progress=lambda s: click.echo(s, err=True))
    click.echo(summary(prepared))
    if examples:
        english, second = build_sides(prepared, cfg.data, active, "train", cfg.train.seed)
        click.echo(f"\nexamples ({cfg.mods}):")
        for i in range(min(examples, english.num_sentences)):
            click.echo("  en: " + " ".join(prepared.vocab.display(english.sentence(i))))
            click.echo("  L1: " + " ".join(prepared.vocab.display(second.sentence(i))))


@main.command(name="mods")
def list_mods():
    """List the registered mods with their versions."""
    from .mods import REGISTRY

    for m in REGISTRY.values():
        click.echo(f"{m.spec(m.default) if m.parse else m.name:<16} v{m.version}  {m.description}")


if __name__ == "__main__":  # pragma: no cover
    main()
