"""The data sources a reference can name, and the options each accepts.

A source's options are its reader's parameters plus, for every file-based source, the shared
groups below: TableOptions for tables, SiteOptions for everything that goes through `assemble`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from data_adapters.readers.csv_sites import read_csv_sites
from data_adapters.readers.demo import make_demo_federation
from data_adapters.readers.har import read_har
from data_adapters.readers.heart import read_heart_disease
from data_adapters.readers.images import read_idx, read_image_folders, read_npz
from data_adapters.readers.synthetic_images import make_synthetic_scans
from data_adapters.readers.vehicle import read_vehicle


# A reader's parameters that the loader passes itself, never a reference's options: the run's seed,
# and the disclosure policy the sites release their statistics at (a site's setting, not the data's).
PASSED = ("seed", "disclosure")


@dataclass(frozen=True)
class TableOptions:
    """How a tabular source's columns become features (see README 'Data sources')."""

    exclude: list[str] = field(default_factory=list)  # columns that are not features
    kinds: dict[str, str] = field(default_factory=dict)  # column -> continuous / binary / categorical
    min_rows: int | None = None  # fewest usable rows a site may have; None: the source's default
    missing_indicators: bool = False  # add a 0/1 '<column> (missing)' feature per column with gaps
    # 'site' (fitted on each site's training rows), 'federated' (pooled over all sites' training rows) or 'none'
    standardization: str = "site"


@dataclass(frozen=True)
class SiteOptions:
    """How rows become sites, and what is injected into them."""

    split: str | None = None  # iid, dirichlet:ALPHA, quantity:BETA; None: the data's own sites
    sites: int = 4  # number of simulated sites when a split is used
    partition_seed: int = 0  # fixes the partition independently of the run's seed
    inject: list[str | dict[str, Any]] = field(default_factory=list)  # see data_adapters.assembly.inject


@dataclass(frozen=True)
class Source:
    name: str
    summary: str
    read: Callable[..., Any]
    # 'complete': read() builds the Federation itself (demo); 'table': read() gives TableSites;
    # 'image': read() gives a RawFederation of images.
    kind: str
    paths: str | None = None  # the reader's path parameter, written positionally in strings
    files: tuple[str, ...] = ()  # options naming one more file (NAME=PATH): checked and made absolute too
    # A required option that another may stand in for (a data dictionary names the target).
    given_by: tuple[tuple[str, str], ...] = ()

    def option_types(self) -> dict[str, Any]:
        """Every option name -> its type hint (reader parameters and shared groups)."""
        hints = typing.get_type_hints(self.read)
        reader = {name: hints[name] for name in inspect.signature(self.read).parameters if name not in PASSED}
        groups = {"complete": (), "table": (TableOptions, SiteOptions), "image": (SiteOptions,)}[self.kind]
        for group in groups:
            group_hints = typing.get_type_hints(group)
            reader.update({f.name: group_hints[f.name] for f in fields(group)})
        return reader

    def required(self, options: dict[str, Any] | None = None) -> list[str]:
        """The options a reference must give (those with no default, unless what stands in for one
        is among `options`)."""
        stand_ins = dict(self.given_by)
        needed = [name for name, p in inspect.signature(self.read).parameters.items()
                  if name not in PASSED and (p.default is inspect.Parameter.empty or name in stand_ins)]
        return [name for name in needed if stand_ins.get(name) not in (options or {})]


SOURCES: dict[str, Source] = {
    source.name: source
    for source in (
        Source("demo", "the built-in synthetic demo federation", make_demo_federation, "complete"),
        Source("csv", "one CSV per site, or CSVs with a site column", read_csv_sites, "table", "files",
               files=("server_test", "dictionary"), given_by=(("target", "dictionary"),)),
        Source("heart", "UCI heart disease, a folder with the 4 processed.*.data files", read_heart_disease,
               "table", "path"),
        Source("har", "UCI HAR: the 'UCI HAR Dataset' folder or a by-subject table", read_har, "table", "path"),
        Source("vehicle", "vehicle sensor network, one table with a sensor column", read_vehicle, "table", "path"),
        Source("npz", "MedMNIST .npz (train/val/test images and labels)", read_npz, "image", "path"),
        Source("idx", "MNIST / Fashion-MNIST IDX files (a folder or an images file)", read_idx, "image", "path"),
        Source("images", "image folders ROOT/SITE/CLASS/*.png|jpg", read_image_folders, "image", "path"),
        Source("synthetic_scans", "SYNTHETIC grey images made up in code (an oval, a spot in one class)",
               make_synthetic_scans, "image"),
    )
}
