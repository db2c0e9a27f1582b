"""Plain-text renderings of the alignment report and the site summary (for the CLI)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from data_adapters.tables.text_tables import DELIMITER_NAMES
from fedcore.checkup import finding_line, untestable_summary
from fedcore.text import table

if TYPE_CHECKING:
    from data_adapters.alignment.align import AlignmentReport
    from data_adapters.alignment.summary import SiteSummary

WIDE = 8  # with more sites than this, missing shares are listed per site instead of as a grid


def alignment_text(report: AlignmentReport) -> str:
    classes = report.class_names
    lines = [
        f"Alignment of {len(report.sites)} sites · target '{report.target}' · classes: {', '.join(classes) or '–'}",
        "",
        table(
            ("site", "file", "rows", "used", "delimiter", "encoding", *classes),
            [
                (s["site"], s["file"], s["rows"], s["rows_used"], DELIMITER_NAMES.get(s["delimiter"], "–"),
                 s["encoding"], *(_count(s["class_counts"].get(c), s["rows_used"]) for c in classes))
                for s in report.sites + ([{**report.server_test, "site": "(server test)"}] if report.server_test else [])
            ],
        ),
        "",
        (f"Columns: {len(report.columns_in_all)} at every site · {len(report.columns_in_some)} at some sites · "
         f"{len(report.columns_in_one)} at one site only · excluded: {', '.join(report.excluded) or 'none'}"),
    ]
    for title, columns in (("at some sites", report.columns_in_some), ("at one site only", report.columns_in_one)):
        for column, where in columns.items():
            lines.append(f"  {title}: {column} ({where if isinstance(where, str) else ', '.join(where)})")
    lines.append("Feature kinds:")
    for kind in ("continuous", "binary", "categorical"):
        names = [
            c + (f" ({len(f['values'])} values)" if kind == "categorical" else "") + ("*" if f["kind_from"] == "given" else "")
            for c, f in report.features.items() if f["kind"] == kind
        ]
        if names:
            lines.append(f"  {kind:12s} {len(names):3d}  {_wrap(names)}")
    if any(f["kind_from"] == "given" for f in report.features.values()):
        lines.append("  (* kind set by you, not inferred)")
    lines.append("Type conflicts (numeric at one site, text at another):" + ("" if report.type_conflicts else " none"))
    for conflict in report.type_conflicts:
        text_at = "; ".join(f"{site}: {', '.join(values)}" for site, values in conflict["text_at"].items())
        lines.append(f"  {conflict['column']}: numeric at {', '.join(conflict['numeric_at'])}; text at {text_at}")
    lines.append("Categorical values that differ between sites:" + ("" if report.category_differences else " none"))
    for column, per_site in report.category_differences.items():
        lines.append(f"  {column}: " + " | ".join(f"{site}: {', '.join(v)}" for site, v in per_site.items()))
    lines += _checkup_lines(report)
    lines += _missing_lines(report.missing_share)
    lines += _messages("Warnings", report.warnings) + _messages("Errors", report.errors)
    return "\n".join(lines)


def _checkup_lines(report: AlignmentReport) -> list[str]:
    """The check-up's findings for the files (its data lens), as a check-up of them lists them."""
    if report.findings is None:
        return []
    title = ("What the site check-up finds in these files (each site against the others, from their statistics; "
             f"q-values within each family of checks):")
    lines = [title + ("" if report.findings else " nothing")]
    lines += [f"  {finding_line(finding)}" for finding in report.findings]
    summary = untestable_summary(report.not_testable)
    return lines + ([f"  {summary}"] if summary else [])


def summary_text(summary: SiteSummary) -> str:
    classes = summary.class_names
    lines = [
        f"{summary.name} · {len(summary.sites)} sites · input {' × '.join(map(str, summary.input_shape))}"
        + (f" ({summary.n_features} features)" if summary.n_features else "")
        + f" · classes: {', '.join(classes)}",
        "",
        table(
            ("site", "train", "hold-out", *classes),
            [(s["name"], s["n_train"], s["n_test"],
              *(_count(a + b, s["n_train"] + s["n_test"]) for a, b in zip(s["train_class_counts"], s["test_class_counts"])))
             for s in summary.sites],
        ),
    ]
    if summary.server_test_rows:
        lines.append(f"\nServer test set: {summary.server_test_rows} rows.")
    if summary.ground_truth:
        lines.append("\nInjected (ground truth):")
        lines += [f"  {g.site} / {g.feature or '–'}: {g.kind}: {g.detail}" for g in summary.ground_truth]
    return "\n".join(lines + _messages("Warnings", summary.warnings))


def _missing_lines(shares: dict[str, dict[str, float]]) -> list[str]:
    columns = [c for c in next(iter(shares.values()), {}) if any(s[c] > 0 for s in shares.values())]
    if not columns:
        return ["Missing values: none"]
    if len(shares) > WIDE:
        return ["Missing values (% of each site's rows):"] + [
            f"  {site}: " + (", ".join(f"{c} {_percent(v[c])}" for c in columns if v[c] > 0) or "none")
            for site, v in shares.items()
        ]
    grid = table(("column", *shares), [(c, *(_percent(v[c]) if v[c] else "·" for v in shares.values())) for c in columns])
    return ["Missing values (% of each site's rows; columns without any are left out):"] + [
        "  " + row for row in grid.splitlines()
    ]


def _messages(title: str, messages: list[str]) -> list[str]:
    if not messages:
        return [f"{title}: none"]
    return [f"{title} ({len(messages)}):"] + [f"  - {m}" for m in messages]


def _count(n: int | None, total: int) -> str:
    if n is None:
        return "–"
    return f"{n} ({100 * n / total:.0f}%)" if total else str(n)


def _percent(share: float) -> str:
    return f"{100 * share:.1f}%" if share < 0.995 else "100%"


def _wrap(names: list[str], width: int = 90) -> str:
    lines, current = [], ""
    for name in names:
        if current and len(current) + len(name) + 2 > width:
            lines.append(current + ",")
            current = name
        else:
            current = f"{current}, {name}" if current else name
    return ("\n" + " " * 20).join([*lines, current])
