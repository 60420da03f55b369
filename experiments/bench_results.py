"""Benchmark result files: what `--json PATH` of bench_train.py, bench_stacked.py, bench_eval.py,
bench_microbatches.py and bench_sizes.py writes, and reading them back (`bench_table.py` builds the Speed
table (docs/speed.md) from them).

One JSON object per benchmark run, written atomically:
    script    "bench_train.py"
    command   the command line as typed (argv joined), argv: the options alone
    label     optional: the Speed table's first cell for this run (--label)
    date      UTC, ISO 8601
    machine   cpu (model name from /proc/cpuinfo), cpus, torch, threads, python, platform, load_avg,
              git_commit
    result    every number the script printed (its last stdout line, for bench_train/bench_stacked)
Files transcribed from an older README carry "source" instead of a measured machine.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "experiments" / "results" / "bench"
sys.path.insert(0, str(ROOT))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine() -> dict:
    import torch

    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "python": platform.python_version(),
            "platform": platform.platform(), "load_avg": [round(x, 2) for x in os.getloadavg()],
            "git_commit": _git_commit()}


def options(argv: list[str], drop=("--json", "--label")) -> list[str]:
    """argv without the options that only say where and how the result is filed."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in drop:
            skip = True
        elif not any(a.startswith(d + "=") for d in drop):
            out.append(a)
    return out


def write_result(path: str | Path, result: dict, label: str | None = None) -> Path:
    """The run's JSON file (see the module doc); the folder is created if needed."""
    from minimult.data.cache import atomic_write_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    script = Path(sys.argv[0]).name
    data = {"script": script, "command": shlex.join(["python", f"experiments/{script}", *sys.argv[1:]]),
            "argv": options(sys.argv[1:]), **({"label": label} if label else {}),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "result": result}
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path


def read_results(folder: str | Path = BENCH_DIR, script: str | None = None) -> list[tuple[Path, dict]]:
    """(path, contents) of every result file in `folder` (of `script` only, if given), by file name."""
    out = []
    for p in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"error: cannot read {p}: {e}")
        if isinstance(data, dict) and "result" in data and (script is None or data.get("script") == script):
            out.append((p, data))
    return out
