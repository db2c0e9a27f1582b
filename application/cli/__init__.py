"""`python -m fedcore`: train, list and inspect runs from the command line.

    python -m fedcore run --algorithm ifedavg --data demo --rounds 300
    python -m fedcore run --spec myrun.json --seed 3
    python -m fedcore run -a ifedavg --data csv:site_a.csv,site_b.csv --target outcome --rounds 100
    python -m fedcore inspect --data heart:../shared/data/heart_disease/canonical
    python -m fedcore inspect --data csv:a.csv,b.csv,target=outcome --draft-dictionary study.dictionary.json
    python -m fedcore checkup --data demo [--train] [--json] [--html checkup.html]
    python -m fedcore list
    python -m fedcore show RUN_ID [--json] [--html run.html]
    python -m fedcore algorithms

Exit codes: 0 done, 1 the run failed, 2 bad input (spec, data, run id), 130 cancelled.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

from data_adapters import describe_reference, draft_dictionary, inspect_data, normalize_reference, reference_dict
from data_adapters import dictionary_bytes
from fedcore.algorithms import REGISTRY
from fedcore.checkup import Plan, plans
from application.checkup_jobs import start_checkup
from application.cli import parser as arguments
from application.cli.formatting import ProgressBar, format_report, format_summary, fmt, run_report, run_row
from application.cli.specs import data_reference, disclosure_settings, raw_specs
from fedcore.interpret.data_checks import Reach, location_reach, reach_by_site
from fedcore.errors import Cancelled, FedcoreError, TrainingError, cancel_on_sigterm
from application.runner import execute, resolve_spec
from fedcore.store import Run, RunStore, atomic_write_bytes
from fedcore.text import table as text_table

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CANCELLED = 1, 2, 130

__all__ = ["EXIT_BAD_INPUT", "EXIT_CANCELLED", "EXIT_FAILED", "HtmlReports", "main", "run_report"]


@dataclass(frozen=True)
class HtmlReports:
    """Self-contained HTML reports, of a run and of a check-up: the dashboard's, which
    `python -m fedcore` hands in (this layer does not import the dashboard)."""

    run: Callable[[Run], str]
    checkup: Callable[[Plan, RunStore], str]


def main(argv: list[str] | None = None, reports: Callable[[], HtmlReports] | None = None) -> int:
    """Run one command; `reports` makes the HTML reports `--html` writes (None: `--html` says how to
    get them)."""
    parser = arguments.build({"run": _cmd_run, "inspect": _cmd_inspect, "checkup": _cmd_checkup, "list": _cmd_list,
                              "show": _cmd_show, "algorithms": _cmd_algorithms})
    args = parser.parse_args(argv)
    args.reports = reports
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
            execute(run, progress)
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
        final = run.summary
        if final is not None:  # it is written before execute returns
            print(format_summary(run, final))
    return exit_code


def _cmd_inspect(args: argparse.Namespace) -> int:
    ref = normalize_reference(data_reference(args))
    if args.draft_dictionary:
        out = Path(args.draft_dictionary)
        content = draft_dictionary(ref)
        atomic_write_bytes(out, dictionary_bytes(content))
        decisions = sum(len(v) for entry in content.get("sites", {}).values() for v in entry.values())
        print(f"Wrote the draft data dictionary {out} ({decisions} site decision(s), {len(content.get('drop', []))} "
              f"column(s) dropped, {len(content.get('kinds', {}))} kind(s)); use it as dictionary={out}.",
              file=sys.stderr)
        ref = {**reference_dict(ref), "dictionary": str(out.resolve())}
    report = inspect_data(ref)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_text())
    return 0 if report.ok else EXIT_BAD_INPUT


def _cmd_checkup(args: argparse.Namespace) -> int:
    store = RunStore(args.store)
    if args.checkup_id:
        found = plans(store)
        chosen = [p for p in found if args.checkup_id in ("latest", p.id)][:1]
        if not chosen:
            raise FedcoreError(f"No check-up '{args.checkup_id}' in {store.root}; "
                               f"there are: {', '.join(p.id for p in found) or 'none'}.")
        plan = chosen[0]
    else:
        if args.replicates < 1 or args.rounds < 1:
            raise FedcoreError("--replicates and --rounds must be at least 1.")
        cancel_on_sigterm()
        plan = start_checkup(store, data_reference(args), args.replicates, args.rounds, train=args.train,
                             in_process=True, progress=lambda text: print(text, file=sys.stderr),
                             disclosure=disclosure_settings(args))
    result = plan.evaluate(store)
    found = location_reach(plan.profile, result.findings) if args.reach and plan.profile is not None else None
    if args.json:
        reach = {} if found is None else {"reach": [r.to_dict() for r in found]}
        print(json.dumps({"check_up": plan.id, **result.to_dict(), **reach}, indent=2, default=float))
    else:
        print(result.to_text())
        if args.reach:
            print(reach_text_block(found))
        print(f"\nCheck-up {plan.id}" + ("" if args.train or args.checkup_id else
                                          " (data lens only: --train adds the model lenses)"))
    if args.html:
        write_html(args, lambda reports: reports.checkup(plan, store))
    return 0


def reach_text_block(found: list[Reach] | None) -> str:
    """What each site's 'nothing found' covers, for the terminal (`data_checks.reach_by_site`)."""
    if not found:
        return "\nWhat 'nothing found' covers: no continuous column was tested for a shift (or no site shared " \
               "its statistics)."
    return "\n".join(["", "What 'nothing found' covers: how far a site's median of a column would have to sit from the "
                       "other sites' mean to be reported as shifted, in within-site SDs (median over its columns; "
                       "--json lists every column):"] + [f"  {s.to_text()}" for s in reach_by_site(found)])


def write_html(args: argparse.Namespace, make: Callable[[HtmlReports], str]) -> None:
    """The HTML report `make` builds, written to `args.html` (atomically: a reader never sees half)."""
    if args.reports is None:
        raise FedcoreError("--html needs the dashboard's reports: run the command as `python -m fedcore ...`.")
    path = Path(args.html)
    if path.is_dir():
        raise FedcoreError(f"--html {path}: that is a folder; name the file to write, e.g. {path / 'report.html'}.")
    atomic_write_bytes(path, make(args.reports()).encode("utf-8"))
    print(f"Wrote the HTML report {path} (self-contained: it opens offline).", file=sys.stderr)


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
        (r["run_id"], r["state"], r["algorithm"] or "?", describe_reference(r["data"]) if r["data"] else "?",
         f"{r['round']}/{r['total_rounds']}", fmt(r["mean_f1"]), fmt(r["worst_f1"]),
         (r["started"] or "")[:19].replace("T", " "))
        for r in rows
    ]
    print(text_table(header, table))
    damaged = [r for r in rows if r["damage"]]
    if damaged:
        print("\nDamaged runs (the others are unaffected; `python -m fedcore show RUN` for one):")
        print("\n".join(f"  {r['run_id']}: {problem}" for r in damaged for problem in r["damage"]))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    run = RunStore(args.store).get(args.run)
    if args.json:
        print(json.dumps(run_report(run), indent=2))
    else:
        print(format_report(run))
    if args.html:
        write_html(args, lambda reports: reports.run(run))
    return 0


def _cmd_algorithms(args: argparse.Namespace) -> int:
    for cls in REGISTRY.values():
        print(f"{cls.name:12s} {cls.title}: {cls.summary}")
        for f in fields(cls.Params):
            choices, bounds = f.metadata.get("choices"), f.metadata.get("bounds")
            extra = f" (one of {', '.join(map(str, choices))})" if choices else ""
            extra += f" ({range_text(bounds)})" if bounds else ""
            print(f"    --{f.name.replace('_', '-'):22s} default {f.default!r}{extra}: {f.metadata.get('help', '')}")
        if cls.config_defaults:
            print(f"    engine defaults for this algorithm: {cls.config_defaults}")
    return 0
