"""Writes the SYNTHETIC sample site files in this folder (made-up patients, fixed seed).

    python assets/sample_sites/generate.py

Four clinics screening for type-2 diabetes, each with its own case mix, and three deliberate
export differences for the alignment report to find: East records glucose in mmol/L instead of
mg/dL, South has gaps (empty cells and two 'unknown' cells in bmi), West exports with semicolons
and decimal commas.
"""

from pathlib import Path

import numpy as np
import pandas as pd

FOLDER = Path(__file__).resolve().parent
# clinic: (rows, share with diabetes, age offset in years)
CLINICS = {"north": (220, 0.22, 0), "south": (180, 0.30, 4), "east": (260, 0.26, -3), "west": (200, 0.18, 2)}
MG_DL_PER_MMOL_L = 18.016


def patients(rng: np.random.Generator, rows: int, prevalence: float, age_offset: float) -> pd.DataFrame:
    sick = rng.random(rows) < prevalence

    def pick(yes: float, no: float) -> np.ndarray:  # a value per patient, by diabetes status
        return np.where(sick, yes, no)

    def normal(mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
        return rng.normal(mean, sd)

    return pd.DataFrame({
        "age": np.clip(normal(pick(58, 48), pick(12, 14)) + age_offset, 18, 95).round().astype(int),
        "sex": np.where(rng.random(rows) < 0.5, "F", "M"),
        "bmi": np.clip(normal(pick(31, 26), pick(5, 4)), 16, 55).round(1),
        "systolic_bp": pd.array(normal(pick(138, 126), pick(16, 15)).round().astype(int), dtype="Int64"),
        "glucose": np.clip(normal(pick(160, 100), pick(35, 15)), 55, 400).round().astype(int),
        "hba1c": np.clip(normal(pick(7.5, 5.4), pick(1.2, 0.4)), 4, 14).round(1),
        "smoker": np.where(rng.random(rows) < pick(0.30, 0.22), "yes", "no"),
        "family_history": (rng.random(rows) < pick(0.45, 0.20)).astype(int),
        "physical_activity": rng.choice(["low", "medium", "high"], rows, p=[0.4, 0.4, 0.2]),
        "diabetes": np.where(sick, "yes", "no"),
    })


def main() -> None:
    rng = np.random.default_rng(2024)
    for clinic, (rows, prevalence, age_offset) in CLINICS.items():
        table = patients(rng, rows, prevalence, age_offset)
        options = {"index": False}
        if clinic == "east":
            table["glucose"] = (table["glucose"] / MG_DL_PER_MMOL_L).round(1)
        if clinic == "south":
            table["bmi"] = table["bmi"].astype(object)
            table.loc[rng.choice(rows, 12, replace=False), ["bmi"]] = np.nan
            table.loc[[17, 88], "bmi"] = "unknown"
            table.loc[rng.choice(rows, 9, replace=False), "systolic_bp"] = pd.NA
        if clinic == "west":
            options.update(sep=";", decimal=",")
        table.to_csv(FOLDER / f"synthetic_{clinic}_clinic.csv", **options)


if __name__ == "__main__":
    main()
