"""Report: the paper's Table 1 (mean ± std over seeds, Welch's t-test against `original`) and figures.

Public entry: `build_report(paths, out_dir, log, readme=None) -> dict`. `paths` are run folders or
folders holding runs (searched recursively). Everything comes from files in the run folders
(`results.json`, `config.json`, `metrics.jsonl`, `checkpoint.pt`); a sweep's `<grid>.sweep.json` next
to its runs only says which runs form which setting (paper ID and name) of which table. Runs no
sweep claims are grouped by mods and configuration in a section of their own. A setting whose grid
gives the paper's numbers (`paper`, recorded in the manifest) shows them in parentheses beside its own.

Writes to `out_dir`: `table1.md` (every section, the first being Table 1), `table1.csv` (one row per
setting, full precision, a `section` column), `runs.csv` (one row per run behind those rows: seed, run
folder, device, precision, training seconds and every column), `report.json` (every aggregated number,
the values per seed and the p-values of every metric) and PNG figures (see `figures.py`); with `readme`,
the first table also goes between that file's `<preset>-<grid>` markers (see `readme.py`), and its
orderings between `<preset>-<grid>-orderings` markers where the file has them.

The modules, by job: `collect` (run folders, sweep manifests, sections of settings), `tables` (aggregates, p-values,
markdown and CSV; the columns come from the evaluator registry), `figures` (position similarity, PCA, training
curves, each seed's final numbers), `segments` (the segment-alternation table and figure of runs evaluated with
`eval --segment`), `links` (word alignment against link files and retrieval both ways, for real languages), `probe`
(language-ID accuracy per layer, overlaying settings), `transfer` (zero-shot transfer per mode and its scatter
against word-order distance), `series` (µ and ∆ along K et al.'s depth, heads, parameter, permutation and
tokenization series), `recipes` (the two recipes side by side, the lang-pos seeds on the floor), `readme` (generated
tables inside README.md and docs/results.md), `claims` (the papers' claims of `claims.toml`, judged from the
sections: docs/claims.md; each table also gets its own orderings, the claims between two of its rows judged from its
runs alone) and `site` (the static HTML site over results folders: `minimult report --html DIR` / `--site DIR`;
Jinja2 templates in `templates/`).
"""

from __future__ import annotations

from minimult.registry import Registry
from minimult.report.build import build_report, load, readme_table  # noqa: F401  (the entries others import)

Registry.load(__name__)  # every section beyond Table 1 registers itself (`parts`)
