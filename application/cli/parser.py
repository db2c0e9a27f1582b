"""The command line's arguments: one flag per engine setting and algorithm parameter, read from
their declarations (`TrainConfig`'s fields, each algorithm's `param()`s)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from fedcore.algorithms import REGISTRY
from fedcore.config import TrainConfig
from fedcore.interpret.disclosure import DEFAULT_MIN_COUNT, MIN_COUNT_FLOOR

Handler = Callable[[argparse.Namespace], int]

def build(handlers: dict[str, Handler]) -> argparse.ArgumentParser:
    """The parser; `handlers` maps each command to the function that runs it."""
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
    _add_disclosure_flags(run)
    engine = run.add_argument_group("engine settings (all algorithms)")
    for f in fields(TrainConfig):
        _add_flag(engine, f.name, f.default, f.metadata)
    algorithm_group = run.add_argument_group("algorithm parameters (see `python -m fedcore algorithms`)")
    owners: dict[str, list[str]] = {}
    first: dict[str, Any] = {}
    for cls in REGISTRY.values():
        for f in fields(cls.Params):
            owners.setdefault(f.name, []).append(cls.name)
            first.setdefault(f.name, f)
    for name, f in first.items():
        _add_flag(algorithm_group, name, f.default, f.metadata, owner=", ".join(owners[name]))
    run.set_defaults(handler=handlers["run"])

    inspect = commands.add_parser(
        "inspect", help="Check data before training: the alignment report of table sites, or a per-site summary.",
        description="Exit code 2 when the report lists errors (the data would not load).",
    )
    inspect.add_argument("--data", "-d", required=True, help="Data reference, e.g. heart:PATH or csv:a.csv,b.csv.")
    inspect.add_argument("--json", action="store_true", help="The report as JSON.")
    inspect.add_argument("--draft-dictionary", metavar="OUT",
                         help="Tables: write a data dictionary (OUT, e.g. study.dictionary.json) with every suggestion "
                              "of the mapping step filled in (the reference's own dictionary, if any, extended); "
                              "read it, edit it, then use it as csv:...,dictionary=OUT.")
    _add_data_flags(inspect)
    inspect.set_defaults(handler=handlers["inspect"])

    checkup = commands.add_parser(
        "checkup", parents=[common],
        help="Which sites have which problem: the data lens at once, the model lenses with --train.",
        description="Every site against the others: its data profile (original units, no rows moved) and, "
                    "with --train, the lenses of models trained on the data (iFedAvg on several seeds, FedAvg, "
                    "AdaFed, FedHealth2); findings at a 5 % false discovery rate. --check-up ID re-reads one "
                    "(e.g. after its background runs finished).")
    source = checkup.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", "-d", help="Data reference of the federation to check.")
    source.add_argument("--check-up", dest="checkup_id", help="A check-up in the store (its id, or 'latest').")
    checkup.add_argument("--train", action="store_true", help="Also train the model lenses' runs here, one after another.")
    checkup.add_argument("--replicates", type=int, default=3, help="iFedAvg runs on other seeds (default 3).")
    checkup.add_argument("--rounds", type=int, default=300, help="Rounds of each model lens's run (default 300).")
    checkup.add_argument("--json", action="store_true", help="The findings as JSON.")
    checkup.add_argument("--reach", action="store_true",
                         help="Also say what 'nothing found' covers: per site and continuous column, how far its "
                              "median would have to sit from the others' to be reported (a few seconds on hundreds "
                              "of columns).")
    checkup.add_argument("--html", metavar="FILE", help="Also write the check-up's self-contained HTML report (the "
                                                       "page's grid, findings and the data behind each) to FILE.")
    _add_data_flags(checkup)
    _add_disclosure_flags(checkup)
    checkup.set_defaults(handler=handlers["checkup"])

    listing = commands.add_parser("list", parents=[common], help="All runs in the store.")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=handlers["list"])

    show = commands.add_parser("show", parents=[common], help="One run's status, scores and records.")
    show.add_argument("run", help="Run id (or a unique prefix of it).")
    show.add_argument("--json", action="store_true", help="Machine-readable summary.")
    show.add_argument("--html", metavar="FILE", help="Also write the run's self-contained HTML report to FILE.")
    show.set_defaults(handler=handlers["show"])

    algorithms = commands.add_parser("algorithms", help="Algorithms and their parameters.")
    algorithms.set_defaults(handler=handlers["algorithms"])
    return parser


def _add_data_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("data options (merged into --data; see README 'Data sources')")
    group.add_argument("--target", help="Target column of CSV sites.")
    group.add_argument("--site-column", dest="site_column", help="Column whose values are the sites (one CSV, all sites).")
    group.add_argument("--site-names", dest="site_names", type=_names, help="Site names, one per CSV file: a,b,c.")
    group.add_argument("--dictionary", help="A data dictionary (NAME.dictionary.json) mapping each site's columns, "
                                            "units, codes and target onto the study's (README 'The data dictionary').")
    group.add_argument("--name", help="What to call the data in lists and titles.")
    group.add_argument("--exclude", type=_names, help="Columns that are not features: id,ward.")
    group.add_argument("--kind", dest="kinds", action="append", type=_kind, metavar="COLUMN=KIND",
                       help="Feature kind instead of the inferred one (continuous, binary, categorical); repeatable.")
    group.add_argument("--missing-indicators", dest="missing_indicators", action="store_const", const=True,
                       help="Add a 0/1 '<column> (missing)' feature for every column with missing values.")
    group.add_argument("--standardization", choices=("site", "federated", "none"),
                       help="Per-site standardisation fitted on each site's training rows (default), federated "
                            "(the mean and SD pooled over all sites: differences in units stay visible), or none.")
    group.add_argument("--split", help="Deal the rows out to simulated sites: iid, dirichlet:ALPHA or quantity:BETA.")
    group.add_argument("--sites", type=int, help="Number of simulated sites for --split (default 4).")
    group.add_argument("--inject", action="append", metavar="SPEC",
                       help="Inject a known problem, e.g. offset:SITE:FEATURE:2, mnar:SITE:FEATURE, flip:SITE, "
                            "stamp:SITE; repeatable.")


def _add_disclosure_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("disclosure control (what each site's statistics may reveal; README "
                                      "'Disclosure control')")
    group.add_argument("--min-count", dest="min_count", type=int, metavar="N",
                       help=f"The fewest rows any statistic a site shares describes (at least {MIN_COUNT_FLOOR}) "
                            f"[default {DEFAULT_MIN_COUNT}].")
    group.add_argument("--dp-epsilon", dest="dp_epsilon", type=float, metavar="EPSILON",
                       help="Add Laplace noise: differential privacy with this ε per release [default: no noise].")


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _kind(text: str) -> tuple[str, str]:
    column, sep, kind = text.rpartition("=")
    if not sep or not column:
        raise argparse.ArgumentTypeError(f"expected COLUMN=KIND, e.g. ca=categorical; got '{text}'")
    return column, kind


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
