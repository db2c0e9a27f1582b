"""Cold start of the dashboard: from `streamlit run app.py` to the first page's content in a browser.

For each checkout given (default: this one), and for each of `--repeats` rounds, this starts a fresh
Streamlit server on a free port with an empty run store, opens the home page in headless Chromium
(Debian's /usr/bin/chromium, launched before the server so its own start is not counted) and waits
until the Runs page's title is visible. It prints, per checkout, the median (and range) of

    server up       `streamlit run` started -> its health endpoint answers
    first content   `streamlit run` started -> the home page's title visible in the browser

Checkouts are timed in turn within each round, so a slow spell on a shared machine falls on all of
them alike. Compare two versions with e.g. `git worktree add /tmp/before <commit>` and

    .venv/bin/python benchmarks/cold_start.py --repeats 7 /tmp/before .
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TITLE = "Federated interoperability dashboard"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_start(checkout: Path, page, timeout: float = 180.0) -> tuple[float, float]:
    """(seconds to health, seconds to the title visible) for one fresh server of `checkout`."""
    port = free_port()
    with tempfile.TemporaryDirectory() as store:
        env = {**os.environ, "FEDCORE_STORE": store, "FEDCORE_MAX_JOBS": "1"}
        started = time.perf_counter()
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true"],
            cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            while True:
                try:
                    urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
                    break
                except OSError:
                    if time.perf_counter() - started > timeout or server.poll() is not None:
                        raise RuntimeError(f"{checkout}: the dashboard did not start") from None
                    time.sleep(0.05)
            healthy = time.perf_counter() - started
            page.goto(url)
            page.get_by_text(TITLE).first.wait_for(state="visible", timeout=timeout * 1000)
            visible = time.perf_counter() - started
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
    return healthy, visible


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(__file__).resolve().parent.parent])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    times: dict[Path, list[tuple[float, float]]] = {c: [] for c in args.checkouts}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for repeat in range(args.repeats):
            for checkout in args.checkouts:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                times[checkout].append(one_start(checkout.resolve(), page))
                page.close()
                print(f"round {repeat + 1}: {checkout}: server up {times[checkout][-1][0]:.1f} s, "
                      f"first content {times[checkout][-1][1]:.1f} s", flush=True)
        browser.close()
    print(f"\nload average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print("| checkout | server up (median, range) | first content (median, range) | repeats |")
    print("|---|---|---|---|")
    for checkout, values in times.items():
        up, shown = [v[0] for v in values], [v[1] for v in values]
        print(f"| {checkout} | {statistics.median(up):.1f} s ({min(up):.1f}–{max(up):.1f}) | "
              f"{statistics.median(shown):.1f} s ({min(shown):.1f}–{max(shown):.1f}) | {len(values)} |")


if __name__ == "__main__":
    main()
