#!/usr/bin/env bash
# Bad-input probes (issues 36 and 63): each command, its exit status and the last line it printed on
# stderr. Run from a checkout after ./test.sh has set up .venv (or with .venv active):
#     scripts/probe_reliability.sh [WORKDIR]        # prints a markdown table
# Every probe must exit non-zero with one "error: ..." line, or exit 0 saying what it did (for a command that
# succeeds, the stderr column shows its last "note:" line where it printed one).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/env.sh"
set +e
W="${1:-$(mktemp -d)}"
mkdir -p "$W" && cd "$W"
export OMP_NUM_THREADS=1
TINY=(--preset tiny --set model.layers=2)
minimult pretrain "${TINY[@]}" --out run >/dev/null 2>&1 || { echo "setup: tiny run failed"; exit 1; }
minimult eval run >/dev/null 2>&1
minimult export run --hf hf >/dev/null 2>&1
# issue 63's setup: a lang-pos run and its export; a parallel run (line-aligned dev files) for --links
minimult pretrain "${TINY[@]}" --mods lang-pos --out lprun >/dev/null 2>&1 && minimult export lprun --hf hflp >/dev/null 2>&1
python - "$ROOT" <<'PY' >/dev/null
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
P = pathlib.Path
P("pair.txt").write_text("in the beginning God made the heaven\nand the earth\n")
P("blank.txt").write_text("  \n\t\n")
P("sup.links").write_text("1\t¹\t1\n")
# 63/3: 200 lines each (wc -l) with U+2028, NEL and form feed inside lines
odd = ["\u2028", "\x85", "\x0c"]
for name in ("odd-a.txt", "odd-b.txt"):
    P(name).write_text("".join(f"verse {i} and{odd[i % 3]}more words\n" for i in range(200)), encoding="utf-8")
P("possible.links").write_text("1\t0\t0\tP\n2\t1\t1\tP\n")  # 63/4
P("empty.links").write_text("")
P("a-folder").mkdir(exist_ok=True)
P("cache-file").write_text("")
# 63/5: a parallel run's files (dev pairs: line-aligned dev files)
par = P("par"); par.mkdir(exist_ok=True)
for split in ("train", "dev"):
    lines = (root / "corpora/tiny" / f"{split}.txt").read_text().splitlines()
    (par / f"en.{split}.txt").write_text("\n".join(lines) + "\n")
    (par / f"xx.{split}.txt").write_text("\n".join(" ".join(w[::-1] for w in l.split()) for l in lines) + "\n")
(par / "corpus.toml").write_text('[languages]\nen = "en.train.txt"\nxx = "xx.train.txt"\n'
                                 '[dev]\nen = "en.dev.txt"\nxx = "xx.dev.txt"\n')
P("par.links").write_text("".join(f"{i}\t0\t0\n" for i in range(1, 201)))
# 63/7: a verses folder edited by hand
P("v").mkdir(exist_ok=True); P("v/corpus.toml").write_text("# edited by hand\n")
# 63/8: a grid and an unreadable manifest beside its root
P("g.toml").write_text('title = "g"\npreset = "tiny"\nseeds = [0]\n[[settings]]\nid = "0"\nname = "original"\nmods = ""\n')
P("sw8").mkdir(exist_ok=True); P("sw8/g.sweep.json").write_text("{not json")
# 63/2: a sweep root whose manifest lists a run of other mods under setting 1 (its grid edited since)
P("sw2").mkdir(exist_ok=True)
# 63 minor: a task directory whose dev file holds a NUL byte
task = P("task-nul"); task.mkdir(exist_ok=True)
for name in ("train", "test.en", "test.fake"):
    (task / f"{name}.tsv").write_text("a\tin the beginning\nb\tand the earth\n")
(task / "dev.tsv").write_text("a\tin the\x00beginning\nb\tand the earth\n")
# 63/10: the parallel files with a dictionary (broken below once their entry is built)
(par / "en-xx.dict").write_text("".join(f"{w}\t{w[::-1]}\n" for w in ("the", "and", "God", "earth")))
(par / "dict.toml").write_text((par / "corpus.toml").read_text() + '[dictionary]\nxx = "en-xx.dict"\n')
# 63/13: a manifest whose first language is a list; the export's weights cut four ways
P("first.toml").write_text('first = ["en"]\n[languages]\nen = "par/en.train.txt"\nxx = "par/xx.train.txt"\n')
import shutil, struct
data = P("hf/model.safetensors").read_bytes()
header = struct.unpack("<Q", data[:8])[0]
for name, size in (("0", 0), ("header", 8 + header // 2), ("half", 8 + header + (len(data) - 8 - header) // 2),
                   ("last", len(data) - 1)):
    shutil.rmtree(f"hf-cut-{name}", ignore_errors=True)
    shutil.copytree("hf", f"hf-cut-{name}")
    P(f"hf-cut-{name}/model.safetensors").write_bytes(data[:size])
PY
cp -r run sw2/1-no-sep-s0 2>/dev/null
printf '{"grid": "g.toml", "title": "g", "preset": "tiny", "settings": [{"id": "1", "name": "no-sep", "mods": "no-sep", "runs": ["1-no-sep-s0"]}]}\n' > sw2/g.sweep.json
minimult pretrain "${TINY[@]}" --files par/corpus.toml --out parrun >/dev/null 2>&1
minimult prepare "${TINY[@]}" --files par/dict.toml >/dev/null 2>&1 && rm par/en-xx.dict  # 63/10
minimult pretrain "${TINY[@]}" --source parallel --set data.files=par/corpus.toml --set train.epochs=1 \
  --out parrun11 >/dev/null 2>&1  # 63/11: the files named relative by --set
ctrl_c_sweep() {  # 63/13: Ctrl-C as a terminal sends it (to the sweep's whole process group) once its runs train
  set -m  # job control: the sweep is a process group of its own and takes SIGINT (a script's & ignores it)
  minimult sweep g.toml --root sw13 --jobs 2 --seeds 0,1 --set train.epochs=1000 & local pid=$!
  set +m
  for _ in $(seq 600); do [ "$(ls sw13/*/checkpoint.pt 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.5; done
  kill -INT -- "-$pid"; wait "$pid"
}
echo "| probe | command | exit | last stderr line | last stdout line |"
echo "|---|---|--:|---|---|"
probe() {  # name, command...
  local name="$1"; shift
  "$@" </dev/null >"$W/stdout.txt" 2>"$W/stderr.txt"; local rc=$?
  local err; err="$(grep -v '^\s*$' "$W/stderr.txt" | tail -1)"
  if [ "$rc" = 0 ] && grep -q '^note:' "$W/stderr.txt"; then err="$(grep '^note:' "$W/stderr.txt" | tail -1)"; fi
  local out; out="$(grep -v '^\s*$' "$W/stdout.txt" | tail -1)"
  printf '| %s | `%s` | %s | %s | %s |\n' "$name" "$*" "$rc" "${err//|/\\|}" "${out//|/\\|}"
}
probe "4 empty --only"          minimult eval run --only ,
probe "4 links without --links" minimult eval run --only links
probe "7 empty budget preset"   minimult budget --preset ''
probe "9 absent device"         minimult pretrain "${TINY[@]}" --device cuda:7 --out never
probe "10 non-ASCII digit link" minimult eval --hf hf --pair pair.txt pair.txt --links sup.links
probe "10 huge segment seed"    minimult eval run --segment rand:18446744073709551616
probe "10 blank pair file"      minimult eval --hf hf --pair blank.txt blank.txt
probe "10 png suffix"           minimult probe run --png out.xyz
probe "minor: inv-order="       minimult pretrain "${TINY[@]}" --mods inv-order= --out never2
probe "minor: resume an export" minimult pretrain --resume hf
probe "minor: unknown mod"      minimult pretrain "${TINY[@]}" --mods lang-pos,bogus --out never3
probe "minor: missing corpus"   minimult pretrain "${TINY[@]}" --train-file nothing.txt --out never4
# issue 63
probe "63/2 manifest lists other mods" minimult report sw2 --out sw2-report
probe "63/3 U+2028 NEL FF in lines"    minimult eval --hf hf --pair odd-a.txt odd-b.txt --only retrieval
probe "63/4 possible links only"       minimult eval --hf hf --pair pair.txt pair.txt --links possible.links
probe "63/5 --links --dev-sentences"   minimult eval parrun --links par.links --dev-sentences 50
probe "63/5 ... with retrieval too"    minimult eval parrun --links par.links --only retrieval,links --dev-sentences 50
probe "63/6 --langs en,en"             minimult eval --hf hflp --pair pair.txt pair.txt --langs en,en
probe "63/6 --langs fake,en"           minimult eval --hf hflp --pair pair.txt pair.txt --langs fake,en
probe "63/6 lang-pos read as en twice" minimult eval --hf hflp --pair pair.txt pair.txt --only retrieval
probe "63/7 verses, folder has files"  minimult verses v --train-verses 400 --dev-verses 200
probe "63/7 verses into a run --force" minimult verses run --force
probe "63/8 unreadable manifest"       minimult sweep g.toml --root sw8
probe "63/10 dictionary gone, prepare"  minimult prepare "${TINY[@]}" --files par/dict.toml
probe "63/10 dictionary gone, pretrain" minimult pretrain "${TINY[@]}" --files par/dict.toml --out never6
probe "63/11 eval from another folder" env -C a-folder minimult eval ../parrun11 --only perplexity
probe "63/13 safetensors of 0 bytes"   minimult eval --hf hf-cut-0 --pair pair.txt pair.txt
probe "63/13 safetensors header cut"   minimult eval --hf hf-cut-header --pair pair.txt pair.txt
probe "63/13 safetensors half tensors" minimult eval --hf hf-cut-half --pair pair.txt pair.txt
probe "63/13 safetensors last byte cut" minimult eval --hf hf-cut-last --pair pair.txt pair.txt
probe "63/13 manifest first = [\"en\"]" minimult prepare "${TINY[@]}" --files first.toml
probe "63/13 Ctrl-C of a sweep"        ctrl_c_sweep
probe "63/15 verses too few for a dict" minimult verses vx --train-verses 10 --dev-verses 5
probe "63 minor: pretrain --out in run" minimult pretrain "${TINY[@]}" --out run/inner
probe "63 minor: folder as corpus"     minimult pretrain "${TINY[@]}" --train-file a-folder --out never5
probe "63 minor: folder as pair file"  minimult eval --hf hf --pair a-folder pair.txt
probe "63 minor: empty link file"      minimult eval --hf hf --pair pair.txt pair.txt --links empty.links
probe "63 minor: MINIMULT_CACHE file"  env MINIMULT_CACHE=cache-file minimult prepare --preset tiny
probe "63 minor: budget --source"      minimult budget --preset paper --source en-es
probe "63 minor: resume --set a setting" minimult pretrain --resume run --set train.lr=1 --set train.threads=1
probe "63 minor: task file with a NUL" minimult transfer run --task task-nul
probe "63 minor: default task, tiny run" minimult transfer run
printf 'no folder left by the refused pretrains: %s\n' "$(ls -d never* run/inner 2>/dev/null | wc -l)"
printf 'verses folder kept: %s; manifest kept: %s\n' "$(cat v/corpus.toml)" "$(cat sw8/g.sweep.json)"
printf 'eval run says done for: %s\n' "$(minimult eval run 2>&1 >/dev/null | sed -n 's/^eval: \([a-z_-]*\) done.*/\1/p' | tr '\n' ' ')"
