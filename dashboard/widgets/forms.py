"""Widgets generated from documented parameter dataclasses (algorithm Params, TrainConfig), so
every parameter's default and help text come from one place: the code that uses it."""

from __future__ import annotations

from dataclasses import Field, fields
from typing import Any

import streamlit as st


def field_input(field: Field, key: str, default: Any = None, label: str | None = None) -> Any:
    """One widget for one parameter, starting at its default (or `default`); a float parameter
    with bounds (low, high) is a slider, so that a share reads as a position on its range. Other
    numbers are free: the spec's validation (`param()`'s declaration) says what is wrong."""
    value = field.default if default is None else default
    label = label or field.name.replace("_", " ")
    help_text = field.metadata.get("help")
    choices = field.metadata.get("choices")
    if choices:
        return st.selectbox(label, list(choices), index=list(choices).index(value), help=help_text, key=key)
    low, high = field.metadata.get("bounds") or (None, None)
    if isinstance(value, float) and low is not None and high is not None:
        return float(st.slider(label, float(low), float(high), value, step=(high - low) / 1000, help=help_text, key=key))
    if isinstance(value, bool):
        return st.checkbox(label, value=value, help=help_text, key=key)
    if isinstance(value, int):
        return int(st.number_input(label, value=value, step=1, help=help_text, key=key))
    if isinstance(value, float):
        return float(st.number_input(label, value=value, format="%g", help=help_text, key=key))
    if isinstance(value, tuple):
        text = st.text_input(label, value=",".join(map(str, value)), help=help_text, key=key)
        return [int(part) for part in text.split(",") if part.strip().isdigit()]
    return st.text_input(label, value=str(value), help=help_text, key=key)


def params_inputs(cls: type, key_prefix: str, columns: int = 3) -> dict[str, Any]:
    """Widgets for every field of a parameter dataclass, laid out in columns; returns values."""
    values = {}
    slots = st.columns(columns)
    for i, f in enumerate(fields(cls)):
        with slots[i % columns]:
            values[f.name] = field_input(f, key=f"{key_prefix}-{f.name}")
    return values
