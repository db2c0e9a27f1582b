"""UCI Heart Disease from its four original `processed.*.data` files: one site per hospital.

Layout: a folder holding processed.cleveland.data, processed.hungarian.data,
processed.switzerland.data and processed.va.data (as published by UCI; `?` = missing, no header).
The 14 columns are the standard ones (heart-disease.names, attributes #3 … #58). The target `num`
(0 = no disease, 1–4 = disease severity) is binarised the usual way, num > 0 = disease, unless
`binary=False` keeps the five levels.

Publications using these data should name each site's principal investigator: Andras Janosi
(Hungarian Institute of Cardiology, Budapest), William Steinbrunn (University Hospital Zurich),
Matthias Pfisterer (University Hospital Basel), Robert Detrano (V.A. Medical Center, Long Beach,
and Cleveland Clinic Foundation).
"""

from __future__ import annotations

from pathlib import Path

from data_adapters.alignment.align import TableSites
from data_adapters.readers.csv_sites import site_table
from data_adapters.tables.text_tables import read_text_table
from fedcore.errors import DataError

COLUMNS = ("age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang", "oldpeak",
           "slope", "ca", "thal", "num")
KINDS = {
    "age": "continuous", "sex": "binary", "cp": "categorical", "trestbps": "continuous",
    "chol": "continuous", "fbs": "binary", "restecg": "categorical", "thalach": "continuous",
    "exang": "binary", "oldpeak": "continuous", "slope": "categorical",
    "ca": "continuous",  # number of major vessels coloured by fluoroscopy, 0-3: a count
    "thal": "categorical",  # 3 = normal, 6 = fixed defect, 7 = reversible defect
}
HOSPITALS = {
    "cleveland": "Cleveland Clinic Foundation",
    "hungarian": "Hungarian Institute of Cardiology, Budapest",
    "switzerland": "University Hospitals Zurich and Basel",
    "va": "V.A. Medical Center, Long Beach",
}
MAX_BYTES = 10_000_000


def read_heart_disease(path: str, binary: bool = True) -> TableSites:
    folder = Path(path)
    files = sorted(folder.glob("processed.*.data")) if folder.is_dir() else []
    if not files:
        raise DataError(
            f"{folder} is not a folder holding the UCI heart-disease files "
            f"({', '.join(f'processed.{site}.data' for site in HOSPITALS)})."
        )
    tables = [site_table(file.name.split(".")[1], read_text_table(file, MAX_BYTES, COLUMNS)) for file in files]
    levels = {"0": "no disease", **{str(k): "disease" for k in range(1, 5)}}
    return TableSites(
        name="UCI Heart Disease (4 hospitals)",
        description=(
            "Real patients from the UCI Heart Disease data: "
            + "; ".join(f"{t.site} = {HOSPITALS.get(t.site, t.file)}" for t in tables)
            + ". Target: " + ("angiographic disease (num > 0)." if binary else "num, 0 (none) to 4.")
        ),
        source="heart",
        tables=tables,
        target="num",
        class_labels=levels if binary else {str(k): str(k) for k in range(5)},
        kinds=KINDS,
        notes={"target_rule": "num > 0 = disease" if binary else "num 0-4", "attribution": __doc__.split("\n\n")[-1].strip()},
    )
