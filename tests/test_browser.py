"""End to end in a real browser (Debian Chromium + Playwright): the dashboard served as `make run`
serves it, the one-click demo, training in a background job, the heatmap with its marks, and a
reload that finds the run still there. Screenshots go to test-artifacts/ for a person to look at."""

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from application import jobs
from fedcore.store import RunStore

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def dashboard(tmp_path):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing; .ci/run installs it so this test runs in CI.")
        pytest.skip("needs Debian's chromium (apt-get install chromium chromium-driver)")
    store = RunStore(tmp_path / "runs")
    port = _free_port()
    env = {**os.environ, "FEDCORE_STORE": str(store.root), "FEDCORE_MAX_JOBS": "1"}
    server = subprocess.Popen(  # as `make run` starts it: the launcher, local mode on 127.0.0.1
        [sys.executable, "-m", "dashboard.serve", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
            break
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                raise AssertionError("the dashboard did not start") from None
            time.sleep(0.5)
    yield url, store
    server.terminate()
    server.wait(timeout=30)
    for run in store.runs():
        jobs.cancel(run)


def _marks(page) -> int:
    """'O' annotations drawn in the heatmap's SVG (after plotly has drawn it)."""
    page.locator("g.annotation text.annotation-text").first.wait_for(timeout=30_000)
    return page.locator("g.annotation text.annotation-text").filter(has_text=re.compile(r"^O$")).count()


def test_demo_to_heatmap_with_marks_and_reload(dashboard):
    from playwright.sync_api import sync_playwright

    url, store = dashboard
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        page.goto(url)
        page.get_by_role("button", name=re.compile("Train iFedAvg on the demo data")).click()
        page.wait_for_url(re.compile(r".*/feature_shifts\?run=.*"), timeout=30_000)
        run = store.runs()[0]
        deadline = time.time() + 240
        while run.status.state != "done":
            assert run.status.state in ("queued", "running"), run.status
            assert time.time() < deadline, "training did not finish in time"
            time.sleep(1)
        # The page refreshes itself while the run trains, then settles on the final round.
        page.get_by_text("No training running.").wait_for(timeout=30_000)
        page.get_by_text("Round 150:").first.wait_for(timeout=30_000)
        page.get_by_text("Did the paper's 2-SD marks find the injected problems?").wait_for()
        assert _marks(page) >= 2
        # The detection table (its cells are drawn on a canvas; AppTest checks their contents).
        assert page.locator('[data-testid="stDataFrame"]').count() >= 1
        page.screenshot(path=str(ARTIFACTS / "feature_shifts.png"), full_page=True)

        # Clicking a cell shows the data behind it: Fir Valley (5th of 8 sites) x confusion (12th of 12).
        cells = page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
        page.mouse.click(cells["x"] + cells["width"] * 11.5 / 12, cells["y"] + cells["height"] * 4.5 / 8)
        page.get_by_text("confusion: Fir Valley against all other sites").wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "feature_shifts_clicked.png"), full_page=True)

        page.reload()
        page.get_by_text("Round 150:").first.wait_for(timeout=60_000)
        assert f"run={run.id}" in page.url  # the chosen run survives the reload
        assert _marks(page) >= 2
        page.goto(url)
        page.get_by_text("Runs (1)").wait_for(timeout=30_000)  # still listed after all the reloads
        page.locator('[data-testid="stDataFrame"]').first.wait_for()
        page.screenshot(path=str(ARTIFACTS / "runs.png"), full_page=True)
        browser.close()


def test_prototypes_page_draws_local_and_global_boxes(dashboard):
    """A finished inDISCO GM run of a small bias experiment: the overlap chart, each test image with
    its local and global box, the prototypes, and one image's top prototypes, as a person sees them."""
    from playwright.sync_api import sync_playwright

    from application.runner import execute, resolve_spec

    url, store = dashboard
    run = store.create(resolve_spec({
        "algorithm": "indisco-gm",
        "data": {"source": "synthetic_scans", "images": 150, "split": "iid", "sites": 3, "inject": ["stamp:site1"]},
        "params": {"prototypes_per_class": 3, "prototype_dim": 16, "last_layer_epochs": 2, "explain_images": 6},
        "config": {"rounds": 2, "local_epochs": 1},
    }))
    execute(run)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 3200})  # the page scrolls inside: a tall view
        page.goto(f"{url}/prototypes?run={run.id}")
        page.get_by_text("Boxes on the stamp, site by site").wait_for(timeout=60_000)
        page.locator(".js-plotly-plot .bars").first.wait_for(timeout=30_000)  # the overlap chart is drawn
        images = page.locator('[data-testid="stImage"] img')
        images.first.wait_for(timeout=30_000)
        assert images.count() >= 6  # the site's test images, each with its local and global box
        assert page.get_by_text("site1 (stamped)").count() >= 1
        page.screenshot(path=str(ARTIFACTS / "prototypes.png"), full_page=True)
        page.get_by_role("tab", name="The prototypes").click()
        page.get_by_text("Local prototypes (as each site sent them in GM)").first.wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "prototypes_sources.png"), full_page=True)
        page.get_by_role("tab", name="One image, ten prototypes").click()
        page.get_by_text("Hold-out image", exact=True).wait_for(timeout=30_000)  # (tables are drawn on a canvas)
        page.locator("[data-testid=\"stDataFrame\"]").nth(2).wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "prototypes_one_image.png"), full_page=True)
        browser.close()


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


@pytest.fixture(scope="module")
def readable_report_runs(tmp_path_factory):
    """iFedAvg, FedHealth2 and AdaFed on four CSV sites with long hospital names and a long first
    feature name (a rotated label of the first column reaches left, under the site names)."""
    import pandas as pd

    from application.runner import execute, resolve_spec

    folder = tmp_path_factory.mktemp("long_names")
    names = {"north": "St Mary's University Hospital North", "south": "Royal Infirmary South (Teaching)",
             "east": "Eastern District General Hospital", "west": "West Valley Community Clinic"}
    files = []
    for short, long in names.items():
        table = pd.read_csv(ROOT / "assets" / "sample_sites" / f"synthetic_{short}_clinic.csv", sep=None,
                            engine="python", decimal="," if short == "west" else ".")
        table = table.rename(columns={"age": "age_at_admission_in_completed_years", "systolic_bp": "systolic_blood_pressure"})
        path = folder / f"{long}.csv"
        table.to_csv(path, index=False)
        files.append(str(path))
    store = RunStore(folder / "runs")
    data = {"source": "csv", "files": files, "target": "diabetes", "exclude": ["glucose"]}
    runs = []
    for spec in ({"algorithm": "ifedavg", "config": {"rounds": 3}},
                 {"algorithm": "fedhealth2", "params": {"pretrain_epochs": 2}, "config": {"rounds": 2}},
                 {"algorithm": "adafed", "config": {"rounds": 3}}):
        run = store.create(resolve_spec({**spec, "data": data}))
        execute(run)
        runs.append(run)
    return runs


def test_the_html_report_is_readable_at_1280_and_1920(readable_report_runs):
    """What a clinician shares: every heatmap's site and feature labels inside the figure, no axis
    title over tick labels; screenshots at both widths in test-artifacts/ for a person to look at."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing; .ci/run installs it so this test runs in CI.")
        pytest.skip("needs Debian's chromium (apt-get install chromium chromium-driver)")
    from playwright.sync_api import sync_playwright

    from dashboard.presenters.report import html_report

    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for run in readable_report_runs:
            path = ARTIFACTS / f"report-{run.spec.algorithm}.html"
            path.write_text(in_the_servers_template(lambda: html_report(run)), encoding="utf-8")
            for width in (1280, 1920):
                page = browser.new_page(viewport={"width": width, "height": 1000})
                page.goto(path.as_uri())
                page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0 && "
                                       "[...document.querySelectorAll('.js-plotly-plot')].every(p => p._fullLayout)")
                page.wait_for_timeout(500)
                found = page.evaluate(READABILITY)
                page.screenshot(path=str(ARTIFACTS / f"report-{run.spec.algorithm}-{width}.png"), full_page=True)
                page.close()
                problems += [f"{run.spec.algorithm} at {width} px: {p}" for p in found["problems"]]
                expected = {"ifedavg": 4, "fedhealth2": 2, "adafed": 0}[run.spec.algorithm]
                assert len(found["heatmaps"]) == expected, found["heatmaps"]
                assert all(h["ticks"] >= 8 for h in found["heatmaps"]), found["heatmaps"]  # 4 sites and features
        browser.close()
    assert not problems, "\n".join(problems)
