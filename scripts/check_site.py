"""Open pages of a built site in headless Chromium: a screenshot of each, and what went wrong on it.

    scripts/check_site.sh [SITE] [OUT]        # SITE: report/site (built by `minimult report --site`); OUT: SITE-check
    scripts/check_site.sh --all [SITE] [OUT]  # and every other page of the site, one line for each with a problem

For the index, the first run page the every-run page links, and the claims page, it writes OUT/<page>.png (the
whole page at 1,400 px wide) and prints one line a page: its console errors (uncaught exceptions, console.error, a
file the page could not load), whether it is wider than the window, how many boxes on it scroll sideways (a table too
wide for the page) and which figures it shows at under 60% of their pixels (labels smaller than drawn). Exit 1 when
a page had a console error or did not load, 2 when Chromium or the site is missing. `--all` also opens every other
page (no screenshot) and prints a line for each that has any of those problems, then a count of each.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages ending in a NUL on
file descriptors 3 and 4), so nothing beyond the standard library and Debian's `chromium` package is needed.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

WIDTH, HEIGHT, MAX_HEIGHT = 1400, 900, 8000  # px: the window, and the longest screenshot taken
LOAD_S = 30.0  # the most a page may take to load


class Browser:
    """One headless Chromium, spoken to with DevTools protocol commands over a pipe."""

    def __init__(self, binary: str):
        to_chrome_r, self._out = os.pipe()
        self._in, from_chrome_w = os.pipe()

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                 "--allow-file-access-from-files", f"--window-size={WIDTH},{HEIGHT}", "about:blank"]
        # the browser reads commands on its fd 3 and writes replies on its fd 4
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', binary, *flags],
            pass_fds=(to_chrome_r, from_chrome_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer, self._next_id, self.events = b"", 0, []

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: str | None = None, **params) -> dict:
        """The result of one command; events that arrive meanwhile are kept in `events`."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(e.get("method") == method for e in self.events):
                return True
            self.send("Browser.getVersion")  # a round trip: collects the events that came meanwhile
            time.sleep(0.1)
        return False

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        self.proc.wait(10)


def errors_in(events: list[dict]) -> list[str]:
    """The page's problems among the protocol's events: uncaught exceptions, console.error, failed loads."""
    out = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and p.get("type") == "error":
            out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"{entry.get('text', '')} {entry.get('url', '')}".strip())
    return [line.splitlines()[0] if line else "error" for line in out]


# What a reader would notice on the page as laid out: it is wider than the window; a box scrolls sideways (a wide
# table); a figure is shown at under SHRUNK of its pixels (its labels then smaller than they were drawn).
SHRUNK = 0.6
LAYOUT = f"""({{
  overflow_px: document.documentElement.scrollWidth - window.innerWidth,
  scrolling: [...document.querySelectorAll('*')].filter(e => e.scrollWidth > e.clientWidth + 1
      && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX)).length,
  shrunk: [...document.images].filter(i => i.naturalWidth && i.clientWidth
      && i.clientWidth < {SHRUNK} * i.naturalWidth).map(i => i.getAttribute('src')),
}})"""


def visit(browser: Browser, url: str, png: Path | None) -> dict:
    """Load `url` in a fresh tab, screenshot the whole page into `png` (unless None); what went wrong on it."""
    target = browser.send("Target.createTarget", url="about:blank")["targetId"]
    session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        browser.send(f"{domain}.enable", session)
    browser.events.clear()
    browser.send("Page.navigate", session, url=url)
    loaded = browser.wait_for("Page.loadEventFired", LOAD_S)
    time.sleep(0.5)  # the page's own scripts (sorting, curves) run after load
    browser.send("Browser.getVersion")
    metrics = browser.send("Page.getLayoutMetrics", session)
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    height = min(MAX_HEIGHT, int(size["height"]))
    if png is not None:
        shot = browser.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                            clip={"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1})
        png.write_bytes(base64.b64decode(shot["data"]))
    layout = browser.send("Runtime.evaluate", session, returnByValue=True, expression=LAYOUT)["result"]["value"]
    errors = errors_in([e for e in browser.events if e.get("sessionId") == session])
    browser.send("Target.closeTarget", targetId=target)
    return {"loaded": loaded, "errors": errors, "height": height, **layout}


def first_run_page(site: Path) -> Path | None:
    """The first run page the every-run page links (the site's pages name their runs relative to the site)."""
    runs = site / "runs.html"
    if not runs.is_file():
        return None
    for href in re.findall(r'href="([^"#]+\.html)"', runs.read_text(encoding="utf-8")):
        page = (site / href).resolve()
        if page.is_file() and page.parent != site.resolve():
            return page
    return None


def report(name: str, page: str, got: dict, shot: Path | None) -> None:
    wide = f", {got['overflow_px']} px wider than the window" if got["overflow_px"] > 0 else ""
    where = f"; screenshot {shot} ({WIDTH}x{got['height']})" if shot else ""
    print(f"{name:7s} {page}: {'loaded' if got['loaded'] else 'NOT LOADED'}, {len(got['errors'])} console errors"
          f"{wide}, {got['scrolling']} boxes scrolling sideways, {len(got['shrunk'])} figures shown under "
          f"{SHRUNK:.0%} of their size{where}")
    for line in got["errors"]:
        print(f"        error: {line}")
    for src in got["shrunk"]:
        print(f"        shrunk: {src}")


PROBLEMS = ("console errors", "wider than the window", "scrolling sideways", "shrunk figures")


def problems(got: dict) -> dict:
    """{each of PROBLEMS: whether the page `visit` reported on has it}."""
    return dict(zip(PROBLEMS, (bool(got["errors"]) or not got["loaded"], got["overflow_px"] > 0, got["scrolling"] > 0,
                               bool(got["shrunk"]))))


def main(argv: list[str]) -> int:
    every = "--all" in argv
    args = [a for a in argv[1:] if a != "--all"]
    site = Path(args[0] if args else "report/site")
    out = Path(args[1] if len(args) > 1 else f"{site}-check")
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if binary is None:
        print("check_site: no Chromium found: install Debian's package (apt install chromium)", file=sys.stderr)
        return 2
    if not (site / "index.html").is_file():
        print(f"check_site: no site at {site} (no index.html): build it with `minimult report --site {site}`",
              file=sys.stderr)
        return 2
    pages = {"index": site / "index.html", "run": first_run_page(site), "claims": site / "claims.html"}
    out.mkdir(parents=True, exist_ok=True)
    browser = Browser(binary)
    failed = 0
    try:
        for name, page in pages.items():
            if page is None or not page.is_file():
                print(f"{name:7s} missing: {page or 'no run page linked from runs.html'}")
                failed += 1
                continue
            got = visit(browser, page.resolve().as_uri(), out / f"{name}.png")
            report(name, page.resolve().relative_to(site.resolve()), got, out / f"{name}.png")
            failed += problems(got)["console errors"]
        if every:
            seen = {p.resolve() for p in pages.values() if p is not None}
            rest = sorted(p for p in site.rglob("*.html") if p.resolve() not in seen)
            counts = dict.fromkeys(PROBLEMS, 0)
            for page in rest:
                got = visit(browser, page.resolve().as_uri(), None)
                found = problems(got)
                if any(found.values()):
                    report("page", page.relative_to(site), got, None)
                for kind, present in found.items():
                    counts[kind] += present
            failed += counts["console errors"]
            print(f"all     {len(rest) + len(seen)} pages: " + ", ".join(f"{n} with {k}" for k, n in counts.items())
                  + " (beyond the three above)")
    finally:
        browser.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
