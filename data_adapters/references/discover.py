"""Datasets already on this machine, in their usual published layouts, for the dashboard to offer.

Looks (not deeply) in the data roots, the folders of $FEDCORE_DATA_DIRS (separated by ':'; see
roots.py): nowhere else, so that the dashboard offers only what the operator allows. Nothing is
downloaded and nothing is required to exist.
"""

from __future__ import annotations

from pathlib import Path

from data_adapters.references.roots import configured_roots

# (label, source, pattern relative to a searched folder, whether the reference names the parent folder)
LAYOUTS = (
    ("UCI heart disease, 4 hospitals", "heart", "**/processed.cleveland.data", True),
    ("UCI HAR by subject (265 features)", "har", "**/uci_har_time265_by_subject.csv*", False),
    ("UCI HAR (official folder, 561 features)", "har", "**/UCI HAR Dataset/features.txt", True),
    ("Vehicle sensor network, 23 sensors", "vehicle", "**/vehicle*by_sensor*.csv*", False),
    ("MedMNIST", "npz", "**/*mnist*.npz", False),
    ("MNIST / Fashion-MNIST (IDX)", "idx", "**/t10k-images-idx3-ubyte*", True),
)


def search_folders() -> list[Path]:
    """The configured data roots that exist."""
    return [folder for folder in configured_roots() if folder.is_dir()]


def find_datasets(folders: list[Path] | None = None) -> list[tuple[str, dict[str, str]]]:
    """(label, data reference) for every known layout found, at most three folders deep."""
    found: dict[tuple[str, str], str] = {}
    for folder in search_folders() if folders is None else folders:
        for label, source, pattern, parent in LAYOUTS:
            for match in sorted(folder.glob(pattern)):
                if len(match.relative_to(folder).parts) > 4:
                    continue
                path = match.parent if parent else match
                found.setdefault((source, str(path)), f"{label} — {path}")
    return [(label, {"source": source, "path": path}) for (source, path), label in found.items()]
