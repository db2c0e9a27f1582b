"""Four made-up hospital exports of one study, each messy the way real exports are — what the
mapping step's tests (unit, CLI, browser) upload and expect to harmonise:

north.csv   the study's layout: comma, UTF-8, cholesterol in mmol/L, sex M/F
south.csv   semicolons, Windows-1252, decimal commas; age spelled 'Âge'; two garbage cells
east.csv    cholesterol in mg/dL (× 38.67); sex written male/female
west.csv    age 999 and cholesterol 0 for 'not measured'; sex coded 1/0 (1 = M); a spreadsheet's
            trailing empty, unnamed column
Every file has a patient identifier and an integer-coded chest-pain type (1-4, types 2 and 4
raising the risk: codes, not a scale). The outcome depends on cholesterol, sex and chest pain,
so the codes can be paired by their label relation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SITES = ("north", "south", "east", "west")
ROWS = 150
CHOLESTEROL_MG_DL = 38.67
FEATURES = ["age", "sex", "chol", "chest_pain=1", "chest_pain=2", "chest_pain=3", "chest_pain=4", "smoker"]


def study_rows(site: int, n: int = ROWS) -> dict[str, np.ndarray]:
    """One site's rows in the study's own units and codes."""
    rng = np.random.default_rng(100 + site)
    age = np.round(rng.normal(56, 9, n)).astype(int)
    male = rng.random(n) < 0.68
    chol = np.round(rng.normal(5.4, 1.0, n), 2)
    pain = rng.integers(1, 5, n)
    smoker = rng.random(n) < 0.3
    # chest pain 2 and 4 raise the risk, 1 and 3 do not: codes of categories, not a scale
    score = 1.4 * (chol - 5.4) + 1.5 * male - 1.4 + 1.2 * np.isin(pain, (2, 4)) + rng.normal(0, 0.8, n)
    return {"patient_id": np.array([f"{site}-{k:05d}" for k in range(n)]), "age": age,
            "sex": np.where(male, "M", "F"), "chol": chol, "chest_pain": pain,
            "smoker": np.where(smoker, "yes", "no"), "outcome": (score > 0).astype(int)}


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
        header = ["patient_id", "age", "sex", "chol", "chest_pain", "smoker", "outcome"]
        delimiter, encoding, trailing = ",", "utf-8", False
        if site == "south":
            delimiter, encoding = ";", "cp1252"
            header[1] = "Âge"
            chol = [c.replace(".", ",") for c in chol]
            age[7], age[40] = "n.v.", "??"
        elif site == "east":
            chol = [f"{float(c) * CHOLESTEROL_MG_DL:.1f}" for c in chol]
            sex = ["male" if s == "M" else "female" for s in sex]
        elif site == "west":
            trailing = True
            sex = ["1" if s == "M" else "0" for s in sex]
            for row in range(0, ROWS, 9):
                age[row] = "999"
            for row in range(4, ROWS, 11):
                chol[row] = "0"
        columns = [list(r["patient_id"]), age, sex, chol, [str(v) for v in r["chest_pain"]], list(r["smoker"]),
                   [str(v) for v in r["outcome"]]]
        path = folder / f"{site}.csv"
        path.write_bytes(_lines(header, columns, delimiter, trailing).encode(encoding))
        paths.append(path)
    return paths
