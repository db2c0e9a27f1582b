"""Where the dashboard shows things: every page, defined once, and the lens registry.

A lens is what shows one kind of record (`fedcore.records`): its page, the word for its runs in
pickers, and its section of the HTML report. A run's record kind comes from its spec, so a page
picks its runs, the Runs table opens a run, the report adds a section and the navigation lists
the lenses by looking them up here — no page, report or picker tests an algorithm's name. The
command line's text for a record is the record's own (`Record.summary_lines`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dashboard.presenters import report_sections
from fedcore.records import FeatureShifts, Mixture, Prototypes, SiteSimilarity, SiteWeights
from fedcore.store import Run


@dataclass(frozen=True)
class Page:
    path: str
    title: str
    icon: str
    action: str = "view"  # what a role must be allowed to do to see it (dashboard/access/auth.py's PERMISSIONS)


RUNS = Page("views/runs.py", "Runs", ":material/home:")
CHECKUP = Page("views/checkup.py", "Site check-up", ":material/health_and_safety:")
DATA = Page("views/data.py", "Data", ":material/table:", "choose data")
TRAIN = Page("views/train.py", "Train", ":material/play_arrow:", "train")
FEATURE_SHIFTS = Page("views/feature_shifts.py", "Feature shifts (iFedAvg)", ":material/grid_on:")
SITE_SIMILARITY = Page("views/site_similarity.py", "Site similarity (FedHealth2)", ":material/hub:")
SITE_WEIGHTS = Page("views/site_weights.py", "Site weights (AdaFed)", ":material/balance:")
PROTOTYPES = Page("views/prototypes.py", "Prototypes (inDISCO)", ":material/image_search:")
COMPARE = Page("views/compare.py", "Compare", ":material/compare_arrows:")
RUN_DETAILS = Page("views/run.py", "Run details", ":material/description:")
SETTINGS = Page("views/settings.py", "Access and data folders", ":material/admin_panel_settings:", "settings")


@dataclass(frozen=True)
class Lens:
    kind: str  # the record kind it shows
    page: Page
    runs_called: str  # what its runs are called in its picker
    # the HTML report's sections (run, site colours, whether its reader may see a site's rows)
    report: Callable[[Run, dict[str, str], bool], list[str]]


LENSES = {lens.kind: lens for lens in (
    Lens(FeatureShifts.kind, FEATURE_SHIFTS, "iFedAvg run", report_sections.feature_shifts),
    Lens(SiteSimilarity.kind, SITE_SIMILARITY, "FedHealth2 run", report_sections.site_similarity),
    Lens(SiteWeights.kind, SITE_WEIGHTS, "AdaFed run", report_sections.site_weights),
    Lens(Prototypes.kind, PROTOTYPES, "inDISCO run", report_sections.prototypes),
    Lens(Mixture.kind, RUN_DETAILS, "APFL run", report_sections.mixture),
)}
LENS_PAGES = list(dict.fromkeys(lens.page for lens in LENSES.values() if lens.page != RUN_DETAILS))


def lens_of(run: Run) -> Lens | None:
    """The lens that shows this run's records (None: the run details page shows its scores)."""
    return LENSES.get(run.spec.record)


def page_of(run: Run) -> Page:
    """The page that shows a run best."""
    lens = lens_of(run)
    return lens.page if lens is not None else RUN_DETAILS
