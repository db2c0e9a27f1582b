"""`python -m application.flower demo`: the demo's hospitals as a real Flower federation on this machine.

Starts a SuperLink and one SuperNode per demo site, each its own process on 127.0.0.1 and each
reading only its own hospital (`data='demo:site=NAME'`); trains through them exactly as a user
launches a Flower run (`python -m fedcore run --data flower:ADDRESS ...`, whose flags it passes
on); then stops every process it started. The run lands in the run store like any other.

    python -m application.flower demo --sites 8 --rounds 5 --local-epochs 10
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from data_adapters.readers.demo import SITES
from application import cli
from application.flower.launch import Loopback


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m application.flower", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="a SuperLink and one SuperNode per demo site, one run, then stop",
                               description="Other flags go to `python -m fedcore run` (e.g. --rounds, "
                                           "--no-local-f-out); the data are the Flower federation started here.")
    demo.add_argument("--sites", type=int, default=len(SITES), choices=range(2, len(SITES) + 1), metavar="N",
                      help=f"how many of the demo's {len(SITES)} hospitals take part (default all)")
    demo.add_argument("-a", "--algorithm", default="ifedavg")
    args, run_flags = parser.parse_known_args(argv)
    if "--data" in run_flags:
        parser.error("the demo's data are the Flower federation it starts; --data cannot be given")

    names = [name for name, _, _ in SITES[: args.sites]]
    folder = Path(tempfile.mkdtemp(prefix="fedcore-flower-demo-"))
    started = time.perf_counter()
    # One thread per site: here all sites share this machine's cores.
    with Loopback([{"site": name, "data": f"demo:site={name}"} for name in names], folder,
                  env={"OMP_NUM_THREADS": "1"}) as federation:
        print(f"SuperLink on {federation.address}; {len(names)} SuperNodes, one per site: {', '.join(names)} "
              f"(logs in {folder})", file=sys.stderr)
        code = cli.main(["run", "-a", args.algorithm, "--data", f"flower:{federation.address},sites={len(names)}",
                         *run_flags])
    print(f"Stopped the SuperLink and the {len(names)} SuperNodes ({time.perf_counter() - started:.0f} s in all).",
          file=sys.stderr)
    if code == 0:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"The Flower logs are kept in {folder}.", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
