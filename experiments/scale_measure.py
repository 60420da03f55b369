"""Wall time and peak memory of `minimult prepare` and `minimult pretrain` on a large parallel corpus.

    python experiments/scale_measure.py --mb 10 --work /work/scale [--preset quick] [--stop-after 200]
    # (with the venv's bin on PATH: `source scripts/env.sh`; --mb 1000 is the 1 GB point, /work/scale/1000mb)

Writes (unless it is there) WORK/<mb>mb/en.txt and xx.txt with experiments/scale_corpus.py, then runs, each
under `/usr/bin/time -v` with MINIMULT_CACHE=WORK/cache-<mb>mb (a cache of its own, emptied first, so prepare
builds):

    minimult prepare  --files en=WORK/<mb>mb/en.txt,xx=WORK/<mb>mb/xx.txt --set data.vocab_size=2048
    minimult pretrain --files en=...,xx=... --set data.vocab_size=2048 --preset quick --stop-after 200 \
        --set train.threads=1 --out WORK/runs/<mb>mb

Words are split at whitespace (the parallel source's default, `words = "whitespace"`; the generator writes
words joined by single spaces): NLTK tokenization of a gigabyte would take hours. pretrain finds prepare's
cache entry (same data settings), so its numbers are training's own: loading the encoded text, batching,
200 updates of BERT-small, the checkpoint. Each stage's elapsed wall time and peak RSS (`Maximum resident set
size`) go into experiments/results/bench/scale-<mb>mb.json with the stage's printed lines, each timed from
the start of the stage (so where prepare spends its time shows). A guard kills a stage when the machine's
MemAvailable falls under --guard-gb (other processes share the machine); the JSON then says "killed".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))


def mem_available_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024**2
    except OSError:
        return None
    return None


def run_stage(name: str, cmd: list[str], env: dict, guard_gb: float, timeout: float) -> dict:
    """Run `cmd` under /usr/bin/time -v; its wall time, peak RSS and timed output lines."""
    full = ["/usr/bin/time", "-v", *cmd]
    print(f"[{name}] {' '.join(cmd)}", flush=True)
    start = time.time()
    proc = subprocess.Popen(full, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines: list[tuple[float, str]] = []
    min_avail = [mem_available_gb() or 0.0]
    killed: list[str] = []

    def watch():
        while proc.poll() is None:
            avail = mem_available_gb()
            if avail is not None:
                min_avail[0] = min(min_avail[0], avail)
                if avail < guard_gb and not killed:
                    killed.append(f"MemAvailable {avail:.1f} GB < guard {guard_gb} GB")
                    os.killpg(proc.pid, signal.SIGKILL)
            if time.time() - start > timeout and not killed:
                killed.append(f"over {timeout:.0f} s")
                os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    for line in proc.stdout:
        lines.append((round(time.time() - start, 1), line.rstrip("\n")))
        print(f"  {lines[-1][0]:7.1f}s {line.rstrip()}", flush=True)
    rc = proc.wait()
    watcher.join()
    text = "\n".join(l for _, l in lines)
    peak_kb = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    user = re.search(r"User time \(seconds\): ([\d.]+)", text)
    system = re.search(r"System time \(seconds\): ([\d.]+)", text)
    out = {"stage": name, "command": cmd, "rc": rc, "wall_s": round(time.time() - start, 1),
           "user_s": float(user.group(1)) if user else None, "system_s": float(system.group(1)) if system else None,
           "peak_rss_gb": round(int(peak_kb.group(1)) / 1024**2, 3) if peak_kb else None,
           "min_mem_available_gb": round(min_avail[0], 1),
           "lines": [[t, l] for t, l in lines if not l.startswith("\t")]}  # /usr/bin/time's own lines start with a tab
    if killed:
        out["killed"] = killed[0]
    print(f"[{name}] rc {rc}, {out['wall_s']} s, peak RSS {out['peak_rss_gb']} GB"
          + (f", KILLED: {killed[0]}" if killed else ""), flush=True)
    return out


def _vm(field: str) -> float:
    m = re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text())
    return int(m.group(1)) / 1024**2


def breakdown(files: str, log=print) -> list[dict]:
    """prepare's steps for the parallel source run one by one in this process (MINIMULT_CACHE is not touched):
    each step's wall time, the resident memory after it and the peak during it (VmHWM, reset before each step
    through /proc/self/clear_refs), to show which step holds memory in proportion to the text."""
    from minimult.config import DataConfig
    from minimult.data.parallel import parse_spec, read_corpora
    from minimult.data.prepare import corpus_stats
    from minimult.data.vocab import train_vocab, vocab_key

    spec = parse_spec(files)
    rows = []

    def step(name, fn):
        try:
            Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        except OSError:
            pass
        t = time.time()
        value = fn()
        rows.append({"step": name, "wall_s": round(time.time() - t, 1), "rss_after_gb": round(_vm("VmRSS"), 3),
                     "peak_during_gb": round(_vm("VmHWM"), 3)})
        log(f"  {name}: {rows[-1]}")
        return value

    step("imports (baseline)", lambda: DataConfig)
    step("cache key: sha256 of the files, in blocks (Spec.key)", lambda: spec.key())
    train, dev = step("read_corpora: every line checked, none kept (line-aligned)",
                      lambda: read_corpora(spec, None, 10_000))
    step("corpus_stats", lambda: corpus_stats(train, dev))
    step("shipped-vocabulary lookup (vocab_key: the text sorted, in runs past 256 MB)",
         lambda: vocab_key(train.sentences, 2048, ""))
    vocab = step("train_vocab wordpiece, first language", lambda: train_vocab("wordpiece", train.sentences, 2048))
    step("Vocab.encode, first language's training text (in chunks)",
         lambda: vocab.encode(train.sentences, train.verse_ids))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, required=True, help="megabytes of text per language")
    p.add_argument("--work", type=Path, required=True, help="folder for the text, the cache and the run (not the repo)")
    p.add_argument("--preset", default="quick", help="pretrain's preset (quick: BERT-small, batches of 128)")
    p.add_argument("--stop-after", type=int, default=200)
    p.add_argument("--guard-gb", type=float, default=2.5, help="kill a stage when MemAvailable falls below this")
    p.add_argument("--timeout", type=float, default=1800, help="kill a stage after this many seconds")
    p.add_argument("--stages", default="prepare,pretrain")
    p.add_argument("--breakdown", action="store_true", help="also run prepare's steps one by one in this process")
    p.add_argument("--examples", type=int, help="prepare's --examples (0: the build alone; by default prepare shows "
                                                "3 examples from views of the whole training text)")
    p.add_argument("--out", type=Path, help="JSON file (default experiments/results/bench/scale-<mb>mb.json)")
    a = p.parse_args(argv)
    from scale_corpus import generate

    tag = f"{a.mb:g}mb"
    data = a.work / tag
    if not (data / "en.txt").is_file() or not (data / "xx.txt").is_file():
        generate(data, a.mb)
    files = f"en={data / 'en.txt'},xx={data / 'xx.txt'}"
    cache = a.work / f"cache-{tag}"
    run_dir = a.work / "runs" / tag
    env = {**os.environ, "MINIMULT_CACHE": str(cache)}
    common = ["--files", files, "--set", "data.vocab_size=2048"]
    result = {"mb_per_language": a.mb, "bytes": {k: (data / f"{k}.txt").stat().st_size for k in ("en", "xx")},
              "lines": sum(1 for _ in open(data / "en.txt", "rb")), "words": "whitespace",
              "preset": a.preset, "stop_after": a.stop_after, "machine": platform.node(), "cpus": os.cpu_count(),
              "mem_available_gb_at_start": round(mem_available_gb() or 0, 1),
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "stages": []}
    stages = a.stages.split(",")
    if "prepare" in stages:
        shutil.rmtree(cache, ignore_errors=True)
        shown = [] if a.examples is None else ["--examples", str(a.examples)]
        result["stages"].append(run_stage("prepare", ["minimult", "prepare", *common, *shown], env, a.guard_gb,
                                          a.timeout))
    if "pretrain" in stages and all(s["rc"] == 0 for s in result["stages"]):
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        result["stages"].append(run_stage(
            "pretrain", ["minimult", "pretrain", *common, "--preset", a.preset, "--stop-after", str(a.stop_after),
                         "--set", "train.threads=1", "--out", str(run_dir)], env, a.guard_gb, a.timeout))
    if a.breakdown:
        print("[breakdown] prepare's steps in this process", flush=True)
        result["breakdown"] = breakdown(files)
    out = a.out or ROOT / "experiments" / "results" / "bench" / f"scale-{tag}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    return 0 if all(s["rc"] == 0 for s in result["stages"]) else 1


if __name__ == "__main__":
    sys.exit(main())
