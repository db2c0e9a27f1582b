"""Messy multi-site exports with a known true data dictionary: what the mapping step's suggestions
are scored against (`score`; tests/test_suggestion_suite.py keeps a few seeds, benchmarks/evidence/
mapping.py measures many and writes RESULTS.md §7).

A *study* is a clean multi-site table: every site's rows in the study's column names, units and
codes (`heart`: the four UCI hospitals; `har`: 4-6 subjects and 8 of the 265 features; `vehicle`:
4-6 sensors and 8 of the 100 features; `demo`: 4-6 of the synthetic hospitals). `messy_case`
draws, from a seed, what the sites' exports got wrong — each family below, at random sites and
columns — writes one file per site in a random format, and records the dictionary that undoes it:

rename       a column spelled differently at one site: case, spacing, accents, a unit in the name,
             an abbreviation or synonym of the name lists (matched by name)
complement   a column named so that only its data tell (a clinical synonym no list holds, a code
             name) at one or two sites
target       the target column spelled differently at one site
unit         a continuous column in another unit of the catalogue at one site (two sites, each in
             its own unit, or in one unit where five or more sites keep the study's)
code         a missing-value code (-9, 999, ...) in 3-15 % of a column's values at one site, in a
             column of any kind
unmeasured   a continuous column recorded as 0 for every patient at one site
coding       a binary column written in words at one site (M/F, yes/no, Y/N) where the others
             write 0/1 — or the study writes words and one site 1/0
positive     the target written yes/no, or graded 0-4 (heart), at one site
drop         an identifier at every site, an empty comment column, a spreadsheet's trailing empty
             unnamed column
noise        no decision: a column at one site only that is no other site's column, a column one
             site does not export
The study's own needs are in the truth too (heart: Switzerland's cholesterol is 0 for every
patient, VA's in a quarter of its rows; cp, restecg, slope and thal are codes of categories).

Files: comma / semicolon with decimal commas / tab, UTF-8 (with or without BOM), Windows-1252,
UTF-16, gzip, and .xlsx; a few junk cells in numeric columns.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from data_adapters.mapping.dictionary import FORMAT, merge
from fedcore.interpret.unit_conversions import CONVERSIONS, Conversion

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
HEART = SHARED / "heart_disease" / "heart_disease_4sites.csv"
HAR = SHARED / "uci_har" / "uci_har_time265_by_subject.csv.gz"
HAR_NAMES = SHARED / "uci_har" / "feature_names_265.csv"
VEHICLE = SHARED / "vehicle_sensor" / "vehicle_ditto_train_by_sensor.csv.gz"
BASES = ("heart", "har", "vehicle", "demo")
TYPES = ("rename", "target", "drop", "missing", "values", "convert", "kind", "positive")
CODES = (-9.0, -99.0, -999.0, -1.0, 99.0, 999.0, 9999.0, 9.0, 0.0)


@dataclass
class Study:
    """A clean multi-site study: each site's rows in the study's names, units and codes."""

    base: str
    frames: dict[str, pd.DataFrame]  # features (float; binary 0/1, or words where `words` says) + target
    target: str
    kinds: dict[str, str]  # every feature's true kind
    binary_target: bool
    needs: dict[str, Any] = field(default_factory=dict)  # the dictionary the clean data need already
    spellings: dict[str, tuple[str, ...]] = field(default_factory=dict)  # names matched by name lists
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # names only the data can match
    units: dict[str, tuple[Conversion, ...]] = field(default_factory=dict)  # catalogue units a column may be in
    words: dict[str, tuple[str, str]] = field(default_factory=dict)  # binary column -> its 0 and 1 as words
    graded: dict[str, pd.Series] = field(default_factory=dict)  # heart: each site's target as 0-4

    @property
    def sites(self) -> list[str]:
        return list(self.frames)

    def features(self) -> list[str]:
        return [c for c in next(iter(self.frames.values())).columns if c != self.target]


@dataclass
class MessyCase:
    study: Study
    seed: int
    files: list[Path]
    target: str  # the target's name in the study
    truth: dict[str, Any]  # the data dictionary that undoes every planted problem
    planted: list[dict[str, Any]]  # family, site, column, what
    undecidable: list[dict[str, Any]] = field(default_factory=list)  # what only the analyst can decide

    def reference(self) -> dict[str, Any]:
        return {"source": "csv", "files": [str(f) for f in self.files], "target": self.target}


# -- the studies -------------------------------------------------------------------------------------------
def _conversions(*pairs: tuple[str, ...]) -> tuple[Conversion, ...]:
    """The catalogue's conversions from `source` to `target` units (the site's unit -> the study's),
    of the analyte a third word names."""
    found = tuple(c for c in CONVERSIONS for s, t, *analyte in pairs if c.source == s and c.target == t
                  and (not analyte or analyte[0] in c.analytes))
    assert len(found) == len(pairs), pairs
    return found


FACTORS = tuple(c for c in CONVERSIONS if not c.source and not c.target)  # × / ÷ 10, 100, 1000


def heart_study(rng: np.random.Generator) -> Study:
    data = pd.read_csv(HEART)
    frames, graded = {}, {}
    for site, rows in data.groupby("site", sort=False):
        rows = rows.drop(columns="site").sample(frac=rng.uniform(0.8, 1.0), random_state=int(rng.integers(1 << 31)))
        rows = rows.reset_index(drop=True)
        graded[site] = rows["num"].astype(int)
        frames[site] = rows.drop(columns="num").assign(disease=(rows["num"] > 0).astype(int))
    kinds = {"age": "continuous", "sex": "binary", "cp": "categorical", "trestbps": "continuous",
             "chol": "continuous", "fbs": "binary", "restecg": "categorical", "thalach": "continuous",
             "exang": "binary", "oldpeak": "continuous", "slope": "categorical", "ca": "continuous",
             "thal": "categorical"}
    needs = {"kinds": {c: "categorical" for c in ("cp", "restecg", "slope", "thal")},
             "sites": {"switzerland": {"missing": {"chol": [0]}}, "va": {"missing": {"chol": [0]}}}}
    return Study(
        "heart", frames, "disease", kinds, True, needs,
        spellings={"age": ("Age", "AGE", "age_years", "Age (years)"), "sex": ("Sex", "Gender", "gender"),
                   "chol": ("Cholesterol", "cholesterol", "Chol", "serum cholesterol"),
                   "trestbps": ("TrestBPS", "TRESTBPS", "trest_bps"), "thalach": ("Thalach", "THALACH"),
                   "oldpeak": ("OldPeak", "old_peak"), "cp": ("CP", "Cp"), "exang": ("ExAng", "EXANG"),
                   "fbs": ("FBS", "Fbs"), "restecg": ("RestECG", "rest_ecg"), "slope": ("Slope", "SLOPE"),
                   "ca": ("CA", "Ca"), "thal": ("Thal", "THAL")},
        aliases={"thalach": ("Max HR", "max_heart_rate", "peak heart rate"),
                 "trestbps": ("resting_bp", "Resting BP", "bp_rest"),
                 "oldpeak": ("ST depression", "st_dep_mm"), "age": ("yrs_old",)},
        units={"chol": _conversions(("mmol/L", "mg/dL", "cholesterol")), "age": _conversions(("months", "years")),
               "thalach": (), "trestbps": _conversions(("kPa", "mmHg")), "oldpeak": ()},
        words={"sex": ("F", "M"), "fbs": ("no", "yes"), "exang": ("no", "yes")},
        graded=graded,
    )


def har_study(rng: np.random.Generator) -> Study:
    names = pd.read_csv(HAR_NAMES, index_col=0)["name"].to_dict()
    chosen = sorted(rng.choice(list(names), 8, replace=False).tolist())
    subjects = sorted(rng.choice(np.arange(1, 31), int(rng.integers(4, 7)), replace=False).tolist())
    data = pd.read_csv(HAR, usecols=["subject", "activity", *chosen])
    frames = {}
    for subject in subjects:
        rows = data[data["subject"] == subject].sample(frac=0.5, random_state=int(rng.integers(1 << 31)))
        frames[f"subject_{subject:02d}"] = (rows[chosen].rename(columns=names).assign(activity=rows["activity"])
                                            .reset_index(drop=True))
    features = [names[c] for c in chosen]
    return Study(
        "har", frames, "activity", {c: "continuous" for c in features}, False,
        spellings={c: (c.upper(), c.replace("-", "_"), c.replace("()", "").replace("-", " ")) for c in features},
        aliases={c: (f"channel_{k + 1}", f"ch{k + 11}") for k, c in enumerate(features)},
        units={c: FACTORS for c in features},
    )


def vehicle_study(rng: np.random.Generator) -> Study:
    data = pd.read_csv(VEHICLE)
    columns = sorted(rng.choice([f"f{k:03d}" for k in range(100)], 8, replace=False).tolist())
    big = [s for s, n in data["sensor"].value_counts().items() if n >= 55]
    sensors = sorted(rng.choice(big, int(rng.integers(4, 7)), replace=False).tolist())
    frames = {f"sensor_{s:02d}": data.loc[data["sensor"] == s, [*columns, "y"]].reset_index(drop=True)
              for s in sensors}
    return Study(
        "vehicle", frames, "y", {c: "continuous" for c in columns}, False,
        spellings={c: (c.upper(), f"f_{c[1:]}", f"F {c[1:]}") for c in columns},
        aliases={c: (f"acoustic_{k + 3}", f"s{k + 40}x") for k, c in enumerate(columns)},
        units={c: FACTORS for c in columns},
    )


def demo_study(rng: np.random.Generator) -> Study:
    from data_adapters import load_federation

    federation = load_federation({"source": "demo", "problems": False, "standardization": "none",
                                  "data_seed": int(rng.integers(1000))})
    chosen = sorted(rng.choice(len(federation.sites), int(rng.integers(4, 7)), replace=False).tolist())
    frames = {}
    for k in chosen:
        site = federation.sites[k]
        x = np.concatenate([site.x_train.numpy(), site.x_test.numpy()]).astype(np.float64)
        y = np.concatenate([site.y_train.numpy(), site.y_test.numpy()])
        frame = pd.DataFrame(x, columns=federation.feature_names).round(2)
        frames[site.name.lower().replace(" ", "_")] = frame.assign(sepsis=y)
    kinds = dict(zip(federation.feature_names, federation.feature_kinds))
    return Study(
        "demo", frames, "sepsis", kinds, True,
        spellings={"age": ("Age", "age_years", "AGE (yrs)"), "temperature": ("Temperature", "temp", "Temp (°C)"),
                   "heart_rate": ("Heart Rate", "HR", "pulse"), "resp_rate": ("Resp_Rate", "RESP RATE"),
                   "systolic_bp": ("SBP", "Systolic BP", "systolic blood pressure"), "spo2": ("SpO2", "SPO2 (%)"),
                   "wbc": ("WBC", "Wbc"), "crp": ("CRP", "crp_mg_l"), "lactate": ("Lactate", "lactate (mmol/L)"),
                   "sex_male": ("Sex_Male", "SEX MALE"), "cough": ("Cough", "COUGH"), "confusion": ("Confusion",)},
        aliases={"resp_rate": ("breaths_per_min", "RR"), "wbc": ("leukocytes", "white_cells"),
                 "crp": ("c_reactive", "inflam_marker"), "spo2": ("sat_o2", "oximetry"), "heart_rate": ("bpm_ed",)},
        units={"temperature": _conversions(("°F", "°C"), ("K", "°C")), "age": _conversions(("months", "years")),
               "lactate": _conversions(("mg/dL", "mmol/L", "lactate")), "systolic_bp": _conversions(("kPa", "mmHg")),
               "wbc": FACTORS, "crp": FACTORS, "heart_rate": (), "resp_rate": (), "spo2": FACTORS[:2]},
        words={"sex_male": ("no", "yes"), "cough": ("no", "yes"), "confusion": ("N", "Y")},
    )


STUDIES: dict[str, Callable[[np.random.Generator], Study]] = {
    "heart": heart_study, "har": har_study, "vehicle": vehicle_study, "demo": demo_study}


# -- what the exports got wrong ------------------------------------------------------------------------------
class _Draft:
    """The exports while problems are planted: cells per site (study names), each site's names for
    the study's columns, the truth, and which (site, column) is already taken by a problem."""

    def __init__(self, study: Study, rng: np.random.Generator) -> None:
        self.study, self.rng = study, rng
        self.cells = {s: f.astype(object).copy() for s, f in study.frames.items()}
        self.names: dict[str, dict[str, str]] = {s: {} for s in study.sites}
        self.truth: dict[str, Any] = merge({"format": FORMAT, "target": {"column": study.target}}, study.needs)
        self.planted: list[dict[str, Any]] = []
        self.taken: set[tuple[str, str]] = {(s, c) for s, e in study.needs.get("sites", {}).items()
                                            for what in e.values() for c in what}
        self.extra: dict[str, dict[str, Any]] = {s: {} for s in study.sites}  # columns added at the end
        self.dropped: set[tuple[str, str]] = set()

    def plant(self, family: str, site: str | None, column: str | None, what: str, patch: dict[str, Any]) -> None:
        self.truth = merge(self.truth, patch)
        self.planted.append({"family": family, "site": site, "column": column, "what": what})

    def free(self, kinds: tuple[str, ...] = ("continuous", "binary", "categorical"), exclude=()) -> list[tuple[str, str]]:
        return [(s, c) for s in self.study.sites for c in self.study.features()
                if self.study.kinds[c] in kinds and (s, c) not in self.taken and c not in exclude
                and (s, c) not in self.dropped]

    def values(self, site: str, column: str) -> np.ndarray:
        return pd.to_numeric(pd.Series(self.cells[site][column]), errors="coerce").to_numpy(np.float64)


def _pick(rng: np.random.Generator, options: list) -> Any:
    return options[int(rng.integers(len(options)))]


def _renames(d: _Draft) -> None:
    """A column spelled another way at one site (the name lists match it)."""
    options = [(s, c) for s, c in d.free() if d.study.spellings.get(c) and c not in d.names[s]]
    for _ in range(int(d.rng.integers(1, 4))):
        if not options:
            return
        site, column = _pick(d.rng, options)
        spelling = _pick(d.rng, list(d.study.spellings[column]))
        if spelling in d.cells[site].columns or spelling in d.names[site].values():
            continue
        d.names[site][column] = spelling
        d.plant("rename", site, column, f"'{column}' written '{spelling}'",
                {"sites": {site: {"rename": {spelling: column}}}})
        options = [(s, c) for s, c in options if c != column]


def _complements(d: _Draft) -> None:
    """A column named so that only its data tell, at one site (or two, each its own name)."""
    columns = [c for c in d.study.features() if d.study.aliases.get(c) and d.study.kinds[c] == "continuous"
               and not any(c in d.names[s] for s in d.study.sites)]
    if not columns:
        return
    column = _pick(d.rng, columns)
    aliases = list(d.study.aliases[column])
    n_sites = 2 if len(aliases) >= 2 and len(d.study.sites) >= 4 and d.rng.random() < 0.5 else 1
    sites = d.rng.choice(d.study.sites, n_sites, replace=False).tolist()
    for site, alias in zip(sites, d.rng.permutation(aliases)):
        d.names[site][column] = str(alias)
        d.plant("complement", site, column, f"'{column}' written '{alias}'", {"sites": {site: {"rename": {str(alias): column}}}})


def _target(d: _Draft) -> None:
    target = d.study.target
    site = _pick(d.rng, d.study.sites)
    spelling = _pick(d.rng, [target.capitalize(), target.upper(), target.title()])
    if spelling.strip() == target:
        return
    d.names[site][target] = spelling
    d.plant("target", site, target, f"the target written '{spelling}'", {"sites": {site: {"rename": {spelling: target}}}})


def _units(d: _Draft) -> None:
    """A continuous column in another unit at one site; sometimes a second site in a unit of its own
    (or in the same one, where five or more sites keep the study's)."""
    columns = [c for c in d.study.features() if d.study.units.get(c)]
    if not columns:
        return
    column = _pick(d.rng, columns)
    sites = [s for s in d.study.sites if (s, column) not in d.taken]
    if len(sites) < 3:
        return
    conversions = list(d.study.units[column])
    first = _pick(d.rng, conversions)
    chosen = [(d.rng.choice(sites), first)]
    if d.rng.random() < 0.4:
        others = [c for c in conversions if c.a != first.a and not _near(c, first)]
        second = first if len(d.study.sites) >= 5 else (_pick(d.rng, others) if others else None)
        rest = [s for s in sites if s != chosen[0][0]]
        if second is not None and len(d.study.sites) - 2 >= 2:
            chosen.append((d.rng.choice(rest), second))
    for site, conversion in chosen:
        site = str(site)
        values = d.values(site, column)
        exported = (values - conversion.b) / conversion.a  # the site's unit: the conversion brings it back
        d.cells[site][column] = _rounded(exported, values)
        d.taken.add((site, column))
        d.plant("unit", site, column, f"'{column}' in {conversion.source or conversion.note}",
                {"sites": {site: {"convert": {column: {"name": "truth", "a": conversion.a, "b": conversion.b}}}}})


def _near(a: Conversion, b: Conversion) -> bool:
    return abs(math.log(abs(a.a) / abs(b.a))) < math.log(3)


def _rounded(exported: np.ndarray, study: np.ndarray) -> np.ndarray:
    """Exported values with as many significant digits as the study's had (at least 3)."""
    out = exported.astype(object)
    for k, value in enumerate(exported):
        if np.isfinite(value):
            out[k] = float(f"{value:.4g}")
    return out


def _codes(d: _Draft) -> None:
    """A missing-value code in 3-15 % of a column's values at one site (any kind of column)."""
    for _ in range(int(d.rng.integers(1, 4))):
        options = d.free()
        if not options:
            return
        site, column = _pick(d.rng, options)
        everywhere = np.concatenate([d.values(s, column) for s in d.study.sites])
        everywhere = everywhere[np.isfinite(everywhere)]
        if not everywhere.size:
            continue
        low, high = everywhere.min(), everywhere.max()
        span = max(high - low, 1.0)
        codes = [c for c in CODES if c < low - 0.5 * span or c > high + 0.5 * span
                 or (c == 0 and low > 0 and low > 0.2 * span and d.study.kinds[column] == "continuous")]
        if not codes:
            continue
        code = _pick(d.rng, codes)
        filled = np.flatnonzero(pd.notna(d.cells[site][column]).to_numpy())
        if len(filled) < 40:  # too few values for a code to show
            continue
        share = d.rng.uniform(0.03, 0.15)
        rows = d.rng.choice(filled, max(6, int(share * len(filled))), replace=False)
        column_cells = d.cells[site][column].copy()
        column_cells.iloc[rows] = code
        d.cells[site][column] = column_cells
        d.taken.add((site, column))
        d.plant("code", site, column, f"{code:g} in {len(rows)} rows", {"sites": {site: {"missing": {column: [_number(code)]}}}})


def _unmeasured(d: _Draft) -> None:
    """A continuous column written 0 for every patient at one site."""
    options = [(s, c) for s, c in d.free(("continuous",))
               if all(np.nanmin(d.values(t, c)) > 0 for t in d.study.sites)]
    if not options or len(d.study.sites) < 4:
        return
    site, column = _pick(d.rng, options)
    d.cells[site][column] = 0
    d.taken.add((site, column))
    d.plant("unmeasured", site, column, "0 for every patient", {"sites": {site: {"missing": {column: [0]}}}})


def _codings(d: _Draft) -> None:
    """A binary column in words at one site where the others write 0/1 — or in words at every site
    but one, which writes 1/0."""
    options = [(s, c) for s, c in d.free(("binary",)) if c in d.study.words]
    if not options:
        return
    site, column = _pick(d.rng, options)
    words = d.study.words[column]
    if d.rng.random() < 0.3:  # the study writes words; one site 0/1
        for other in d.study.sites:
            if other != site:
                d.cells[other][column] = _worded(d.cells[other][column], words)
        d.plant("coding", site, column, "0/1 where the others write words",
                {"sites": {site: {"values": {column: {"0": words[0], "1": words[1]}}}}})
    else:
        d.cells[site][column] = _worded(d.cells[site][column], words)
        d.plant("coding", site, column, f"{words[0]}/{words[1]}", {"sites": {site: {"values": {column: {
            words[0]: "0", words[1]: "1"}}}}})
    for other in d.study.sites:
        d.taken.add((other, column))


def _worded(cells: pd.Series, words: tuple[str, str]) -> pd.Series:
    numbers = pd.to_numeric(cells, errors="coerce")
    return cells.where(~numbers.isin([0, 1]), numbers.map({0.0: words[0], 1.0: words[1]}))


def _positive(d: _Draft) -> None:
    if not d.study.binary_target:
        return
    site = _pick(d.rng, d.study.sites)
    target = d.study.target
    if d.study.graded and d.rng.random() < 0.5:
        graded = d.study.graded[site]
        if graded.max() <= 1:
            return
        d.cells[site][target] = graded.astype(object)
        values = sorted(str(v) for v in graded.unique() if v > 0)
        d.plant("positive", site, target, "graded 0-4", {"target": {"negative": "0", "positive": "1"},
                                                          "sites": {site: {"positive": values}}})
    else:
        d.cells[site][target] = d.cells[site][target].map({0: "no", 1: "yes"})
        d.plant("positive", site, target, "yes/no", {"target": {"negative": "0", "positive": "1"},
                                                      "sites": {site: {"positive": ["yes"]}}})


def _drops(d: _Draft) -> None:
    if d.rng.random() < 0.7:
        name = _pick(d.rng, ["patient_id", "record", "ID"])
        for k, site in enumerate(d.study.sites):
            n = len(d.cells[site])
            d.extra[site][name] = [f"{site[:3].upper()}-{k}{r:05d}" for r in d.rng.permutation(n)]
        d.plant("drop", None, name, "an identifier", {"drop": [name]})
    if d.rng.random() < 0.4:
        for site in d.study.sites:
            d.extra[site]["comments"] = [None] * len(d.cells[site])
        d.plant("drop", None, "comments", "empty everywhere", {"drop": ["comments"]})


def _noise(d: _Draft) -> None:
    """No decision: a column at one site only, and a column one site does not export."""
    if d.rng.random() < 0.4:
        site = _pick(d.rng, d.study.sites)
        n = len(d.cells[site])
        d.extra[site]["ward"] = d.rng.integers(1, 30, n).astype(float) * 3.7
        d.planted.append({"family": "noise", "site": site, "column": "ward", "what": "only at one site"})
    if d.rng.random() < 0.4:
        options = [(s, c) for s, c in d.free() if c not in d.names[s]]
        if options:
            site, column = _pick(d.rng, options)
            d.dropped.add((site, column))
            d.taken |= {(s, column) for s in d.study.sites}
            d.planted.append({"family": "noise", "site": site, "column": column, "what": "not exported"})


FAMILIES = (_drops, _positive, _unmeasured, _units, _codings, _codes, _renames, _complements, _target, _noise)


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


# -- writing the files ---------------------------------------------------------------------------------------
FORMATS = ("comma", "semicolon", "tab-utf16", "cp1252", "bom", "gzip", "xlsx")


def _text(value: Any, decimal: str) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    if isinstance(value, (int, float, np.integer, np.floating)):
        text = f"{float(value):.6g}"
        return text.replace(".", ",") if decimal == "," else text
    return str(value)


def write_site(frame: pd.DataFrame, folder: Path, site: str, style: str, rng: np.random.Generator,
               target: str) -> Path:
    """One site's export in `style`; a few junk cells in a numeric column (not the target)."""
    decimal = "," if style == "semicolon" else "."
    cells = frame.astype(object)
    numeric = [c for c in cells.columns if c.strip().lower() != target
               and pd.to_numeric(cells[c], errors="coerce").notna().mean() > 0.9]
    if numeric and rng.random() < 0.5:
        column = _pick(rng, numeric)
        for row in rng.choice(len(cells), 2, replace=False):
            cells.iat[int(row), cells.columns.get_loc(column)] = _pick(rng, ["n.v.", "??", "#REF!"])
    if style == "xlsx":
        path = folder / f"{site}.xlsx"
        with pd.ExcelWriter(path, engine="openpyxl") as writer:
            cells.map(lambda v: v if not isinstance(v, float) or np.isfinite(v) else None).to_excel(
                writer, sheet_name=site[:31], index=False)
        return path
    delimiter = {"semicolon": ";", "tab-utf16": "\t"}.get(style, ",")
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\r\n" if style == "cp1252" else "\n")
    writer.writerow(map(str, cells.columns))
    writer.writerows([_text(v, decimal) for v in row] for row in cells.itertuples(index=False))
    text = buffer.getvalue()
    encoding = {"tab-utf16": "utf-16", "cp1252": "cp1252", "semicolon": "cp1252", "bom": "utf-8-sig"}.get(style, "utf-8")
    data = text.encode(encoding, errors="replace")
    if style == "gzip":
        path = folder / f"{site}.csv.gz"
        path.write_bytes(gzip.compress(data, mtime=0))
        return path
    path = folder / f"{site}.{'txt' if style == 'tab-utf16' else 'csv'}"
    path.write_bytes(data)
    return path


def messy_case(base: str, seed: int, folder: Path) -> MessyCase:
    """One draw: a study of `base`, its problems and files (in `folder`), and the truth."""
    rng = np.random.default_rng([seed, BASES.index(base)])
    study = STUDIES[base](rng)
    draft = _Draft(study, rng)
    for family in FAMILIES:
        family(draft)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for site in study.sites:
        frame = draft.cells[site].drop(columns=[c for s, c in draft.dropped if s == site])
        for name, values in draft.extra[site].items():
            frame.insert(0 if name != "comments" else len(frame.columns), name, values)
        frame = frame.rename(columns=draft.names[site])
        if site == study.sites[-1] and rng.random() < 0.5:
            frame[""] = None  # a spreadsheet's trailing empty column: read as 'Unnamed: N' and left out
        files.append(write_site(frame, folder, site, _pick(rng, list(FORMATS)), rng, study.target))
    return MessyCase(study, seed, files, study.target, draft.truth, draft.planted)


# -- scoring -------------------------------------------------------------------------------------------------
@dataclass
class Score:
    """Per decision type: right (pre-filled in the draft and in the truth), wrong (pre-filled, not
    in the truth), asked (in the truth, not pre-filled, but a question offers it), missed (neither)."""

    right: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TYPES, 0))
    wrong: dict[str, list[str]] = field(default_factory=lambda: {t: [] for t in TYPES})
    asked: dict[str, list[str]] = field(default_factory=lambda: {t: [] for t in TYPES})
    missed: dict[str, list[str]] = field(default_factory=lambda: {t: [] for t in TYPES})
    questions: int = 0  # questions asked in all
    cases: int = 0

    def add(self, other: Score) -> Score:
        for t in TYPES:
            self.right[t] += other.right[t]
            for what in ("wrong", "asked", "missed"):
                getattr(self, what)[t] += getattr(other, what)[t]
        self.questions += other.questions
        self.cases += other.cases
        return self

    def truth(self, kind: str) -> int:
        return self.right[kind] + len(self.asked[kind]) + len(self.missed[kind])

    def precision(self, kind: str) -> float:
        n = self.right[kind] + len(self.wrong[kind])
        return self.right[kind] / n if n else float("nan")

    def recall(self, kind: str) -> float:
        """Share of the truth's decisions pre-filled right."""
        return self.right[kind] / self.truth(kind) if self.truth(kind) else float("nan")

    def found(self, kind: str) -> float:
        """Share of the truth's decisions pre-filled right or offered by a question."""
        n = self.truth(kind)
        return (self.right[kind] + len(self.asked[kind])) / n if n else float("nan")


def source_columns(case: MessyCase) -> dict[str, list[str]]:
    """Each site's columns as its file has them (read back)."""
    from data_adapters.readers.csv_sites import read_csv_sites

    sites = read_csv_sites([str(f) for f in case.files], target=case.target)
    return {t.site: [str(c) for c in t.frame.columns] for t in sites.tables}


def score(case: MessyCase, draft: dict[str, Any], questions: list[dict[str, Any]] = (),
          columns: dict[str, list[str]] | None = None) -> Score:
    """The draft dictionary against the truth, decision by decision (see README 'How right the
    suggestions are'): renames by the study column each source column ends in, the rest by site,
    study column and value. `questions`: those the suggestions asked (each option's patch)."""
    columns = columns or source_columns(case)
    truth, out = case.truth, Score(questions=len(questions), cases=1)
    offered = [option["patch"] for q in questions for option in q["options"]]
    true_of = {(s, c): (truth.get("sites", {}).get(s, {}).get("rename", {}).get(c, c)) for s, cs in columns.items()
               for c in cs}
    mine = {(s, c): (draft.get("sites", {}).get(s, {}).get("rename", {}).get(c, c)) for s, cs in columns.items()
            for c in cs}
    # which study column each of the draft's names stands for: most of its members' true column
    members: dict[str, list[str]] = {}
    for key, name in mine.items():
        members.setdefault(name, []).append(true_of[key])
    meaning = {name: max(set(m), key=m.count) for name, m in members.items()}
    target = case.target

    def kind_of(study: str) -> str:
        return "target" if study == target else "rename"

    # A draft's rename is wrong when the column it joins holds another study column at the other
    # sites; renaming the majority onto the minority's spelling is a naming choice, not counted.
    for (site, column), name in mine.items():
        if name != column:
            others = [true_of[k] for k, n in mine.items() if n == name and k[0] != site]
            if not others or max(set(others), key=others.count) != true_of[(site, column)]:
                out.wrong[kind_of(true_of[(site, column)])].append(f"{site}: '{column}' → '{name}'")
    # A true rename is found when the column ends where most of its study column's other sites' do.
    for (site, column), study in true_of.items():
        if study != column:
            together = [mine[k] for k, s in true_of.items() if s == study and k[0] != site]
            where = max(set(together), key=together.count) if together else None
            if where is not None and mine[(site, column)] == where:
                out.right[kind_of(study)] += 1
            elif any(p.get("sites", {}).get(site, {}).get("rename", {}).get(column) in (study, where) for p in offered):
                out.asked[kind_of(study)].append(f"{site}: '{column}' → '{study}'")
            else:
                out.missed[kind_of(study)].append(f"{site}: '{column}' → '{study}'")

    def study_name(name: str) -> str:
        return meaning.get(name, name)

    def atoms(content: dict[str, Any], translate: Callable[[str], str]) -> dict[str, set]:
        found: dict[str, set] = {t: set() for t in ("drop", "missing", "values", "convert", "kind", "positive")}
        found["drop"] |= {translate(c) for c in content.get("drop", [])}
        found["kind"] |= {(translate(c), k) for c, k in content.get("kinds", {}).items()}
        for site, entry in content.get("sites", {}).items():
            found["drop"] |= {translate(c) for c in entry.get("drop", [])}
            for column, codes in entry.get("missing", {}).items():
                found["missing"] |= {(site, translate(column), _code(c)) for c in codes}
            for column, mapping in entry.get("values", {}).items():
                found["values"] |= {(site, translate(column), str(k), str(v)) for k, v in mapping.items()}
            for column, conversion in entry.get("convert", {}).items():
                found["convert"].add((site, translate(column), float(conversion["a"]), float(conversion.get("b", 0))))
            if entry.get("positive"):
                found["positive"].add((site, frozenset(map(str, entry["positive"]))))
        return found

    want, got = atoms(truth, lambda c: c), atoms(draft, study_name)
    options = [atoms(p, study_name) for p in offered]
    for kind in ("drop", "missing", "values", "kind", "positive"):
        out.right[kind] += len(want[kind] & got[kind])
        out.wrong[kind] += sorted(map(str, got[kind] - want[kind]))
        for atom in sorted(want[kind] - got[kind], key=str):
            (out.asked if any(atom in o[kind] for o in options) else out.missed)[kind].append(str(atom))

    def same(w: tuple, atom: tuple) -> bool:
        return w[:2] == atom[:2] and _same_conversion(w[2:], atom[2:])

    matched = set()
    for atom in got["convert"]:
        hit = next((w for w in want["convert"] if same(w, atom)), None)
        if hit is None:
            out.wrong["convert"].append(str(atom))
        else:
            out.right["convert"] += 1
            matched.add(hit)
    for atom in sorted(want["convert"] - matched, key=str):
        asked = any(same(atom, o) for option in options for o in option["convert"])
        (out.asked if asked else out.missed)["convert"].append(str(atom))
    return out


def _code(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _same_conversion(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two conversions y = a·x + b agree within 2 % over the values they convert (b relative to the
    converted scale)."""
    (a1, b1), (a2, b2) = a, b
    return abs(a1 - a2) <= 0.02 * abs(a1) and abs(b1 - b2) <= 0.02 * max(abs(b1), abs(a1), 1e-9)


def case_summary(case: MessyCase) -> str:
    lines = [f"{case.study.base} seed {case.seed}: {len(case.study.sites)} sites ({', '.join(f.name for f in case.files)})"]
    lines += [f"  {p['family']}: {p['site'] or 'every site'} · {p['column']} · {p['what']}" for p in case.planted]
    return "\n".join(lines)


def frame_of(path: Path) -> pd.DataFrame:  # for looking at a file while debugging
    from data_adapters.tables.text_tables import read_text_table

    return read_text_table(path, 10**9).frame

