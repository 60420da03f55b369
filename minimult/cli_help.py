"""Help texts that list what a registry holds (sources, presets, evaluators), derived from it when `--help`
is shown: a new source, preset or evaluator appears in them without a change here, and a command that
is not asked for help never imports the evaluators for it (~0.3 s)."""

from __future__ import annotations

import click


class DerivedHelp(click.Option):
    """An option whose help text is `derived_help()`, called when help is shown."""

    def __init__(self, *args, derived_help, **kwargs):
        super().__init__(*args, **kwargs)
        self.derived_help = derived_help

    def get_help_record(self, ctx):
        self.help = self.derived_help()
        return super().get_help_record(ctx)


def sources() -> str:
    from minimult.config import DataConfig
    from minimult.data.sources import REGISTRY

    return ("Where the languages come from (data.source; --fake is its old name): "
            + "; ".join(f"{name}{' (default)' if name == DataConfig.source else ''}: {s.description}"
                        for name, s in REGISTRY.items()) + ".")


def shared_option_sources() -> str:
    """The sources where data.shared_vocab chooses between own vocabularies and one shared (`shared_option`)."""
    from minimult.data.sources import REGISTRY

    return " or ".join(name for name, s in REGISTRY.items() if s.shared_option)


def presets(note: str) -> str:
    from minimult.config import PRESETS

    return f"{' | '.join(PRESETS)} ({note})."


def evaluator_names() -> str:
    from minimult.evaluate import evaluators  # the package registers every evaluator

    return ", ".join(e.name for e in evaluators())


def text_evaluators() -> str:
    """The evaluators `eval --hf --pair` runs on a plain pair of texts (`registry.text_evaluators`)."""
    from minimult.evaluate import registry  # the package registers every evaluator

    return ", ".join(registry.text_evaluators())
