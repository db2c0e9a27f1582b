"""What to call the data a run trained on: one label for a data reference, everywhere it is shown.

A reference that carries a name (`name`, else `label`: what a person called the federation) is
called by it. Otherwise the label is built from the reference itself, file names instead of paths
(an upload's temporary folder means nothing to a reader):

    demo                                         demo
    demo:standardization=site                    demo · standardization=site
    heart:/data/uci/canonical                    heart: canonical
    {"source": "csv", "files": [".../a.csv", ".../b.csv"], "target": "outcome"}
                                                 csv: a.csv, b.csv · target outcome
    {"source": "flower", "superlink": "10.0.0.5:9093", "sites": 3}
                                                 Flower federation at 10.0.0.5:9093 (3 sites)

Options that say nothing (empty lists, false switches) are left out; long file lists are cut
after a few names, and a label longer than LABEL_LENGTH characters is cut. Pure string work on the stored reference: no data adapter is loaded, so the
dashboard's pages and the command line label runs without torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PATH_OPTIONS = ("files", "path")  # where a source's own path(s) sit in a reference's object form
FILES_SHOWN = 3
NAME_KEYS = ("name", "label")
LABEL_LENGTH = 160


def shortened(text: str, limit: int) -> str:
    """`text` on one line (each run of white space one space), cut to `limit` characters ending
    in '…': what a page or a list shows of a name, however long the stored one (a name pasted by
    mistake, a store edited by hand) — only its start is ever looked at."""
    line = " ".join(text[: 4 * limit].split())
    return line if len(line) <= limit and len(text) <= 4 * limit else line[: limit - 1] + "…"


def data_label(ref: Any) -> str:
    """The readable label of a data reference (a string or its object form), at most
    LABEL_LENGTH characters."""
    return shortened(_label(ref), LABEL_LENGTH)


def _label(ref: Any) -> str:
    if isinstance(ref, Mapping):
        for key in NAME_KEYS:
            if isinstance(ref.get(key), str) and ref[key].strip():
                return ref[key]
        source = str(ref.get("source") or "data")
        options = {k: v for k, v in ref.items() if k not in ("source", *NAME_KEYS)}
        paths = [p for key in PATH_OPTIONS for p in _as_list(options.pop(key, None))]
    elif isinstance(ref, str):
        source, paths, options = _parse_text(ref)
    else:
        return "no data" if ref is None else str(ref)
    if source == "flower":
        return _flower_label(paths, options)
    parts = [f"{source}: {_file_names(paths)}" if paths else source]
    if options.get("target"):
        parts.append(f"target {options['target']}")
    if options.get("split"):
        sites = f" × {options['sites']} sites" if options.get("sites") else ""
        parts.append(f"{options['split']}{sites}")
    if options.get("inject"):
        parts.append(f"{len(_as_list(options['inject']))} injected")
    for key, value in options.items():
        if key in ("target", "split", "sites", "inject") or value in (None, "", [], {}, False):
            continue
        parts.append(f"{key}={_option_text(value)}")
    return " · ".join(parts)


def _parse_text(ref: str) -> tuple[str, list[str], dict[str, Any]]:
    """`source:item,item,key=value`: items without '=' are the source's paths."""
    head, _, rest = ref.partition(":")
    paths, options = [], {}
    for item in (part.strip() for part in rest.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if sep:
            options.setdefault(key.strip(), []).append(value.strip())
        else:
            paths.append(item)
    return head.strip(), paths, {k: v[0] if len(v) == 1 else v for k, v in options.items()}


def _flower_label(paths: list[str], options: Mapping[str, Any]) -> str:
    address = options.get("superlink") or (paths[0] if paths else "?")
    sites = f" ({options['sites']} sites)" if options.get("sites") else ""
    server = f" · server's data: {data_label(options['server_data'])}" if options.get("server_data") else ""
    return f"Flower federation at {address}{sites}{server}"


def _file_names(paths: list[str]) -> str:
    names = [_base_name(p) for p in paths]
    if len(names) <= FILES_SHOWN + 1:
        return ", ".join(names)
    return ", ".join(names[:FILES_SHOWN]) + f", … ({len(names)} files)"


def _option_text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{k}:{_option_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(_option_text(v) for v in value)
    text = str(value)
    return _base_name(text) if "/" in text or "\\" in text else text


def _base_name(path: Any) -> str:
    text = str(path).rstrip("/\\")
    return text.replace("\\", "/").rsplit("/", 1)[-1] or text


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]
