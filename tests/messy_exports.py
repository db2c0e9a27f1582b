"""Two sets of four hospital exports of one study each, messy the way real exports are — what the
mapping step's tests (unit, CLI, browser) upload and expect to harmonise without editing a file.

`write_messy_exports` (made up):
north.csv   the study's layout: comma, UTF-8, cholesterol in mmol/L, sex M/F
south.csv   semicolons, Windows-1252, decimal commas; age spelled 'Âge', the target 'Outcome';
            two garbage cells
east.csv    cholesterol in mg/dL (× 38.67); sex written male/female; -9 for an unknown smoker
west.csv    age 999 and cholesterol 0 for 'not measured'; sex coded 1/0 (1 = M); systolic blood
            pressure named 'systolic_pressure' (only its values tell); a spreadsheet's trailing
            empty, unnamed column
Every file has a patient identifier and an integer-coded chest-pain type (1-4, types 2 and 4
raising the risk: codes, not a scale). The outcome depends on cholesterol, sex, chest pain and
blood pressure, so the codes can be paired and the columns matched by their label relation.

`write_heart_exports` (the four UCI heart-disease hospitals, real values):
cleveland.csv    the study's layout; the target `disease` 0/1
hungarian.csv    semicolons, decimal commas, Windows-1252; `thalach` named 'Max HR'; -9 for 'not
                 measured' in 8 % of cholesterol and exercise angina values; sex written M/F
switzerland.xlsx the target spelled 'Disease' and graded 0-4 (1-4 = disease); `thalach` named
                 'max_heart_rate'; cholesterol 0 for every patient (never measured: as published)
va.txt           tab-separated UTF-16; cholesterol in mmol/L (÷ 38.67; its published 0 for 'not
                 measured' kept); ST depression (oldpeak) in tenths of a millimetre
What only the analyst knows is asked: whether restecg, slope (codes) and ca (a count of vessels)
are categories — the data cannot tell a scale from codes there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SITES = ("north", "south", "east", "west")
ROWS = 150
CHOLESTEROL_MG_DL = 38.67
FEATURES = ["age", "sex", "chol", "chest_pain=1", "chest_pain=2", "chest_pain=3", "chest_pain=4", "smoker", "sbp"]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
HEART = SHARED / "heart_disease" / "heart_disease_4sites.csv"
HEART_SITES = ("cleveland", "hungarian", "switzerland", "va")
HEART_ANSWERS = {"restecg": "categorical", "slope": "categorical", "ca": "continuous"}
HEART_FEATURES = ["age", "sex", *(f"cp={v}" for v in (1, 2, 3, 4)), "trestbps", "chol", "fbs",
                  *(f"restecg={v}" for v in (0, 1, 2)), "thalach", "exang", "oldpeak",
                  *(f"slope={v}" for v in (1, 2, 3)), "ca", *(f"thal={v}" for v in (3, 6, 7))]


def study_rows(site: int, n: int = ROWS) -> dict[str, np.ndarray]:
    """One site's rows in the study's own units and codes."""
    rng = np.random.default_rng(100 + site)
    age = np.round(rng.normal(56, 9, n)).astype(int)
    male = rng.random(n) < 0.68
    chol = np.round(rng.normal(5.4, 1.0, n), 2)
    pain = rng.integers(1, 5, n)
    smoker = rng.random(n) < 0.3
    sbp = np.round(rng.normal(132, 16, n))
    # chest pain 2 and 4 raise the risk, 1 and 3 do not: codes of categories, not a scale
    score = (1.4 * (chol - 5.4) + 1.5 * male - 1.4 + 1.2 * np.isin(pain, (2, 4)) + 0.05 * (sbp - 132)
             + rng.normal(0, 0.8, n))
    return {"patient_id": np.array([f"{site}-{k:05d}" for k in range(n)]), "age": age,
            "sex": np.where(male, "M", "F"), "chol": chol, "chest_pain": pain,
            "smoker": np.where(smoker, "yes", "no"), "sbp": sbp, "outcome": (score > 0).astype(int)}


def _lines(header: list[str], columns: list[list[str]], delimiter: str, trailing: bool = False) -> str:
    end = delimiter if trailing else ""
    rows = [delimiter.join(header) + end] + [delimiter.join(cells) + end for cells in zip(*columns)]
    return "\n".join(rows) + "\n"


def write_messy_exports(folder: Path) -> list[Path]:
    """The four files (see the module's docstring), written to `folder`; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, site in enumerate(SITES):
        r = study_rows(k)
        age = [str(v) for v in r["age"]]
        chol = [f"{v:.2f}" for v in r["chol"]]
        sex = list(r["sex"])
        smoker = list(r["smoker"])
        header = ["patient_id", "age", "sex", "chol", "chest_pain", "smoker", "sbp", "outcome"]
        delimiter, encoding, trailing = ",", "utf-8", False
        if site == "south":
            delimiter, encoding = ";", "cp1252"
            header[1], header[-1] = "Âge", "Outcome"
            chol = [c.replace(".", ",") for c in chol]
            age[7], age[40] = "n.v.", "??"
        elif site == "east":
            chol = [f"{float(c) * CHOLESTEROL_MG_DL:.1f}" for c in chol]
            sex = ["male" if s == "M" else "female" for s in sex]
            for row in range(3, ROWS, 13):
                smoker[row] = "-9"
        elif site == "west":
            trailing = True
            header[6] = "systolic_pressure"
            sex = ["1" if s == "M" else "0" for s in sex]
            for row in range(0, ROWS, 9):
                age[row] = "999"
            for row in range(4, ROWS, 11):
                chol[row] = "0"
        columns = [list(r["patient_id"]), age, sex, chol, [str(v) for v in r["chest_pain"]], smoker,
                   [f"{v:g}" for v in r["sbp"]], [str(v) for v in r["outcome"]]]
        path = folder / f"{site}.csv"
        path.write_bytes(_lines(header, columns, delimiter, trailing).encode(encoding))
        paths.append(path)
    return paths


def write_heart_exports(folder: Path) -> list[Path]:
    """The four UCI hospitals' real rows as four messy exports (see the module's docstring)."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    data = pd.read_csv(HEART)
    paths = []
    for site in HEART_SITES:
        rows = data[data["site"] == site].drop(columns="site").reset_index(drop=True)
        graded = rows.pop("num").astype(int)
        rows["disease"] = (graded > 0).astype(int)
        cells = rows.astype(object).where(rows.notna(), None)
        if site == "hungarian":
            coded = np.arange(len(cells)) % 12 == 5
            cells.loc[coded & cells["chol"].notna().to_numpy(), "chol"] = -9
            cells.loc[(np.arange(len(cells)) % 12 == 7) & cells["exang"].notna().to_numpy(), "exang"] = -9
            cells["sex"] = cells["sex"].map({1.0: "M", 0.0: "F"})
            cells = cells.rename(columns={"thalach": "Max HR"})
            text = cells.to_csv(sep=";", index=False, decimal=",", lineterminator="\r\n")
            path = folder / f"{site}.csv"
            path.write_bytes(text.encode("cp1252"))
        elif site == "switzerland":
            cells["disease"] = graded
            cells = cells.rename(columns={"thalach": "max_heart_rate", "disease": "Disease"})
            path = folder / f"{site}.xlsx"
            cells.to_excel(path, sheet_name=site, index=False)
        elif site == "va":
            chol = pd.to_numeric(cells["chol"])
            cells["chol"] = (chol / 38.67).round(2).where(chol.notna(), None)
            cells["oldpeak"] = (pd.to_numeric(cells["oldpeak"]) * 10).where(cells["oldpeak"].notna(), None)
            path = folder / f"{site}.txt"
            path.write_bytes(cells.to_csv(sep="\t", index=False).encode("utf-16"))
        else:
            path = folder / f"{site}.csv"
            cells.to_csv(path, index=False)
        paths.append(path)
    return paths
