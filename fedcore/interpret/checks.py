"""The check-up's one registry of checks: every check declared once.

A declaration says what a person reads (the title), how the check decides (statistic, null and
what makes a finding material, in words: the README's check table is made from them), where it
belongs (its lens, the family whose false discovery rate it shares), how specific an explanation
it is (its rank: the order of `CHECKS`, most specific first), which evidence view draws it (a
name the dashboard's drawings are keyed by: `EVIDENCE_VIEWS`), which profile statistics it needs
(`profile.STATISTICS`: a cell whose statistics were withheld is *not testable*, with the reason)
and which of their quantiles (a site's disclosure policy may release fewer),
what one of its cells is (`scope`), and which function computes it (a method of
`data_checks.Checks` for the data lens, a function of `model_checks` for the model lenses).

Everything that shows or decides findings loops over this registry — the check-up's data lens
(`data_checks.check_profile`), the decision (`findings.decide`: q-values per family and site, explanations
by rank), the grid, the Data page's alignment report and `inspect` (which run the data lens on
the files at hand) — so they cannot disagree about a column. Adding a check is a declaration
here, its function, and its known-answer test.

Rules of a declaration:
- family: Benjamini–Hochberg runs within each family at each site (`findings.pool`), so one
  broken site's hundreds of true findings of one kind (a flipped site's every feature relating to
  the label the other way) loosen no other family's threshold, nor any other site's. Every model
  lens is a family of its own.
- explains: kinds this check explains at the same site whatever their feature (wrong labels
  explain every feature's reversed relation to the label).
- explains_here: families whose findings at the same site and feature it explains when it is the
  more specific, besides its own family's (a unit explains a shifted median and iFedAvg's input
  correction; more missing values explain no shift of the values recorded, so both are listed).
  A model lens that agrees with the data lens says so ("agrees with the data lens") and stays
  visible in its cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedcore.interpret.unit_conversions import (
    CONVERSION_SPREAD_RATIO,
    FIT_TOLERANCE,
    IMPROVEMENT,
    PAIR_MEDIAN_TOLERANCE,
    PAIR_MIN_VALUES,
    PAIR_SPREAD_TOLERANCE,
)

# Lenses (a column of the check-up), in the order the check-up shows them.
LENSES = ("data profile", "feature shifts", "labels", "contribution", "similarity", "prototypes")
DATA = LENSES[0]

# What one cell of a check is.
SCOPES = {
    "continuous": "a continuous feature at a site",
    "feature": "a feature at a site (a categorical column's one-hot parts together, as the column)",
    "column": "a categorical column at a site",
    "discrete": "a yes/no or categorical column at a site (a categorical column's one-hot parts together)",
    "site": "the site as a whole",
}

FAMILIES = {
    "values": "how a feature's values lie: location, spread, shape, units, implausible values, distribution",
    "recording": "how values were recorded: constant columns, point masses, missing-value codes, categories, "
                 "duplicated rows",
    "missing values": "how many values are missing, and for which class",
    "relation to the label": "each feature's relation to the label",
    "labels": "a site's labels as a whole: wrong, noisy, or another class balance",
    "correlations": "how features vary together",
    # its own family: its sharp tests find many small real differences between sites, and beside the
    # plain value checks' cells one broken site's few findings then made other sites' borderline
    # cells reportable (vehicle, tuning seeds: other sites with a new finding 1.7 % -> 9.9 %; own: 2.1 %)
    "related features": "a feature's median and spread against what its related features predict",
    # its own family: many sites' class mixes differ, and these cells (as many as the plain location's
    # and spread's) would double the values family's count of tests
    "within classes": "a feature's class means and SDs against the other sites' of the same classes",
    # its own family: a copied column's p is tiny (|r| = 1), and beside the correlation check's cells it
    # made other sites' small differences of correlation reportable
    "columns": "whether a column holds another column's values (an export that mapped the wrong source)",
    # its own family: an exchange's p is tiny where it is one, and in the copies' family it made another
    # sensor's copy, tested just above the line untouched, reportable (vehicle, tuning seeds)
    "exchanges": "whether two columns were exchanged (their correlations with the other features)",
    # its own family: where it applies, a site's p is tiny (the others' shares of decimals are near 0),
    # and beside the recording checks' cells it would loosen their line at that site
    "precision": "whether a site records a column at the other sites' precision: decimals where they record whole "
                 "numbers, or a coarser step than theirs",
    # its own family: its cells are one per continuous feature, tested against the other sites' own
    # orders of rows, and a drifting column is a fault of its own, not one of how the values lie
    "recording order": "whether a feature's values change along the order of the site's rows (a drifting device)",
    "feature shifts": "iFedAvg's learned input corrections",
    "model labels": "iFedAvg's output layer and a shared model's scores at each site",
    "contribution": "AdaFed's weights",
    "similarity": "FedHealth2's distances",
    "prototypes": "inDISCO's prototypes",
}

# The drawings of a finding's evidence (dashboard/presenters/checkup_view.py draws one per name).
EVIDENCE_VIEWS = {
    "quantiles": "every site's values of the feature as boxes, and the site's quantiles against the others'",
    "unit_conversion": "the site's values in its own units, then converted, against the others' in theirs",
    "missing_code": "each site's share of values at the code, against the others' range",
    "swapped_columns": "the site's values of the two columns against the others' values of each",
    "point_mass": "each site's share of values at its most common value, its minimum and its maximum",
    "missing_share": "each site's share of missing values",
    "missing_by_class": "each site's share of missing values, per class",
    "categories": "each site's share of rows per category (a yes/no column: of yes and of no)",
    "class_means": "each site's mean of the feature per class",
    "class_sds": "each site's SD of the feature per class",
    "label_pattern": "each site's class means over the informative features against the others' pattern",
    "class_balance": "each site's share of rows per class",
    "duplicates": "each site's share of rows repeated exactly",
    "decimals": "each site's share of values with decimals",
    "resolution": "each site's share of its values not 0 on the step the site records the feature at",
    "row_order": "each site's rank correlation of the feature with the order of its rows, within classes",
    "correlations": "the feature's correlations with the others at the site against the other sites'",
    "exchanged_correlations": "the feature's rank correlations with the others at the site against the other sites' of "
                              "the same feature and of the column it looks exchanged with",
    "related_features": "each site's median (or SD) of the feature against what its related features predict from the "
                        "other sites' relation",
    "feature_correction": "iFedAvg's learned input correction of the feature at each site",
    "output_scale": "iFedAvg's output scale at each site",
    "shared_model_auc": "a shared model's ROC AUC on each site's test rows",
    "server_score": "AdaFed's score of each site's model",
    "distance": "FedHealth2's mean distance of each site to the others",
    "stamp_share": "the share of each site's images decided by a prototype on the mark",
}


@dataclass(frozen=True)
class Check:
    kind: str  # the finding's kind (its identifier)
    title: str  # what a person reads
    family: str  # FAMILIES: where its false discovery rate is controlled (at each site)
    lens: str  # LENSES
    statistic: str
    null: str
    material: str  # when a significant finding is large enough to matter
    evidence: str  # EVIDENCE_VIEWS
    needs: tuple[str, ...] = ()  # profile statistics (data lens) it is computed from
    scope: str = "continuous"  # SCOPES
    function: str = ""  # data lens: the `data_checks.Checks` method; model lenses: the `model_checks` function
    explains: tuple[str, ...] = ()
    # families whose less specific findings at the same site and feature it explains, besides its own
    # family's (a unit explains a shifted median; more missing values explain no shift of the values
    # that were recorded): `EXPLAINS_SHIFT`, `EXPLAINS_VALUES`
    explains_here: tuple[str, ...] = ()
    min_sites: int = 3  # fewer sites than this: every site's cell is not testable
    min_classes: int = 0  # fewer classes than this: the check does not apply (no cell; another check says it)
    # the numbers of its rule, by name: its function reads them here, `material` names them {like_this}
    limits: tuple[tuple[str, float], ...] = ()
    # the quantiles (by probability) it reads at a site, of those `needs` names: a disclosure policy
    # releases a small group's at a coarser resolution (its median only), and a cell whose own are
    # not released is not testable, with the resolution that was
    quantiles: tuple[float, ...] = (0.5,)
    # of the statistics per class it needs: "every" class's at a site, or "some" (at least two): it
    # compares a site over the classes it released, so that a federation split by label (a site
    # without some classes, a class too small to release) leaves it testable
    classes: str = "every"

    @property
    def rank(self) -> int:
        """Its place among explanations (0: the most specific)."""
        return RANK[self.kind]

    def limit(self, name: str) -> float:
        return dict(self.limits)[name]

    @property
    def material_text(self) -> str:
        """`material` with its limits filled in."""
        return self.material.format(**{name: _number(value) for name, value in self.limits})

    @property
    def statistic_text(self) -> str:
        return self.statistic.format(**{name: _number(value) for name, value in self.limits})


QUANTILES = ("quantiles", "observed")
QUARTILES = (0.25, 0.5, 0.75)
# the fewest rows of each column over which the checks that tell columns apart by their rank
# correlations (a copy, an exchange) call a pair what it looks like: two columns that correlate 0.9
# agree in rank over 10 rows in 0.3 % of pairs, over 13 in 0.01 %, over 16 in 0.0003 % (400,000
# draws each, benchmarks/README.md 2026-12-04), and a rank correlation's SD over 12 rows is near 0.3
FEWEST_ROWS = 16
CLASS_PROFILE = ("mean_by_class", "sd_by_class", "observed_by_class", "class_counts")
LOO = "leave-one-out t over sites, moderated across features"
# what a test of a site's value statistic adds to the others' spread: the variance its size and its
# release's noise give it beyond theirs (`Checks.excess_variance`)
OWN_EXCESS = ", the site's own variance (sampling at its size; noise under differential privacy) beyond the others' added"
# a statistic of a site's released quantiles: what it reads at the site's size where nothing differs
# and how much it varies there are drawn (`sampling`), its noise under DP followed (`release_noise`)
DRAWN = (", its offset and variance at the site's size where nothing differs drawn from the sites' common "
         "distribution as the site's policy releases that many values: the offset subtracted, the variance on the "
         "side of the others' mean the site lies on (a skewed statistic's two sides differ; and the noise's under "
         "differential privacy) beyond the others' added")
# a statistic of a site's rank correlations read from the best of its partners: what it reads by
# chance at the site's size, and how much it varies there, drawn (`sampling.rank_correlation_moments`)
DRAWN_CORRELATIONS = (", its offset and variance at the site's size where nothing differs drawn (the rank "
                      "correlations of that many rows from the Gaussian copula of the sites' median ones): the offset "
                      "subtracted, the variance on the side of the others' mean the site lies on beyond the others' "
                      "added")
AT_LEAST_OWN = ", the others' spread taken as no less than their own variances' mean"
SHARE_LOO = ("leave-one-out t over sites on the logit of the share (its binomial variance at the site added), "
             "moderated across features, one-sided")
RANDOM_EFFECTS = ("random effects: the share against the other sites' rate, on its binomial variance plus the variance "
                  "between the others beyond theirs (t, others − 1 df; the count's exact beta-binomial tail where "
                  "larger: a few values at a small site)")
OVER_DISPERSED = "over-dispersed binomial against the others' rate (dispersion from every site and item), one-sided"

# What a finding explains at its own site and feature (`Check.explains_here`), beyond its family.
# A change of the values explains their other descriptions, the related features' view of them and
# iFedAvg's input correction (which then agrees with the data lens) — not how many are missing, nor
# how they relate to the label or to the other features.
EXPLAINS_SHIFT = ("values", "within classes", "related features", "feature shifts", "precision")
# Values that are not the column's (one value, another column's, a code, a filled mass): everything
# they show, their relation to the label and to the other features included.
EXPLAINS_VALUES = (*EXPLAINS_SHIFT, "recording", "relation to the label", "correlations", "columns", "exchanges")

CHECKS: tuple[Check, ...] = (
    Check("constant", "the same value in (nearly) every row", "recording", DATA,
          "the share of the site's values at its most common value (a categorical column: its largest category)",
          OVER_DISPERSED, "≥ {share:%} of its values and ≥ {count} values, where the others' is ≤ {others:%}, or where their "
          "values off it are as many as a site at {share:%} may keep off it and {fewer} × the site's (a marker the "
          "others record in 10 % of their rows, never at the site); and beyond what the site's class mix predicts "
          "(the point mass's rule)",
          "point_mass", ("top_share", "observed"), "feature", "constant", min_sites=2,
          limits=(("share", 0.95), ("others", 0.8), ("count", 5), ("fewer", 3)), explains_here=EXPLAINS_VALUES),
    Check("copied_column", "a copy of another column", "columns", DATA,
          "of the feature's partners, the one the site shows closest to identical against the others: Fisher z of "
          "the site's absolute rank correlation minus that of the other sites' median (of ranks: one row far out in "
          "two columns makes their r ±1 over a few dozen rows, and leaves a copy's rank correlation 1); of the pair, "
          "the copy is the column whose correlations with the other features no longer follow the other sites' (an "
          "export that filled a column from another)", LOO + DRAWN_CORRELATIONS + ", one-sided",
          "rank correlation ≥ {identical} (or ≤ −{identical}) at the site over ≥ {rows} rows of each column, where "
          "the others' median is within ±{others}, and the likelier copy of the two (two columns that correlate "
          "0.9 agree in rank over 13 rows once in 10,000 pairs, over 16 once in 400,000)",
          "correlations", ("rank_correlation",), "continuous", "copied_columns",
          limits=(("identical", 0.999), ("others", 0.9), ("rows", FEWEST_ROWS)),
          explains_here=(*EXPLAINS_VALUES, "missing values")),
    Check("unit", "unit or scale", "values", DATA,
          "a conversion of the catalogue (°F/°C, lb/kg, inch/cm, mg/dL ↔ mmol/L per named analyte, ×10, ×1000, "
          "%, …) "
          "or a clean factor mapping the site's quantiles onto the others' mean quantiles, tried where the location or "
          "spread differs materially with p < {tried}", "the shift's or spread's p, × 2",
          "the quantiles land within {fit} SD and {closer} × closer, their range within × {range_ratio} of the "
          "others' (a unit scales the spread with the values)", "unit_conversion", QUANTILES, "continuous",
          "unit_conversions",
          limits=(("tried", 0.01), ("fit", FIT_TOLERANCE), ("closer", IMPROVEMENT), ("distinct", 5),
                  ("range_ratio", CONVERSION_SPREAD_RATIO)),
          quantiles=QUARTILES, explains_here=EXPLAINS_SHIFT),
    Check("unit_pair", "a unit factor between two sites", "values", DATA,
          "two sites' medians and interquartile ranges differ by one factor of the catalogue (°F/°C affinely), for "
          "positive quantities with ≥ {values} values at both, where no site-level unit finding names the column "
          "and the classes both sites hold (≥ {values} values each, where their class means are released) do not say "
          "otherwise: their class means' median log ratio nearer the factor's than 0 (a different class mix moves "
          "the medians, a unit every class)",
          "the log ratio of the medians, normal with their sampling SDs (× the partners tried)",
          "medians within {median:%} of the factor, spreads within what sampling allows (at least {spread:%})",
          "quantiles", QUANTILES, "continuous", "unit_pairs", min_sites=2,
          limits=(("values", PAIR_MIN_VALUES), ("median", PAIR_MEDIAN_TOLERANCE), ("spread", PAIR_SPREAD_TOLERANCE)),
          quantiles=QUARTILES, explains_here=EXPLAINS_SHIFT),
    Check("missing_code", "value used as a missing code", "recording", DATA,
          "a usual code (0, −1, 9, 99, 999, …) taking a share of the values, outside every other site's range",
          "binomial against the value's rate at the other sites where it is no code",
          "≥ {share:%} and ≥ {count} values, outside the others' 5–95 % ± 2 SD (or below 0 where no other site "
          "has a quantile below 0), the others' values taken without their codes (those material with every code "
          "in, or {apart} SD or more from the site's other values; judged again until that no longer changes)",
          "missing_code", ("sentinel_counts", "quantiles", "observed"), "continuous", "missing_codes", min_sites=2,
          limits=(("share", 0.02), ("count", 5), ("apart", 1.0)), explains_here=(*EXPLAINS_VALUES, "missing values")),
    # in the precision family (a step coarser than the other sites' is its question the other way round:
    # whole numbers, or tens, where they record decimals or units), and before the point mass, which it
    # explains: values rounded to a coarse step pile up on its multiples, and a point mass says that
    # they do, not why. After the checks that say what the values are (one value, a copy, a unit, a code)
    Check("resolution", "recorded at a coarser step", "precision", DATA,
          "the site's step: the coarsest of 1, 2, 5 × a power of ten that ≥ {whole:%} of its values not 0 are a "
          "multiple of, within the release's rounding (≥ {count} such values; elsewhere no cell); the share of its "
          "values on that step",
          RANDOM_EFFECTS + ", on the same step, one-sided",
          "the others' share on the step ≤ {others:%} and the step ≥ {step} within-site SD", "resolution",
          ("step_shares", "observed"), "continuous", "resolution",
          limits=(("whole", 0.98), ("count", 20), ("others", 0.5), ("step", 0.2)), explains_here=("recording",)),
    Check("point_mass", "many values at one value", "recording", DATA,
          "the shares of the site's values at its most common value, at its minimum and at its maximum (saturation, "
          "clipping, zero-fill, dropouts, a code outside the usual list); tested: the values tied with it beyond "
          "the one (a continuous column's extreme always holds 1/n)",
          RANDOM_EFFECTS + "; the smallest of the three × 3",
          "≥ {excess:pt} more and {ratio} × the others', and ≥ {excess:pt} more than its class mix predicts (each "
          "class's share at the value at the other sites, read off their quantiles of the class, in the site's "
          "proportions: a site of mostly one class holds that class's mass)", "point_mass",
          ("top_share", "min_share", "max_share", "observed"), "continuous", "point_mass",
          limits=(("excess", 0.05), ("ratio", 3)), explains_here=EXPLAINS_VALUES),
    Check("category_codes", "categorical codes differ", "recording", DATA,
          "the share of rows in categories no other site uses", "binomial against half a row in all the others' rows",
          "≥ {share:%}", "categories", ("mean", "observed"), "column", "category_codes", min_sites=2,
          limits=(("share", 0.05),), explains_here=EXPLAINS_VALUES),
    # after the codes no other site uses (which change every share, and explain it) and the constant
    # column: the shares of a yes/no or categorical column are its values, compared as a median is
    Check("category_share", "categories in other proportions", "values", DATA,
          "the share of the site's values in each category (a yes/no column: its share of yes)",
          "leave-one-out t over sites on the logit of the share (its binomial variance at the site added), moderated "
          "across the columns' categories; a categorical column's categories together (the smallest p, × categories)",
          "with k categories, one 2/k × {gap:pt} and {odds} × the odds away from the others' mean ({gap:pt} with "
          "two), and as far from what its class mix predicts (each class's share at the other sites, in the site's "
          "proportions: a site of mostly one class holds that class's share)",
          "categories", ("mean", "observed"), "discrete", "category_shares", limits=(("gap", 0.15), ("odds", 2))),
    Check("swapped_columns", "columns swapped", "values", DATA,
          "the site's values of two features fit the others' of each other", "the shift's or spread's p, × 2",
          "both fit within {fit} SD, {closer} × closer than to their own column", "swapped_columns", QUANTILES,
          "continuous",
          "swapped_columns", limits=(("fit", FIT_TOLERANCE), ("closer", IMPROVEMENT)), quantiles=QUARTILES,
          explains_here=(*EXPLAINS_VALUES, "missing values")),
    # after the swap its values show (the plainer evidence, which explains this one where both are
    # found) and before the value checks: an exchange of two columns on one scale shows in no value
    # check, and explains those it does show
    Check("exchanged_columns", "columns exchanged", "exchanges", DATA,
          "of the feature's partners, the one whose exchange with it most improves how both columns' rank "
          "correlations with the other features follow the other sites' median rank correlations of the other column "
          "(each fit: the Pearson r of the two rows of correlations over the other features, the pair left out): the "
          "smaller of the two columns' gains (of ranks: one row far out at a small site makes Pearson correlations "
          "±1)",
          LOO + DRAWN_CORRELATIONS + ", one-sided (larger)",
          "each the other's best exchange, both fitting ≥ {fit} as the other column and gaining ≥ {gain} over each "
          "rival reading: their own correlations as they are, and turned round (a reversed column); and each "
          "column's values no farther from the others' of the other column than from their own (or within {values} "
          "SD); over ≥ {rows} rows of each column",
          "exchanged_correlations", ("rank_correlation",), "continuous", "exchanged_columns",
          limits=(("gain", 0.3), ("fit", 0.5), ("values", FIT_TOLERANCE), ("rows", FEWEST_ROWS)),
          explains_here=(*EXPLAINS_VALUES, "missing values")),
    # after the checks that say where other values came from (a unit, a code, a copy, an exchange),
    # which explain it where both are found: decimals in a column of whole numbers are how a
    # conversion, a correction or a computed value shows, not which
    Check("precision", "recorded at another precision", "precision", DATA,
          "the share of the site's values that are not whole numbers, where the other sites' is ≤ {others:%} (a "
          "column they record in whole numbers; elsewhere no cell)", RANDOM_EFFECTS + ", one-sided", "≥ {share:%} and ≥ {count} values with decimals", "decimals",
          ("integer_share", "observed"), "continuous", "precision",
          limits=(("share", 0.1), ("count", 5), ("others", 0.02))),
    Check("labels_permuted", "labels look wrong", "labels", DATA,
          "over the features the others show related to the label (a class difference of {informative} SD or "
          "more either way), over the classes the site released: how often renaming its classes (or one "
          "of them to a class it has none of) fits the others better, over the features that tell the "
          "renamed classes apart; two classes also a reversal projection. Where several sites' labels look wrong "
          "(p < {suspect}), each is judged again with the suspect whose renaming explains the others best set right "
          "(fewer sites left looking wrong, or {margin} × less evidence than the next best choice)",
          "binomial, × the renamings tried",
          "≥ {features} features and {share:%} of them, or a negative correlation "
          "with the others' pattern; and renamed, the site's relation to its labels at least {strength:%} as strong "
          "as the others' (a flat pattern is noise, not renamed labels)", "label_pattern", CLASS_PROFILE, "site",
          "labels_permuted",
          explains=("label_relation", "class_shift", "labels_weak", "class_balance", "location_within",
                    "spread_within", "output_shift", "shared_model_reversed"),
          limits=(("informative", 0.2), ("features", 3), ("share", 0.75), ("suspect", 0.01), ("margin", 10),
                  ("strength", 0.5)),
          classes="some"),
    Check("labels_weak", "labels look noisy", "labels", DATA,
          "how strongly the site's features relate to its labels relative to the others' (median ratio over the "
          "informative features)", "leave-one-out t over sites on its log (at least log 0.05), one-sided (weaker)",
          "below {ratio}",
          "label_pattern", CLASS_PROFILE, "site", "labels_weak",
          explains=("label_relation", "class_shift", "class_balance", "location_within", "spread_within"),
          limits=(("ratio", 0.5),), classes="some"),
    Check("class_balance", "another class balance", "labels", DATA,
          "the logit of each class's share of the site's rows",
          "leave-one-out t over sites, its binomial variance beyond the others' added (each class, × classes)",
          "with k classes, a class 2/k × {gap:pt} and {odds} × the odds away from the others' mean ({gap:pt} "
          "with two)",
          "class_balance",
          ("class_counts", "rows"), "site", "class_balance", limits=(("gap", 0.15), ("odds", 2)), classes="some"),
    # before the far-out share: a skewed distribution has far-out values, and is the more specific
    # before what the values show (shape, far-out values, median, spread): where within each class the
    # site's mean and SD are the others', those are its class mix (a site of mostly one class is skewed
    # and has far-out values by its classes' own)
    Check("class_mix", "differs as its class mix predicts", "values", DATA,
          "tried where the location, spread, shape or far-out share differs materially: the site's mean and SD "
          "within its classes against what its class mix predicts (the statistics of the checks within classes), "
          "and its mix alone (every site's classes in the site's proportions) against the other sites' mixes",
          "the smaller p of the material differences it names (the median's and the spread's where either is "
          "material, else the shape's and the far-out share's), × their number",
          "within its classes below the material sizes of 'values shifted within classes' and 'different spread "
          "within classes'; the mix alone moving the mean or the SD by the location's or the spread's material size "
          "(of those two, the one that differs materially, where either does), each material difference of the "
          "median or the spread the way the mix moves it", "class_means", (*QUANTILES, *CLASS_PROFILE),
          "continuous", "class_mix", min_classes=2,
          classes="some", explains_here=EXPLAINS_SHIFT),
    Check("shape", "different shape", "values", DATA,
          "Bowley skew (q75 + q25 − 2 q50)/(q75 − q25); log tail ratio (q95 − q05)/(q75 − q25)", LOO + DRAWN + AT_LEAST_OWN,
          "skew ± {skew}, tails × {tails}", "quantiles", QUANTILES, "continuous", "shape",
          limits=(("skew", 0.15), ("tails", 1.3)), quantiles=(0.05, *QUARTILES, 0.95), explains_here=EXPLAINS_SHIFT),
    # before the checks of spread: a few far-out values (a unit slip in 3 % of the rows) widen a site's
    # SD within its classes as computed, and the far-out share is the plainer evidence
    Check("range", "implausible values", "values", DATA,
          "the share of the site's values beyond its quartiles by 3 interquartile ranges (counted at the site)",
          SHARE_LOO, "≥ {share:%} and ≥ {count} values, {ratio} × the others'", "quantiles",
          ("far_share", "observed"), "continuous", "implausible_values",
          limits=(("share", 0.01), ("count", 5), ("ratio", 4)), explains_here=EXPLAINS_SHIFT),
    Check("spread", "different spread", "values", DATA,
          "log of the site's robust SD (mean of the normal-scaled widths of its central 50–80 %; its SD where its "
          "disclosure policy released too few quantiles for them)", LOO + DRAWN + AT_LEAST_OWN,
          "ratio ≥ {ratio} or ≤ 1/{ratio}", "quantiles", QUANTILES, "continuous", "spread",
          limits=(("ratio", 1.25),), explains_here=(*EXPLAINS_SHIFT, "relation to the label")),
    # the spreads before the relations to the label: those are in within-class SDs, so a site whose
    # values vary more within its classes shows each class nearer the middle (a class shifted, a
    # weaker relation); the plain spread first, which explains the spread within classes where both
    # are found
    Check("spread_within", "different spread within classes", "within classes", DATA,
          "the log of the site's SD within its classes (pooled) against what its class mix predicts (every site's "
          "median variance of each class, pooled with the site's class counts)",
          LOO + ", the log SD's own sampling error added (each class's variance varying by 2/(n − 1) + (kurtosis − "
          "3)/n, the kurtosis of the class's common distribution held at its far-out fences)",
          "ratio ≥ {ratio} or ≤ 1/{ratio}", "class_sds",
          CLASS_PROFILE, "continuous", "spread_within", min_classes=2, limits=(("ratio", 1.25),), classes="some",
          explains_here=(*EXPLAINS_SHIFT, "relation to the label")),
    Check("class_shift", "one class's values differ", "relation to the label", DATA,
          "per feature and class (three classes or more; with two, the relation to the label is this test): the "
          "class's mean at the site, centred on the site's mean of its class means, in within-class SDs (a site "
          "without some classes: every site re-centred on the classes it has, a class another lacks placed by the "
          "sites' pattern)",
          LOO + ", the class mean's own sampling error (1/n) added; each class, the smallest p × the classes; a "
          "categorical column's categories together",
          "≥ {gap} within-class SDs from the other sites' mean of that class",
          "class_means", CLASS_PROFILE, "feature", "class_shifts", min_classes=3, limits=(("gap", 0.5),),
          classes="some", explains_here=EXPLAINS_SHIFT),
    Check("label_relation", "relation to the label differs", "relation to the label", DATA,
          "per feature, the site's standardised class difference (more classes: along the others' class pattern)",
          LOO + "; a categorical column's categories together (the smallest p, × categories)",
          "{gap} SD apart and ≥ {share:.2g} × the size of the others' relation (weaker, reversed, stronger, or new)",
          "class_means", CLASS_PROFILE, "feature", "label_relations",
          limits=(("gap", 0.3), ("informative", 0.2), ("share", 2 / 3))),
    Check("missing_by_class", "missingness depends on the class", "missing values", DATA,
          "the missing share per class within the site", "χ² with the dispersion the other sites show",
          "classes {gap:pt} apart", "missing_by_class", ("observed_by_class", "class_counts"), "feature",
          "missing_by_class", min_sites=2, limits=(("gap", 0.2),)),
    Check("missingness", "more missing values", "missing values", DATA,
          "the site's count of missing values", OVER_DISPERSED, "+ {more:pt} and {odds} × the odds",
          "missing_share", ("observed", "rows"), "feature", "missingness", min_sites=2,
          limits=(("more", 0.05), ("odds", 2))),
    Check("duplicates", "rows repeated", "recording", DATA,
          "the share of the site's rows that repeat an earlier row exactly (counted at the site)", OVER_DISPERSED,
          "≥ {share:%} and ≥ {count} rows, {ratio} × the others'", "duplicates", ("duplicate_rows", "rows"),
          "site",
          "duplicates", min_sites=2, limits=(("share", 0.02), ("count", 5), ("ratio", 3))),
    Check("location", "values shifted", "values", DATA,
          "the site's median in within-site SDs (the median over sites of each site's robust SD)", LOO + DRAWN + AT_LEAST_OWN,
          "≥ {shift} SD from the others", "quantiles", QUANTILES, "continuous", "location",
          limits=(("shift", 0.25),), explains_here=EXPLAINS_SHIFT),
    # after the plain location, which explains it where both are found: this is for the sites whose
    # class mix hides a shift (label skew, a hospital with more patients ill)
    Check("location_within", "values shifted within classes", "within classes", DATA,
          "the site's mean less what its class mix predicts (every site's median mean of each class, weighted by "
          "the site's class counts), in within-class SDs (the median over sites of each site's pooled SD within "
          "its classes)", LOO + ", the mean's own sampling error added",
          "≥ {shift} within-class SDs from the others", "class_means", CLASS_PROFILE, "continuous",
          "location_within", min_classes=2, limits=(("shift", 0.25),), classes="some",
          explains_here=EXPLAINS_SHIFT),
    Check("location_related", "values shifted against related features", "related features", DATA,
          "the site's median in within-site SDs less what the other sites' least-squares relation of it to the "
          "medians of its related features predicts (those it correlates with most within the sites, r of "
          "{related} or more either way, at most {partners} and n − 5; a related feature that stands out at the site "
          "beyond doubt, p < 10⁻⁴, is left out of its prediction and of the fits)",
          "externally studentized residual of that regression over sites (t with n − m − 2 df), residual variances "
          "moderated across features" + DRAWN + " (its related features' too, through the coefficients)",
          "≥ {shift} SD from the prediction", "related_features", (*QUANTILES, "correlation"),
          "continuous", "location_related", min_sites=6,
          limits=(("shift", 0.25), ("related", 0.3), ("partners", 3)), explains_here=EXPLAINS_SHIFT),
    Check("spread_related", "spread differs against related features", "related features", DATA,
          "the log of the site's robust SD less what the other sites' least-squares relation of it to the log SDs "
          "of the same related features predicts",
          "externally studentized residual of that regression over sites (t with n − m − 2 df), residual variances "
          "moderated across features" + DRAWN + " (its related features' too, through the coefficients)",
          "ratio ≥ {ratio} or ≤ 1/{ratio}", "related_features", (*QUANTILES, "correlation"),
          "continuous", "spread_related", min_sites=6, limits=(("ratio", 1.25),), explains_here=EXPLAINS_SHIFT),
    Check("correlation", "relations between features differ", "correlations", DATA,
          "the site's rank correlations (Spearman's: a few rows far out do not move them) of the feature with the "
          "others, projected on the other sites' median rank correlations over the partners they correlate with "
          "(of {informative} or more either way): 1 alike, "
          "0 vanished, < 0 reversed; and the feature's mean Fisher z with those partners at the site less the "
          "partners' among themselves there (a channel that alone lost its relations, not a site whose features "
          "all go together loosely)",
          LOO + OWN_EXCESS + ", one-sided (lower), of each; the smaller p × 2",
          "projection ≤ {projection} and the correlations {gap} apart on average",
          "correlations", ("rank_correlation",), "continuous", "correlation",
          limits=(("informative", 0.3), ("partners", 2), ("projection", 0.5), ("gap", 0.25))),
    Check("row_order", "values change along the rows", "recording order", DATA,
          "Spearman's correlation of the feature's values with their row's place in the site's file, within each "
          "class (pooled as one correlation of places and ranks centred within their class: a file sorted by its label "
          "is no drift), on Fisher's z",
          LOO + ", the correlation's own sampling error (1.06 / (n − 3)) added",
          "a straight trend's change from the first row to the last, √12 × the correlation beyond the others' "
          "mean, ≥ {change} SD of the values",
          "row_order", ("order_correlation", "observed"), "continuous", "row_order",
          limits=(("change", 1.0),)),
    Check("distribution", "differs in distribution", "values", DATA,
          "the mean distance between the site's quantiles and the others' mean quantiles, in within-site SDs (a "
          "Wasserstein distance on the quantiles)", LOO + ", on its log, one-sided; noise under differential privacy beyond the others' added", "≥ {distance} SD",
          "quantiles", QUANTILES, "continuous", "distribution", limits=(("distance", 0.25),), quantiles=QUARTILES,
          explains_here=EXPLAINS_SHIFT),
    Check("feature_shift", "learned input correction stands out", "feature shifts", "feature shifts",
          "iFedAvg's b_in and w_in per cell, the mean over replicate runs with other seeds", LOO,
          "b_in ≥ {b_in}, w_in ≥ {w_in}", "feature_correction", scope="feature", function="feature_shifts",
          limits=(("b_in", 0.25), ("w_in", 0.2))),
    Check("output_shift", "learned output correction stands out", "model labels", "labels",
          "iFedAvg's local output layer w_out against the others'", "leave-one-out t over sites, one-sided",
          "negative or < {share:%} of the others'", "output_scale", scope="site", function="output_layer",
          limits=(("share", 0.5),)),
    Check("shared_model_reversed", "a shared model scores below chance", "model labels", "labels",
          "a model trained across the federation (FedAvg): ROC AUC on the site's own hold-out",
          "Mann–Whitney with its class counts, one-sided", "below {auc}", "shared_model_auc", scope="site",
          function="shared_model_auc", explains=("output_shift",), min_sites=1, limits=(("auc", 0.4),)),
    Check("low_contribution", "low weight at the server", "contribution", "contribution",
          "AdaFed: the logit of each site model's accuracy on the server's test set",
          "leave-one-out t over sites, one-sided", "{gap:pt} below", "server_score", scope="site",
          function="contribution", limits=(("gap", 0.1),)),
    Check("distant", "far from the other sites", "similarity", "similarity",
          "FedHealth2: the log of the site's mean distance to the other sites", "leave-one-out t over sites, one-sided",
          "× {ratio} the others'", "distance", scope="site", function="similarity", limits=(("ratio", 1.5),)),
    Check("prototype_on_stamp", "prototypes look at a mark on the images", "prototypes", "prototypes",
          "inDISCO: the share of the site's hold-out images decided by a prototype at the stamp's place",
          "leave-one-out t over sites, one-sided", "{gap:pt} above the others", "stamp_share", scope="site",
          function="prototypes", limits=(("gap", 0.2),)),
)

BY_KIND = {check.kind: check for check in CHECKS}
RANK = {check.kind: rank for rank, check in enumerate(CHECKS)}
KINDS = {check.kind: check.title for check in CHECKS}


def limit(kind: str, name: str) -> float:
    """One number of a check's rule (its declaration's `limits`)."""
    return BY_KIND[kind].limit(name)


def of_lens(lens: str) -> tuple[Check, ...]:
    """The checks of one lens, most specific first."""
    return tuple(check for check in CHECKS if check.lens == lens)


def family(kind: str) -> str:
    """The family whose false discovery rate a kind shares (an unregistered kind: a family of its own)."""
    check = BY_KIND.get(kind)
    return check.family if check is not None else kind


def check_table() -> str:
    """The README's check table (Markdown), from the declarations."""
    rows = ["| check | lens | family | statistic | null | material when |", "|---|---|---|---|---|---|"]
    rows += [f"| {c.title} | {c.lens} | {c.family} | {c.statistic_text} | {c.null} | {c.material_text} |"
             for c in CHECKS]
    return "\n".join(rows)


def _number(value: float) -> str:
    """A limit as the table writes it ("{share:%}": 0.05 -> "5 %", "{gap:pt}": 0.2 -> "20 points")."""
    return _Number(value)


class _Number(float):
    def __format__(self, spec: str) -> str:
        if spec == "%":
            return f"{float(self) * 100:g} %"
        if spec == "pt":
            return f"{float(self) * 100:g} points"
        return format(float(self), spec) if spec else f"{float(self):g}"
