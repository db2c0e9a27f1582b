"""UCI Human Activity Recognition (Anguita et al., ESANN 2013): one site per subject (30).

Two layouts are read:
- the official `UCI HAR Dataset/` folder (or the folder holding it): features.txt,
  activity_labels.txt, train/ and test/ with X_*.txt (561 features), y_*.txt, subject_*.txt;
- a by-subject table (CSV, optionally gzipped) with columns subject, activity (1-6) and f001…,
  such as `uci_har_time265_by_subject.csv.gz`; a features.txt beside it names the fNNN columns.
The published train/test split is by subject; here every subject's windows (train and test
files together) form one site and the per-site hold-out rule applies, as in the iFedAvg paper.
Non-commercial use only (the dataset's licence).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from data_adapters.alignment.align import TableSites
from data_adapters.readers.csv_sites import numbered, split_by_column
from data_adapters.tables.text_tables import TextTable, read_text_table
from fedcore.errors import DataError

ACTIVITIES = ("WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING", "LAYING")
OFFICIAL_FOLDER = "UCI HAR Dataset"
SPLIT_COLUMNS = ("orig_split", "local_split")  # split markers in the by-subject table, not features
MAX_BYTES = 500_000_000


def read_har(path: str) -> TableSites:
    location = Path(path)
    if (location / OFFICIAL_FOLDER).is_dir():
        location = location / OFFICIAL_FOLDER
    if location.is_dir():
        text = _official_layout(location)
    elif location.is_file():
        text = read_text_table(location, MAX_BYTES)
        names = _feature_names(location.parent / "features.txt")
        if names:
            text.frame = text.frame.rename(columns={f"f{k:03d}": name for k, name in enumerate(names, 1)})
    else:
        raise DataError(f"{location} is neither the '{OFFICIAL_FOLDER}' folder nor a by-subject HAR table.")
    warnings = list(text.warnings)
    tables = split_by_column(text, "subject", numbered("subject"), warnings)
    n_features = len(text.frame.columns) - 2 - sum(c in text.frame.columns for c in SPLIT_COLUMNS)
    return TableSites(
        name=f"UCI HAR by subject ({len(tables)} subjects, {n_features} features)",
        description="Real smartphone sensor windows of 30 volunteers, six activities; one site per subject.",
        source="har",
        tables=tables,
        target="activity",
        class_labels={str(k): name for k, name in enumerate(ACTIVITIES, 1)},
        exclude=SPLIT_COLUMNS,
        warnings=warnings,
        notes={"licence": "non-commercial use only (UCI HAR README)"},
    )


def _official_layout(folder: Path) -> TextTable:
    names = _feature_names(folder / "features.txt")
    if not names:
        raise DataError(f"{folder} has no features.txt; is it the '{OFFICIAL_FOLDER}' folder?")
    parts = []
    for part in ("train", "test"):
        x = _numbers(folder / part / f"X_{part}.txt")
        y = _numbers(folder / part / f"y_{part}.txt")
        subject = _numbers(folder / part / f"subject_{part}.txt")
        if x.shape[1] != len(names):
            raise DataError(f"{part}/X_{part}.txt has {x.shape[1]} columns but features.txt names {len(names)}.")
        if not len(x) == len(y) == len(subject):
            raise DataError(
                f"{part}/: X_{part}.txt has {len(x)} rows, y_{part}.txt {len(y)}, subject_{part}.txt {len(subject)}; "
                "they must match row for row."
            )
        frame = pd.DataFrame(x.to_numpy(np.float64), columns=names)
        frame.insert(0, "activity", y[0].to_numpy())
        frame.insert(0, "subject", subject[0].to_numpy())
        parts.append(frame)
    return TextTable(f"{OFFICIAL_FOLDER} (train + test)", pd.concat(parts, ignore_index=True), " ", "utf-8")


def _numbers(file: Path) -> pd.DataFrame:
    if not file.is_file():
        raise DataError(f"{file} is missing from the HAR folder.")
    try:
        return pd.read_csv(file, sep=r"\s+", header=None, dtype=np.float64)
    except (ValueError, pd.errors.ParserError) as error:
        raise DataError(f"{file.name} is not a whitespace-separated table of numbers: {error}") from None


def _feature_names(file: Path) -> list[str]:
    """Names from features.txt ('1 tBodyAcc-mean()-X' per line); repeats get ' [2]', ' [3]' (the
    published list names 42 band-energy features three times each)."""
    if not file.is_file():
        return []
    names = [line.split(maxsplit=1)[1].strip() for line in file.read_text(encoding="latin-1").splitlines() if line.strip()]
    seen: Counter[str] = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(name if seen[name] == 1 else f"{name} [{seen[name]}]")
    return unique
