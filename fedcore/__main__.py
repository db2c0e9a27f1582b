"""`python -m fedcore`: the command line (`application.cli`), given the dashboard's self-contained HTML
reports for `--html` — the one place the application layer is handed something from the layer above
it (pyproject.toml's layers)."""

import sys

from application.cli import HtmlReports, main


def html_reports() -> HtmlReports:
    # Loaded only when a report is asked for: the dashboard's figures take seconds to import, and
    # every other command starts without them.
    from dashboard.presenters.report import checkup_report, html_report

    return HtmlReports(run=html_report, checkup=checkup_report)


if __name__ == "__main__":
    sys.exit(main(reports=html_reports))
