"""The ground truth of a federation: each problem injected into its data, as one typed record.

The data adapters' injection code builds them (`data_adapters.assembly.inject`, the demo's built-in
problems), the engine carries them (`Federation.ground_truth`), federation.json stores their
`to_json()`, and the store's reader gives them back (`StoredFederation.ground_truth`, after
checking each entry's shape: `fedcore.store.INJECTED_PROBLEM`). Readers use the fields; nothing
indexes the stored mapping. Torch-free: the store reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

# The stored key of a field where Python cannot spell it (a field is never called `class`).
_STORED_AS = {"label": "class"}


@dataclass(frozen=True)
class StampBox:
    """Where a stamp sits on an image: its top-left pixel and its side, in pixels."""

    row: int
    col: int
    size: int

    @property
    def region(self) -> tuple[int, int, int, int]:
        """(row0, row1, col0, col1), the end excluded."""
        return self.row, self.row + self.size, self.col, self.col + self.size

    def to_json(self) -> dict[str, int]:
        return {"row": self.row, "col": self.col, "size": self.size}


@dataclass(frozen=True)
class InjectedProblem:
    """One injected incompatibility at one site, with what a reader needs to check a lens against it."""

    site: str
    feature: str | None  # the feature it is in (the first one-hot feature of a column); None: a label problem
    kind: str  # 'offset', 'unit', 'missing_not_at_random', 'label_flip', 'stamp', ...
    detail: str = ""  # what was done, in words
    # the particulars of some kinds (absent from the stored entry where None / empty)
    amount: float | None = None  # the injection's amount (a factor, a share, SDs)
    label: str | None = None  # the class it concerns (missing not at random, a stamp); stored as 'class'
    box: StampBox | None = None  # a stamp's place
    column: str | None = None  # a categorical column's name, when its one-hot features are several
    features: Sequence[str] = ()  # ... and those features
    other: str | None = None  # the other feature of a swap

    @property
    def is_label_problem(self) -> bool:
        """A site-level problem of the labels (a flip, label noise): it shows in the output layer."""
        return self.feature is None

    def to_json(self) -> dict[str, Any]:
        """The federation.json entry: the four keys every entry has, then the particulars it has."""
        stored: dict[str, Any] = {"site": self.site, "feature": self.feature, "kind": self.kind, "detail": self.detail}
        for f in fields(self)[4:]:
            value = getattr(self, f.name)
            if value is None or (f.name == "features" and not value):
                continue
            stored[_STORED_AS.get(f.name, f.name)] = (value.to_json() if isinstance(value, StampBox)
                                                      else list(value) if f.name == "features" else value)
        return stored

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> InjectedProblem:
        """An entry as stored, whose shape the store's reader (or the writer) has checked: the
        four keys every entry has are required; a particular it lacks is None."""
        box = stored.get("box")
        return cls(site=stored["site"], feature=stored["feature"], kind=stored["kind"], detail=stored["detail"],
                   amount=stored.get("amount"), label=stored.get("class"),
                   box=StampBox(box["row"], box["col"], box["size"]) if box is not None else None,
                   column=stored.get("column"), features=tuple(stored.get("features", ())),
                   other=stored.get("other"))


STORED_KEYS = tuple(_STORED_AS.get(f.name, f.name) for f in fields(InjectedProblem))
