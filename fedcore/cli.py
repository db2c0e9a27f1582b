"""`python -m fedcore`: train, list and inspect runs from the command line.

    python -m fedcore run --algorithm ifedavg --data demo --rounds 300 --local-f-out --scalar-w-out
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
import math
import sys
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from fedcore.errors import Cancelled, FedcoreError, cancel_on_sigterm
from fedcore.store import Run, RunStore
from fedcore.text import table as text_table

EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CANCELLED = 1, 2, 130


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
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


# -- run -----------------------------------------------------------------------------------
def _cmd_run(args: argparse.Namespace) -> int:
    from data_adapters import describe_reference
    from fedcore.runner import execute, resolve_spec

    store = RunStore(args.store)
    specs = [resolve_spec(raw) for raw in _raw_specs(args)]
    cancel_on_sigterm()
    exit_code = 0
    for spec in specs:
        run = store.create(spec)
        print(f"Run {run.id}: {spec['algorithm']} on '{describe_reference(spec['data'])}', "
              f"{spec['config']['rounds']} rounds, seed {spec['config']['seed']}", file=sys.stderr)
        progress = _ProgressBar(spec["algorithm"], disable=args.quiet)
        try:
            summary = execute(run, progress)
        except (KeyboardInterrupt, Cancelled):
            progress.close()
            print(f"Cancelled: run {run.id} is marked cancelled; its records so far are kept.",
                  file=sys.stderr)
            return EXIT_CANCELLED
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
        print(_format_summary(run, summary))
    return exit_code


def _raw_specs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Spec file values, overridden by flags; one spec per algorithm named."""
    from fedcore.algorithms import REGISTRY, get_algorithm

    base: dict[str, Any] = _read_spec_file(args.spec) if args.spec else {}
    config = dict(base.get("config") or {})
    config.update({name: value for name, value in _engine_flags(args).items() if value is not None})
    flagged_params = {
        name: getattr(args, name) for name in _param_flag_names() if getattr(args, name) is not None
    }
    algorithms = (args.algorithm or base.get("algorithm") or "")
    names = [a.strip() for a in str(algorithms).split(",") if a.strip()]
    if not names:
        raise FedcoreError(f"Name an algorithm with --algorithm (one of: {', '.join(REGISTRY)}).")
    classes = [get_algorithm(name) for name in names]
    owners = {name: [c for c in classes if name in {f.name for f in fields(c.Params)}] for name in flagged_params}
    for name, users in owners.items():
        if not users:
            raise FedcoreError(
                f"--{name.replace('_', '-')} is not a parameter of {', '.join(c.title for c in classes)}; "
                "`python -m fedcore algorithms` lists each algorithm's parameters."
            )
    specs = []
    for cls in classes:
        params = dict(base.get("params") or {}) if len(classes) == 1 else {}
        params.update({k: v for k, v in flagged_params.items() if cls in owners[k]})
        specs.append({
            "algorithm": cls.name,
            "data": _data_reference(args, base.get("data")),
            "params": params,
            "config": config,
        })
    return specs


def _read_spec_file(path: str) -> dict[str, Any]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FedcoreError(f"Spec file '{path}' does not exist.") from None
    except UnicodeDecodeError:
        raise FedcoreError(f"Spec file '{path}' is not UTF-8 text.") from None
    try:
        spec = tomllib.loads(text) if file.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        kind = "TOML" if file.suffix == ".toml" else "JSON"
        raise FedcoreError(f"Spec file '{path}' is not valid {kind}: {error}.") from None
    if not isinstance(spec, dict):
        raise FedcoreError(f"Spec file '{path}' must hold an object with algorithm, data, params, config.")
    return spec


# -- data ------------------------------------------------------------------------------------
DATA_FLAGS = ("target", "site_column", "site_names", "exclude", "kinds", "missing_indicators",
              "standardization", "split", "sites", "inject")


def _data_reference(args: argparse.Namespace, stored: Any = None) -> Any:
    """--data (or the spec file's data, or demo) with the data flags merged in; the object form
    as soon as a flag is given, the reference as written otherwise."""
    from data_adapters import reference_dict

    ref = args.data or stored or "demo"
    flags = {name: getattr(args, name) for name in DATA_FLAGS if getattr(args, name) is not None}
    if "kinds" in flags:
        flags["kinds"] = dict(flags["kinds"])
    return {**reference_dict(ref), **flags} if flags else ref


def _cmd_inspect(args: argparse.Namespace) -> int:
    from data_adapters import inspect_data, normalize_reference

    report = inspect_data(normalize_reference(_data_reference(args)))
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_text())
    return 0 if report.ok else EXIT_BAD_INPUT


def _add_data_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data options (merged into --data; see README 'Data sources')")
    group.add_argument("--target", help="Target column of CSV sites.")
    group.add_argument("--site-column", dest="site_column", help="Column whose values are the sites (one CSV, all sites).")
    group.add_argument("--site-names", dest="site_names", type=_names, help="Site names, one per CSV file: a,b,c.")
    group.add_argument("--exclude", type=_names, help="Columns that are not features: id,ward.")
    group.add_argument("--kind", dest="kinds", action="append", type=_kind, metavar="COLUMN=KIND",
                       help="Feature kind instead of the inferred one (continuous, binary, categorical); repeatable.")
    group.add_argument("--missing-indicators", dest="missing_indicators", action="store_const", const=True,
                       help="Add a 0/1 '<column> (missing)' feature for every column with missing values.")
    group.add_argument("--standardization", choices=("site", "none"),
                       help="Per-site standardisation fitted on each site's training rows (default), or none.")
    group.add_argument("--split", help="Deal the rows out to simulated sites: iid, dirichlet:ALPHA or quantity:BETA.")
    group.add_argument("--sites", type=int, help="Number of simulated sites for --split (default 4).")
    group.add_argument("--inject", action="append", metavar="SPEC",
                       help="Inject a known problem, e.g. offset:SITE:FEATURE:2, mnar:SITE:FEATURE, flip:SITE, "
                            "stamp:SITE; repeatable.")


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _kind(text: str) -> tuple[str, str]:
    column, sep, kind = text.rpartition("=")
    if not sep or not column:
        raise argparse.ArgumentTypeError(f"expected COLUMN=KIND, e.g. ca=categorical; got '{text}'")
    return column, kind


# -- list / show / algorithms ------------------------------------------------------------------
def _cmd_list(args: argparse.Namespace) -> int:
    from data_adapters import describe_reference

    runs = RunStore(args.store).runs()
    rows = [_run_row(run) for run in runs]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"No runs in {RunStore(args.store).root}. Start one with `python -m fedcore run --algorithm ifedavg`.")
        return 0
    header = ("run", "state", "algorithm", "data", "round", "mean F1", "worst F1", "started")
    table = [
        (r["run_id"], r["state"], r["algorithm"] or "?", describe_reference(r["data"]) if r["data"] else "?",
         f"{r['round']}/{r['total_rounds']}", _fmt(r["mean_f1"]), _fmt(r["worst_f1"]),
         (r["started"] or "")[:19].replace("T", " "))
        for r in rows
    ]
    print(text_table(header, table))
    damaged = [r for r in rows if r["damage"]]
    if damaged:
        print("\nDamaged runs (the others are unaffected; `python -m fedcore show RUN` for one):")
        print("\n".join(f"  {r['run_id']}: {problem}" for r in damaged for problem in r["damage"]))
    return 0


def _run_row(run: Run) -> dict[str, Any]:
    spec, status, damage = run.spec, run.status, run.damage
    mean, worst = status.get("mean") or {}, status.get("worst") or {}
    return {
        "run_id": run.id,
        "state": run.state,
        "damage": [str(d) for d in damage],
        "algorithm": spec.get("algorithm"),
        "data": spec.get("data"),
        "round": status.get("round", 0),
        "total_rounds": status.get("total_rounds", spec.get("config", {}).get("rounds")),
        "mean_f1": mean.get("f1"),
        "worst_f1": worst.get("f1"),
        "started": status.get("started"),
    }


def _cmd_show(args: argparse.Namespace) -> int:
    run = RunStore(args.store).get(args.run)
    report = run_report(run)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_format_report(run, report))
    return 0


def run_report(run: Run) -> dict[str, Any]:
    """The machine-readable summary `show --json` prints."""
    spec, status, damage = run.spec, run.status, run.damage
    records = run.rounds()
    last = run.summary or (records[-1] if records else None)
    report = {
        "run_id": run.id,
        "state": run.state,
        "damage": [str(d) for d in damage],
        "status": status,
        "algorithm": spec.get("algorithm"),
        "data": spec.get("data"),
        "round": status.get("round", 0),
        "total_rounds": status.get("total_rounds"),
        "spec": spec,
        "final": None,
    }
    if last is not None:
        report["final"] = {key: last.get(key) for key in ("round", "sites", "mean", "worst", "worst_site")}
        report["algorithm_record"] = last.get("algorithm", {})
    if run.summary and "detection" in run.summary:
        report["detection"] = run.summary["detection"]
    return report


def _cmd_algorithms(args: argparse.Namespace) -> int:
    from fedcore.algorithms import REGISTRY

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


# -- formatting --------------------------------------------------------------------------------
def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _metrics_table(final: dict[str, Any]) -> str:
    metrics = ["f1", "roc_auc", "balanced_accuracy", "accuracy"]
    header = ["site", "F1", "ROC AUC", "bal. acc.", "accuracy"]
    if any(m.get("sensitivity") is not None for m in final["sites"].values()):  # two classes
        metrics += ["sensitivity", "specificity"]
        header += ["sensitivity", "specificity"]
    rows = [(name, *(_fmt(m.get(k)) for k in metrics)) for name, m in final["sites"].items()]
    rows.append(("mean", *(_fmt(final["mean"].get(k)) for k in metrics)))
    rows.append(("worst site", *(_fmt(final["worst"].get(k)) for k in metrics)))
    return text_table(header, rows)


def _format_summary(run: Run, summary: dict[str, Any]) -> str:
    parts = [f"\nRun {run.id} finished after round {summary['round']}.", _metrics_table(summary)]
    if "stamp_overlap" in summary.get("algorithm", {}):
        parts.append(_format_prototypes(summary["algorithm"]))
    if "detection" in summary:
        parts.append(_format_detection(summary["detection"]))
    parts.append(f"\nDetails: python -m fedcore show {run.id}")
    return "\n".join(parts)


def _format_detection(detection: dict[str, Any]) -> str:
    lines = [f"\nInjected shifts caught by the significance marks: {detection['caught']} of {detection['checkable']}"]
    for entry in detection["injected"]:
        verdict = {True: "caught", False: "missed", None: "n/a"}[entry["caught"]]
        where = f"{entry['site']} / {entry['feature'] or 'labels'}"
        lines.append(f"  [{verdict:6s}] {where}: {entry['detail']}; {'; '.join(entry['evidence']) or 'no mark'}")
    fp = detection["false_positives"]
    lines.append(f"  other marked cells (not injected): {len(fp)}"
                 + (" — " + ", ".join(f"{f['site']}/{f['column']} ({f['layer']})" for f in fp) if fp else ""))
    return "\n".join(lines)


def _format_prototypes(record: dict[str, Any]) -> str:
    """inDISCO: per site, how much the boxes of its most activated prototypes lie on the stamp, and
    the scores of the local models (what each site sent, before the server's step)."""
    lines = []
    stamp = record.get("stamp")
    if stamp:
        kinds = list(record["stamp_overlap"])
        lines.append(f"\nPrototype boxes and the stamp (stamped: {', '.join(stamp['sites'])}, class '{stamp['class']}'). "
                     "Per hold-out image, the box of its most activated prototype: mean share of it on the stamp, "
                     f"and images whose box is at least {stamp['on_stamp_share']:.0%} on it; prototypes whose own "
                     f"patch is on it, of {record['prototypes']}:")
        header = ["site"] + [f"{kind} {what}" for kind in kinds for what in ("box share", "images", "prototypes")]
        rows = [(site, *(value for k in kinds for value in (
                    _fmt(record["stamp_overlap"][k][site], 2), f"{record['test_on_stamp'][k][site]:.0%}",
                    str(record["prototypes_on_stamp"][k][site]))))
                for site in record["stamp_overlap"][kinds[0]]]
        lines.append(text_table(header, rows))
    if record.get("local_model"):
        lines.append("\nLocal models (as each site sent them, before the server's step):")
        rows = [(site, *(_fmt(m.get(k)) for k in ("balanced_accuracy", "sensitivity", "specificity")))
                for site, m in record["local_model"].items()]
        lines.append(text_table(("site", "bal. acc.", "sensitivity", "specificity"), rows))
    return "\n".join(lines)


def _format_report(run: Run, report: dict[str, Any]) -> str:
    from data_adapters import describe_reference

    status = report["status"]
    parts = [
        f"Run {run.id}",
        f"  state      {report['state']}" + (f" — {status['error']}" if status.get("error") else ""),
        *(f"  damage     {problem}" for problem in report["damage"]),
        f"  algorithm  {report['algorithm'] or '?'}  params {json.dumps(report['spec'].get('params', {}))}",
        f"  data       {describe_reference(report['data']) if report['data'] else '?'}",
        f"  progress   round {report['round']} of {report['total_rounds'] or '?'}",
        f"  device     {status.get('device', '?')}   seed {report['spec'].get('config', {}).get('seed')}",
    ]
    if report["final"]:
        parts += [f"\nScores at round {report['final']['round']} (each site on its own hold-out):",
                  _metrics_table(report["final"])]
        extra = report.get("algorithm_record") or {}
        if "stamp_overlap" in extra or "local_model" in extra:
            parts.append(_format_prototypes(extra))
        elif extra:
            parts.append("\nAlgorithm record: " + json.dumps(extra))
    if "detection" in report:
        parts.append(_format_detection(report["detection"]))
    return "\n".join(parts)


class _ProgressBar:
    """tqdm bar over rounds showing the latest mean and worst-site F1 (silent when not a TTY)."""

    def __init__(self, label: str, disable: bool) -> None:
        self.label, self.disable, self.bar = label, disable, None

    def __call__(self, round_: int, total: int, record: dict[str, Any] | None) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.label, unit="round", disable=self.disable or None,
                            file=sys.stderr, dynamic_ncols=True)
        self.bar.update(round_ - self.bar.n)
        if record is not None:
            self.bar.set_postfix(mean_f1=_fmt(record["mean"]["f1"]), worst_f1=_fmt(record["worst"]["f1"]))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- argument parser ---------------------------------------------------------------------------
def _engine_fields() -> list:
    from fedcore.engine import TrainConfig

    return list(fields(TrainConfig))


def _engine_flags(args: argparse.Namespace) -> dict[str, Any]:
    return {f.name: getattr(args, f.name) for f in _engine_fields()}


def _param_flag_names() -> list[str]:
    from fedcore.algorithms import REGISTRY

    return sorted({f.name for cls in REGISTRY.values() for f in fields(cls.Params)})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fedcore", description="Federated training and run inspection.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=None, help="Run store folder (default: $FEDCORE_STORE or ./runs).")
    commands = parser.add_subparsers(dest="command")

    run = commands.add_parser("run", parents=[common], help="Train one or more algorithms on a federation.",
                              description="Train; every setting not given takes the paper default.")
    run.add_argument("--algorithm", "-a", help="Algorithm name, or several separated by commas.")
    run.add_argument("--data", "-d", help="Data reference (default: demo, the synthetic demo federation); "
                                          "flower:HOST:PORT,sites=N trains on a Flower federation's sites.")
    run.add_argument("--spec", help="JSON or TOML spec file; flags override its values.")
    run.add_argument("--quiet", "-q", action="store_true", help="No progress bar.")
    _add_data_flags(run)
    engine = run.add_argument_group("engine settings (all algorithms)")
    for f in _engine_fields():
        _add_flag(engine, f.name, f.default, f.metadata)
    algorithm_group = run.add_argument_group("algorithm parameters (see `python -m fedcore algorithms`)")
    from fedcore.algorithms import REGISTRY

    owners: dict[str, list[str]] = {}
    first: dict[str, Any] = {}
    for cls in REGISTRY.values():
        for f in fields(cls.Params):
            owners.setdefault(f.name, []).append(cls.name)
            first.setdefault(f.name, f)
    for name, f in first.items():
        _add_flag(algorithm_group, name, f.default, f.metadata, owner=", ".join(owners[name]))
    run.set_defaults(handler=_cmd_run)

    inspect = commands.add_parser(
        "inspect", help="Check data before training: the alignment report of table sites, or a per-site summary.",
        description="Exit code 2 when the report lists errors (the data would not load).",
    )
    inspect.add_argument("--data", "-d", required=True, help="Data reference, e.g. heart:PATH or csv:a.csv,b.csv.")
    inspect.add_argument("--json", action="store_true", help="The report as JSON.")
    _add_data_flags(inspect)
    inspect.set_defaults(handler=_cmd_inspect)

    listing = commands.add_parser("list", parents=[common], help="All runs in the store.")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_cmd_list)

    show = commands.add_parser("show", parents=[common], help="One run's status, scores and records.")
    show.add_argument("run", help="Run id (or a unique prefix of it).")
    show.add_argument("--json", action="store_true", help="Machine-readable summary.")
    show.set_defaults(handler=_cmd_show)

    algorithms = commands.add_parser("algorithms", help="Algorithms and their parameters.")
    algorithms.set_defaults(handler=_cmd_algorithms)
    return parser


def _add_flag(group: Any, name: str, default: Any, metadata: Any, owner: str | None = None) -> None:
    flag = "--" + name.replace("_", "-")
    help_text = metadata.get("help", "")
    help_text += f" [default {default!r}" + (f"; for {owner}" if owner else "") + "]"
    options: dict[str, Any] = {"dest": name, "default": None, "help": help_text}
    if metadata.get("choices"):
        options["choices"] = metadata["choices"]
    if isinstance(default, bool):
        group.add_argument(flag, action=argparse.BooleanOptionalAction, **options)
    elif isinstance(default, tuple):
        group.add_argument(flag, type=_int_tuple, **options)
    else:
        group.add_argument(flag, type=type(default) if default is not None else str, **options)


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, e.g. 128,64; got '{text}'") from None
