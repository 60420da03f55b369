"""`minimult sweep`: a tiny grid (3 settings x 2 seeds) completes; a second invocation skips
everything; an interrupted run is resumed to the same result and only the unfinished runs are run;
failures are reported while the rest goes on; the Ray backend gives the same numbers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from conftest import cli
from minimult.config import RunConfig
from minimult.mods import parse_mods
from minimult.runs import read_json, try_lock, write_json
from minimult.runs import load_checkpoint
from minimult.train import pretrain

ROOT = Path(__file__).resolve().parents[1]
# `-c` rather than `-m minimult.cli`: works whatever the order of cli.py's `__main__` block
CLI = [sys.executable, "-c", "import sys; from minimult.cli import main; sys.exit(main())"]
SETTINGS = {"0": "original", "1": "lang-pos", "18": "untrained"}
SEEDS = (0, 42)
RUNS = [f"{i}-{m}-s{s}" for i, m in SETTINGS.items() for s in SEEDS]

# 4 layers (µ at layers 0 and 3 = round(2/3 x 4)); half the tiny corpus (2 x 13 steps); evaluations during
# training for the report's curves
GRID = f"""
title = "Tiny test grid"
preset = "tiny"
seeds = [{", ".join(map(str, SEEDS))}]

[overrides]
"data.train" = "{ROOT / 'corpora/tiny/train.txt'}"
"data.dev" = "{ROOT / 'corpora/tiny/dev.txt'}"
"data.vocab_size" = 256
"model.layers" = 4
"data.train_sentences" = 200
"data.dev_sentences" = 100
"train.eval_every" = 13
""" + "".join(f'\n[[settings]]\nid = "{i}"\nname = "{m}"\nmods = "{"" if m == "original" else m}"\n'
              for i, m in SETTINGS.items())


def sweep_cli(*args, cwd) -> subprocess.CompletedProcess:
    """`minimult sweep ARGS` in a process of its own, as a user starts it; the tests below that only read what
    a sweep prints and writes run it in this process (`cli`)."""
    return subprocess.run(CLI + ["sweep", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=900)


@dataclass
class Swept:
    base: Path
    grid: Path
    root: Path
    proc: subprocess.CompletedProcess


_DONE: dict[str, Swept] = {}


@pytest.fixture
def swept(tmp_path_factory) -> Swept:
    """The tiny grid swept once per test session (shared with test_report)."""
    if "local" not in _DONE:
        base = tmp_path_factory.mktemp("sweep")
        grid = base / "tiny.toml"
        grid.write_text(GRID)
        proc = sweep_cli(grid, "--root", base / "runs", "--jobs", 2, cwd=base)
        _DONE["local"] = Swept(base, grid, base / "runs", proc)
    return _DONE["local"]


def headline(results: dict) -> dict:
    out = {"mu": results["mu"]}
    for k, v in results["perplexity"].items():  # per language (dev_languages): one number per language
        out.update({f"ppl_{k}_{lang}": x for lang, x in v.items()} if isinstance(v, dict) else {f"ppl_{k}": v})
    for l, r in results["layers"].items():
        for k in ("align_f1", "retrieval", "translation"):
            out[f"{k}_L{l}"] = r[k]
    return out


def results_of(root: Path) -> dict[str, dict]:
    return {name: read_json(root / name / "results.json") for name in RUNS}


def test_sweep_completes_every_run(swept):
    assert swept.proc.returncode == 0, swept.proc.stdout + swept.proc.stderr
    out = swept.proc.stdout
    assert "6 runs: 6 done, 0 skipped (already complete), 0 failed" in out
    assert sum(line.startswith("[") and "] done " in line for line in out.splitlines()) == 6
    for name in RUNS:
        run = swept.root / name
        results = read_json(run / "results.json")
        meta = read_json(run / "run.json")
        assert meta["status"] == "complete" and results["steps"] == meta["steps"]
        assert results["mu"] is not None and set(results["layers"]) == {"0", "3"} and results["mu_layers"] == [0, 3]
        assert results["seed"] == int(name.rsplit("-s", 1)[1])
        assert (run / "sweep.log").is_file() and (run / "vocab.txt").is_file()
    cfg = read_json(swept.root / "1-lang-pos-s42" / "config.json")
    assert cfg["mods"] == "lang-pos" and cfg["train"]["seed"] == 42 and cfg["model"]["layers"] == 4
    assert read_json(swept.root / "18-untrained-s0" / "run.json")["steps"] == 0
    manifest = read_json(swept.root / "tiny.sweep.json")
    assert [s["id"] for s in manifest["settings"]] == list(SETTINGS)
    assert manifest["settings"][1]["runs"] == ["1-lang-pos-s0", "1-lang-pos-s42"]
    # different seeds and settings really differ
    mus = {n: r["mu"] for n, r in results_of(swept.root).items()}
    assert mus["0-original-s0"] != mus["0-original-s42"] and mus["0-original-s0"] != mus["1-lang-pos-s0"]


def test_second_invocation_skips_everything(swept):
    before = {n: (swept.root / n / "results.json").stat().st_mtime_ns for n in RUNS}
    proc = cli("sweep", swept.grid, "--root", swept.root, cwd=swept.base)
    assert proc.returncode == 0, proc.stderr
    assert "6 runs: 0 done, 6 skipped (already complete), 0 failed" in proc.stdout
    assert {n: (swept.root / n / "results.json").stat().st_mtime_ns for n in RUNS} == before


def test_a_run_interrupted_before_its_first_checkpoint_is_planned_from_step_0(tmp_path):
    """run.json `interrupted` at step 0 (Ctrl-C before the first checkpoint): the plan says so, not 'its checkpoint'."""
    from minimult.sweep.plan import Task, pending

    write_json(tmp_path / "run.json", {"status": "interrupted", "steps": 0, "total_steps": 26})
    assert pending(Task("0", "original", "", 0, str(tmp_path), {})) == "resume from step 0 of 26 (no checkpoint)"


def test_interrupted_sweep_finishes_only_the_rest(swept, tmp_path):
    assert swept.proc.returncode == 0
    root = tmp_path / "runs"
    shutil.copytree(swept.root, root)
    reference = results_of(swept.root)
    # one run "killed" after 10 of its 26 steps, another never started
    run = root / "0-original-s42"
    for f in ("results.json", "checkpoint.pt", "metrics.jsonl", "run.json"):
        (run / f).unlink()
    cfg = RunConfig.from_dict(read_json(run / "config.json"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the sweep's workers: bit-identical continuation
    try:
        pretrain(cfg, parse_mods(None), run, log=lambda s: None, stop_after=10)
    finally:
        torch.set_num_threads(threads)
    assert not load_checkpoint(run / "checkpoint.pt")["complete"]
    shutil.rmtree(root / "1-lang-pos-s0")
    # a dry run says what the sweep will do and changes nothing
    before = sorted((p.relative_to(root), p.stat().st_mtime_ns) for p in root.rglob("*"))
    dry = cli("sweep", swept.grid, "--root", root, "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "2 to run, 4 already complete" in dry.stdout
    said = [line.strip() for line in dry.stdout.splitlines() if line.startswith(("  new", "  resume", "  evaluate"))]
    assert said == ["new: 1-lang-pos-s0",  # seed-major, as the sweep runs them
                    "resume from step 10 of 26 (its checkpoint): 0-original-s42"]
    assert sorted((p.relative_to(root), p.stat().st_mtime_ns) for p in root.rglob("*")) == before
    lock = try_lock(run)  # a run another process is at work on is named so (read from /proc/locks: no lock taken)
    busy = cli("sweep", swept.grid, "--root", root, "--dry-run", cwd=tmp_path).stdout
    lock.close()
    assert "  busy: resume from step 10 of 26 (its checkpoint): 0-original-s42" in busy, busy
    assert cli("sweep", swept.grid, "--root", tmp_path / "nowhere", "--dry-run", cwd=tmp_path).returncode == 0
    assert not (tmp_path / "nowhere").exists()
    inside = cli("sweep", swept.grid, "--root", run, "--dry-run", cwd=tmp_path)  # a run folder holds no runs
    assert inside.returncode == 2 and f"--root {run} is a run folder; give a folder of its own" in inside.stderr
    proc = cli("sweep", swept.grid, "--root", root, "--jobs", 2, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 runs: 2 done, 4 skipped (already complete), 0 failed" in proc.stdout
    assert "done 0-original-s42 (resumed" in proc.stdout and "done 1-lang-pos-s0 (new" in proc.stdout
    assert "resuming" in (run / "sweep.log").read_text()
    after = results_of(root)
    for name in RUNS:  # the resumed and the re-created run end exactly where the uninterrupted ones did
        assert headline(after[name]) == pytest.approx(headline(reference[name]), abs=1e-9), name


def test_failing_runs_are_reported_and_the_others_go_on(swept, tmp_path):
    assert swept.proc.returncode == 0
    root = tmp_path / "runs"
    shutil.copytree(swept.root, root)
    broken = root / "0-original-s0"  # a damaged checkpoint of an unfinished run: the worker fails
    (broken / "results.json").unlink()
    meta = read_json(broken / "run.json")
    write_json(broken / "run.json", {**meta, "status": "training"})
    (broken / "checkpoint.pt").write_bytes(b"not a checkpoint")
    other = root / "1-lang-pos-s0"  # a folder holding another configuration is never reused
    cfg = read_json(other / "config.json")
    cfg["train"]["lr"] = 0.5
    write_json(other / "config.json", cfg)
    moved = root / "0-original-s42"  # how a run executed (threads, device: a run brought from a GPU) is not
    cfg = read_json(moved / "config.json")  # which run it is: the folder still matches
    cfg["train"].update(threads=3, device="cuda:1")
    write_json(moved / "config.json", cfg)
    proc = cli("sweep", swept.grid, "--root", root, cwd=tmp_path)
    assert proc.returncode == 1
    assert "6 runs: 0 done, 4 skipped (already complete), 2 failed" in proc.stdout
    assert "FAILED 0-original-s0: error: checkpoint" in proc.stdout and "corrupt" in proc.stdout
    assert "failed: 1-lang-pos-s0: error:" in proc.stdout and "train.lr=0.5" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_run_finished_after_the_sweep_planned_it_is_not_trained_again(swept, tmp_path):
    """A sweep plans its runs when it starts; a run another process finished since (a second sweep, a run
    brought from a GPU without its checkpoint) is skipped when its turn comes, not trained anew over its
    results."""
    from minimult.sweep.grid import load_grid
    from minimult.sweep.plan import plan
    from minimult.sweep.worker import run_group

    assert swept.proc.returncode == 0
    root = tmp_path / "runs"
    shutil.copytree(swept.root, root)
    grid = load_grid(swept.grid)
    (task,) = [t for t in plan(grid, SEEDS, grid.preset, root, {}) if Path(t.run_dir).name == "0-original-s0"]
    run = root / "0-original-s0"
    (run / "checkpoint.pt").unlink()  # as a finished run comes back from a GPU: results, no checkpoint
    before = {f: (run / f).read_bytes() for f in ("results.json", "metrics.jsonl", "run.json")}
    (outcome,) = run_group([task], threads=None)
    assert outcome.status == "skipped" and "finished elsewhere" in outcome.message
    assert {f: (run / f).read_bytes() for f in before} == before
    (run / "results.json").unlink()  # unfinished and without a checkpoint: trained anew, as before
    (outcome,) = run_group([task], threads=None)
    assert outcome.status == "done" and outcome.message == "new run"


def test_ray_backend_gives_the_same_results(swept, tmp_path):
    pytest.importorskip("ray")
    assert swept.proc.returncode == 0
    proc = sweep_cli(swept.grid, "--root", tmp_path / "runs", "--backend", "ray", "--jobs", 2, "--status-every", 0.01,
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 runs: 6 done, 0 skipped" in proc.stdout and "ray: 2 CPUs" in proc.stdout
    assert "running, " in proc.stdout and "finished elsewhere" not in proc.stdout
    local, ray = results_of(swept.root), results_of(tmp_path / "runs")
    for name in RUNS:
        assert headline(ray[name]) == pytest.approx(headline(local[name]), abs=1e-6), name
    assert json.loads((tmp_path / "runs" / "tiny.sweep.json").read_text())["settings"][0]["runs"] == RUNS[:2]


def test_ray_cluster_by_address_with_token_authentication(swept, tmp_path):
    """A real `ray start --head` on loopback (token authentication is on by default in current Ray),
    reached with --address as the README shows; the numbers equal the local backend's."""
    import os
    import shutil
    import socket

    pytest.importorskip("ray")
    ray_cli = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path / "home"  # the cluster's token goes to $HOME/.ray/auth_token: a private one
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("RAY_AUTH_MODE", None)
    token = subprocess.run([ray_cli, "get-auth-token", "--generate"], capture_output=True, text=True, env=env,
                           timeout=120)  # with a token at hand, `ray start` turns authentication on
    assert token.returncode == 0 and (home / ".ray" / "auth_token").is_file(), token.stderr
    start = subprocess.run([ray_cli, "start", "--head", "--port", str(port), "--num-cpus", "2",
                            "--node-ip-address", "127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"],
                           capture_output=True, text=True, env=env, timeout=180)
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        assert "Token authentication is enabled" in start.stdout + start.stderr
        grid = tmp_path / "tiny.toml"
        grid.write_text(GRID)
        proc = subprocess.run([sys.executable, "-m", "minimult.cli", "sweep", str(grid), "--root", str(tmp_path / "runs"),
                               "--backend", "ray", "--address", f"127.0.0.1:{port}", "--only", "0", "--seeds", "0"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "token authentication" in proc.stdout and "1 runs: 1 done" in proc.stdout
        ray_result = json.loads((tmp_path / "runs" / RUNS[0] / "results.json").read_text())
        assert headline(ray_result) == pytest.approx(headline(results_of(swept.root)[RUNS[0]]), abs=1e-6)
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, env=env, timeout=120)


def test_a_ray_address_nothing_answers_at_is_one_line_in_seconds(tmp_path):
    """--address HOST:PORT where no cluster listens: one error line naming the address and what to do (Ray
    itself retried for minutes), the run folders untouched."""
    import socket

    pytest.importorskip("ray")
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    grid = tmp_path / "tiny.toml"
    grid.write_text(GRID)
    proc = cli("sweep", grid, "--root", tmp_path / "runs", "--backend", "ray", "--address", f"127.0.0.1:{port}",
               "--only", "0", "--seeds", "0", cwd=tmp_path)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and last.startswith(f"error: cannot reach a Ray cluster at 127.0.0.1:{port}: "), last
    assert f"`ray start --head --port {port}`" in last and "Traceback" not in proc.stderr
    assert not list((tmp_path / "runs").glob("*/checkpoint.pt"))


def test_a_run_another_sweep_is_working_on_is_left_alone(tmp_path):
    import fcntl

    from minimult.sweep import LOCK, Summary, Task, run_group

    run = tmp_path / "0-original-s0"
    run.mkdir()
    with open(run / LOCK, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        [outcome] = run_group([Task("0", "original", "original", 0, str(run), {})], threads=None)
    # busy, not failed: the other sweep is training it, and this one exits 0 saying so
    assert outcome.status == "busy" and "another process is working on" in outcome.message
    summary = Summary([outcome], tmp_path, tmp_path / "x.sweep.json")
    assert summary.ok and "0 failed, 1 busy (another process is training them)" in summary.line()
    assert not (run / "config.json").exists() and not (run / "sweep.log").exists()


def test_stacked_sweep_gives_the_same_results(swept, tmp_path):
    assert swept.proc.returncode == 0
    proc = cli("sweep", swept.grid, "--root", tmp_path / "runs", "--stack", 2, "--jobs", 2, "--status-every", 0.01,
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 runs: 6 done, 0 skipped" in proc.stdout and "stacked in 2 group(s) of up to 2" in proc.stdout
    status = [line for line in proc.stdout.splitlines() if " running, " in line]
    assert status and not any("finished elsewhere" in line for line in status)  # its own runs, reported first
    assert "new run, stacked x2" in proc.stdout  # original s0+s42 and lang-pos s0+s42; untrained alone
    local, stacked = results_of(swept.root), results_of(tmp_path / "runs")
    for name in RUNS:  # weights agree to float round-off (tests/test_stacked.py); metrics to within a link
        assert headline(stacked[name]) == pytest.approx(headline(local[name]), abs=2e-3, rel=1e-3), name
    meta = read_json(tmp_path / "runs" / "0-original-s42" / "run.json")
    assert meta["stacked_with"] == ["0-original-s0", "0-original-s42"] and meta["status"] == "complete"


def test_grouping_for_stacking_keeps_shapes_and_checkpointed_runs_apart(tmp_path):
    from minimult.sweep import Task, group_tasks

    def task(name, model, epochs=2, checkpoint=False, precision="auto"):
        d = tmp_path / name
        d.mkdir()
        if checkpoint:
            (d / "checkpoint.pt").write_bytes(b"x")
        train = {"epochs": epochs, "batch_size": 8, "lr": 1e-3, "weight_decay": 0.0, "adam_eps": 1e-6,
                 "warmup_steps": 1, "clip": 1.0, "device": "cpu", "threads": 1, "precision": precision,
                 "checkpoint_every": 0, "eval_every": 0, "eval_sentences": 10, "batching": "bucket"}
        return Task("0", name, name, 0, str(d), {"model": {"hidden": model}, "train": train})

    ts = [task("a", 64), task("b", 128), task("g", 64, precision="bf16"), task("c", 64),
          task("d", 64, checkpoint=True), task("e", 64), task("f", 64, epochs=0)]
    names = [[t.name for t in g] for g in group_tasks(ts, 2)]
    assert names == [["a", "c"], ["b"], ["g"], ["d"], ["e"], ["f"]]
    assert [[t.name for t in g] for g in group_tasks(ts, 1)] == [[t.name] for t in ts]


def test_placement_announces_the_threads_a_run_will_really_use(monkeypatch):
    from types import SimpleNamespace

    from minimult.sweep import Placement

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("minimult.sweep.cpu_count", lambda: 8)

    def tasks(*threads):
        return [SimpleNamespace(config={"train": {"device": "cpu", "threads": t}}) for t in threads]

    assert Placement.choose(tasks(0, 0), [[1], [2]], jobs=2).threads == 4  # the cores, shared by the workers
    assert Placement.choose(tasks(1, 1), [[1], [2]], jobs=2).describe() == "CPU, 1 thread(s) per run"  # --set wins
    assert Placement.choose(tasks(1, 0), [[1], [2]], jobs=2).threads == 4  # mixed: the share again


def test_manifest_keeps_the_grid_order_whatever_only_picks(tmp_path):
    from types import SimpleNamespace

    from minimult.sweep.grid import load_grid
    from minimult.sweep import write_manifest

    (tmp_path / "tiny.toml").write_text(GRID)
    grid = load_grid(tmp_path / "tiny.toml")

    def swept_only(setting_id):  # what `sweep --only ID` hands write_manifest: its own tasks only
        tasks = [SimpleNamespace(setting_id=setting_id, mods=SETTINGS[setting_id] if setting_id != "0" else "original",
                                 run_dir=str(tmp_path / f"{setting_id}-{SETTINGS[setting_id]}-s{s}")) for s in SEEDS]
        return read_json(write_manifest(tmp_path, grid, "tiny", tasks))

    assert [s["id"] for s in swept_only("18")["settings"]] == ["18"]
    assert [s["id"] for s in swept_only("0")["settings"]] == ["0", "18"]
    manifest = swept_only("1")
    assert [s["id"] for s in manifest["settings"]] == ["0", "1", "18"]
    assert manifest["settings"][2]["runs"] == ["18-untrained-s0", "18-untrained-s42"]


def test_two_sweeps_into_one_root_merge_the_manifest_in_turn(tmp_path):
    """The manifest's read-merge-write holds a lock on the root folder: a second sweep's merge waits for it
    (else the two could each read the file before the other wrote, and one setting would drop out)."""
    import fcntl
    import os
    import threading
    from types import SimpleNamespace

    from minimult.sweep.grid import load_grid
    from minimult.sweep import write_manifest

    (tmp_path / "tiny.toml").write_text(GRID)
    grid = load_grid(tmp_path / "tiny.toml")
    tasks = [SimpleNamespace(setting_id="1", mods="lang-pos", run_dir=str(tmp_path / "1-lang-pos-s0"))]
    folder = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(folder, fcntl.LOCK_EX)  # another sweep in the middle of its merge
    writer = threading.Thread(target=write_manifest, args=(tmp_path, grid, "tiny", tasks))
    writer.start()
    writer.join(timeout=1.0)
    assert writer.is_alive() and not (tmp_path / "tiny.sweep.json").exists()  # waiting, nothing written
    os.close(folder)
    writer.join(timeout=30)
    assert [s["id"] for s in read_json(tmp_path / "tiny.sweep.json")["settings"]] == ["1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.sweep.json", "tiny.toml"]  # no lock file left


def test_settings_that_need_a_gpu_are_left_out_on_a_cpu_unless_named(swept, tmp_path, monkeypatch):
    from minimult.sweep.grid import load_grid
    from minimult.sweep import run_sweep

    assert swept.proc.returncode == 0
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    grid_file = tmp_path / "tiny.toml"
    grid_file.write_text(GRID.replace('mods = "untrained"\n', 'mods = "untrained"\nneeds_gpu = true\n'))
    grid = load_grid(grid_file)
    assert [s.needs_gpu for s in grid.settings] == [False, False, True]
    root = tmp_path / "runs"
    root.mkdir()
    for name in RUNS[:4]:  # original and lang-pos already done
        shutil.copytree(swept.root / name, root / name)

    lines = []
    summary = run_sweep(grid, root=root, log=lines.append)
    out = "\n".join(lines)
    assert summary.ok and "6 runs: 0 done, 4 skipped (already complete), 0 failed, 2 left out (need a GPU)" in out
    assert "left out on this machine (no GPU): setting(s) 18" in out
    assert not any(root.glob("18-*"))
    manifest = read_json(root / "tiny.sweep.json")["settings"]
    assert [(s["id"], s["runs"] == [], s.get("left_out")) for s in manifest] == [
        ("0", False, None), ("1", False, None), ("18", True, "needs a GPU")]
    from minimult.report import build_report

    report = build_report([root], tmp_path / "report", log=lambda _: None)  # says which row is missing, and why
    assert [r["id"] for r in report["sections"][0]["rows"]] == ["0", "1"]
    assert report["sections"][0]["not_run"] == [{"id": "18", "setting": "untrained", "why": "needs a GPU"}]
    assert "\nNo row: 18 untrained (needs a GPU).\n" in report["markdown"]

    lines.clear()
    summary = run_sweep(grid, root=root, log=lines.append, only=["18"], jobs=1)  # named: runs on the CPU
    assert summary.ok and "2 runs: 2 done, 0 skipped" in "\n".join(lines)
    for name in RUNS[4:]:
        assert headline(read_json(root / name / "results.json")) == pytest.approx(
            headline(read_json(swept.root / name / "results.json")), abs=1e-6)

    lines.clear()
    run_sweep(grid, root=root, log=lines.append)  # finished runs of such a setting count as complete
    assert "6 runs: 0 done, 6 skipped (already complete), 0 failed; run" in "\n".join(lines)
    manifest = read_json(root / "tiny.sweep.json")["settings"]
    assert [s["id"] for s in manifest] == list(SETTINGS) and not any("left_out" in s for s in manifest)


@pytest.mark.parametrize("how", ["killed", "interrupted alone", "terminated"])
def test_workers_end_when_the_sweep_process_is_killed(how, tmp_path):
    """Killed (SIGKILL): the kernel ends the workers with it. Interrupted on its own (SIGINT to the sweep
    process only, not its process group as Ctrl-C would) or terminated (`kill PID`: SIGTERM): it passes the
    interrupt on and exits (130) at once with its one line, instead of waiting for the runs in flight, which
    would take 1,000 epochs here, and a run left unfinished keeps its checkpoint for the next sweep."""
    import os
    import signal
    import time

    grid = tmp_path / "tiny.toml"
    grid.write_text(GRID.replace('"train.eval_every" = 13', '"train.epochs" = 1000'))  # long enough to be killed
    proc = subprocess.Popen(CLI + ["sweep", str(grid), "--root", str(tmp_path / "runs"), "--jobs", "2", "--only", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            # as from a terminal: pytest-xdist's workers ignore SIGINT, and children inherit that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def alive(pid):
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
        except (FileNotFoundError, IndexError):
            return False

    def workers():
        kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        return [int(p) for p in kids.read_text().split()] if kids.exists() else []

    pids = []
    try:
        deadline = time.monotonic() + 300
        while len(list(tmp_path.glob("runs/0-original-s*/sweep.log"))) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, "the sweep ended before it was killed"
            time.sleep(0.5)  # until both workers are on their runs (each has started its log)
        pids += [p for p in workers() if "multiprocessing" in Path(f"/proc/{p}/cmdline").read_text()]
        assert pids, "no worker processes found"
        if how == "killed":
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        else:
            while not list(tmp_path.glob("runs/0-original-s*/checkpoint.pt")) and time.monotonic() < deadline:
                time.sleep(0.5)
            proc.send_signal(signal.SIGINT if how == "interrupted alone" else signal.SIGTERM)
            assert proc.wait(timeout=120) == 130  # without passing it on: blocked until both runs end
            said = proc.stderr.read()
            assert said.splitlines()[-1] == ("interrupted: checkpointed work is kept; run the same sweep command "
                                             "again to resume") and "Warning" not in said, said
            assert not list(tmp_path.glob("runs/0-original-s*/results.json"))
            assert list(tmp_path.glob("runs/0-original-s*/checkpoint.pt"))
        deadline = time.monotonic() + 60
        while any(map(alive, pids)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(map(alive, pids)), "sweep workers outlived the sweep"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in pids:  # never leave workers behind, whatever failed
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_nproc_auto_gives_a_lone_run_the_idle_cores(tmp_path, monkeypatch):
    """`sweep --nproc auto`: fewer runs to do than cores share the cores out (train.nproc in config.json);
    a run per core otherwise; refused where the sweep does not place the runs itself."""
    from minimult.errors import MinimultError
    from minimult.sweep import auto_ranks, run_sweep
    from minimult.sweep.grid import load_grid

    assert [auto_ranks(runs, cpus) for runs, cpus in ((1, 2), (2, 2), (3, 16), (20, 2))] == [2, 1, 5, 1]
    (tmp_path / "tiny.toml").write_text(GRID)
    grid = load_grid(tmp_path / "tiny.toml")
    for kwargs, words in (({"nproc": "2"}, "--set train.nproc"), ({"nproc": "auto", "jobs": 1}, "without --jobs"),
                          ({"nproc": "auto", "stack": 2}, "without --stack"),
                          ({"nproc": "auto", "overrides": {"train.nproc": 1}}, "leave train.nproc out")):
        with pytest.raises(MinimultError, match=words):
            run_sweep(grid, seeds=[0], root=tmp_path / "refused", only=["0"], log=lambda s: None, **kwargs)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("minimult.sweep.cpu_count", lambda: 2)
    lines = []
    summary = run_sweep(grid, seeds=[0], root=tmp_path / "runs", only=["0"], log=lines.append, nproc="auto")
    assert summary.ok, "\n".join(lines)
    assert "1 run(s) to do on 2 cores, so 2 processes per run" in "\n".join(lines)
    run = tmp_path / "runs" / "0-original-s0"
    assert read_json(run / "config.json")["train"]["nproc"] == 2 and (run / "results.json").is_file()


def test_a_run_whose_headline_is_not_a_complete_evaluation_is_not_complete(tmp_path):
    """A finished run evaluated first on 500 dev sentences (`eval --dev-sentences 500`: its headline results until
    a complete evaluation replaces them) is evaluated again by the sweep, not skipped as done."""
    from minimult.sweep.plan import results_complete

    run = tmp_path / "0r-original-s0"
    shutil.copytree(ROOT / "experiments/results/fidelity-quick/0r-original-s0", run)
    assert results_complete(run)
    results = read_json(run / "results.json")
    write_json(run / "results.json", {**results, "evaluation": {**results["evaluation"], "dev_sentences": 500,
                                                                 "complete": False}})
    assert not results_complete(run)


@pytest.mark.parametrize("damage", ["{not json", "[1, 2]", '{"settings": ["0"]}', b"\xff\xfe", "folder"])
def test_item63_8_an_unreadable_manifest_is_refused_not_rewritten(tmp_path, damage):
    """Issue 63 item 8: a sweep manifest that cannot be read is refused with one line naming it, and left as it
    was; rewriting it with the current command's runs alone would drop every earlier sweep's."""
    from types import SimpleNamespace

    from minimult.errors import MinimultError
    from minimult.sweep import write_manifest
    from minimult.sweep.grid import load_grid

    (tmp_path / "tiny.toml").write_text(GRID)
    grid = load_grid(tmp_path / "tiny.toml")
    path = tmp_path / "tiny.sweep.json"
    if damage == "folder":
        path.mkdir()
    else:
        path.write_bytes(damage if isinstance(damage, bytes) else damage.encode())
    before = path.read_bytes() if path.is_file() else None
    tasks = [SimpleNamespace(setting_id="1", mods=SETTINGS["1"], run_dir=str(tmp_path / f"1-lang-pos-s{s}"))
             for s in SEEDS]
    with pytest.raises(MinimultError, match="tiny.sweep.json cannot be read") as e:
        write_manifest(tmp_path, grid, "tiny", tasks)
    assert "\n" not in str(e.value)
    assert (path.read_bytes() if path.is_file() else None) == before
