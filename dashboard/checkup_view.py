"""The check-up (`fedcore.checkup`) as the dashboard shows it: the grid of sites × lenses, the
findings as tables (page and CSV), each data finding's evidence as a figure, and the check-up's
part of an HTML report. Functions of a CheckUp and its profile, no Streamlit: the Check-up page and
the reports draw the very same things.

A grid cell is one of:
    a finding      its title and q-value, coloured by strength (the smaller q, the darker);
                   "+n more" when the lens found several things at that site
    nothing found  the lens looked at the site and nothing passed the calibration
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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures import FONT, site_colors
from dashboard.safe_text import plot_text
from dashboard.report_sections import figures_html
from fedcore.checkup import ROLE_LENSES, CheckUp, Plan, format_q, plans
from fedcore.interpret.findings import FDR, KINDS, LENSES, Finding
from fedcore.interpret.disclosure import Withheld
from fedcore.interpret.profile import PROBABILITIES, Profile
from fedcore.store import Run, RunStore

DATA_LENS = LENSES[0]
IMAGE_LENSES = (DATA_LENS, "labels", "prototypes")
TABLE_LENSES = tuple(lens for lens in LENSES if lens != "prototypes")
NOT_CHECKED, NOTHING_FOUND, TRAINING, NO_DATA_LENS = "not checked", "nothing found", "training…", "no data lens"
NOT_SHARED = "not shared"
# Cells' colour values: states below the findings' -log10(q) scale, which starts at -log10(FDR).
STATE_Z = {NOT_CHECKED: -0.75, NO_DATA_LENS: -0.75, NOT_SHARED: -0.75, NOTHING_FOUND: 0.0, TRAINING: 0.75}
Z_MIN, Z_MAX, Q_FLOOR = -1.0, 4.0, 1e-4
QUANTILE_KINDS = ("location", "spread", "shape", "unit", "swapped_columns", "missing_code")
MISSING_KINDS = ("missingness", "missing_by_class")
BOX = {"lowerfence": 0.05, "q1": 0.25, "median": 0.5, "q3": 0.75, "upperfence": 0.95}  # the boxes' quantiles
CALIBRATION = (
    "**How to read it.** Each site is compared with the other sites *without itself*, so an unusual site cannot "
    "hide by pulling the average towards it, and federations of three or four sites work too. A finding is shown "
    "only when it is large enough to matter *and* unlikely to be chance. Its **q-value** says how likely it is to "
    f"be a false alarm: findings are shown up to q = {FDR:g}, so of everything shown, at most about one in "
    f"{round(1 / FDR)} is expected to be a false alarm, however many cells were tested. The trained lenses are "
    "trained several times with other random seeds (replicate runs), so that training noise is not mistaken for a "
    "site's problem."
)
CALIBRATION_DETAILS = (
    "The data lens compares every site's federated statistics in their original units (counts, quantiles, missing "
    "shares, class-wise means: no row leaves a site); each check states its null (a leave-one-out predictive t "
    "with variances moderated across features, binomial or χ² counts). The model lenses compare what trained models "
    "record per site the same way: iFedAvg's input and output layers averaged over the replicate runs, a shared "
    "model's ROC AUC on each site's hold-out, AdaFed's score of each site's model, FedHealth2's distances. "
    "Benjamini–Hochberg then sets the q-values over every cell tested, all lenses together. The README's "
    "Check-up section has each check's statistic and its threshold for a material finding."
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
    state: str  # "finding", or one of NOT_CHECKED, NOTHING_FOUND, TRAINING, NO_DATA_LENS, NOT_SHARED
    # the reported findings of this lens at this site, strongest first
    findings: list[Finding] = field(default_factory=list)
    # this lens's tests at this site that a disclosure policy left untestable (`Finding.not_testable`)
    not_shared: list[Finding] = field(default_factory=list)

    @property
    def withheld(self) -> str:
        """How many tests were not shared, and the commonest reason ('' when none)."""
        if not self.not_shared:
            return ""
        reasons = [f.not_testable or "" for f in self.not_shared]
        return f"{len(reasons)} not shared: {max(set(reasons), key=reasons.count).removeprefix('not shared ')}"

    @property
    def text(self) -> str:
        extra = f" ({self.withheld})" if self.withheld and self.state != NOT_SHARED else ""
        if self.state == NOT_SHARED:
            return f"{NOT_SHARED} {self.not_shared[0].not_testable.removeprefix('not shared ')}" \
                if self.not_shared and self.not_shared[0].not_testable else NOT_SHARED
        if self.state != "finding":
            return self.state + extra
        top = self.findings[0]
        more = f" (+{len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        return f"{top.title}, {q_label(top.q)}{more}{extra}"

    def lines(self, width: int = 16) -> tuple[list[str], list[str]]:
        """The text drawn in the grid's cell, as (title, the rest): the finding's title wrapped, then
        its q-value and how many more the lens found here (a state: its words, nothing else), and how
        many tests were not shared."""
        untested = [f"{len(self.not_shared)} not shared"] if self.not_shared and self.state != NOT_SHARED else []
        if self.state == NOT_SHARED:
            return [], textwrap.wrap(self.text, width)
        if self.state != "finding":
            return [], textwrap.wrap(self.state, width) + untested
        top = self.findings[0]
        more = [f"+{len(self.findings) - 1} more"] if len(self.findings) > 1 else []
        return textwrap.wrap(top.title, width), [q_label(top.q), *more, *untested]

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
    untested: dict[tuple[str, str], list[Finding]] = {}
    tested: set[tuple[str, str]] = set()
    for finding in result.findings:
        if finding.not_testable:
            untested.setdefault((finding.site, finding.lens), []).append(finding)
        else:
            tested.add((finding.site, finding.lens))
    cells = []
    for site in result.sites:
        row = []
        for lens in lenses:
            found, withheld = by_cell.get((site, lens), []), untested.get((site, lens), [])
            if found:
                row.append(Cell("finding", found, withheld))
            elif withheld and (site, lens) not in tested:
                row.append(Cell(NOT_SHARED, [], withheld))
            elif lens in result.sources:
                row.append(Cell(TRAINING if lens in training else NOTHING_FOUND, [], withheld))
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
    hover = [[escaped(_hover(site, lens, cell)) for lens, cell in zip(table.lenses, row)]
             for site, row in zip(table.sites, table.cells)]
    ticks = {-0.75: f"{NOT_CHECKED} / {NOT_SHARED}", 0.0: NOTHING_FOUND, 0.75: "training", -math.log10(FDR): f"q = {FDR:g}",
             2.0: "q = 0.01", 3.0: "q = 0.001", 4.0: "q ≤ 0.0001"}
    fig = go.Figure(go.Heatmap(
        z=z, x=list(table.lenses), y=sites, zmin=Z_MIN, zmax=Z_MAX, colorscale=_colorscale(), xgap=3, ygap=3,
        customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        colorbar=dict(title=dict(text="strength", side="right"), tickvals=list(ticks), ticktext=list(ticks.values()),
                      thickness=14, len=min(1.0, max(0.5, 300 / (48 * len(sites) + 70)))),
    ))
    most = 1
    for i, row in enumerate(table.cells):
        for j, cell in enumerate(row):
            dark = cell.state == "finding" and cell.z >= 2.4
            title, rest = cell.lines()
            lines = [f"<b>{escaped(line)}</b>" for line in title] + [escaped(line) for line in rest]
            most = max(most, len(lines))
            fig.add_annotation(x=table.lenses[j], y=sites[i], text="<br>".join(lines), showarrow=False,
                               font=dict(size=12, color="white" if dark else ("#1d2733" if cell.state == "finding"
                                                                                else "#5b6b7b")))
    fig.update_xaxes(side="top", tickfont=dict(size=14, color="#1d2733"), showgrid=False)
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=13, color="#1d2733"), showgrid=False)
    row_height = max(48, 15 * most + 14)
    fig.update_layout(font=FONT, height=row_height * len(sites) + 70, margin=dict(l=10, r=10, t=40, b=10),
                      plot_bgcolor="white", paper_bgcolor="white")
    return fig


def _hover(site: str, lens: str, cell: Cell) -> str:
    if cell.state != "finding":
        return f"{site} · {lens}: {cell.text}"
    return f"{site} · {lens}:<br>" + "<br>".join(
        textwrap.shorten(f"{f.title}{' (' + f.feature + ')' if f.feature else ''}, {q_label(f.q)}", 90)
        for f in cell.findings[:8])


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
        "not testable": f.not_testable or "",
        "source": source_of(f),
    } for f in findings]
    columns = ["site", "lens", "finding", "feature", "message", "q", "p", "effect", "effect unit",
               "large enough to matter", "reported", "explained by", "not testable", "source"]
    return pd.DataFrame(rows, columns=columns)


def reported_frame(result: CheckUp) -> pd.DataFrame:
    """The reported findings, ranked (the CSV export of the findings)."""
    frame = findings_frame(result.reported)
    frame.insert(0, "rank", range(1, len(frame) + 1))
    return frame.drop(columns=["reported", "explained by", "not testable"])


# -- what each site shared -----------------------------------------------------------------------
def sharing_frame(profile: Profile) -> pd.DataFrame:
    """One row per site: the disclosure policy it released its statistics at, how many statistics
    (or parts of them: a class, a feature) it withheld, and why."""
    rows = []
    for site in profile.sites:
        withheld = profile.withheld.get(site, [])
        policy = profile.policies.get(site) or {}
        recorded = site in profile.policies and profile.policies[site] is not None
        rows.append({"site": site,
                     "fewest rows per statistic": str(policy.get("min_count")) if recorded else "none (as computed)",
                     "noise (ε per release)": f"{policy['dp_epsilon']:g}" if policy.get("dp_epsilon") else "none",
                     "withheld": len(withheld), "why": "; ".join(sorted({w.reason for w in withheld})) or "nothing withheld",
                     "what": "; ".join(sorted({_withheld_what(w) for w in withheld}))[:400]})
    return pd.DataFrame(rows, columns=["site", "fewest rows per statistic", "noise (ε per release)", "withheld", "why",
                                       "what"])


def _withheld_what(entry: Withheld) -> str:
    where = [part for part in (entry.feature, f"class '{entry.cls}'" if entry.cls else None) if part]
    return f"{entry.statistic.replace('_', ' ')}{' of ' + ', '.join(where) if where else ''}"


def sharing_note(profile: Profile | None) -> str:
    """The policies the sites released at, and whether any withheld something."""
    if profile is None:
        return ""
    texts = sorted({profile.policy_text(site) for site in profile.sites})
    withheld = [site for site in profile.sites if profile.withheld.get(site)]
    what = (f"{len(withheld)} of the {len(profile.sites)} sites withheld some statistics of small groups; their "
            "cells say which tests were not shared and why." if withheld else "No site withheld a statistic.")
    noisy = [site for site in profile.sites if (profile.policies.get(site) or {}).get("dp_epsilon")]
    noise = (f" {len(noisy)} site(s) added noise (differential privacy): the check-up's null does not include it, so "
             "a finding there may be the noise (README, Disclosure control)." if noisy else "")
    return f"Disclosure control: the sites released {' / '.join(texts)}. {what}{noise}"


# -- evidence of a data-lens finding -------------------------------------------------------------
def evidence_figure(finding: Finding, profile: Profile | None, colors: dict[str, str]) -> go.Figure | None:
    """The data behind a data-lens finding, from the sites' statistics (None: its evidence is the text)."""
    if profile is None or finding.lens != DATA_LENS or finding.feature not in profile.features:
        return None
    if finding.site not in profile.sites:
        return None
    j = profile.features.index(finding.feature)
    if finding.kind in QUANTILE_KINDS:
        return quantile_figure(finding, profile, j, colors)
    if finding.kind in MISSING_KINDS:
        return missing_figure(finding, profile, j, colors)
    if finding.kind == "label_relation":
        return class_means_figure(finding, profile, j, colors)
    return None


def _unit_title(profile: Profile, feature: str) -> str:
    unit = profile.units.get(feature, "")
    return escaped(f"{feature} ({unit})" if unit else f"{feature} (original units)")


def quantile_figure(finding: Finding, profile: Profile, j: int, colors: dict[str, str]) -> go.Figure:
    """Left: every site's values of the feature as a box (5, 25, 50, 75, 95 % quantiles), the
    finding's site in its colour. Right: the site's quantiles against the other sites' mean
    quantiles (the finding's evidence), each other site a thin line."""
    site, feature = finding.site, finding.feature or ""
    colour = colors.get(site, "#d62728")
    index = {name: int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0]) for name, p in BOX.items()}
    fig = make_subplots(rows=1, cols=2, column_widths=[0.5, 0.5], horizontal_spacing=0.12,
                        subplot_titles=("Every site's values (box: 25–75 %, whiskers: 5–95 %)",
                                        "Quantiles: this site against the others"))
    for k, name in enumerate(profile.sites):
        quantiles = profile.quantiles[k, :, j]
        if not np.isfinite(quantiles).any():
            continue
        mine = name == site
        box = {key: quantiles[i] for key, i in index.items()}
        if not all(np.isfinite([box["q1"], box["median"], box["q3"]])):
            box = dict.fromkeys(box, np.nanmedian(quantiles))  # a small site: its median only (a line)
        # whiskers where the site released its 5 and 95 % quantiles, else at the box
        box["lowerfence"] = box["lowerfence"] if np.isfinite(box["lowerfence"]) else box["q1"]
        box["upperfence"] = box["upperfence"] if np.isfinite(box["upperfence"]) else box["q3"]
        fig.add_trace(go.Box(y=[escaped(name)], orientation="h", name=escaped(name), showlegend=False,
                             **{key: [float(value)] for key, value in box.items()},
                             marker_color=colour if mine else "#9aa5b1", line=dict(width=3 if mine else 1.5),
                             fillcolor=colour if mine else "rgba(154,165,177,0.35)",
                             hoverinfo="x+name"), row=1, col=1)
        if not mine:
            fig.add_trace(go.Scatter(**released(quantiles), mode="lines", showlegend=False,
                                     line=dict(color="#c5ccd4", width=1), hoverinfo="skip"), row=1, col=2)
    others = finding.evidence.get("others_quantiles")
    if others is not None:
        fig.add_trace(go.Scatter(**released(others), mode="lines+markers", name="the other sites' mean",
                                 line=dict(color="#44546a", width=2.5, dash="dash")), row=1, col=2)
    own = finding.evidence.get("quantiles", profile.quantiles[profile.sites.index(site), :, j])
    fig.add_trace(go.Scatter(**released(own), mode="lines+markers", name=escaped(site),
                             line=dict(color=colour, width=3)), row=1, col=2)
    if "code" in finding.evidence:
        fig.add_vline(x=finding.evidence["code"], line=dict(color="#b00020", dash="dot"), row=1, col=1,
                      annotation_text=f"{finding.evidence['code']:g}", annotation_position="top")
    axis = _unit_title(profile, feature)
    fig.update_xaxes(title_text=axis, row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text="quantile (% of the site's values below)", row=1, col=2)
    fig.update_yaxes(title_text=axis, row=1, col=2)
    fig.update_layout(title=dict(text=escaped(f"{site}: {feature}, as recorded at each site"), x=0),
                      legend=dict(orientation="h", yanchor="bottom", y=-0.3, x=0.55))
    return _styled(fig, max(380, 26 * len(profile.sites) + 200))


def released(quantiles) -> dict[str, np.ndarray]:
    """x (percent) and y of the quantiles a site released (its disclosure policy leaves out those
    no block of enough values stands for)."""
    values = np.asarray(quantiles, dtype=np.float64)
    shared = np.isfinite(values)
    return {"x": PROBABILITIES[shared] * 100, "y": values[shared]}


def missing_figure(finding: Finding, profile: Profile, j: int, colors: dict[str, str]) -> go.Figure:
    """Each site's share of missing values of the feature, per class (the finding's site marked);
    over all its rows where the site did not share its per-class counts (its disclosure policy)."""
    counts = profile.class_counts.astype(float)  # [sites, classes]
    i = profile.sites.index(finding.site)
    with np.errstate(invalid="ignore", divide="ignore"):
        missing = 1 - profile.observed_by_class[:, :, j] / counts
        overall = 1 - profile.observed[:, j] / profile.rows.astype(float)
    names = [escaped(s) for s in profile.sites]
    if np.isfinite(missing[i]).all():
        fig = go.Figure([go.Bar(x=names, y=missing[:, k], name=escaped(f"outcome: {c}"),
                                hovertemplate="%{x}: %{y:.0%} missing<extra>" + escaped(c) + "</extra>")
                         for k, c in enumerate(profile.classes)])
        what = "per outcome"
    else:
        fig = go.Figure([go.Bar(x=names, y=overall, name="all rows", hovertemplate="%{x}: %{y:.0%} missing<extra></extra>")])
        what = "all rows (per outcome: not shared)"
    fig.add_vrect(x0=i - 0.5, x1=i + 0.5, fillcolor=colors.get(finding.site, "#d62728"), opacity=0.15, line_width=0)
    fig.update_yaxes(title_text="share missing", tickformat=".0%", rangemode="tozero")
    fig.update_xaxes(tickangle=-35)
    fig.update_yaxes(range=[0, 1])
    fig.update_layout(barmode="group", title=dict(
        text=escaped(f"{finding.feature}: share of rows where it is missing, {what} (shaded: {finding.site})"),
        x=0))
    return _styled(fig, 380)


def class_means_figure(finding: Finding, profile: Profile, j: int, colors: dict[str, str]) -> go.Figure:
    """Each site's mean of the feature per class, joined per site: a relation to the label that
    differs or reverses shows as a line that runs the other way."""
    names = [escaped(s) for s in profile.sites]
    fig = go.Figure()
    for k, c in enumerate(profile.classes):
        fig.add_trace(go.Scatter(x=names, y=profile.mean_by_class[:, k, j], mode="markers",
                                 name=escaped(f"outcome: {c}"), marker=dict(size=12),
                                 hovertemplate="%{x}: mean %{y:.4g}<extra>" + escaped(c) + "</extra>"))
    for i, name in enumerate(names):
        fig.add_trace(go.Scatter(x=[name] * len(profile.classes), y=profile.mean_by_class[i, :, j], mode="lines",
                                 showlegend=False, hoverinfo="skip",
                                 line=dict(color=colors.get(finding.site, "#d62728") if profile.sites[i] == finding.site
                                           else "#c5ccd4", width=4 if profile.sites[i] == finding.site else 2)))
    fig.update_yaxes(title_text=_unit_title(profile, finding.feature or ""))
    fig.update_xaxes(tickangle=-35)
    fig.update_layout(title=dict(text=escaped(f"{finding.feature}: mean per outcome at each site "
                                              f"({finding.site} in colour)"), x=0))
    return _styled(fig, 380)


def _styled(fig: go.Figure, height: int) -> go.Figure:
    fig.update_layout(height=height, font=FONT, margin=dict(l=10, r=10, t=70, b=10), plot_bgcolor="white",
                      paper_bgcolor="white")
    return fig


def evidence_text(finding: Finding) -> str:
    """What a finding's evidence says beyond its message (plain text; empty when nothing)."""
    e = finding.evidence
    if finding.kind == "category_codes":
        return f"Codes only this site uses: {', '.join(map(str, e.get('site_codes', [])))}; the others use: " \
               f"{', '.join(map(str, e.get('other_codes', [])))}."
    if finding.kind == "feature_shift" and e.get("replicates", 1) > 1 and np.isfinite(e.get("replicate_sd", np.nan)):
        return (f"Across the {e['replicates']} replicate runs this cell varied with an SD of {e['replicate_sd']:.2f}; "
                f"its mean {e['value']:+.2f} against {e['others']:+.2f} at the other sites.")
    if finding.kind == "labels_permuted" and "positives" in e:
        return f"Hold-out at this site: {e['positives']} of the last class, {e['negatives']} of the first."
    return ""


# -- HTML ---------------------------------------------------------------------------------------
def html_sections(result: CheckUp, kind: str, profile: Profile | None, colors: dict[str, str], level: int = 2,
                  evidence: int = 12, tested: int = 500) -> list[str]:
    """The check-up as HTML under a heading of `level`: what it checked, the grid, the ranked
    findings (the first `evidence` data findings with their figure), and the tested cells with the
    smallest q-values (`tested`)."""
    heading, sub = f"h{level}", f"h{level + 1}"
    out = [f"<{heading}>Check-up: {html.escape(result.label or str(result.data))}</{heading}>",
           f"<p>{len(result.sites)} sites · {len(result.findings)} cells tested · "
           f"<b>{len(result.reported)} findings</b> "
           f"at a {FDR:.0%} false discovery rate.</p>",
           "<p class='note'>" + html.escape(CALIBRATION.replace("**", "").replace("*", "")) + "</p>",
           "<p class='note'>" + html.escape(CALIBRATION_DETAILS) + "</p>"]
    out.append("<ul>" + "".join(f"<li>{html.escape(lens)}: {html.escape(source)}</li>"
                                for lens, source in result.sources.items()) + "</ul>")
    notes = lens_notes(result, kind, profile)
    if notes:
        out.append("".join(f"<p class='note'>{html.escape(n)}</p>" for n in notes))
    out.append(figures_html([grid_figure(grid(result, kind))]))
    out.append(f"<{sub}>Findings, strongest first</{sub}>")
    if not result.reported:
        out.append("<p>No site stands out from the others in any lens checked.</p>")
    items, plots = [], 0
    for finding in result.reported:
        where = f" · {finding.feature}" if finding.feature else ""
        extra = evidence_text(finding)
        item = (f"<li><b>{html.escape(finding.site)}</b> · {html.escape(finding.lens)}{html.escape(where)}: "
                f"{html.escape(finding.message)} "
                f"<b>({html.escape(q_label(finding.q))}, {strength(finding.q)} evidence)</b>"
                + (f"<br><span class='note'>{html.escape(extra)}</span>" if extra else "")
                + (f"<br><span class='note'>from {html.escape(source_of(finding))}</span>"
                   if finding.lens != DATA_LENS else ""))
        figure = evidence_figure(finding, profile, colors) if plots < evidence else None
        if figure is not None:
            plots += 1
            item += figures_html([figure])
        items.append(item + "</li>")
    out.append("<ol>" + "".join(items) + "</ol>")
    if profile is not None:
        out.append(f"<{sub}>What each site shared</{sub}><p class='note'>Each site released its statistics at its own "
                   "disclosure policy; a statistic of a group smaller than its minimum stayed at the site.</p>")
        out.append(sharing_frame(profile).to_html(index=False))
    frame = findings_frame(sorted(result.findings, key=lambda f: f.q))
    shown = frame.head(tested)
    which = f" (the {tested} with the smallest q)" if len(frame) > tested else ""
    out.append(f"<{sub}>Every tested cell{which}"
               f"</{sub}><p class='note'>Not significant, or too small to matter, is a result too: these are the "
               "cells behind the findings, with their p- and q-values.</p>")
    out.append(shown.drop(columns=["message"]).to_html(index=False, float_format=lambda v: f"{v:.3g}", na_rep="–"))
    return out


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
        runs = plan.contents.get("runs") or {}
        if any(isinstance(ids, list) and run.id in ids for fed, ids in runs.items() if role in (None, fed)):
            return plan
    return None


def checkup_sections(run: Run) -> list[str]:
    """The newest check-up that `run` feeds, as a section of the run's HTML report (none: nothing)."""
    plan = plan_fed_by(run)
    if plan is None:
        return []
    result = plan.evaluate(RunStore(run.path.parent))
    return html_sections(result, plan.kind, plan.profile, site_colors(result.sites), level=2)
