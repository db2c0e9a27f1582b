"""What each algorithm records at an evaluated round, as typed records readable without torch.

An algorithm names its record class (`Algorithm.Record`) and fills one in `record`; the engine
stores it as the round's "algorithm" entry of rounds.jsonl (its arrays go to the round's npz).
The run store reads the entry back with `read_record` (the kind its spec names), which keeps
what has the declared type and drops the rest, so a record from an older version or a damaged
file gives defaults instead of an exception; every reader — the dashboard's lenses, the HTML
report, `python -m fedcore show` — gets the typed record from the store. The record's
`kind` names the lens that shows it (the dashboard's registry maps kinds to pages and report
sections); `summary_lines` is its text for the command line.

The kinds live here, not beside each algorithm, so that the dashboard can read them without
loading the training code; the algorithm module says which one it records.
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar

from fedcore.text import table as text_table

RECORDS: dict[str, type[Record]] = {}  # kind -> record class, filled as the classes are defined


@dataclass
class Record:
    """An algorithm that records nothing of its own beyond the sites' scores."""

    kind: ClassVar[str] = "none"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        RECORDS[cls.kind] = cls

    def to_json(self) -> dict[str, Any]:
        """The stored form: every field under its JSON name (`json` in a field's metadata, else its name)."""
        values = asdict(self)
        return {f.metadata.get("json", f.name): values[f.name] for f in fields(self)}

    @classmethod
    def from_json(cls, value: Any) -> Record:
        """The record from its stored form; a field missing or of the wrong type takes its default."""
        stored = value if isinstance(value, Mapping) else {}
        hints = typing.get_type_hints(cls)
        kept = {}
        for f in fields(cls):
            name = f.metadata.get("json", f.name)
            if name in stored and _fits(stored[name], hints[f.name]):
                kept[f.name] = stored[name]
            elif f.default is MISSING and f.default_factory is MISSING:
                kept[f.name] = None
        return cls(**kept)

    def summary_lines(self, sites: list[str]) -> list[str]:
        """The record as text for `python -m fedcore show` (`sites`: the federation's site names)."""
        values = {k: v for k, v in self.to_json().items() if v not in (None, {}, [])}
        return [f"Algorithm record: {json.dumps(values)}"] if values else []


RECORDS[Record.kind] = Record


def read_record(kind: str | None, value: Any) -> Record:
    """A stored "algorithm" entry as the record class of `kind` (unknown kinds: the plain record).
    A Flower round whose record would read tensors some sites keep to themselves holds a
    `Withheld` record in its place, stored without a kind: it is known by holding exactly its fields."""
    cls = RECORDS.get(kind or "none", Record)
    if isinstance(value, Mapping) and value and set(value) == _json_names(Withheld) \
            and not set(value) & _json_names(cls):
        cls = Withheld
    return cls.from_json(value)


def _json_names(cls: type[Record]) -> set[str]:
    return {f.metadata.get("json", f.name) for f in fields(cls)}


@dataclass
class FeatureShifts(Record):
    """iFedAvg: the per-site affine layers' heatmaps (arrays b_in, w_in [, b_out, w_out], each with
    its *_O cell marks, *_x feature marks and *_z scores) and how they were marked."""

    kind: ClassVar[str] = "feature_shifts"
    marks: dict[str, dict[str, int]] = field(default_factory=dict)  # layer -> {"O": cells, "x": features}
    n_sd: float = 2.0
    sd_floor: float = 0.05
    rule: str = "sd"
    warning: str | None = None  # why the rule cannot mark a cell with this few sites

    def summary_lines(self, sites: list[str]) -> list[str]:
        marked = ", ".join(f"{layer}: {m.get('O', 0)} cells 'O', {m.get('x', 0)} features 'x'"
                           for layer, m in self.marks.items())
        lines = [f"\nSignificance marks ({self.rule} rule, {self.n_sd:g} SD): {marked or 'none recorded'}"]
        return lines + ([f"  note: {self.warning}"] if self.warning else [])


@dataclass
class SiteWeights(Record):
    """AdaFed: each site's score p_i and share of the server model, the class weights κ and the
    server model's per-class F1."""

    kind: ClassVar[str] = "site_weights"
    p: dict[str, float] = field(default_factory=dict)
    p_share: dict[str, float] = field(default_factory=dict)
    site_accuracy: dict[str, float] = field(default_factory=dict)
    kappa: list[float] = field(default_factory=list)
    server_f1_per_class: list[float] = field(default_factory=list)
    server_macro_f1: float | None = None
    server_accuracy: float | None = None
    fallback_uniform: bool = False  # every p_i was 0: the round averaged uniformly
    weight_formula: str | None = None  # how the rule made p_i from accuracy

    def summary_lines(self, sites: list[str]) -> list[str]:
        rows = [(site, _number(self.site_accuracy.get(site)), _number(self.p.get(site)),
                 _number(self.p_share.get(site))) for site in sites]
        formula = f"p_i = {self.weight_formula}" if self.weight_formula else "p_i"
        lines = [f"\nSite weights ({formula}; share = p_i / Σ p):",
                 text_table(("site", "server accuracy", "p_i", "share"), rows),
                 f"Class weights κ: {', '.join(_number(k) for k in self.kappa)}"]
        return lines + (["  (every p_i was 0: that round averaged uniformly)"] if self.fallback_uniform else [])


@dataclass
class SiteSimilarity(Record):
    """FedHealth2: distance and weight matrices between sites (arrays distance, weights)."""

    kind: ClassVar[str] = "site_similarity"
    lam: float | None = field(default=None, metadata={"json": "lambda"})
    variant: str | None = None
    weights_from_round: int | None = None
    nearest: dict[str, list[str]] = field(default_factory=dict)  # site -> its nearest sites, nearest first

    def summary_lines(self, sites: list[str]) -> list[str]:
        if not self.nearest:
            return [f"\nSite similarity: no weights yet ({self.variant}-variant warm-up)"]
        rows = [(site, ", ".join(self.nearest.get(site, [])[:3])) for site in sites]
        return [f"\nSite similarity (λ = {_number(self.lam)}, {self.variant}): nearest sites",
                text_table(("site", "nearest"), rows)]


@dataclass
class Mixture(Record):
    """APFL: each site's weight α of its personal model in the mixture (array alpha)."""

    kind: ClassVar[str] = "mixture"
    alpha: dict[str, float] = field(default_factory=dict)

    def summary_lines(self, sites: list[str]) -> list[str]:
        rows = [(site, _number(self.alpha.get(site))) for site in sites]
        return ["\nAPFL: weight α of each site's personal model", text_table(("site", "α"), rows)]


@dataclass
class Prototypes(Record):
    """inDISCO: each site's local and / or global prototypes on its own images (boxes, heat maps,
    the test images' most activated prototypes in the arrays), with an injected stamp how much of
    the boxes lie on it, and the local models' scores."""

    kind: ClassVar[str] = "prototypes"
    stage: str | None = None
    kinds: list[str] = field(default_factory=list)  # 'local' (as sent), 'global' (after the server)
    prototypes: int | None = None
    stamp: dict[str, Any] | None = None  # sites, class, box, on_stamp_share
    test_on_stamp: dict[str, dict[str, float]] = field(default_factory=dict)  # kind -> site -> share
    stamp_overlap: dict[str, dict[str, float]] = field(default_factory=dict)
    prototypes_on_stamp: dict[str, dict[str, int]] = field(default_factory=dict)
    local_model: dict[str, dict[str, float]] = field(default_factory=dict)  # site -> scores before the server

    def summary_lines(self, sites: list[str]) -> list[str]:
        lines = []
        if self.stamp and self.stamp_overlap:
            kinds = list(self.stamp_overlap)
            lines.append(
                f"\nPrototype boxes and the stamp (stamped: {', '.join(self.stamp.get('sites', []))}, class "
                f"'{self.stamp.get('class')}'). Per hold-out image, the box of its most activated prototype: mean "
                f"share of it on the stamp, and images whose box is at least "
                f"{float(self.stamp.get('on_stamp_share', 0.5)):.0%} on it; prototypes whose own patch is on it, "
                f"of {self.prototypes}:")
            header = ["site"] + [f"{kind} {what}" for kind in kinds for what in ("box share", "images", "prototypes")]
            rows = [(site, *(value for k in kinds for value in (
                _number(self.stamp_overlap[k].get(site), 2), _percent(self.test_on_stamp.get(k, {}).get(site)),
                str(self.prototypes_on_stamp.get(k, {}).get(site, "–")))))
                for site in sites]
            lines.append(text_table(header, rows))
        if self.local_model:
            lines.append("\nLocal models (as each site sent them, before the server's step):")
            rows = [(site, *(_number(m.get(k)) for k in ("balanced_accuracy", "sensitivity", "specificity")))
                    for site, m in self.local_model.items()]
            lines.append(text_table(("site", "bal. acc.", "sensitivity", "specificity"), rows))
        return lines


@dataclass
class Withheld(Record):
    """A Flower round whose record reads local tensors some sites keep to themselves."""

    kind: ClassVar[str] = "withheld"
    withheld: list[str] = field(default_factory=list)
    note: str = ""

    def summary_lines(self, sites: list[str]) -> list[str]:
        return [f"\n{self.note}"] if self.note else []


def _fits(value: Any, annotation: Any) -> bool:
    """Whether a stored JSON value has the declared type (numbers may be None: NaN is stored so)."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in arguments)
    if annotation is type(None):
        return value is None
    if annotation is Any:
        return True
    if annotation is float:
        return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation in (str, bool):
        return isinstance(value, annotation)
    if origin is list:
        return isinstance(value, list) and all(_fits(item, arguments[0]) for item in value)
    if origin is dict:
        return isinstance(value, Mapping) and all(isinstance(k, str) and _fits(v, arguments[1])
                                                  for k, v in value.items())
    return False


def _number(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _percent(value: Any) -> str:
    return "–" if value is None else f"{value:.0%}"
