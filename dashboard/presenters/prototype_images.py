"""inDISCO's lens from stored runs: prototype boxes drawn on a site's own images, local against
global, and the per-site overlap of boxes and stamp. Pure numpy and PIL (no torch): the page
fetches, these draw. (The bias experiment's preset, which looks for data on this machine, is in
`dashboard.widgets.bias_experiment`: the HTML report imports this module on every page.)

A comparison has two sides, each one kind of prototypes of one run at its last evaluated round:
'local' from an LM run (each site alone, as in the paper's figures) or the local prototypes a GM /
PM run's sites sent; 'global' from a GM, PM or CM run. Runs compare when they share data and seed
(then their sites, hold-outs and recorded test images are the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import plotly.colors as pc
import plotly.graph_objects as go
from PIL import Image, ImageDraw

from dashboard.presenters.figures import _style
from fedcore.interpret.prototype_boxes import ON_STAMP_SHARE
from fedcore.records import Prototypes
from fedcore.store import Run, Scores

ALGORITHMS = {
    "indisco-gm": "GM (everything averaged)",
    "indisco-pm": "PM (prototypes and last layer averaged)",
    "indisco-cm": "CM (one model, pooled data)",
    "indisco-lm": "LM (each site alone)",
}
GLOBAL_SOURCES = ("indisco-gm", "indisco-pm", "indisco-cm")
COLOURS = {"local": "#ffd400", "global": "#00c8ff"}  # yellow as the reference; cyan for global
COLOUR_NAMES = {"local": "yellow", "global": "cyan"}
STAMP_COLOUR = "#ff3b6b"
TILE = 150  # pixels of a drawn image's longer side


@dataclass
class Side:
    """One kind of prototypes ('local' or 'global') of one run at its last evaluated round."""

    run: Run
    kind: str
    title: str
    arrays: dict[str, np.ndarray]
    round: int
    scores: Scores | None  # the round's record (None: its line of rounds.jsonl is damaged)

    @property
    def record(self) -> Prototypes:
        """What inDISCO recorded at the round."""
        found = self.scores.algorithm if self.scores is not None else None
        return found if isinstance(found, Prototypes) else Prototypes()

    @property
    def role(self) -> str:
        return "local" if self.run.spec.algorithm == "indisco-lm" else self.kind

    @property
    def colour(self) -> str:
        return COLOURS[self.role]

    def get(self, name: str) -> np.ndarray:
        return self.arrays[f"{self.kind}_{name}"]

    def test_position(self, site: int, row: int) -> int | None:
        """Where hold-out row `row` of a site is among this run's recorded test images."""
        found = np.flatnonzero(self.arrays["test_rows"][site] == row)
        return int(found[0]) if found.size else None


def side_title(run: Run, kind: str) -> str:
    algorithm = run.spec.algorithm
    if algorithm == "indisco-lm":
        return "Local prototypes (LM: each site alone)"
    if algorithm == "indisco-cm":
        return "Centralised model's prototypes (CM)"
    scheme = "GM" if algorithm == "indisco-gm" else "PM"
    if kind == "local":
        return f"Local prototypes (as each site sent them in {scheme})"
    if algorithm == "indisco-pm":
        return "Global prototypes (PM: averaged, pushed onto this site's images)"
    return "Global prototypes (GM: after the server averaged)"


def load_side(run: Run | None, kind: str) -> Side | None:
    """The run's `kind` of prototypes at its last evaluated round; None before there is one."""
    rounds = run.array_rounds() if run is not None else []
    if not rounds:
        return None
    arrays = run.load_arrays(rounds[-1])
    if f"{kind}_source_box" not in arrays:
        return None
    scores = next((r for r in run.rounds() if r.round == rounds[-1]), None)
    return Side(run, kind, side_title(run, kind), arrays, rounds[-1], scores)


def siblings(runs: list[Run], run: Run) -> dict[str, Run]:
    """The newest undamaged inDISCO run of each scheme on the same data with the same seed (and
    `run` itself)."""
    same, spec = {}, run.spec
    for other in runs:
        theirs = other.spec
        if (theirs.record == Prototypes.kind and not other.damage and theirs.data == spec.data
                and theirs.seed == spec.seed):
            same.setdefault(theirs.algorithm, other)
    same[spec.algorithm] = run
    return same


def local_choices(group: dict[str, Run]) -> dict[str, tuple[Run, str]]:
    """Label -> (run, kind) for the local side: the LM run, else what GM / PM sites sent."""
    choices = {}
    if "indisco-lm" in group:
        choices["each site alone (LM run)"] = (group["indisco-lm"], "local")
    for name in ("indisco-gm", "indisco-pm"):
        if name in group:
            choices[f"as each site sent them ({name[-2:].upper()} run)"] = (group[name], "local")
    return choices


def overlap_table(sides: list[Side], sites: list[str]) -> pd.DataFrame:
    """Per site and side, for every hold-out image the box of the prototype it activates most: the
    mean share of that box on the stamp, and the share of images whose box is at least half on it;
    and how many prototypes have their own patch (on the site's training images) on it."""
    arrays = sides[0].arrays
    rows = []
    for i, site in enumerate(sites):
        row: dict[str, Any] = {"site": site, "stamped": "yes" if arrays["stamped_site"][i] else "no"}
        for side in sides:
            valid = side.arrays["holdout_label"][i] >= 0
            overlap = side.get("holdout_overlap")[i][valid]
            found = side.get("source_image")[i] >= 0
            source = side.get("source_overlap")[i][found]
            row[f"{side.role}: images on stamp"] = float((overlap >= ON_STAMP_SHARE).mean())
            row[f"{side.role}: box share"] = float(overlap.mean())
            row[f"{side.role}: prototypes"] = f"{int((source >= ON_STAMP_SHARE).sum())}/{int(found.sum())}"
        rows.append(row)
    return pd.DataFrame(rows)


def overlap_figure(table: pd.DataFrame, sides: list[Side]) -> go.Figure:
    """Grouped bars: per site and side, the share of hold-out images whose top box is on the stamp."""
    fig = go.Figure()
    labels = [f"{s} (stamped)" if stamped == "yes" else s for s, stamped in zip(table["site"], table["stamped"])]
    for side in sides:
        values = table[f"{side.role}: images on stamp"]
        fig.add_trace(go.Bar(x=labels, y=values, name=side.title, marker_color=side.colour,
                             marker_line=dict(color="#333", width=1), text=[f"{v:.0%}" for v in values],
                             textposition="outside", hovertemplate="%{x}: %{y:.0%}<extra>" + side.title + "</extra>"))
    fig.update_layout(barmode="group", legend=dict(orientation="h", y=-0.18),
                      title=dict(text="Hold-out images whose most activated prototype is boxed on the stamp<br><sup>"
                                      f"at least {ON_STAMP_SHARE:.0%} of the box in the stamp's place · each site on "
                                      "its own images</sup>", x=0),
                      yaxis=dict(range=[0, 1.15], title="share of the site's hold-out images", tickformat=".0%"))
    return _style(fig, height=420, top=80)


@cache
def _jet() -> np.ndarray:
    """256 × 3 bytes: the JET colour map (the reference's heat overlay)."""
    colours = np.array(pc.sample_colorscale("Jet", [i / 255 for i in range(256)], colortype="tuple"))
    return (colours * (255 if colours.max() <= 1 else 1)).round().astype(np.uint8)


def render(pixels: np.ndarray, scale: float, stamp: Any, boxes: list[tuple[np.ndarray, str]] = (),
           heat: np.ndarray | None = None, tile: int = TILE) -> Image.Image:
    """A stored image (C × h × w bytes) drawn `tile` pixels wide, with a heat map overlaid (0.5 image
    + 0.3 JET, as the reference), each (box, colour) in original pixel coordinates (`scale`: stored
    pixels per original pixel), and the stamp's place outlined when there is a stamp."""
    image = pixels.astype(np.float64)
    rgb = (np.repeat(image, 3, axis=0) if image.shape[0] == 1 else image[:3]).transpose(1, 2, 0)
    if heat is not None:
        rgb = 0.5 * rgb + 0.3 * _jet()[heat].astype(np.float64)
    picture = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
    zoom = tile / max(picture.size)
    picture = picture.resize((round(picture.width * zoom), round(picture.height * zoom)), Image.BICUBIC)
    draw = ImageDraw.Draw(picture)
    if stamp is not None:
        _rectangle(draw, stamp, scale * zoom, STAMP_COLOUR, width=1)
    for box, colour in boxes:
        if box[0] >= 0:
            _rectangle(draw, box, scale * zoom, colour, width=max(2, round(tile / 75)))
    return picture


def _rectangle(draw: ImageDraw.ImageDraw, box: Any, factor: float, colour: str, width: int) -> None:
    r0, r1, c0, c1 = (float(v) * factor for v in box)
    draw.rectangle([c0, r0, max(c0, c1 - 1), max(r0, r1 - 1)], outline=colour, width=width)


def side_by_side(pictures: list[Image.Image], gap: int = 6) -> Image.Image:
    out = Image.new("RGB", (sum(p.width for p in pictures) + gap * (len(pictures) - 1),
                            max(p.height for p in pictures)), "white")
    x = 0
    for picture in pictures:
        out.paste(picture, (x, 0))
        x += picture.width + gap
    return out


def stamp_and_scale(arrays: dict[str, np.ndarray]) -> tuple[tuple[int, ...] | None, float]:
    """The stamp's box in original pixels (None without a stamp) and the stored pixels per
    original pixel of the recorded images."""
    stamp = tuple(int(v) for v in arrays["stamp_box"]) if "stamp_box" in arrays else None
    return stamp, arrays["test_pixels"].shape[-1] / float(arrays["image_size"][1])


def holdout_panel(sides: list[Side], site: int, row: int, classes: list[str]) -> tuple[Image.Image, str]:
    """Hold-out image `row` of a site once per side, boxed where the prototype it activates most
    looks, and a caption with its class and what each side's model says."""
    stamp, scale = stamp_and_scale(sides[0].arrays)
    panels, said = [], []
    for side in sides:
        t = side.test_position(site, row)
        if t is None:
            continue
        panels.append(render(side.arrays["test_pixels"][site, t], scale, stamp,
                             [(side.get("test_box")[site, t, 0], side.colour)]))
        said.append(f"{side.role}: P{int(side.get('test_top')[site, t, 0])}, says "
                    f"'{classes[int(side.get('test_pred')[site, t])]}'")
    truth = classes[int(sides[0].arrays["test_label"][site, sides[0].test_position(site, row)])]
    return side_by_side(panels), f"hold-out image {row}, class '{truth}' — " + " · ".join(said)


def top_table(side: Side, site: int, shown: int, classes: list[str]) -> pd.DataFrame:
    """The prototypes a test image activates most (up to ten): similarity, class, and the
    connection of the prototype to the class the model predicts (its last-layer weight)."""
    pred = int(side.get("test_pred")[site, shown])
    last = side.get("last_layer")[site]
    rows = []
    for rank, (proto, similarity) in enumerate(zip(side.get("test_top")[site, shown],
                                                   side.get("test_top_similarity")[site, shown]), start=1):
        proto = int(proto)
        rows.append({"rank": rank, "prototype": f"P{proto}",
                     "class": classes[int(side.arrays["prototype_class"][proto])],
                     "similarity": float(similarity), f"connection to '{classes[pred]}'": float(last[pred, proto])})
    return pd.DataFrame(rows)
