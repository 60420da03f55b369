"""Command line for grids: `minimult sweep GRID` and `minimult report RUNS... --out DIR`.

Only parses arguments and calls `sweep.run_sweep` / `report.build_report`; registered on the main
group at the end of `cli.py`. As there, each command imports what it calls in its own body (start-up time).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from minimult import cli_help
from minimult.cli_help import DerivedHelp
from minimult.errors import MinimultError, fail_cleanly, terminate_as_interrupt


def _ids(only: str | None) -> list[str] | None:
    """--only's setting IDs; given but empty is an error, not "every setting"."""
    if only is None:
        return None
    ids = [s.strip() for s in only.split(",") if s.strip()]
    if not ids:
        raise MinimultError("--only needs at least one setting ID, e.g. --only 0,1")
    return ids


@click.command()
@click.argument("grid_file", metavar="GRID", type=click.Path(dir_okay=False))
@click.option("--seeds", default=None, metavar="S,S,...", help="Seeds (default: the grid's, e.g. 0,42,43,100,101).")
@click.option("--preset", default=None, cls=DerivedHelp, derived_help=lambda: cli_help.presets("default: the grid's"))
@click.option("--jobs", type=int, default=None,
              help="Runs in parallel (default: one per CPU core with one thread each, or one per GPU).")
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: a process pool on this machine; ray: one Ray task per run (or per --stack group).")
@click.option("--address", default=None, help="Ray cluster address (default: start a private local Ray).")
@click.option("--root", default="runs", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the run folders (<id>-<mods>-s<seed>).")
@click.option("--only", default=None, metavar="ID,ID", help="Only these setting IDs of the grid, run in this order.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Override a setting for every run, e.g. --set train.epochs=10 (repeatable).")
@click.option("--stack", type=int, default=1, show_default=True, metavar="K",
              help="Train up to K new runs of one model shape and schedule as one stacked (batched) model "
                   "per worker; per-model results equal separate runs. Pays off on a GPU; on a CPU it is "
                   "slower (see experiments/bench_stacked.py).")
@click.option("--nproc", default=None, metavar="auto",
              help="auto: when fewer runs are left to do than CPU cores, each run trains on the idle cores too "
                   "(torch.distributed, one thread per process; e.g. one run on 2 cores: 2 processes). A run's "
                   "numbers then differ from one process's by the dropout draws, like another dropout seed; "
                   "default: one process per run (train.nproc).")
@click.option("--status-every", type=float, default=300, show_default=True, metavar="SECONDS",
              help="How often to print where the running runs are and how long the sweep has left.")
@click.option("--dry-run", is_flag=True,
              help="Say what the sweep would do with each run (new, resume from its logged step, evaluate) and "
                   "change nothing.")
@fail_cleanly
def sweep(grid_file, seeds, preset, jobs, backend, address, root, only, settings, stack, nproc, status_every,
          dry_run):
    """Train and evaluate every setting x seed of a grid file (e.g. experiments/table1.toml).

    Runs already complete are skipped and interrupted ones resumed, so the same command can simply
    be run again. Exits with status 1 if any run failed."""
    terminate_as_interrupt()  # `kill PID`: workers told, the line of what is kept
    try:  # an interrupt while it imports, too, is the line below
        from minimult.config import parse_overrides
        from minimult.sweep.grid import load_grid, parse_seeds
        from minimult.sweep import run_sweep

        grid = load_grid(grid_file)
        summary = run_sweep(grid, parse_seeds(seeds) if seeds is not None else None, preset, jobs, backend, address,
                            root, parse_overrides(settings), log=click.echo, only=_ids(only), stack=stack,
                            progress_every=status_every, nproc=nproc, dry_run=dry_run)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while it exits changes nothing
        click.echo("interrupted: checkpointed work is kept; run the same sweep command again to resume", err=True)
        sys.exit(130)
    if not summary.ok:
        sys.exit(1)


@click.command()
@click.argument("runs", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False),
              help="Folder for table1.md, table1.csv, report.json and the figures.")
@click.option("--html", "html_dir", default=None, type=click.Path(file_okay=False),
              help="Also build the HTML site there: index.html, a page per RUNS folder and per run, the claims.")
@click.option("--site", "site_dir", default=None, type=click.Path(file_okay=False),
              help="Build the HTML site of every folder under experiments/results/ there (no RUNS).")
@click.option("--readme", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Also write the first table between the file's <!-- BEGIN <preset>-<grid> --> and <!-- END "
                   "<preset>-<grid> --> lines (README.md: paper-table1; docs/results.md: quick-table1); with --site, "
                   "the claims table between its claims markers.")
@fail_cleanly
def report(runs, out_dir, html_dir, site_dir, readme):
    """Table 1 (mean ± std over seeds, Welch's t-test against original) and figures from run folders
    or folders holding runs; with --html or --site, the static HTML site over them and the papers'
    claims judged from them."""
    from minimult.report import build_report
    from minimult.report.site import build_site, site_folders

    from minimult.data.corpus import text_lines
    from minimult.report.readme import markers, update_readme
    from minimult.runs import lab_folder

    log = lambda s: click.echo(s, err=True)  # noqa: E731
    for option, folder in (("--out", out_dir), ("--html", html_dir), ("--site", site_dir)):
        inside = folder and lab_folder(folder)
        if inside:
            raise MinimultError(f"{option} {folder}: {inside[0]} is {inside[1]}; a report goes into a folder of its "
                                f"own")
    if site_dir is not None:
        if runs or out_dir or html_dir:
            raise MinimultError("--site builds every folder under experiments/results/ on its own: give RUNS with "
                                "--out or --html instead")
        if readme and markers("claims")[0] not in text_lines(Path(readme).read_text(encoding="utf-8")):
            raise MinimultError(f"--readme {readme} has no line {markers('claims')[0]}: say where the claims table "
                                f"goes before the site is built")
        built = build_site(site_folders(), site_dir, log)
        if readme:
            from minimult.report.claims import markdown

            changed = update_readme(readme, markdown(built["claims"]), "claims")
            log(f"report: {readme} {'updated' if changed else 'unchanged'} between its claims markers")
            if built["recipes"] and update_readme(readme, built["recipes"], "recipes", optional=True):
                log(f"report: {readme} updated between its recipes markers (Table 1 under both recipes)")
        click.echo(f"site: {built['index']}")
        return
    if not runs:
        raise MinimultError("give the run folders (or folders holding runs) to report on, or --site DIR")
    if out_dir is None and html_dir is None:
        raise MinimultError("say where the report goes: --out DIR (tables and figures) and/or --html DIR (the site)")
    prebuilt = {}
    if out_dir is not None:
        result = build_report(list(runs), out_dir, log=log, readme=readme)
        click.echo(result["printed"])
        if len(runs) == 1:
            prebuilt[Path(runs[0])] = Path(out_dir)
    elif readme:
        raise MinimultError("--readme writes the report's Table 1: give --out too")
    if html_dir is not None:
        built = build_site([Path(r) for r in runs], html_dir, log, prebuilt=prebuilt)
        click.echo(f"site: {built['index']}")
