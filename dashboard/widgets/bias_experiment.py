"""The Prototypes page's bias experiment: inDISCO's LM, GM and PM on four sites whose site1 has a
stamp on its positive images, on declared-synthetic scans or a binary MedMNIST file found on this
machine. Apart from `dashboard.presenters.prototype_images` because finding data goes through the application
layer's data services (`application.datasets`), which load the data adapters and torch: only the page
that offers the experiment pays for that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from application.datasets import find_datasets

SYNTHETIC = {"source": "synthetic_scans", "images": 1200}
PRESET_SITES = {"split": "iid", "sites": 4, "inject": ["stamp:site1"]}
PRESET_CONFIG = {"rounds": 6, "local_epochs": 5, "seed": 0}
PRESET_ALGORITHMS = ("indisco-gm", "indisco-pm", "indisco-lm")
BINARY_MEDMNIST = ("pneumoniamnist", "breastmnist")


def preset_choices() -> dict[str, tuple[dict[str, Any], bool]]:
    """Label -> (data reference, synthetic) for the bias experiment: the declared-synthetic scans
    first, then every binary MedMNIST file found on this machine (four IID sites, a stamp on
    site1's last, positive class)."""
    choices = {"SYNTHETIC scans made up in code (an oval, a faint spot in class 'spot')": ({**SYNTHETIC, **PRESET_SITES},
                                                                                         True)}
    for _, ref in find_datasets():
        path = Path(ref["path"])
        if ref["source"] == "npz" and path.stem.lower() in BINARY_MEDMNIST:
            choices[f"{path.name} found on this machine ({path.parent})"] = ({**ref, **PRESET_SITES}, False)
    return choices


def preset_specs(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"algorithm": name, "data": data, "config": PRESET_CONFIG} for name in PRESET_ALGORITHMS]
