"""The check-up (`fedcore.checkup`) as the dashboard shows it: the grid of sites × lenses, the
findings as tables (page and CSV), each data finding's evidence as a figure, and the check-up's
part of an HTML report. Functions of a CheckUp and its profile, no Streamlit: the Check-up page and
the reports draw the very same things.

A grid cell is one of:
    a finding      its title and q-value, coloured by strength (the smaller q, the darker);
                   "+n more" when the lens found several things at that site; a model lens's
                   finding that another lens's explains says "agrees with the data lens"
    nothing found  the lens looked at the site and nothing passed the calibration ("n not
                   testable" below it when some of its cells could not be tested)
    not testable   the lens could test nothing at the site (its statistics withheld, too few
                   sites): the commonest reason in the cell ("not testable: not shared (fewer than
                   10 rows)" where its disclosure policy withheld them), every reason in the hover
    training       the runs that feed the lens are still queued or training
    not checked    no run feeds the lens (or it failed); "no data lens" for images, or where
                   the sites kept their statistics to themselves
    not shared     the site's disclosure policy withheld every statistic the data lens tests at
                   it (a cell that found something, or nothing, says how many of its tests were
                   not shared)
Every user-supplied name that reaches a figure is HTML-escaped first: plotly renders a subset of
HTML in its texts (links included).
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.presenters import evidence_views as views
from dashboard.presenters.evidence_views import Evidence
from dashboard.presenters.figures import FONT, site_colors
from dashboard.presenters.record_tables import run_name
from dashboard.presenters.safe_text import plot_lines, plot_text
from dashboard.presenters.report_sections import figures_html
from fedcore.glossary import COLUMNS, effect_unit, plain, term
from fedcore.checkup import ROLE_LENSES, CheckUp, Plan, format_q, plans
from fedcore.interpret.checks import BY_KIND, limit
from fedcore.interpret.data_checks import Reach, location_reach, reach_by_site, reach_text
from fedcore.interpret.findings import FDR, KINDS, LENSES, Finding
from fedcore.interpret.profile import STATISTICS, Profile
from fedcore.store import Run, RunStore

DATA_LENS = LENSES[0]
IMAGE_LENSES = (DATA_LENS, "labels", "prototypes")
TABLE_LENSES = tuple(lens for lens in LENSES if lens != "prototypes")
NOT_CHECKED, NOTHING_FOUND, TRAINING, NO_DATA_LENS = "not checked", "nothing found", "training…", "no data lens"
NOT_TESTABLE = "not testable"
# Cells' colour values: states below the findings' -log10(q) scale, which starts at -log10(FDR).
STATE_Z = {NOT_CHECKED: -0.75, NO_DATA_LENS: -0.75, NOT_TESTABLE: -0.75, NOTHING_FOUND: 0.0, TRAINING: 0.75}
Z_MIN, Z_MAX, Q_FLOOR = -1.0, 4.0, 1e-4
CALIBRATION = (
    "**How to read it.** Each site is compared with the other sites *without itself*, so an unusual site cannot "
    "hide by pulling the average towards it, and federations of three or four sites work too. A finding is shown "
    "only when it is large enough to matter *and* unlikely to be chance. Its **q-value** says how likely it is to "
    f"be a false alarm: findings are shown up to q = {FDR:g}, so of a site's findings of one kind, at most about one "
    f"in {round(1 / FDR)} is expected to be a false alarm, however many cells were tested. The trained lenses are "
    f"trained several times, as {term('replicate runs')}, so that training noise is not mistaken for a site's "
    "problem."
)
CALIBRATION_DETAILS = (
    "The data lens compares every site's federated statistics in their original units (counts, quantiles, missing "
    "shares, class-wise means: no row leaves a site). Each check states its null: "
    f"{term('leave-one-out')}, a predictive t with variances moderated across features, or binomial and χ² counts. "
    "The model lenses compare what trained models record per site the same way: iFedAvg's input and output layers "
    f"averaged over the repeat runs, a shared model's ROC AUC on each site's {term('hold-out')}, AdaFed's score of "
    f"each site's model, FedHealth2's distances. The q-values come from a {term('Benjamini–Hochberg')} within each "
    "family of checks (values, values against related features, recording, missing values, labels, correlations, "
    "copied columns, exchanged columns, and each model lens on its own) at each site, so one broken site's many "
    "findings do not make other sites' small differences reportable. A cell that "
    "could not be tested (a statistic withheld, too few sites) says so, with the reason. The README's Check-up "
    "section has each check's statistic and its threshold for a material finding."
)


def q_label(q: float) -> str:
    """'q < 0.001' or 'q = 0.012'."""
    text = format_q(q)
    return f"q {text}" if text.startswith("<") else f"q = {text}"


def strength(q: float) -> str:
    """How strong a finding's evidence is, in words."""
    return "very strong" if q < 0.001 else "strong" if q < 0.01 else "moderate"


escaped = plot_text  # a user-supplied name in a plotly text


# -- the grid -----------------------------------------------------------------------------------
@dataclass
class Cell:
    state: str  # "finding", or one of NOT_CHECKED, NOTHING_FOUND, TRAINING, NO_DATA_LENS, NOT_TESTABLE
    # the reported findings of this lens at this site, strongest first; where it has none, its
    # significant findings another lens explains (it agrees with that lens)
    findings: list[Finding] = field(default_factory=list)
    untestable: list[Finding] = field(default_factory=list)  # its cells that could not be tested

    @property
    def agrees(self) -> str:
        """The lens the cell's finding agrees with, in words ('' when it is a finding of its own)."""
        top = self.findings[0] if self.findings else None
        if top is None or top.explained_by not in BY_KIND:
            return ""
        lens = BY_KIND[top.explained_by].lens
        return "the data lens" if lens == DATA_LENS else f"the {lens} lens"

    @property
    def reason(self) -> str:
        """The commonest reason among its cells that could not be tested ('' when none): where a
        site's disclosure policy withheld a statistic, 'not shared (fewer than N rows)'."""
        reasons = [f.untestable for f in self.untestable]
        return max(dict.fromkeys(reasons), key=reasons.count) if reasons else ""

    @property
    def text(self) -> str:
        if self.state == NOT_TESTABLE and self.reason:
            return f"{NOT_TESTABLE}: {self.reason}"
        if self.state != "finding":
            more = f" ({len(self.untestable)} not testable)" if self.untestable and self.state == NOTHING_FOUND else ""
            return self.state + more
        top = self.findings[0]
        more = f" (+{len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        agrees = f", agrees with {self.agrees}" if self.agrees else ""
        return f"{top.title}, {q_label(top.q)}{more}{agrees}"

    def lines(self, width: int = 16) -> tuple[list[str], list[str]]:
        """The text drawn in the grid's cell, as (title, the rest): the finding's title wrapped, then
        its q-value and how many more the lens found here (a state: its words, and how many cells
        could not be tested; not testable at all: why)."""
        if self.state == NOT_TESTABLE and self.reason:
            return [], textwrap.wrap(self.text, width)
        if self.state != "finding":
            more = [f"{len(self.untestable)} not testable"] if self.untestable and self.state == NOTHING_FOUND else []
            return [], [*textwrap.wrap(self.state, width), *more]
        top = self.findings[0]
        more = [f"+{len(self.findings) - 1} more"] if len(self.findings) > 1 else []
        agrees = textwrap.wrap(f"agrees with {self.agrees}", width) if self.agrees else []
        return textwrap.wrap(top.title, width), [q_label(top.q), *more, *agrees]

    @property
    def z(self) -> float:
        if self.state != "finding":
            return STATE_Z[self.state]
        return min(Z_MAX, -math.log10(max(self.findings[0].q, Q_FLOOR)))


@dataclass
class Grid:
    sites: list[str]
    lenses: list[str]
    cells: list[list[Cell]]  # [site][lens]

    def frame(self) -> pd.DataFrame:
        """The grid as a table: a row per site, a column per lens, each cell's text."""
        return pd.DataFrame([[cell.text for cell in row] for row in self.cells], columns=self.lenses).assign(
            site=self.sites)[["site", *self.lenses]]


def grid_lenses(result: CheckUp, kind: str) -> list[str]:
    """The columns: the lenses of a table's or an image federation's check-up, and any other lens checked."""
    base = TABLE_LENSES if kind == "table" else IMAGE_LENSES
    return [lens for lens in LENSES if lens in base or lens in result.sources]


def grid(result: CheckUp, kind: str) -> Grid:
    lenses = grid_lenses(result, kind)
    training = {lens for role in result.pending for lens in ROLE_LENSES.get(role, ())}
    by_cell: dict[tuple[str, str], list[Finding]] = {}
    for finding in result.reported:
        by_cell.setdefault((finding.site, finding.lens), []).append(finding)
    untestable: dict[tuple[str, str], list[Finding]] = {}
    tested: set[tuple[str, str]] = set()
    for finding in result.findings:
        if finding.untestable:
            untestable.setdefault((finding.site, finding.lens), []).append(finding)
        else:
            tested.add((finding.site, finding.lens))
    cells = []
    for site in result.sites:
        row = []
        for lens in lenses:
            found = by_cell.get((site, lens), []) or result.agreeing(site, lens)
            missed = untestable.get((site, lens), [])
            if found:
                row.append(Cell("finding", found, missed))
            elif lens in result.sources:
                row.append(Cell(TRAINING if lens in training else NOTHING_FOUND if (site, lens) in tested or not missed
                                else NOT_TESTABLE, untestable=missed))
            elif lens in training:
                row.append(Cell(TRAINING))
            else:
                row.append(Cell(NO_DATA_LENS if lens == DATA_LENS else NOT_CHECKED))
        cells.append(row)
    return Grid(list(result.sites), lenses, cells)


def _colorscale() -> list[list]:
    """States in flat colours, then findings from light orange (q = FDR) to dark red (q ≤ 1e-4)."""
    def at(z: float) -> float:
        return (z - Z_MIN) / (Z_MAX - Z_MIN)

    start = -math.log10(FDR)
    return [[0.0, "#eceff3"], [at(-0.5), "#eceff3"], [at(-0.5), "#dcefdc"], [at(0.5), "#dcefdc"],
            [at(0.5), "#dbe7f5"], [at(1.0), "#dbe7f5"], [at(1.0), "#fdd0a2"], [at(start), "#fdd0a2"],
            [at(2.5), "#ef6548"], [1.0, "#99000d"]]


def grid_figure(table: Grid) -> go.Figure:
    """Sites × lenses, each cell's finding and q-value written in it, coloured by strength; the
    colour bar is the legend (states, then q-values)."""
    sites = [escaped(s) for s in table.sites]
    z = np.array([[cell.z for cell in row] for row in table.cells], dtype=float)
    hover = [[_hover(site, lens, cell) for lens, cell in zip(table.lenses, row)]
             for site, row in zip(table.sites, table.cells)]
    ticks = {-0.75: f"{NOT_CHECKED} or {NOT_TESTABLE}", 0.0: NOTHING_FOUND, 0.75: "training", -math.log10(FDR): f"q = {FDR:g}",
             2.0: "q = 0.01", 3.0: "q = 0.001", 4.0: "q ≤ 0.0001"}
    fig = go.Figure(go.Heatmap(
        z=z, x=list(table.lenses), y=sites, zmin=Z_MIN, zmax=Z_MAX, colorscale=_colorscale(), xgap=3, ygap=3,
        customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        colorbar=dict(title=dict(text="strength", side="right"), tickvals=list(ticks), ticktext=list(ticks.values()),
                      thickness=14, len=min(1.0, max(0.5, 300 / (48 * len(sites) + 70)))),
    ))
    most, annotations = 1, []
    for i, row in enumerate(table.cells):
        for j, cell in enumerate(row):
            dark = cell.state == "finding" and cell.z >= 2.4
            title, rest = cell.lines()
            lines = [f"<b>{escaped(line)}</b>" for line in title] + [escaped(line) for line in rest]
            most = max(most, len(lines))
            colour = "white" if dark else ("#1d2733" if cell.state == "finding" else "#5b6b7b")
            annotations.append(dict(x=table.lenses[j], y=sites[i], text="<br>".join(lines), showarrow=False,
                                    font=dict(size=12, color=colour)))
    # at once: plotly's add_annotation validates every annotation already there again, so one call per
    # cell grew with cells² (15 check-ups' grids, heart's, vehicle's among them: 3.7 s, now 0.3 s, the
    # same figure)
    fig.update_layout(annotations=annotations)
    fig.update_xaxes(side="top", tickfont=dict(size=14, color="#1d2733"), showgrid=False, automargin=True)
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=13, color="#1d2733"), showgrid=False, automargin=True)
    row_height = max(48, 15 * most + 14)
    # the lenses' names sit below the chart's toolbar (the top 30 px, shown on hover), not under it
    fig.update_layout(font=FONT, height=row_height * len(sites) + 100, margin=dict(l=10, r=10, t=70, b=10),
                      plot_bgcolor="white", paper_bgcolor="white")
    return fig


def _hover(site: str, lens: str, cell: Cell) -> str:
    """A cell's hover, as plotly text (plot_lines: names escaped once, lines kept)."""
    missed = [textwrap.shorten(f"not testable: {f.title}{' (' + f.feature + ')' if f.feature else ''}: {f.untestable}",
                               110) for f in cell.untestable[:6]]
    if len(cell.untestable) > 6:
        missed.append(f"… and {len(cell.untestable) - 6} more not testable")
    if cell.state != "finding":
        return plot_lines([f"{site} · {lens}: {cell.state}", *missed])
    agrees = [f"agrees with {cell.agrees} ({KINDS.get(cell.findings[0].explained_by, '')})"] if cell.agrees else []
    return plot_lines([f"{site} · {lens}:", *(
        textwrap.shorten(f"{f.title}{' (' + f.feature + ')' if f.feature else ''}, {q_label(f.q)}", 90)
        for f in cell.findings[:8]), *agrees, *missed])


# -- tables -------------------------------------------------------------------------------------
def source_of(finding: Finding) -> str:
    """What the finding was computed from: the runs of a model lens, else the sites' statistics."""
    return str(finding.evidence.get("run") or "the sites' federated statistics")


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """One row per finding, in the order given (the check-up's: reported first, strongest first)."""
    rows = [{
        "site": f.site, "lens": f.lens, "finding": f.title, "feature": f.feature or "", "message": f.message,
        "q": f.q, "p": f.p, "effect": f.effect, "effect unit": f.effect_unit, "large enough to matter": f.material,
        "reported": f.significant and f.explained_by is None,
        "explained by": KINDS.get(f.explained_by, f.explained_by) if f.explained_by else "",
        "not testable": f.untestable, "source": source_of(f),
    } for f in findings]
    columns = ["site", "lens", "finding", "feature", "message", "q", "p", "effect", "effect unit",
               "large enough to matter", "reported", "explained by", "not testable", "source"]
    return pd.DataFrame(rows, columns=columns)


def reported_frame(result: CheckUp) -> pd.DataFrame:
    """The reported findings, ranked (the CSV export of the findings)."""
    frame = findings_frame(result.reported)
    frame.insert(0, "rank", range(1, len(frame) + 1))
    return frame.drop(columns=["reported", "explained by", "not testable"])


# -- what 'nothing found' covers ------------------------------------------------------------------
REACH_NOTE = (
    "How far each site's median of a column would have to sit from the other sites' before the check-up reports it "
    "(“values shifted”), the rest of the federation as it is: far enough to matter ({shift:g} {sds}) and beyond what "
    "the other sites' own differences and the false discovery rate allow. A smaller shift would not have been "
    "reported, so “nothing found” says nothing about it. With few sites the other sites' spread rests on few values, "
    "and a site's own shift widens the yardstick it is compared with: then it takes several SDs. Distances are in "
    "{sds} (the column's own units beside them); “now”: where the site's median sits today."
)
REACHED, NOW, TYPICAL = "reported from", "now", "median over its columns"


def reach_note() -> str:
    return REACH_NOTE.format(shift=limit("location", "shift"), sds=plain("within-site SDs"))


def reaches(result: CheckUp, profile: Profile | None) -> list[Reach]:
    """Per site and continuous column, how far its median would have to sit to be reported
    (`data_checks.location_reach`); none without the sites' statistics."""
    return location_reach(profile, result.findings) if profile is not None else []


def reach_frame(found: Sequence[Reach], profile: Profile) -> pd.DataFrame:
    """A row per site and column: the distance from the other sites' median at which its median
    would be reported, in within-site SDs and in the column's units, where it sits now, and
    whether the check-up finds it shifted now. Sites in the check-up's order, nearest first."""
    rows = [{"site": r.site, "column": r.feature,
             REACHED: round(r.distance, 2),
             "that is, in the column's units": _in_units(r, profile),
             NOW: round(r.now, 2),
             "shifted now": "yes" if r.found else "no"} for r in found]
    frame = pd.DataFrame(rows, columns=["site", "column", REACHED,
                                        "that is, in the column's units", NOW,
                                        "shifted now"])
    order = {site: k for k, site in enumerate(dict.fromkeys(r.site for r in found))}
    return frame.sort_values(["site", REACHED], key=lambda c: c.map(order) if c.name == "site"
                             else c, kind="stable").reset_index(drop=True)


def _in_units(reach: Reach, profile: Profile) -> str:
    if not math.isfinite(reach.distance):
        return ""
    unit = profile.units.get(reach.feature, "")
    return f"± {reach.distance * reach.sd:.3g}{' ' + unit if unit else ''}"


def reach_summary(found: Sequence[Reach]) -> pd.DataFrame:
    """A row per site: over its columns, the median distance at which a shift of a column's median
    would be reported, and its nearest and farthest column (`data_checks.reach_by_site`)."""
    rows = [{"site": s.site, "columns": s.columns, TYPICAL: reach_text(s.median),
             "nearest": f"{s.nearest.feature} ({s.nearest.distance_text})",
             "farthest": f"{s.farthest.feature} ({s.farthest.distance_text})"} for s in reach_by_site(found)]
    return pd.DataFrame(rows, columns=["site", "columns", TYPICAL, "nearest", "farthest"])


# -- what each site shared -----------------------------------------------------------------------
def sharing_frame(profile: Profile) -> pd.DataFrame:
    """One row per site: the disclosure policy it released its statistics at, what it withheld (a
    statistic, and of which features or classes where only some) and why."""
    rows = []
    for i, site in enumerate(profile.sites):
        withheld = profile.withheld.get(site, {})
        policy = profile.policies.get(site) or {}
        recorded = site in profile.policies and profile.policies[site] is not None
        rows.append({"site": site,
                     "fewest rows per statistic": str(policy.get("min_count")) if recorded else
                     "none (as computed)" if site in profile.policies else "not recorded",
                     "noise (ε per release)": f"{policy['dp_epsilon']:g}" if policy.get("dp_epsilon") else "none",
                     "statistics withheld": len(withheld),
                     "why": "; ".join(sorted(set(withheld.values()))) or "nothing withheld",
                     "what": textwrap.shorten("; ".join(withheld_parts(profile, i, name) for name in withheld), 400)})
    return pd.DataFrame(rows, columns=["site", "fewest rows per statistic", "noise (ε per release)",
                                       "statistics withheld", "why", "what"])


def withheld_parts(profile: Profile, i: int, name: str) -> str:
    """A statistic site i withheld, in words, with the features and classes it withheld it for where
    not all (those whose entries are all NaN: `profile.STATISTICS` says which axes they are; a
    quantile not released at a group's resolution withholds no feature)."""
    axes = STATISTICS[name].axes
    hidden = ~np.isfinite(np.asarray(profile.arrays[name][i], dtype=np.float64))
    what = name.replace("_", " ")
    parts = []
    for axis, names in (("class", profile.classes), ("feature", profile.features)):
        if axis in axes and hidden.size:
            along = np.moveaxis(hidden, axes.index(axis), 0).reshape(len(names), -1).all(1)
            if 0 < along.sum() < len(names):
                parts.append(", ".join(f"'{n}'" if axis == "class" else n for n in np.array(names)[along]))
    return f"{what} ({'; '.join(parts)})" if parts else what


def sharing_note(profile: Profile | None) -> str:
    """The policies the sites released at, and whether any withheld something."""
    if profile is None:
        return ""
    texts = sorted({profile.policy_text(site) for site in profile.sites})
    withheld = [site for site in profile.sites if profile.withheld.get(site)]
    what = (f"{len(withheld)} of the {len(profile.sites)} sites withheld some statistics of small groups; their "
            "cells say which tests were not testable and why." if withheld else "No site withheld a statistic.")
    noisy = [site for site in profile.sites if (profile.policies.get(site) or {}).get("dp_epsilon")]
    noise = (f" {len(noisy)} site(s) added noise (differential privacy): their shares too noisy to test are not "
             "testable cells; the checks of values do not count the noise, so a finding there may be the noise "
             "(README, Disclosure control)." if noisy else "")
    return f"Disclosure control: the sites released {' / '.join(texts)}. {what}{noise}"


# -- the evidence of a finding -------------------------------------------------------------------
# Every evidence view by name: a pure function of a finding and what the check-up computed it from
# (`evidence_views.Evidence`) to a figure, None where it has nothing to draw from.
EVIDENCE_VIEWS: dict[str, Callable[[Finding, Evidence], go.Figure | None]] = {
    "quantiles": views.quantiles_view,
    "unit_conversion": views.unit_view,
    "missing_code": views.missing_code_view,
    "swapped_columns": views.swapped_view,
    "missing_share": views.missing_share_view,
    "missing_by_class": views.missing_by_outcome_view,
    "categories": views.category_view,
    "class_means": views.outcome_means_view,
    "class_sds": views.outcome_sds_view,
    "label_pattern": views.outcome_pattern_view,
    "correlations": views.correlations_view,
    "exchanged_correlations": views.exchanged_view,
    "related_features": views.related_view,
    "class_balance": views.outcome_balance_view,
    "point_mass": views.point_mass_view,
    "duplicates": views.duplicates_view,
    "decimals": views.decimals_view,
    "resolution": views.resolution_view,
    "row_order": views.row_order_view,
    "feature_correction": views.feature_correction_view,
    "output_scale": partial(views.site_values_view, axis=f"{term('w_out')} each site's model learnt",
                            title="iFedAvg's output layer at each site", reference=0.0,
                            reference_name="0: its outcome scores turned off; below: turned around"),
    "shared_model_auc": partial(views.site_values_view, axis=f"ROC AUC of a shared model on each site's {term('hold-out')}",
                                title="A model trained across the federation, scored at each site", reference=0.5,
                                reference_name="0.5: no better than guessing"),
    "server_score": partial(views.site_values_view, axis="accuracy of each site's model on the server's test set",
                            title="How AdaFed's server scores each site's model", reference="others", percent=True),
    "distance": partial(views.site_values_view, axis="mean distance to the other sites (FedHealth2)",
                        title="How far each site's statistics lie from the others'", reference="others"),
    "stamp_share": partial(views.site_values_view,
                           axis="share of the site's images decided by a prototype on the marked corner",
                           title="Prototypes looking at a mark on the images", reference="others", percent=True),
    "site_values": views.site_values_view,  # one number per site, as the check's effect unit says
}


def view_name(finding: Finding) -> str:
    """The name of the view that draws a finding's evidence: its check's declaration in the check
    registry (`checks.Check.evidence`); a kind the registry does not know (a finding stored by an
    older version): its feature's values, or one number per site."""
    check = BY_KIND.get(finding.kind)
    if check is not None:
        return check.evidence
    return "quantiles" if finding.feature is not None and finding.lens == DATA_LENS else "site_values"


def evidence_figure(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """The data behind a finding, drawn by its view (None: nothing to draw it from)."""
    return EVIDENCE_VIEWS[view_name(finding)](finding, evidence)


def evidence_text(finding: Finding) -> str:
    """What a finding's evidence says beyond its message (plain text; empty when nothing)."""
    e = finding.evidence
    if finding.kind == "category_codes":
        return f"Codes only this site uses: {', '.join(map(str, e.get('site_codes', [])))}; the others use: " \
               f"{', '.join(map(str, e.get('other_codes', [])))}."
    if finding.kind == "feature_shift" and e.get("replicates", 1) > 1 and np.isfinite(e.get("replicate_sd", np.nan)):
        return (f"Across the {e['replicates']} {term('replicate runs')} this cell varied with an SD of "
                f"{e['replicate_sd']:.2f}; "
                f"its mean {e['value']:+.2f} against {e['others']:+.2f} at the other sites.")
    if finding.kind == "shared_model_reversed" and "positives" in e:
        return (f"The {term('hold-out')} at this site: {e['positives']} of the last class, {e['negatives']} of the "
                "first.")
    return ""


# -- HTML ---------------------------------------------------------------------------------------
def html_sections(result: CheckUp, kind: str, profile: Profile | None, colors: dict[str, str],
                  names: Mapping[str, str] | None = None, level: int = 2, evidence: int = 12,
                  tested: int = 500) -> list[str]:
    """The check-up as HTML under a heading of `level`: what it checked, the grid, the ranked
    findings (the first `evidence` with the figure of their evidence), and the tested cells with
    the smallest q-values (`tested`, folded away: a printed report keeps to the findings). `names`:
    run id -> the run's name, said in place of its id."""
    names = names or {}
    heading, sub = f"h{level}", f"h{level + 1}"
    out = [f"<{heading}>Check-up: {html.escape(result.label or str(result.data))}</{heading}>",
           f"<p>{len(result.sites)} sites · {result.tested} cells tested · "
           f"<b>{len(result.reported)} findings</b> "
           f"at a {FDR:.0%} false discovery rate.</p>",
           "<p class='note'>" + html.escape(CALIBRATION.replace("**", "").replace("*", "")) + "</p>",
           "<p class='note'>" + html.escape(CALIBRATION_DETAILS) + "</p>"]
    out.append("<ul>" + "".join(f"<li>{html.escape(lens)}: {html.escape(with_names(source, names))}</li>"
                                for lens, source in result.sources.items()) + "</ul>")
    notes = lens_notes(result, kind, profile)
    if notes:
        out.append("".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes))
    out.append(figures_html([grid_figure(grid(result, kind))]))
    out.append(f"<{sub}>Findings, strongest first</{sub}>")
    if not result.reported:
        out.append("<p>No site stands out from the others in any lens checked.</p>")
    context = Evidence(profile, result.findings, colors)
    items = []
    for rank, finding in enumerate(result.reported):
        where = f" · {finding.feature}" if finding.feature else ""
        extra = evidence_text(finding)
        item = (f"<li><b>{html.escape(finding.site)}</b> · {html.escape(finding.lens)}{html.escape(where)} · "
                f"<b>{html.escape(finding.title)}</b>: {html.escape(finding.message)} "
                f"<b>({html.escape(q_label(finding.q))}, {strength(finding.q)} evidence)</b>"
                + (f"<br><span class='note'>{html.escape(extra)}</span>" if extra else "")
                + (f"<br><span class='note'>from {html.escape(with_names(source_of(finding), names))}</span>"
                   if finding.lens != DATA_LENS else ""))
        figure = evidence_figure(finding, context) if rank < evidence else None
        if figure is not None:
            item += figures_html([figure])
        items.append(item + "</li>")
    out.append("<ol>" + "".join(items) + "</ol>")
    if profile is not None:
        out.append(f"<{sub}>What each site shared</{sub}><p class='note'>Each site released its statistics at its own "
                   "disclosure policy; a statistic of a group smaller than its minimum stayed at the site.</p>")
        out.append(sharing_frame(profile).to_html(index=False))
        found = reaches(result, profile)
        if found:
            out.append(f"<{sub}>What “nothing found” covers</{sub}><p class='note'>"
                       + html.escape(reach_note().replace("*", "")) + "</p>" + reach_summary(found).to_html(index=False))
    if len(result.reported) > evidence:
        out.append(f"<p class='note'>The first {evidence} findings are drawn; the page draws any of them.</p>")
    frame = readable(findings_frame(sorted(result.findings, key=lambda f: f.q)), names)
    which = f"the {tested} with the smallest q-value" if len(frame) > tested else "all of them"
    out.append(f"<{sub}>Every tested cell ({len(frame)})</{sub}><p class='note'>Not significant, or too small to "
               "matter, is a result too: these are the cells behind the findings, with their p- and q-values.</p>"
               f"<details><summary>Show {which}</summary>"
               + frame.head(tested).drop(columns=["message"]).to_html(index=False, float_format=lambda v: f"{v:.3g}",
                                                                       na_rep="–")
               + "</details>")
    return out


def run_names(plan: Plan, store: RunStore) -> dict[str, str]:
    """Run id -> the run's name, for every run of a check-up still in the store."""
    return {run.id: run_name(run) for runs in plan.runs(store).values() for run in runs}


def with_names(text: str, names: Mapping[str, str]) -> str:
    """A text that quotes run ids (a lens's source, a finding's runs) with the runs' names instead."""
    for run_id, name in names.items():
        text = text.replace(run_id, name)
    return text


def readable(frame: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """A findings table as a person reads it: the columns' words (`glossary.COLUMNS`), the effect's
    unit in words, runs by name."""
    out = frame.assign(**{"effect unit": frame["effect unit"].map(effect_unit),
                          "source": frame["source"].map(lambda text: with_names(text, names))})
    return out.rename(columns=COLUMNS)


def lens_notes(result: CheckUp, kind: str, profile: Profile | None) -> list[str]:
    """Why a column is empty: no data lens for images or withheld statistics; what the sites shared."""
    notes = [sharing_note(profile)] if profile is not None else []
    if profile is None:
        notes.append("No data lens: these are images, whose pixels have no units to compare; their lenses are the "
                     "trained models'." if kind == "image" else
                     "No data lens: the sites did not share their statistics (a Flower site with share-profile=false "
                     "keeps them), so only the trained models' lenses check this federation.")
    return notes


def plan_fed_by(run: Run, role: str | None = None) -> Plan | None:
    """The newest check-up that `run` feeds (in `role`, or in any), if any."""
    store = RunStore(run.path.parent)  # a run's folder lies in its store's root
    for plan in plans(store):
        if any(run.id in ids for fed, ids in plan.contents.runs.items() if role in (None, fed)):
            return plan
    return None


def checkup_sections(run: Run) -> list[str]:
    """The newest check-up that `run` feeds, as a section of the run's HTML report (none: nothing)."""
    plan = plan_fed_by(run)
    if plan is None:
        return []
    store = RunStore(run.path.parent)
    result = plan.evaluate(store)
    return html_sections(result, plan.kind, plan.profile, site_colors(result.sites), run_names(plan, store), level=2)
