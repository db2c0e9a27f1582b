"""What the browser tests share: Debian's Chromium driven by Playwright, the dashboard started as
`make run` starts it on a free loopback port over a store of the test's own, and a page opened
once its script run has ended. The fixtures built on these (`chromium`, `browser`, `dashboard`)
are in conftest.py; screenshots go to test-artifacts/ for a person to look at."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
# Debian's Chromium (`.ci/run` installs it there), driven by PyPI's playwright: never `playwright install`.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# Streamlit marks its root with the state of the page's script run: a click before the run has
# ended can land on an element the end of the run draws again (an expander re-drawn closed).
RUN_ENDED = "[data-testid='stApp'][data-test-script-state='notRunning']"


def need_chromium() -> None:
    """Skip without Chromium on a developer's machine; fail in CI, where `.ci/run` installs it."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing; .ci/run installs it so this test runs in CI.")
        pytest.skip("needs Debian's chromium (apt-get install chromium chromium-driver)")


def launch(playwright: Any, extra_args: Sequence[str] = ()) -> Any:
    """Headless Chromium; `extra_args` for a test that needs a switch of its own."""
    need_chromium()
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *extra_args])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(port: int, process: subprocess.Popen, timeout: float = 90) -> None:
    """Until the server on `port` answers its health check; fails at once if it exits."""
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
            return
        except OSError:
            if time.time() > deadline or process.poll() is not None:
                process.kill()
                raise AssertionError("the dashboard did not start") from None
            time.sleep(0.2)


@contextmanager
def serving(store_root: Path, *, port: int | None = None, args: Sequence[str] = (),
            launcher: Sequence[str] = ("-m", "dashboard.serve"), env: dict[str, str] | None = None,
            log: Path | None = None) -> Iterator[str]:
    """The dashboard as `make run` starts it (the launcher, local mode on 127.0.0.1 unless `args`
    say otherwise) over the store at `store_root`, one background job at a time; yields its
    address once it answers. `launcher` runs it under a wrapper, `env` adds to this process's
    environment (read now: set a variable before), `log` keeps its output. On leaving, the server
    stops and no run of the store keeps training."""
    from application import jobs
    from fedcore.store import RunStore

    port = port or free_port()
    environment = {**os.environ, "FEDCORE_STORE": str(store_root), "FEDCORE_MAX_JOBS": "1", **(env or {})}
    output = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    process = subprocess.Popen([sys.executable, *launcher, "--port", str(port), *args], cwd=ROOT, env=environment,
                               stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_until_serving(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        if log:
            output.close()
        for run in RunStore(store_root).runs():
            jobs.cancel(run)


def figure(page: Any, key: str) -> Any:
    """The plotly figure a page draws with `st.plotly_chart(..., key=key)`: Streamlit marks its element
    with the class `st-key-<key>`. Not `.js-plotly-plot` by position: the figures of one page are drawn
    in no fixed order, so the first one on the page for a moment can be another (a CI run counted the
    heatmap's marks in the distribution chart drawn below it, before the heatmap was drawn)."""
    return page.locator(figure_selector(key))


def figure_selector(key: str) -> str:
    """`figure`'s CSS selector, for a script run in the page that must look the figure up itself
    (each time it runs: Streamlit may draw the element anew)."""
    return f".st-key-{key} .js-plotly-plot"


def wait_until_run_ended(page: Any, timeout_ms: int = 90_000) -> None:
    page.locator(RUN_ENDED).wait_for(timeout=timeout_ms)


def open_page(browser: Any, url: str, width: int, wait_for: str | re.Pattern, height: int = 1400) -> Any:
    """A new page of `width` x `height` px at `url`, once `wait_for` shows and its script run has
    ended. `browser` is a Browser or a BrowserContext (whose viewport is then set)."""
    size = {"width": width, "height": height}
    if hasattr(browser, "contexts"):  # a Browser
        page = browser.new_page(viewport=size)
    else:
        page = browser.new_page()
        page.set_viewport_size(size)
    page.goto(url)
    page.get_by_text(wait_for).first.wait_for(timeout=90_000)
    wait_until_run_ended(page)
    return page


# Every figure of a report: every text a reader needs — tick labels (sites, features), axis titles,
# the figure's title, legend entries, annotations (subplot titles, a colour bar's labels) — must lie
# inside the figure, and none may cover another (an axis title over a tick, a legend over an axis
# title, two subplot titles); each returned problem names the figure, the texts and where they are.
# No mark may carry a placeholder colour (Streamlit's template fills bars with #000001...#00000a,
# which its front end replaces: in a file they are black), and a figure with bars or boxes has more
# than one colour (the finding's site against the others, one per outcome).
READABILITY = """() => {
  const problems = [];
  const inside = (b, f) => b.left >= f.left - 1 && b.right <= f.right + 1 && b.top >= f.top - 1 && b.bottom <= f.bottom + 1;
  const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const shown = t => t.textContent.trim() && t.getBoundingClientRect().width > 0;
  const placeholder = /^rgb\\(0, 0, ([1-9]|10)\\)$/;
  const heatmaps = [];
  const colours = [];
  document.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
    const figure = plot.getBoundingClientRect();
    const title = (plot.querySelector('.gtitle') || {}).textContent || `figure ${i}`;
    const ticks = [...plot.querySelectorAll('.xaxislayer-above text, .yaxislayer-above text')].filter(shown);
    const titles = [...plot.querySelectorAll('text[class$="title"]:not(.gtitle):not(.legendtitletext)')].filter(shown);
    const legend = [...plot.querySelectorAll('.legend .traces text, .legendtitletext')].filter(shown);
    const plotArea = plot.querySelector('.nsewdrag');
    const area = plotArea ? plotArea.getBoundingClientRect() : null;
    // annotations outside the plotting area: subplot titles, notes (a grid's cell texts lie inside it)
    const notes = [...plot.querySelectorAll('.annotation-text')].filter(shown).filter(t => !area ||
      !inside(t.getBoundingClientRect(), area));
    const colourbar = [...plot.querySelectorAll('.colorbar text')].filter(shown);
    const figureTitle = [...plot.querySelectorAll('.gtitle')].filter(shown);
    if (plot.querySelector('.heatmaplayer .hm, .heatmaplayer image')) heatmaps.push({title, ticks: ticks.length});
    const where = b => `x ${Math.round(b.left - figure.left)}..${Math.round(b.right - figure.left)}, y ${Math.round(b.top - figure.top)}..${Math.round(b.bottom - figure.top)} of ${Math.round(figure.width)}x${Math.round(figure.height)}`;
    for (const t of [...ticks, ...titles, ...legend, ...notes, ...colourbar, ...figureTitle]) {
      const b = t.getBoundingClientRect();
      if (!inside(b, figure)) problems.push(`${title}: '${t.textContent}' outside the figure at ${where(b)}`);
    }
    // a text of several lines covers what its lines cover (its whole box would take in the space
    // beside a short last line)
    const lines = t => { const parts = [...t.querySelectorAll('tspan.line')].filter(shown);
                         return (parts.length ? parts : [t]).map(p => p.getBoundingClientRect()); };
    const covers = (a, b) => lines(a).some(x => lines(b).some(y => overlap(x, y)));
    const pairs = [[titles, ticks], [legend, titles], [legend, ticks], [notes, ticks], [notes, titles], [notes, legend],
                   [figureTitle, legend], [figureTitle, notes], [figureTitle, ticks]];
    for (const [first, second] of pairs) for (const a of first) for (const t of second) {
      if (a !== t && covers(a, t))
        problems.push(`${title}: '${a.textContent}' covers '${t.textContent}' at ${where(a.getBoundingClientRect())}`);
    }
    // the texts in a heatmap's cells (the check-up grid's findings) stay apart: one spilling into the
    // next cell covers its text
    const cells = [...plot.querySelectorAll('.annotation-text')].filter(shown).filter(t => area &&
      inside(t.getBoundingClientRect(), area));
    for (let a = 0; a < cells.length; a++) for (let b = a + 1; b < cells.length; b++) {
      if (covers(cells[a], cells[b])) problems.push(`${title}: '${cells[a].textContent}' covers '${cells[b].textContent}'`);
    }
    const rows = [...plot.querySelectorAll('g.ytick text')].filter(shown);  // horizontal names: one row each
    for (let a = 0; a < rows.length; a++) for (let b = a + 1; b < rows.length; b++) {
      if (covers(rows[a], rows[b])) problems.push(`${title}: '${rows[a].textContent}' covers '${rows[b].textContent}'`);
    }
    for (let a = 0; a < notes.length; a++) for (let b = a + 1; b < notes.length; b++) {
      if (covers(notes[a], notes[b])) problems.push(`${title}: '${notes[a].textContent}' covers '${notes[b].textContent}'`);
    }
    const marks = [...plot.querySelectorAll('.bars path, .boxlayer path, .scatterlayer .point, .scatterlayer .js-line')];
    const fills = new Set();
    for (const m of marks) {
      const style = getComputedStyle(m);
      for (const c of [style.fill, style.stroke]) if (placeholder.test(c)) problems.push(`${title}: a mark in the placeholder colour ${c}`);
      if (style.fill && style.fill !== 'none' && !m.classList.contains('js-line')) fills.add(style.fill);
    }
    const filled = plot.querySelector('.bars path, .boxlayer path');
    colours.push({title, colours: fills.size});
    if (filled && fills.size < 2) problems.push(`${title}: bars or boxes in ${fills.size} colour(s)`);
  });
  return {problems, heatmaps, colours};
}"""


def readability(page: Any, screenshot: str) -> dict:
    """READABILITY's findings on `page` once every figure is drawn; a full-page screenshot named
    `screenshot` in test-artifacts/."""
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0 && "
                           "[...document.querySelectorAll('.js-plotly-plot')].every(p => p._fullLayout)")
    page.wait_for_timeout(500)  # plotly's last re-layout (nothing in the DOM says it is done)
    found = page.evaluate(READABILITY)
    page.screenshot(path=str(ARTIFACTS / f"{screenshot}.png"), full_page=True)
    return found


def in_the_servers_template(make):
    """What `make()` returns when plotly's default template is the one Streamlit's server sets (its
    placeholder colours, its axes without room for their labels): a report is made there."""
    import plotly.io as pio
    from streamlit.elements.lib.streamlit_plotly_theme import configure_streamlit_plotly_theme

    default = pio.templates.default
    configure_streamlit_plotly_theme()
    try:
        return make()
    finally:
        pio.templates.default = default
