"""The built-in demo federation: SYNTHETIC sepsis triage data for 8 hospitals, with recorded shifts.

Nothing here is real patient data. Each row is a made-up emergency-department patient drawn from
class-conditional distributions in clinical units (sepsis within 48 h: yes / no); each site
also gets a small random case-mix offset, as real hospitals differ. Four sites then carry one
injected incompatibility each, recorded as ground truth that travels with the federation:

    Cedar Community   age recorded 20 years too high (a date-of-birth convention error)
    Elm Regional      temperature recorded in degrees Fahrenheit instead of Celsius
    Fir Valley        'confusion' recorded only for patients who turned out septic
                      (missing for everyone else: missing not at random)
    Oak District      outcome labels flipped (a coding error in the export)

Alder, Birch, Pine and Willow are clean. By default every site standardises with the same
reference values (the consortium's data dictionary), so unit errors stay visible; with per-site
standardisation (the iFedAvg paper's setting) the Fahrenheit and age errors become invisible —
and harmless — because they are affine. The rows go through the same assembly as every table
source (`assemble`: profile, hold-out split, standardisation, injections on request).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from data_adapters.assembly.assemble import assemble
from data_adapters.tables.site_rows import RawFederation, RawSite
from fedcore.errors import DataError
from fedcore.interpret.disclosure import DEFAULT_POLICY, Policy
from fedcore.federation import Federation
from fedcore.injected import InjectedProblem

NAME = "Synthetic sepsis triage (demo)"
CLASSES = ("no sepsis", "sepsis")


@dataclass(frozen=True)
class Feature:
    name: str
    kind: str
    unit: str
    negative: tuple[float, float]  # no sepsis: (mean, sd), or (P(1), 0) for binary
    positive: tuple[float, float]  # sepsis
    reference: tuple[float, float] = (0.0, 1.0)  # data-dictionary (mean, sd) for continuous
    low: float = -np.inf  # physiological floor for clipping

FEATURES = (
    Feature("age", "continuous", "years", (52, 16), (68, 15), (58, 17), 18),
    Feature("sex_male", "binary", "", (0.47, 0), (0.55, 0)),
    Feature("temperature", "continuous", "°C", (37.1, 0.6), (37.9, 0.9), (37.3, 0.8), 34),
    Feature("heart_rate", "continuous", "bpm", (84, 14), (98, 17), (88, 16), 35),
    Feature("resp_rate", "continuous", "/min", (17.5, 3.5), (21, 4.5), (18, 4), 8),
    Feature("systolic_bp", "continuous", "mmHg", (127, 18), (114, 21), (124, 20), 60),
    Feature("spo2", "continuous", "%", (96.8, 1.9), (95.0, 2.8), (96, 2.5), 70),
    Feature("wbc", "continuous", "10^9/L", (8.5, 2.8), (12.0, 4.5), (9, 4), 0.5),
    Feature("crp", "continuous", "mg/L", (28, 25), (75, 55), (40, 45), 0.5),
    Feature("lactate", "continuous", "mmol/L", (1.4, 0.6), (2.4, 1.2), (1.7, 1.0), 0.3),
    Feature("cough", "binary", "", (0.30, 0), (0.42, 0)),
    Feature("confusion", "binary", "", (0.06, 0), (0.22, 0)),
)
FEATURE_INDEX = {f.name: j for j, f in enumerate(FEATURES)}

# (site, rows, share with sepsis)
SITES = (
    ("Alder General", 620, 0.26),
    ("Birch University", 700, 0.30),
    ("Cedar Community", 380, 0.21),
    ("Elm Regional", 460, 0.28),
    ("Fir Valley", 420, 0.24),
    ("Oak District", 340, 0.33),
    ("Pine County", 520, 0.25),
    ("Willow Memorial", 560, 0.27),
)

GROUND_TRUTH = (
    InjectedProblem("Cedar Community", "age", "offset", "age recorded 20 years too high (date-of-birth convention error)"),
    InjectedProblem("Elm Regional", "temperature", "unit", "temperature recorded in °F instead of °C"),
    InjectedProblem("Fir Valley", "confusion", "missing_not_at_random",
                    "confusion recorded only for patients with sepsis; missing for all others"),
    InjectedProblem("Oak District", None, "label_flip", "sepsis / no-sepsis labels swapped for every patient"),
)


def make_demo_federation(
    seed: int = 0, data_seed: int = 7, standardization: str = "reference", site: str | None = None,
    problems: bool = True, inject: list[str | dict] | None = None, disclosure: Policy | None = DEFAULT_POLICY,
) -> Federation:
    """The demo federation; `seed` sets the hold-out split, `data_seed` the generated patients.
    `site` keeps only that hospital, exactly as it is in the whole federation (what one Flower
    site holds in the demo deployment). `problems=False` leaves out the four built-in problems
    (a clean federation); `inject` adds others (data_adapters.assembly.inject), recorded as ground truth too.
    `disclosure`: the policy the hospitals release their statistics at."""
    names = [name for name, _, _ in SITES]
    if site is not None and site not in names:
        raise DataError(f"The demo federation has no site '{site}'; its sites: {', '.join(names)}.")
    rng = np.random.default_rng(data_seed)
    raw_sites = []
    for name, n_rows, prevalence in SITES:
        x, y = _patients(rng, n_rows, prevalence)
        if problems:
            x, y = _inject(name, x, y)
        raw_sites.append(RawSite(name, x, y))
    # Every site is generated, so that each one's patients come from the same random stream.
    kept = [s for s in raw_sites if site in (None, s.name)]
    feature_names = [f.name for f in FEATURES]
    raw = RawFederation(
        name=NAME,
        description=("SYNTHETIC demo data, not real patients: 8 made-up hospitals triaging suspected sepsis"
                     + (", four of them with a known injected problem (see ground truth)." if problems else ".")),
        source="demo", sites=kept, class_names=list(CLASSES), feature_names=feature_names,
        feature_kinds=[f.kind for f in FEATURES], feature_columns=feature_names, synthetic=True,
        preprocessing={"data_seed": data_seed, "units": {f.name: f.unit for f in FEATURES if f.unit}},
    )
    reference = {j: f.reference for j, f in enumerate(FEATURES) if f.kind == "continuous"}
    federation = assemble(raw, seed, inject=inject or (), standardization=standardization,
                          reference=reference if standardization == "reference" else None, disclosure=disclosure)
    built_in = [g for g in GROUND_TRUTH if problems and site in (None, g.site)]
    federation.ground_truth = [*built_in, *federation.ground_truth]
    return federation


def _patients(rng: np.random.Generator, n_rows: int, prevalence: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows in clinical units; each site gets its own small case-mix offset per feature."""
    y = (rng.random(n_rows) < prevalence).astype(np.int64)
    x = np.empty((n_rows, len(FEATURES)))
    for j, feature in enumerate(FEATURES):
        if feature.kind == "binary":
            p = np.where(y == 1, feature.positive[0], feature.negative[0])
            x[:, j] = (rng.random(n_rows) < p).astype(float)
            continue
        case_mix = rng.normal(0.0, 0.1 * feature.reference[1])
        mean = np.where(y == 1, feature.positive[0], feature.negative[0]) + case_mix
        sd = np.where(y == 1, feature.positive[1], feature.negative[1])
        x[:, j] = np.maximum(rng.normal(mean, sd), feature.low)
    return x, y


def _inject(site: str, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Apply the site's recorded incompatibility (GROUND_TRUTH) to its raw table."""
    x, y = x.copy(), y.copy()
    if site == "Cedar Community":
        x[:, FEATURE_INDEX["age"]] += 20.0
    elif site == "Elm Regional":
        x[:, FEATURE_INDEX["temperature"]] = x[:, FEATURE_INDEX["temperature"]] * 9 / 5 + 32
    elif site == "Fir Valley":
        x[y == 0, FEATURE_INDEX["confusion"]] = np.nan
    elif site == "Oak District":
        y = 1 - y
    return x, y
