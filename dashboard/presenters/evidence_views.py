"""The data behind a finding, drawn in the units of what it describes: pure functions of the
finding and of what the check-up computed it from (`Evidence`), no Streamlit. Which view draws
which kind of finding is `dashboard.presenters.checkup_view.EVIDENCE_VIEWS` / `VIEW_OF_KIND`.

Every view draws every site, the finding's site in its colour and the others in grey, so that a
reader sees where the site lies among them:
    a data-lens finding    the sites' own statistics (quantiles, missing shares, class-wise means,
                           category shares, correlations), in the feature's units; a unit
                           finding draws the site's values in its own units, then converted,
                           against the others' in theirs
    a model-lens finding   each site's value of what the lens tested (a learned correction, the
                           output scale, a shared model's ROC AUC, the server's score, a distance),
                           read from every cell the check-up tested (`Evidence.findings`)
Names a user supplied (sites, features, classes) are drawn as text (`safe_text.plot_text`); the
figures set their own colours and margins, so a report draws them alike in any template.

Every view draws only what the sites released at their disclosure policy (the profile) and what
the check-up computed from it, never a row: a viewer sees them as an analyst does (the pages that
draw rows ask `dashboard.access.auth.can_see_rows`). A quantile a site did not release is not drawn (a
small group's box is a line at its median), and a statistic a site withheld is no bar, the title
naming the site, never a 0.
"""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.presenters.figures import CLASS_COLOURS, FONT
from dashboard.presenters.safe_text import plot_text
from fedcore.glossary import effect_unit, term
from fedcore.interpret.checks import BY_KIND
from fedcore.interpret.data_checks import Checks, relation_to_labels
from fedcore.interpret.findings import Finding
from fedcore.interpret.profile import PROBABILITIES, RESOLUTION_STEPS, SENTINELS, Profile, on_steps

OTHERS = "#9aa5b1"  # every other site
OTHERS_FILL = "rgba(154,165,177,0.35)"
REFERENCE = "#44546a"  # the other sites' mean, a neutral value
BOX = {"lowerfence": 0.05, "q1": 0.25, "median": 0.5, "q3": 0.75, "upperfence": 0.95}  # the boxes' quantiles
BOX_NOTE = "box: 25–75 % of its values, whiskers: 5–95 %"
# Characters per line: a title, an axis title and a site's name each fit a printed page (680 px)
TITLE_WIDTH, AXIS_WIDTH, LABEL_WIDTH = 60, 60, 28


@dataclass(frozen=True)
class Evidence:
    """What an evidence view draws from: the sites' statistics (None: they kept them, or images),
    every cell the check-up tested (a model lens's view reads each site's value from them), and
    the sites' colours."""

    profile: Profile | None
    findings: Sequence[Finding]
    colors: Mapping[str, str]

    def colour(self, site: str) -> str:
        return self.colors.get(site, "#d62728")

    @cached_property
    def checks(self) -> Checks:
        """The data lens's checks of `profile`, made once for every view drawn from it."""
        return Checks(self.profile)


# -- shared pieces --------------------------------------------------------------------------------
def _title(text: str, note: str = "") -> dict:
    """A figure title wrapped to the printed width, with a smaller second line (`note`)."""
    lines = [plot_text(line) for line in textwrap.wrap(text, TITLE_WIDTH)]
    notes = [f"<sup>{plot_text(line)}</sup>" for line in textwrap.wrap(note, int(TITLE_WIDTH * 1.3))] if note else []
    return dict(text="<br>".join(lines + notes), x=0, xanchor="left")


def _wrapped(text: str, width: int) -> str:
    """Plain text as plotly text, escaped, broken into lines of `width` characters."""
    return "<br>".join(plot_text(line) for line in textwrap.wrap(text, width)) or plot_text(text)


def _label(name: str) -> str:
    """A site's (or feature's) name on an axis: as written, long ones on two or more lines."""
    return _wrapped(name, LABEL_WIDTH)


def _axis_title(text: str, note: str = "") -> str:
    return _wrapped(text, AXIS_WIDTH) + (f"<br><sup>{plot_text(note)}</sup>" if note else "")


def _styled(fig: go.Figure, height: int) -> go.Figure:
    """Fonts, white background, room for the title's lines and any subplot titles below it; axes
    make room for their labels (automargin), so no site name is cut whatever the template."""
    lines = str(fig.layout.title.text or "").count("<br>") + 1
    subplot_titles = any(a.yref == "paper" and a.y is not None and a.y >= 1 for a in fig.layout.annotations)
    top = 30 + 22 * lines + (26 if subplot_titles else 0)
    fig.update_layout(height=height + top - 74, font=FONT, margin=dict(l=10, r=10, t=top, b=10),
                      plot_bgcolor="white", paper_bgcolor="white", hoverlabel=dict(namelength=-1),
                      legend=dict(bgcolor="rgba(255,255,255,0.8)"))
    fig.update_xaxes(automargin=True, showgrid=True, gridcolor="#eef1f4", zeroline=False, linecolor="#c5ccd4")
    fig.update_yaxes(automargin=True, showgrid=True, gridcolor="#eef1f4", zeroline=False, linecolor="#c5ccd4")
    return fig


def _unit(profile: Profile, feature: str) -> str:
    return profile.units.get(feature, "")


def _axis(feature: str, unit: str) -> str:
    return _axis_title(f"{feature} ({unit})" if unit else f"{feature} (the data's units)")


def _site_height(sites: Sequence[str], base: int = 200) -> int:
    """A figure's height for a row per site (a long name takes a line more)."""
    lines = sum(len(textwrap.wrap(site, LABEL_WIDTH)) or 1 for site in sites)
    return max(320, 18 * lines + 12 * len(sites) + base)


def _boxes(fig: go.Figure, profile: Profile, j: int, site: str, colour: str, row: int = 1, col: int = 1,
           converted: tuple[float, float] | None = None, label: str | None = None,
           others: np.ndarray | None = None, labels: Mapping[str, str] | None = None) -> None:
    """Every site's quantiles of feature j as a horizontal box (5, 25, 50, 75, 95 %), the site in
    its colour; with `converted` (a, b), the site's values as a·x + b, named `label`. `others`
    [sites, probabilities]: the other sites drawn from these instead of what they released (as a
    check compared with them; all NaN: not drawn), each named by `labels` where it has one."""
    for k, name in enumerate(profile.sites):
        mine = name == site
        quantiles = profile.quantiles[k, :, j] if mine or others is None else others[k]
        if not np.isfinite(quantiles).any():
            continue
        if mine and converted is not None:
            quantiles = converted[0] * quantiles + converted[1]
            quantiles = quantiles[::-1] if converted[0] < 0 else quantiles  # a reversing conversion
        shown = _label(label if mine and label else (labels or {}).get(name, name))
        fig.add_trace(go.Box(y=[shown], orientation="h", name=shown, showlegend=False, **_box(quantiles),
                             marker_color=colour if mine else OTHERS, line=dict(width=3 if mine else 1.5),
                             fillcolor=colour if mine else OTHERS_FILL,
                             hovertemplate=f"{shown}<br>median %{{median:.4g}}<extra></extra>"), row=row, col=col)
    fig.update_yaxes(autorange="reversed", row=row, col=col)


def _box(quantiles: np.ndarray) -> dict[str, list[float]]:
    """A box's numbers (BOX) from a site's quantiles, as its disclosure policy released them: where
    it released no quartiles (a small group: its median only) the box is a line at the median, and
    its whiskers end at the box where it released no 5 or 95 % quantile."""
    index = {name: int(np.flatnonzero(np.isclose(PROBABILITIES, p))[0]) for name, p in BOX.items()}
    box = {key: float(quantiles[i]) for key, i in index.items()}
    if not np.isfinite([box["q1"], box["median"], box["q3"]]).all():
        box = dict.fromkeys(box, float(np.nanmedian(quantiles)))
    box["lowerfence"] = box["lowerfence"] if np.isfinite(box["lowerfence"]) else box["q1"]
    box["upperfence"] = box["upperfence"] if np.isfinite(box["upperfence"]) else box["q3"]
    return {key: [value] for key, value in box.items()}


def _released(quantiles: Sequence[float]) -> dict[str, np.ndarray]:
    """x (per cent) and y of the quantiles a site released (a disclosure policy leaves out those no
    block of enough values stands for: the 1 and 99 %, and a small group's outer ones)."""
    values = np.asarray(quantiles, dtype=np.float64)
    shared = np.isfinite(values)
    return {"x": PROBABILITIES[shared] * 100, "y": values[shared]}


def _not_shared(sites: Sequence[str], values: np.ndarray) -> str:
    """A figure's note naming the sites that did not share what it draws (all NaN: their disclosure
    policy withheld it), drawn as no bar rather than as 0 ('' when every site did)."""
    values = np.asarray(values, dtype=np.float64).reshape(len(sites), -1)
    missing = [site for site, row in zip(sites, values) if not np.isfinite(row).any()]
    return f"not shared by {', '.join(missing)} (fewer rows than its disclosure policy's minimum)" if missing else ""


def _notes(*notes: str) -> str:
    return "; ".join(note for note in notes if note)


def _by_site(profile_sites: Sequence[str], site: str, colour: str) -> list[str]:
    return [colour if name == site else OTHERS for name in profile_sites]


def _site_bars(values: Sequence[float], sites: Sequence[str], site: str, colour: str, axis: str, title: dict,
               percent: bool = False, reference: float | None = None, reference_name: str = "",
               errors: Sequence[float] | None = None) -> go.Figure:
    """One bar per site (top to bottom in federation order), the finding's site in its colour; a
    dashed line at `reference` (named on the axis' note)."""
    names = [_label(s) for s in sites]
    shown = "%{x:.0%}" if percent else "%{x:.3g}"
    # bars from the reference (no correction, guessing, the others' mean): how far each site lies from it
    base = reference if reference is not None else 0.0
    fig = go.Figure(go.Bar(
        x=[v - base for v in values], base=base, y=names, orientation="h", marker_color=_by_site(sites, site, colour),
        customdata=list(values),
        error_x=dict(type="data", array=list(errors), color=REFERENCE, thickness=1.5) if errors is not None else None,
        hovertemplate=f"%{{y}}: {shown.replace('x', 'customdata')}<extra></extra>", showlegend=False))
    if reference is not None:
        fig.add_vline(x=reference, line=dict(color=REFERENCE, dash="dash", width=1.5))
    axis = _axis_title(axis, f"dashed line: {reference_name}" if reference is not None and reference_name else "")
    low, high = float(np.nanmin([*values, base])), float(np.nanmax([*values, base]))
    pad = 0.05 * ((high - low) or 1.0)
    fig.update_xaxes(title_text=axis, tickformat=".0%" if percent else None,
                     range=[min(low - pad, 0.0) if percent else low - pad, high + pad])
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=title)
    return _styled(fig, _site_height(sites))


def _in_site_order(cells: Mapping[str, Finding], evidence: Evidence) -> list[str]:
    """The sites of `cells` in the federation's order (the colours'), else as the cells come."""
    return [s for s in (evidence.colors or cells) if s in cells] or list(cells)


def _siblings(finding: Finding, findings: Sequence[Finding]) -> dict[str, Finding]:
    """The same check's cell at every site (same lens, kind, feature and layer): site -> finding."""
    layer = finding.evidence.get("layer")
    return {f.site: f for f in findings if f.lens == finding.lens and f.kind == finding.kind
            and f.feature == finding.feature and f.evidence.get("layer") == layer}


def _feature_index(finding: Finding, profile: Profile | None) -> int | None:
    if profile is None or finding.site not in profile.sites or finding.feature not in profile.features:
        return None
    return profile.features.index(finding.feature)


# -- the data lens --------------------------------------------------------------------------------
def quantiles_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Left: every site's values of the feature as a box. Right: the site's quantiles against the
    other sites' mean quantiles, each other site a thin line (location, spread, shape)."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    if j is None:
        return None
    site, feature = finding.site, finding.feature or ""
    colour = evidence.colour(site)
    unit = _unit(profile, feature)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=("Each site's values", "Quantiles against the others'"))
    _boxes(fig, profile, j, site, colour)
    reference, without_codes, left_out = _as_compared(evidence, site, j)
    for k, name in enumerate(profile.sites):
        if name != site and np.isfinite(reference[k]).any():
            fig.add_trace(go.Scatter(**_released(reference[k]), mode="lines", showlegend=False,
                                     line=dict(color="#c5ccd4", width=1, dash="dot" if name in without_codes else "solid"),
                                     hoverinfo="skip"), row=1, col=2)
    others = finding.evidence.get("others_quantiles")
    if others is not None:
        fig.add_trace(go.Scatter(**_released(others), mode="lines+markers", name="the other sites' mean",
                                 line=dict(color=REFERENCE, width=2.5, dash="dash"), marker=dict(color=REFERENCE)),
                      row=1, col=2)
    own = finding.evidence.get("quantiles", profile.quantiles[profile.sites.index(site), :, j])
    fig.add_trace(go.Scatter(**_released(own), mode="lines+markers", name=plot_text(site),
                             line=dict(color=colour, width=3), marker=dict(color=colour)), row=1, col=2)
    axis = _axis(feature, unit)
    fig.update_xaxes(title_text=axis, row=1, col=1)
    fig.update_xaxes(title_text="share of the site's values below (%)", row=1, col=2)
    fig.update_yaxes(title_text=axis, row=1, col=2)
    fig.update_layout(title=_title(f"{feature} at each site: {site} in colour",
                                   _notes(BOX_NOTE, _references_note(without_codes, left_out))))
    return _styled(fig, _site_height(profile.sites, 220))


def _as_compared(evidence: Evidence, site: str, j: int) -> tuple[np.ndarray, list[str], list[str]]:
    """Every site's quantiles of feature j as the checks compared the others with them
    (`Checks.reference_quantiles` [sites, probabilities]: without a site's missing codes, NaN where
    it never measured the feature), and the other sites read without their codes and left out."""
    checks, sites = evidence.checks, evidence.profile.sites
    without_codes = [name for k, name in enumerate(sites) if name != site and checks.codes_read_as_missing[k, j]]
    left_out = [name for k, name in enumerate(sites) if name != site and checks.not_a_reference[k, j]]
    return checks.reference_quantiles[:, :, j], without_codes, left_out


def _references_note(without_codes: Sequence[str], left_out: Sequence[str], boxes: bool = False) -> str:
    """What the other sites' thin lines and mean (the quantiles view), or their boxes on the right
    (`boxes`: the unit view), leave out ('' where nothing)."""
    notes = []
    if without_codes:
        notes.append(f"right: {', '.join(without_codes)}{'' if boxes else ' dotted'}, without "
                     f"{'its' if len(without_codes) == 1 else 'their'} missing codes, as the check compares")
    if left_out:
        where = "not drawn on the right" if boxes else "not in the others' mean"
        notes.append(f"{', '.join(left_out)} {where} (one value: not measured?)")
    return _notes(*notes)


def unit_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """A unit or scale finding: left, the site's values as it records them, on an axis of its own
    units; right, the site's values converted (a·x + b) against every other site's, in theirs."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    if j is None or "a" not in finding.evidence:
        return quantiles_view(finding, evidence)
    site, feature = finding.site, finding.feature or ""
    colour = evidence.colour(site)
    a, b = float(finding.evidence["a"]), float(finding.evidence.get("b", 0.0))
    formula = str(finding.evidence.get("formula") or f"× {a:.4g}")
    theirs = finding.evidence.get("others_unit") or _unit(profile, feature)
    own = finding.evidence.get("site_unit") or ""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.16, column_widths=[0.35, 0.65],
                        subplot_titles=("As recorded there", f"Converted ({formula}), with the others'"))
    quantiles = profile.quantiles[profile.sites.index(site), :, j]
    fig.add_trace(go.Box(y=[_label(site)], orientation="h", showlegend=False, **_box(quantiles), marker_color=colour,
                         fillcolor=colour, line=dict(width=3),
                         hovertemplate=f"{plot_text(site)} as recorded<br>median %{{median:.4g}}<extra></extra>"),
                  row=1, col=1)
    # the others as the unit check compared with them: a site's missing codes left out of its box,
    # a site that never measured the feature not drawn
    reference, without_codes, left_out = _as_compared(evidence, site, j)
    _boxes(fig, profile, j, site, colour, row=1, col=2, converted=(a, b), label=f"{site}, converted",
           others=reference, labels={name: f"{name}, without codes" for name in without_codes})
    own_axis = (f"{feature} at {site} ({own})" if own else f"{feature} at {site} (its own units)")
    fig.update_xaxes(title_text=_axis_title(own_axis), row=1, col=1)
    fig.update_xaxes(title_text=_axis(feature, theirs), row=1, col=2)
    what = f"{own} where the others use {theirs}" if own and theirs else f"values {formula} off the others'"
    fig.update_layout(title=_title(f"{feature}: {site} looks like {what}",
                                   _notes(BOX_NOTE, _references_note(without_codes, left_out, boxes=True))))
    return _styled(fig, _site_height(profile.sites, 220))


def missing_code_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """A value used as a missing code: each site's share of values that are exactly the code
    (left), and every site's values with the code marked (right)."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    code = finding.evidence.get("code")
    if j is None or code is None or not np.isclose(SENTINELS, code).any():
        return quantiles_view(finding, evidence)
    site, feature = finding.site, finding.feature or ""
    colour = evidence.colour(site)
    v = int(np.flatnonzero(np.isclose(SENTINELS, code))[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = profile.sentinel_counts[:, v, j] / profile.observed[:, j]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14, shared_yaxes=True,
                        subplot_titles=(f"Share of values that are exactly {code:g}", "Each site's values"))
    names = [_label(s) for s in profile.sites]
    fig.add_trace(go.Bar(x=shares, y=names, orientation="h", showlegend=False,
                         marker_color=_by_site(profile.sites, site, colour),
                         hovertemplate="%{y}: %{x:.1%}<extra></extra>"), row=1, col=1)
    _boxes(fig, profile, j, site, colour, row=1, col=2)
    fig.add_vline(x=float(code), line=dict(color="#b00020", dash="dot", width=2), row=1, col=2)
    fig.update_xaxes(title_text="share of the site's values", tickformat=".0%", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text=_axis(feature, _unit(profile, feature)), row=1, col=2)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=_title(f"{feature}: {code:g} at {site}, a code for 'missing'?",
                                   _notes(f"dotted line: {code:g}; {BOX_NOTE}", _not_shared(profile.sites, shares))))
    return _styled(fig, _site_height(profile.sites, 220))


def swapped_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Two columns swapped: for each, the site's quantiles against the other sites' mean quantiles
    of both columns (the site's values of one lie on the others' of the other)."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    other = finding.evidence.get("other_feature")
    if j is None or other not in profile.features:
        return quantiles_view(finding, evidence)
    site, colour = finding.site, evidence.colour(finding.site)
    i = profile.sites.index(site)
    columns = [finding.feature or "", str(other)]
    mean_of = {}
    for column in columns:  # the other sites' mean quantiles, as the check compared them
        cell = next((f for f in evidence.findings if f.site == site and f.feature == column
                     and "others_quantiles" in f.evidence), None)
        k = profile.features.index(column)
        mean_of[column] = (np.asarray(cell.evidence["others_quantiles"]) if cell is not None
                           else np.nanmean(np.delete(profile.quantiles[:, :, k], i, axis=0), axis=0))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=[plot_text(f"What {site} records as {c}") for c in columns])
    for col, (column, swapped_with) in enumerate(zip(columns, reversed(columns)), start=1):
        k = profile.features.index(column)
        fig.add_trace(go.Scatter(**_released(mean_of[column]), mode="lines", showlegend=col == 1,
                                 name="the others' values of the same column", legendgroup="same",
                                 line=dict(color=REFERENCE, width=2, dash="dash")), row=1, col=col)
        fig.add_trace(go.Scatter(**_released(mean_of[swapped_with]), mode="lines", showlegend=col == 1,
                                 name="the others' values of the other column", legendgroup="other",
                                 line=dict(color=OTHERS, width=2, dash="dot")), row=1, col=col)
        fig.add_trace(go.Scatter(**_released(profile.quantiles[i, :, k]), mode="lines+markers",
                                 name=plot_text(f"{site}'s values"), legendgroup="site", showlegend=col == 1,
                                 line=dict(color=colour, width=3), marker=dict(color=colour)), row=1, col=col)
        fig.update_yaxes(title_text=_axis(column, _unit(profile, column)), row=1, col=col)
        fig.update_xaxes(title_text="share of values below (%)", row=1, col=col)
    fig.update_layout(title=_title(f"{columns[0]} and {columns[1]} at {site}: each matches the others' other column"),
                      legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0))
    fig = _styled(fig, 440)
    fig.update_layout(margin_b=70)  # the legend below the axis titles
    return fig


def missing_share_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Each site's share of rows where the feature is missing."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    if j is None:
        return None
    rows = profile.rows.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = 1 - profile.observed[:, j] / rows
    return _site_bars(share, profile.sites, finding.site, evidence.colour(finding.site),
                      "share of the site's rows where it is missing",
                      _title(f"{finding.feature}: missing values at each site ({finding.site} in colour)",
                             _not_shared(profile.sites, share)), percent=True)


def missing_by_outcome_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Each site's share of missing values of the feature, per outcome (a colour each), the
    finding's site shaded."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    if j is None:
        return None
    counts = profile.class_counts.astype(float)  # [sites, classes]
    with np.errstate(invalid="ignore", divide="ignore"):
        missing = 1 - profile.observed_by_class[:, :, j] / counts
    names = [_label(s) for s in profile.sites]
    fig = go.Figure([go.Bar(y=names, x=missing[:, k], orientation="h", name=plot_text(f"outcome: {c}"),
                            marker_color=CLASS_COLOURS[k % len(CLASS_COLOURS)],
                            hovertemplate="%{y}: %{x:.0%} missing<extra>" + plot_text(c) + "</extra>")
                     for k, c in enumerate(profile.classes)])
    i = profile.sites.index(finding.site)
    fig.add_hrect(y0=i - 0.5, y1=i + 0.5, fillcolor=evidence.colour(finding.site), opacity=0.18, line_width=0)
    fig.update_xaxes(title_text="share of the outcome's rows where it is missing", tickformat=".0%",
                     range=[0, 1.02])
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="group", title=_title(
        f"{finding.feature}: missing values per outcome at each site",
        _notes(f"shaded: {finding.site}", _not_shared(profile.sites, missing))),
        legend=dict(title_text="outcome"))
    return _styled(fig, _site_height(profile.sites) + 10 * len(profile.sites) * (len(profile.classes) - 1))


def category_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """A yes/no or categorical column: each site's share of rows in each category (a yes/no
    column: at 1 and at 0), stacked; the categories only the finding's site uses named as such in
    the legend, and for a comparison of the shares the finding's site marked."""
    profile = evidence.profile
    if profile is None or finding.site not in profile.sites:
        return None
    column = finding.feature or ""
    members = [j for j, (kind, c) in enumerate(zip(profile.kinds, profile.columns)) if c == column
               and kind in ("categorical", "binary")]
    if not members:
        return None
    if profile.kinds[members[0]] == "binary":  # its two values, from its share of 1
        shares = [(f"{column} = 1", profile.mean[:, members[0]]), (f"{column} = 0", 1 - profile.mean[:, members[0]])]
    else:
        shares = [(profile.features[j][len(column) + 1:] if profile.features[j].startswith(column + "=")
                   else profile.features[j], profile.mean[:, j]) for j in members]
    own = set(map(str, finding.evidence.get("site_codes", [])))
    names = [f"▶ {_label(s)}" if s == finding.site else _label(s) for s in profile.sites]
    fig = go.Figure()
    for n, (category, values) in enumerate(shares):
        label = f"{category} (only at {finding.site})" if category in own else category
        fig.add_trace(go.Bar(y=names, x=values, orientation="h", name=plot_text(label),
                             marker_color=CLASS_COLOURS[n % len(CLASS_COLOURS)],
                             marker_pattern_shape="/" if category in own else "",
                             hovertemplate="%{y}: %{x:.0%}<extra>" + plot_text(category) + "</extra>"))
    fig.update_xaxes(title_text="share of the site's rows", tickformat=".0%", range=[0, 1.0001])
    fig.update_yaxes(autorange="reversed")
    heading = (f"{column}: the categories each site uses ({finding.site}'s own hatched)" if own or
               finding.kind != "category_share" else f"{column}: each site's share of each value ({finding.site} ▶)")
    fig.update_layout(barmode="stack", legend=dict(title_text=plot_text(column)),
                      title=_title(heading, _not_shared(profile.sites, profile.mean[:, members])))
    return _styled(fig, _site_height(profile.sites))


# a site's outcomes against the same outcomes elsewhere (its values within them differ, or they are the
# others' and its mix of them differs)
WITHIN_CLASSES = ("location_within", "spread_within", "class_mix")


def outcome_means_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Each site's mean of the feature per outcome (a colour each), joined per site: a relation to
    the label that differs or reverses runs the other way; a site whose every outcome lies to one
    side is shifted within its outcomes."""
    return _per_outcome_view(finding, evidence, "mean")


def outcome_sds_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Each site's SD of the feature per outcome: a site whose every outcome's SD lies to one side
    varies more (or less) within its outcomes, whatever its mix of outcomes."""
    return _per_outcome_view(finding, evidence, "SD")


def _per_outcome_view(finding: Finding, evidence: Evidence, statistic: str) -> go.Figure | None:
    profile = evidence.profile
    j = _feature_index(finding, profile)
    if j is None:
        return None
    values = (profile.mean_by_class if statistic == "mean" else profile.sd_by_class)[:, :, j]
    names = [_label(s) for s in profile.sites]
    colour = evidence.colour(finding.site)
    fig = go.Figure()
    for i, name in enumerate(names):
        mine = profile.sites[i] == finding.site
        shown = values[i][np.isfinite(values[i])]  # a class the site lacks would break its line
        fig.add_trace(go.Scatter(y=[name] * len(shown), x=shown, mode="lines",
                                 showlegend=False, hoverinfo="skip",
                                 line=dict(color=colour if mine else "#c5ccd4", width=5 if mine else 2)))
    for k, c in enumerate(profile.classes):
        fig.add_trace(go.Scatter(y=names, x=values[:, k], mode="markers",
                                 name=plot_text(f"outcome: {c}"),
                                 marker=dict(size=12, color=CLASS_COLOURS[k % len(CLASS_COLOURS)],
                                             line=dict(width=1, color="white")),
                                 hovertemplate="%{y}: " + statistic + " %{x:.4g}<extra>" + plot_text(c) + "</extra>"))
    fig.update_xaxes(title_text=f"{statistic} of {_axis(finding.feature or '', _unit(profile, finding.feature or ''))}")
    fig.update_yaxes(autorange="reversed")
    named = finding.evidence.get("class")  # one class's values differ: which class to look at
    look = (f"; look at '{named}' against the other sites'" if named else
            "; each outcome's dot against the other sites' of the same colour" if finding.kind in WITHIN_CLASSES
            else "")
    fig.update_layout(title=_title(f"{finding.feature}: {statistic} per outcome at each site",
                                   f"{finding.site}'s line in colour{look}"),
                      legend=dict(title_text="outcome"))
    return _styled(fig, _site_height(profile.sites))


def outcome_pattern_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """A site's labels as a whole: for each feature, how far its outcomes' means lie apart (in
    spreads within an outcome) at every site; the site's dots against the others' show a pattern
    run the other way round (swapped labels) or flattened (noisy labels)."""
    profile = evidence.profile
    if profile is None or finding.site not in profile.sites or len(profile.classes) < 2:
        return None
    i = profile.sites.index(finding.site)
    order = finding.evidence.get("order") or []
    moved = [(k, c) for k, c in enumerate(order) if c != k]
    pair = moved[0] if len(profile.classes) > 2 and moved else None
    relation = relation_to_labels(profile, pair)  # [sites, features]
    if pair is not None and not np.isfinite(relation[i]).any():  # a class the site has none of: no difference
        pair, relation = _pair_the_site_has(profile, i, pair[0])
    if not np.isfinite(relation[i]).any():  # a site compared over some of its classes only (label skew)
        return None
    others = np.delete(relation, i, axis=0)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a feature no other site relates
        typical = np.nanmedian(others, axis=0) if others.size else np.zeros(relation.shape[1])
    order = [j for j in np.argsort(-np.abs(np.nan_to_num(typical)), kind="stable") if np.isfinite(typical[j])][:20]
    features = [plot_text(profile.features[j]) for j in order]
    colour = evidence.colour(finding.site)
    fig = go.Figure()
    for k, name in enumerate(profile.sites):
        if k == i:
            continue
        fig.add_trace(go.Scatter(x=relation[k, order], y=features, mode="markers", showlegend=k == (1 if i == 0 else 0),
                                 name="another site", marker=dict(color=OTHERS, size=8, opacity=0.7),
                                 hovertemplate=plot_text(name) + ": %{x:+.2f}<extra>%{y}</extra>"))
    fig.add_trace(go.Scatter(x=relation[i, order], y=features, mode="markers", name=plot_text(finding.site),
                             marker=dict(color=colour, size=13, symbol="diamond", line=dict(width=1, color="white")),
                             hovertemplate=plot_text(finding.site) + ": %{x:+.2f}<extra>%{y}</extra>"))
    fig.add_vline(x=0, line=dict(color=REFERENCE, width=1))
    first, last = profile.classes[0], profile.classes[-1]
    spreads = "in usual spreads within an outcome (SDs)"
    if pair is not None:
        first, last = profile.classes[pair[1]], profile.classes[pair[0]]
    axis = (f"mean for '{last}' minus mean for '{first}', {spreads}" if len(profile.classes) == 2 or pair else
            f"outcome means along the other sites' pattern, {spreads}")
    fig.update_xaxes(title_text=_axis_title(axis))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=_title(f"How each feature tells '{last}' from '{first}' at {finding.site} and elsewhere",
                                   "features that tell them apart most at the other sites first") if pair else
                      _title(f"How each feature relates to the outcome at {finding.site} and elsewhere",
                             "features the other sites relate most to the outcome first"))
    return _styled(fig, max(340, 24 * len(order) + 200))


def _pair_the_site_has(profile: Profile, i: int, renamed: int) -> tuple[tuple[int, int] | None, np.ndarray]:
    """A renaming that gives site i's class `renamed` the name of a class it has no rows of leaves no
    difference of the two at the site: draw `renamed` against the class the site has that the other
    sites tell apart from it most instead ((renamed, other), its relation). None and the relation to
    the outcome when the site has no such class."""
    best = None
    for other in range(len(profile.classes)):
        if other == renamed:
            continue
        relation = relation_to_labels(profile, (renamed, other))
        if not np.isfinite(relation[i]).any():
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a feature no other site relates
            apart = np.nanmean(np.abs(np.nanmedian(np.delete(relation, i, axis=0), axis=0)))
        if best is None or apart > best[0]:
            best = (apart, (renamed, other), relation)
    return (best[1], best[2]) if best is not None else (None, relation_to_labels(profile))


def correlations_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """How the feature varies with each other continuous feature at the site (its correlation)
    against the other sites': a channel replaced by noise loses its correlations. The correlations
    the finding's check read (its registry's `needs`): of ranks for *relations between features differ* and
    a copy."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    if j is None or j not in profile.continuous:
        return None
    ranked = finding.kind in BY_KIND and "rank_correlation" in BY_KIND[finding.kind].needs
    matrix = profile.rank_correlation if ranked else profile.correlation
    what = "rank correlation" if ranked else "correlation r"
    c = profile.continuous.index(j)
    i = profile.sites.index(finding.site)
    rest = [k for k in range(len(profile.continuous)) if k != c]
    features = [plot_text(profile.features[profile.continuous[k]]) for k in rest]
    fig = go.Figure()
    for s, name in enumerate(profile.sites):
        if s != i:
            fig.add_trace(go.Scatter(x=matrix[s, c, rest], y=features, mode="markers",
                                     name="another site", showlegend=s == (1 if i == 0 else 0),
                                     marker=dict(color=OTHERS, size=8, opacity=0.7),
                                     hovertemplate=plot_text(name) + ": %{x:+.2f}<extra>%{y}</extra>"))
    fig.add_trace(go.Scatter(x=matrix[i, c, rest], y=features, mode="markers", name=plot_text(finding.site),
                             marker=dict(color=evidence.colour(finding.site), size=13, symbol="diamond"),
                             hovertemplate=plot_text(finding.site) + ": %{x:+.2f}<extra>%{y}</extra>"))
    fig.add_vline(x=0, line=dict(color=REFERENCE, width=1))
    fig.update_xaxes(title_text=_axis_title(f"how {finding.feature} varies with each feature ({what})"),
                     range=[-1.05, 1.05])
    fig.update_yaxes(autorange="reversed")
    # the check's second comparison: a channel that alone lost its relations, not a site whose
    # features all go together loosely (the partners' r among themselves, from the finding)
    among = float(finding.evidence.get("partners_r", np.nan))
    note = (f"At {finding.site} the features {finding.feature} goes with at the other sites still go with each other "
            f"({among:+.2f} among them): only {finding.feature} lost its relations" if np.isfinite(among) else "")
    fig.update_layout(title=_title(f"{finding.feature} against the other features at each site", note))
    return _styled(fig, max(320, 24 * len(rest) + 200))


def exchanged_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Two columns exchanged: for each, the site's rank correlations with every other feature against
    the other sites' median rank correlations (as the check reads them) of the same column (grey) and of the other column (the
    site's colour). On the diagonal a column's relations are those of the column compared with:
    an exchanged pair's lie on it against the other column, off it against their own."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    partner = finding.evidence.get("partner")
    if j is None or j not in profile.continuous or partner not in profile.features:
        return correlations_view(finding, evidence)
    k = profile.features.index(partner)
    if k not in profile.continuous:
        return correlations_view(finding, evidence)
    site, colour = finding.site, evidence.colour(finding.site)
    i = profile.sites.index(site)
    c, d = profile.continuous.index(j), profile.continuous.index(k)
    rest = [x for x in range(len(profile.continuous)) if x not in (c, d)]
    names = [plot_text(profile.features[profile.continuous[x]]) for x in rest]
    reference = evidence.checks.others_rank_correlation[i]  # the other sites' median, as the check compared
    columns = [(finding.feature or "", c, d), (str(partner), d, c)]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=[plot_text(f"What {site} records as {name}") for name, _, _ in columns])
    for col, (name, own, other) in enumerate(columns, start=1):
        other_name = columns[2 - col][0]
        site_r = profile.rank_correlation[i, own, rest]
        for compared, label, style in ((own, "the others' same column", dict(color=OTHERS, size=8, opacity=0.8)),
                                       (other, "the others' other column", dict(color=colour, size=10,
                                                                                 symbol="diamond"))):
            fig.add_trace(go.Scatter(x=reference[compared, rest], y=site_r, mode="markers", name=plot_text(label),
                                     legendgroup=label, showlegend=col == 1, marker=style, text=names,
                                     hovertemplate="%{text}: at " + plot_text(site) + " rank r = %{y:+.2f}, the others' "
                                     "rank r = %{x:+.2f}<extra></extra>"), row=1, col=col)
        fig.add_trace(go.Scatter(x=[-1, 1], y=[-1, 1], mode="lines", name="the same relations", legendgroup="same",
                                 showlegend=col == 1, hoverinfo="skip", line=dict(color=REFERENCE, width=1, dash="dash")),
                      row=1, col=col)
        # two panels side by side: each axis title wrapped to half the printed width
        fig.update_xaxes(title_text=_wrapped(f"the other sites' rank r of {name} (grey) or {other_name} with each "
                                             "feature", AXIS_WIDTH // 2), range=[-1.05, 1.05], row=1, col=col)
        fig.update_yaxes(title_text=_wrapped(f"{site}'s rank r of what it records as {name}", AXIS_WIDTH // 2),
                         range=[-1.05, 1.05], row=1, col=col)
    e = finding.evidence
    note = (f"{finding.feature} fits as {partner} {e.get('fit', np.nan):+.2f}, as itself {e.get('own', np.nan):+.2f}; "
            f"{partner} as {finding.feature} {e.get('partner_fit', np.nan):+.2f}, as itself "
            f"{e.get('partner_own', np.nan):+.2f}")
    fig.update_layout(title=_title(f"{finding.feature} and {partner} at {site}: each one's relations to the other "
                                   "features are the others' other column's", note),
                      legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0))
    fig = _styled(fig, 460)
    fig.update_layout(margin_b=70)  # the legend below the axis titles
    return fig


def related_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """A feature against its related features: one point per site, its median (or SD) against what
    the other sites' relation to the related features predicts for it, read from every site's cell
    of the same check. On the dashed line a site is as its related features predict; the site's
    distance from the line is the finding (its related features moved less than it did)."""
    spread = "predicted_sd" in finding.evidence
    predicted_key, observed_key = ("predicted_sd", "sd") if spread else ("predicted_median", "median")
    cells = _siblings(finding, evidence.findings)
    sites = _in_site_order(cells, evidence)
    points = {s: (float(cells[s].evidence.get(predicted_key, np.nan)), float(cells[s].evidence.get(observed_key, np.nan)))
              for s in sites}
    points = {s: xy for s, xy in points.items() if np.isfinite(xy).all()}
    if finding.site not in points:
        return None
    feature, site, colour = finding.feature or "", finding.site, evidence.colour(finding.site)
    unit = _unit(evidence.profile, feature) if evidence.profile is not None else ""
    what = "SD" if spread else "median"
    fig = go.Figure()
    others = [s for s in points if s != site]
    fig.add_trace(go.Scatter(x=[points[s][0] for s in others], y=[points[s][1] for s in others], mode="markers",
                             name="another site", marker=dict(color=OTHERS, size=9, opacity=0.8),
                             text=[plot_text(s) for s in others],
                             hovertemplate="%{text}: %{y:.4g} against %{x:.4g} predicted<extra></extra>"))
    x, y = points[site]
    fig.add_trace(go.Scatter(x=[x, x], y=[x, y], mode="lines", showlegend=False, hoverinfo="skip",
                             line=dict(color=colour, width=2)))
    fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name=plot_text(site),
                             marker=dict(color=colour, size=14, symbol="diamond"),
                             hovertemplate=f"{plot_text(site)}: %{{y:.4g}} against %{{x:.4g}} predicted<extra></extra>"))
    values = [v for xy in points.values() for v in xy]
    low, high = min(values), max(values)
    pad = 0.05 * ((high - low) or 1.0)
    fig.add_trace(go.Scatter(x=[low - pad, high + pad], y=[low - pad, high + pad], mode="lines",
                             name="as its related features predict", line=dict(color=REFERENCE, dash="dash", width=1.5),
                             hoverinfo="skip"))
    related = str(finding.evidence.get("related", ""))
    in_unit = f" ({unit})" if unit else ""
    fig.update_xaxes(title_text=_axis_title(f"{what} predicted from its related features{in_unit}",
                                            f"related features: {related}; the relation fitted over the other sites"))
    fig.update_yaxes(title_text=_axis_title(f"{feature}: the site's {what}{in_unit}"))
    fig.update_layout(title=_title(f"{feature}: {site}'s {what} against what its related features predict",
                                   "each point a site; on the dashed line: as predicted"))
    return _styled(fig, 420)


def outcome_balance_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Each site's share of rows in each outcome, stacked."""
    profile = evidence.profile
    if profile is None or finding.site not in profile.sites:
        return None
    counts = profile.class_counts.astype(float)
    shares = counts / np.maximum(counts.sum(1, keepdims=True), 1)  # NaN where a site withheld its class counts
    names = [_label(s) for s in profile.sites]
    fig = go.Figure([go.Bar(y=names, x=shares[:, k], orientation="h", name=plot_text(str(c)),
                            marker_color=CLASS_COLOURS[k % len(CLASS_COLOURS)],
                            hovertemplate="%{y}: %{x:.0%}<extra>" + plot_text(str(c)) + "</extra>")
                     for k, c in enumerate(profile.classes)])
    i = profile.sites.index(finding.site)
    fig.add_hrect(y0=i - 0.5, y1=i + 0.5, line=dict(color=evidence.colour(finding.site), width=3))
    fig.update_xaxes(title_text="share of the site's rows", tickformat=".0%", range=[0, 1.0001])
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="stack", legend=dict(title_text="outcome"),
                      title=_title(f"The outcomes at each site ({finding.site} outlined)",
                                   _not_shared(profile.sites, shares)))
    return _styled(fig, _site_height(profile.sites))


def point_mass_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """A column (nearly) constant, or many values at one value: each site's share of values at its
    most common value, at its minimum and at its maximum (the profile's `top_share`, `min_share`,
    `max_share`, where the sites shared them; else every site's values)."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    shares = {name: profile.arrays.get(key) for name, key in (("its most common value", "top_share"),
                                                                ("its minimum", "min_share"),
                                                                ("its maximum", "max_share"))} if j is not None else {}
    if j is None or any(value is None for value in shares.values()):
        return quantiles_view(finding, evidence)
    names = [_label(s) for s in profile.sites]
    fig = go.Figure([go.Bar(y=names, x=np.asarray(value, dtype=float)[:, j], orientation="h",
                            name=what, marker_color=CLASS_COLOURS[k], hovertemplate="%{y}: %{x:.0%}<extra>" + what
                            + "</extra>") for k, (what, value) in enumerate(shares.items())])
    i = profile.sites.index(finding.site)
    fig.add_hrect(y0=i - 0.5, y1=i + 0.5, fillcolor=evidence.colour(finding.site), opacity=0.18, line_width=0)
    fig.update_xaxes(title_text="share of the site's values", tickformat=".0%", range=[0, 1.02])
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(barmode="group", legend=dict(title_text="values at"),
                      title=_title(f"{finding.feature}: how many values sit at one value",
                                   _notes(f"shaded: {finding.site}", _not_shared(
                                       profile.sites, np.stack([np.asarray(v, dtype=float)[:, j]
                                                                for v in shares.values()], 1)))))
    return _styled(fig, _site_height(profile.sites) + 20 * len(profile.sites))


def duplicates_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Rows repeated exactly: each site's share of rows that repeat another (the profile's
    `duplicate_rows`, a count per site)."""
    profile = evidence.profile
    counts = profile.arrays.get("duplicate_rows") if profile is not None else None
    if counts is None or finding.site not in profile.sites:
        return None
    share = np.asarray(counts, dtype=float).reshape(len(profile.sites)) / np.maximum(profile.rows.astype(float), 1)
    return _site_bars(share, profile.sites, finding.site, evidence.colour(finding.site),
                      "share of the site's rows that repeat another row exactly",
                      _title(f"Rows repeated at each site ({finding.site} in colour)", _not_shared(profile.sites, share)),
                      percent=True)


def decimals_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Recorded at another precision: each site's share of the feature's values that are not whole
    numbers (the profile's `integer_share`, a share per site and feature)."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    if j is None or "integer_share" not in profile.arrays:
        return None
    share = 1 - np.asarray(profile.integer_share[:, j], dtype=float)
    return _site_bars(share, profile.sites, finding.site, evidence.colour(finding.site),
                      "share of the site's values with decimals (not whole numbers)",
                      _title(f"{finding.feature}: values with decimals at each site ({finding.site} in colour)",
                             _not_shared(profile.sites, share)), percent=True)


def resolution_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Recorded at a coarser step: each site's share of its values not 0 that are multiples of the
    step the finding's site records the feature at (the profile's `step_shares`)."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    step = finding.evidence.get("step")
    if j is None or step is None or "step_shares" not in profile.arrays:
        return None
    k = int(np.argmin(np.abs(np.log(RESOLUTION_STEPS / step))))
    share = on_steps(np.asarray(profile.step_shares, dtype=float)[:, :, j:j + 1])[0][:, k, 0]
    return _site_bars(share, profile.sites, finding.site, evidence.colour(finding.site),
                      f"share of the site's values (those not 0) that are multiples of {step:g}",
                      _title(f"{finding.feature}: values on a step of {step:g} at each site ({finding.site} in colour)",
                             _not_shared(profile.sites, share)), percent=True)


def row_order_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """Values change along the rows: each site's rank correlation of the feature with the order of
    its rows, within classes (the profile's `order_correlation`, one per site and feature)."""
    profile = evidence.profile
    j = _feature_index(finding, profile)
    if j is None or "order_correlation" not in profile.arrays:
        return None
    r = np.asarray(profile.order_correlation[:, j], dtype=float)
    return _site_bars(r, profile.sites, finding.site, evidence.colour(finding.site),
                      "rank correlation with the order of the site's rows (0: no trend; ±1: sorted)",
                      _title(f"{finding.feature}: values along the order of the rows at each site ({finding.site} "
                             "in colour)", _not_shared(profile.sites, r)), reference=0.0,
                      reference_name="0: no trend along the rows")


# -- the model lenses -----------------------------------------------------------------------------
def site_values_view(finding: Finding, evidence: Evidence, axis: str = "", title: str = "",
                     reference: float | str | None = None, reference_name: str = "",
                     percent: bool = False) -> go.Figure | None:
    """One number per site, read from every site's cell of the same check (`evidence['value']`):
    the finding's site in its colour; `reference` a value to draw, or 'others' for the other
    sites' mean. Replicate runs' spread (`replicate_sd`) as error bars where there is one."""
    cells = _siblings(finding, evidence.findings)
    sites = _in_site_order(cells, evidence)
    if finding.site not in cells or any("value" not in cells[s].evidence for s in sites):
        return None
    values = [float(cells[s].evidence["value"]) for s in sites]
    spread = [cells[s].evidence.get("replicate_sd") for s in sites]
    errors = [float(x) if x is not None and np.isfinite(x) else 0.0 for x in spread] \
        if any(x is not None and np.isfinite(x) for x in spread) else None
    if reference == "others":
        reference = float(np.mean([v for s, v in zip(sites, values) if s != finding.site]))
        reference_name = reference_name or "the other sites' mean"
    what = title or f"{finding.title} at {finding.site}"
    note = "error bars: the SD over the repeat runs with other random seeds" if errors is not None else ""
    return _site_bars(values, sites, finding.site, evidence.colour(finding.site),
                      axis or effect_unit(finding.effect_unit), _title(what, note), percent=percent,
                      reference=reference, reference_name=reference_name, errors=errors)


def feature_correction_view(finding: Finding, evidence: Evidence) -> go.Figure | None:
    """iFedAvg's learned correction of one feature at every site (mean over the repeat runs, their
    SD as error bars), against no correction."""
    layer = str(finding.evidence.get("layer", "b_in"))
    neutral = 1.0 if layer.startswith("w") else 0.0
    unit = "1 = no change" if layer.startswith("w") else "in the feature's standard deviations"
    return site_values_view(finding, evidence, axis=f"{term(layer)} of {finding.feature}, {unit}",
                            title=f"The correction iFedAvg learnt for {finding.feature} at each site",
                            reference=neutral, reference_name=f"no correction ({layer} = {neutral:g})")
