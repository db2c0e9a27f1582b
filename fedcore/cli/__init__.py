"""`python -m fedcore`: train, list and inspect runs from the command line.

    python -m fedcore run --algorithm ifedavg --data demo --rounds 300
    python -m fedcore run --spec myrun.json --seed 3
    python -m fedcore run -a ifedavg --data csv:site_a.csv,site_b.csv --target outcome --rounds 100
    python -m fedcore inspect --data heart:../shared/data/heart_disease/canonical
    python -m fedcore list
    python -m fedcore show RUN_ID [--json]
    python -m fedcore algorithms

Exit codes: 0 done, 1 the run failed, 2 bad input (spec, data, run id), 130 cancelled.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields

from data_adapters import describe_reference, inspect_data, normalize_reference
from fedcore.algorithms import REGISTRY
from fedcore.cli import parser as arguments
from fedcore.cli.formatting import ProgressBar, format_report, format_summary, fmt, run_report, run_row
from fedcore.cli.specs import data_reference, raw_specs
from fedcore.errors import Cancelled, FedcoreError, TrainingError, cancel_on_sigterm
from fedcore.runner import execute, resolve_spec
from fedcore.store import RunStore
from fedcore.text import table as text_table

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CANCELLED = 1, 2, 130

__all__ = ["EXIT_BAD_INPUT", "EXIT_CANCELLED", "EXIT_FAILED", "main", "run_report"]


def main(argv: list[str] | None = None) -> int:
    parser = arguments.build({"run": _cmd_run, "inspect": _cmd_inspect, "list": _cmd_list, "show": _cmd_show,
                              "algorithms": _cmd_algorithms})
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return args.handler(args)
    except FedcoreError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # before any run started: nothing to record
        print("Cancelled.", file=sys.stderr)
        return EXIT_CANCELLED
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        sys.stderr.close()
        return 0


def _cmd_run(args: argparse.Namespace) -> int:
    store = RunStore(args.store)
    specs = [resolve_spec(raw) for raw in raw_specs(args)]
    cancel_on_sigterm()
    exit_code = 0
    for spec in specs:
        run = store.create(spec)
        print(f"Run {run.id}: {spec['algorithm']} on '{describe_reference(spec['data'])}', "
              f"{spec['config']['rounds']} rounds, seed {spec['config']['seed']}", file=sys.stderr)
        progress = ProgressBar(spec["algorithm"], disable=args.quiet)
        try:
            summary = execute(run, progress)
        except (KeyboardInterrupt, Cancelled):
            progress.close()
            print(f"Cancelled: run {run.id} is marked cancelled; its records so far are kept.",
                  file=sys.stderr)
            return EXIT_CANCELLED
        except TrainingError as error:  # the run itself failed, not its input: the other runs still go
            progress.close()
            print(f"error: {error}\nRun {run.id} is marked failed.", file=sys.stderr)
            exit_code = EXIT_FAILED
            continue
        except FedcoreError as error:
            progress.close()
            print(f"error: {error}\nRun {run.id} is marked failed.", file=sys.stderr)
            return EXIT_BAD_INPUT
        except Exception as error:  # noqa: BLE001 - any crash is reported, stored, and exits 1
            progress.close()
            print(f"error: the run failed: {type(error).__name__}: {error}\n"
                  f"Run {run.id} is marked failed; `python -m fedcore show {run.id}` has the details.",
                  file=sys.stderr)
            exit_code = EXIT_FAILED
            continue
        progress.close()
        print(format_summary(run, summary))
    return exit_code


def _cmd_inspect(args: argparse.Namespace) -> int:
    report = inspect_data(normalize_reference(data_reference(args)))
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_text())
    return 0 if report.ok else EXIT_BAD_INPUT


def _cmd_list(args: argparse.Namespace) -> int:
    runs = RunStore(args.store).runs()
    rows = [run_row(run) for run in runs]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"No runs in {RunStore(args.store).root}. Start one with `python -m fedcore run --algorithm ifedavg`.")
        return 0
    header = ("run", "state", "algorithm", "data", "round", "mean F1", "worst F1", "started")
    table = [
        (r["run_id"], r["state"], r["algorithm"], describe_reference(r["data"]), f"{r['round']}/{r['total_rounds']}",
         fmt(r["mean_f1"]), fmt(r["worst_f1"]), (r["started"] or "")[:19].replace("T", " "))
        for r in rows
    ]
    print(text_table(header, table))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    run = RunStore(args.store).get(args.run)
    report = run_report(run)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(run, report))
    return 0


def _cmd_algorithms(args: argparse.Namespace) -> int:
    for cls in REGISTRY.values():
        print(f"{cls.name:12s} {cls.title}: {cls.summary}")
        for f in fields(cls.Params):
            choices, bounds = f.metadata.get("choices"), f.metadata.get("bounds")
            extra = f" (one of {', '.join(map(str, choices))})" if choices else ""
            extra += f" (from {bounds[0]:g} to {bounds[1]:g})" if bounds else ""
            print(f"    --{f.name.replace('_', '-'):22s} default {f.default!r}{extra}: {f.metadata.get('help', '')}")
        if cls.config_defaults:
            print(f"    engine defaults for this algorithm: {cls.config_defaults}")
    return 0
