"""scripts/check_site.py: what it counts as a page's error, which run page it opens, and (where Debian's chromium is
installed) the whole check on a two-page site with one known error."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_site.py"
spec = importlib.util.spec_from_file_location("check_site", SCRIPT)
check_site = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_site)


def test_errors_are_exceptions_console_errors_and_failed_loads_not_logs_or_warnings():
    events = [
        {"method": "Runtime.exceptionThrown",
         "params": {"exceptionDetails": {"exception": {"description": "ReferenceError: f is not defined\n  at x"}}}},
        {"method": "Runtime.consoleAPICalled", "params": {"type": "error", "args": [{"value": "bad"}, {"value": 3}]}},
        {"method": "Runtime.consoleAPICalled", "params": {"type": "log", "args": [{"value": "fine"}]}},
        {"method": "Runtime.consoleAPICalled", "params": {"type": "warning", "args": [{"value": "careful"}]}},
        {"method": "Log.entryAdded", "params": {"entry": {"level": "error", "text": "Failed to load resource",
                                                          "url": "file:///s/a.png"}}},
        {"method": "Log.entryAdded", "params": {"entry": {"level": "verbose", "text": "chatter"}}},
        {"method": "Page.loadEventFired", "params": {}},
    ]
    assert check_site.errors_in(events) == ["ReferenceError: f is not defined", "bad 3",
                                            "Failed to load resource file:///s/a.png"]


def test_the_run_page_is_the_first_one_the_every_run_page_links_below_the_site(tmp_path):
    (tmp_path / "f" / "runs").mkdir(parents=True)
    (tmp_path / "f" / "runs" / "r-s0.html").write_text("<p>run</p>")
    (tmp_path / "runs.html").write_text('<a href="glossary.html#mu">µ</a> <a href="f/runs/missing.html">x</a> '
                                        '<a href="f/runs/r-s0.html#top">r</a> <a href="f/runs/r-s0.html">r</a>')
    (tmp_path / "glossary.html").write_text("")
    assert check_site.first_run_page(tmp_path) == (tmp_path / "f" / "runs" / "r-s0.html").resolve()
    assert check_site.first_run_page(tmp_path / "f") is None  # no every-run page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (optional)")
def test_a_page_with_an_uncaught_error_fails_the_check_and_is_named(tmp_path):
    site = tmp_path / "site"
    (site / "f" / "runs").mkdir(parents=True)
    (site / "index.html").write_text("<h1>ok</h1><script>console.log('fine')</script>")
    (site / "runs.html").write_text('<a href="f/runs/r-s0.html">r</a>')
    (site / "f" / "runs" / "r-s0.html").write_text('<div style="overflow-x:auto;width:100px">'
                                                   '<table><tr><td style="min-width:900px">w</td></tr></table></div>')
    (site / "claims.html").write_text("<script>notDefined()</script>")
    got = subprocess.run([sys.executable, str(SCRIPT), str(site), str(tmp_path / "shots")], capture_output=True,
                         text=True, timeout=120)
    lines = got.stdout.splitlines()
    assert got.returncode == 1, got.stdout + got.stderr
    assert lines[0].startswith("index   index.html: loaded, 0 console errors, 0 boxes scrolling")
    assert "loaded, 0 console errors, 1 boxes scrolling sideways" in lines[1]
    assert "1 console errors" in lines[2] and "notDefined is not defined" in lines[3]
    assert all((tmp_path / "shots" / f"{n}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
               for n in ("index", "run", "claims"))
