"""The words a clinician reads, and the technical names they stand for: one table for every page,
report, finding and the command line (the README's *Glossary* is this table, checked by a test).

Where a technical name is shown at all, the plain words come first and the name follows in
brackets: `term("w_in")` is "input scale (w_in)". A setting's key is said in words
(`setting_words("config.lr")` is "learning rate"), never as `config.lr`.
"""

from __future__ import annotations

import re

# Technical name -> plain words, in the order the README lists them. A page shows the name, if at
# all, after its words (`technical_first` finds where it does not).
TERMS: dict[str, str] = {
    # the check-up
    "within-site SDs": "times the usual spread within a site",
    "Benjamini–Hochberg": "false-alarm control over every cell tested",
    "leave-one-out": "each site against the others without itself",
    "replicate runs": "repeat runs with other random seeds",
    "hold-out": "test rows kept aside",
    "standardised units": "the feature's standard deviations",
    # iFedAvg's layers
    "b_in": "input shift",
    "w_in": "input scale",
    "b_out": "output shift",
    "w_out": "output scale",
    "local f_out": "output layer kept at each site",
    # the other lenses
    "p_i": "site's weight at the server",
    "κ_c": "class weight",
}
# The check-up's tables: a column's technical name -> its header (the words, then the name).
COLUMNS: dict[str, str] = {
    "q": "chance of a false alarm (q-value)",
    "p": "chance if the site were like the others (p-value)",
    "effect": "size (effect)",
    "effect unit": "size in (effect unit)",
}
# A finding's effect unit (`Finding.effect_unit`) in words.
EFFECT_UNITS: dict[str, str] = {
    "within-site SDs": "times the usual spread within a site (within-site SDs)",
    "SDs": "times the usual spread within an outcome (SDs)",
    "SD ratio": "ratio of spreads (SD ratio)",
    "Bowley skew": "lopsidedness (Bowley skew)",
    "tail ratio": "weight of the tails (tail ratio)",
    "share of rows": "share of rows",
    "share of values": "share of values",
    "gap in missing share": "gap in the share missing between outcomes",
    "correlation with the others' pattern": "agreement with the others' outcome pattern (correlation)",
    "relative strength": "strength of the outcome relation relative to the others'",
    "b_in (standardised units)": "input shift (b_in, in the feature's standard deviations)",
    "w_in (standardised units)": "input scale (w_in, 1 = none)",
    "w_out": "output scale (w_out)",
    "ROC AUC": "ROC AUC on the site's test rows (0.5 = guessing)",
    "accuracy": "accuracy at the server",
    "distance ratio": "distance to the others relative to theirs",
    "share of images": "share of images",
}
# Scores (the metric keys of the records, never shown as such).
METRIC_WORDS: dict[str, str] = {
    "f1": "F1 (weighted)",
    "roc_auc": "ROC AUC",
    "balanced_accuracy": "Balanced accuracy",
    "accuracy": "Accuracy",
    "loss": "Loss",
    "sensitivity": "Sensitivity (recall of the last class)",
    "specificity": "Specificity (recall of the first class)",
}
# Keys that must never reach a reader (words without spaces a table header or a setting would leak).
RAW_KEYS = ("roc_auc", "balanced_accuracy", "config.", "params.")

# A run's settings (`spec.params`, `spec.config` keys) in words; a key not listed is its name with
# spaces for underscores ('server_share': 'server share').
SETTING_WORDS: dict[str, str] = {
    "lr": "learning rate",
    "lr_decay": "learning-rate decay",
    "lr_decay_every": "learning-rate decay every (rounds)",
    "batch_size": "batch size (rows per step)",
    "local_epochs": "local epochs (passes per round)",
    "weight_decay": "weight decay (L2 penalty)",
    "hidden": "hidden layer widths",
    "eval_every": "evaluate every (rounds)",
    "local_f_out": "output layer kept at each site (local f_out)",
    "scalar_w_out": "one output scale per site (scalar w_out)",
    "n_sd": "SDs for a mark",
    "sd_floor": "minimum spread across sites",
    "mu": "proximal weight (μ)",
    "lam": "weight of a site's own model (λ)",
    "epsilon": "class-weight floor (ε)",
    "alpha": "mixing weight (α)",
}


def term(technical: str) -> str:
    """'input scale (w_in)': the plain words, then the technical name."""
    words = TERMS.get(technical)
    return technical if words is None else f"{words} ({technical})"


def plain(technical: str) -> str:
    """The plain words alone ('input scale'); an unknown name as it is."""
    return TERMS.get(technical, technical)


def setting_words(key: str) -> str:
    """A setting key in words: 'config.rounds' -> 'rounds', 'params.server_share' -> 'server share'."""
    name = key.split(".", 1)[1] if key.startswith(("params.", "config.")) else key
    return SETTING_WORDS.get(name, name.replace("_", " "))


def effect_unit(unit: str) -> str:
    """A finding's effect unit in words (an unknown one as it is)."""
    return EFFECT_UNITS.get(unit, unit)


def technical_first(text: str) -> list[str]:
    """Where `text` shows a technical name of TERMS before (or without) its plain words — each
    occurrence must follow its words within the same sentence — or a raw key (RAW_KEYS) at all.
    The places, quoted."""
    found = [f"raw key '{key}': …{text[max(0, i - 60):i + 40]}…" for key in RAW_KEYS
             for i in (m.start() for m in re.finditer(re.escape(key), text))]
    for technical, words in TERMS.items():
        for match in re.finditer(rf"(?<![\w]){re.escape(technical)}(?![\w])", text):
            start = max(text.rfind(". ", 0, match.start()), text.rfind("\n", 0, match.start()), 0)
            if words.lower() not in text[start:match.start()].lower():
                found.append(f"'{technical}' before its words ('{words}'): "
                             f"…{text[max(0, match.start() - 60):match.end() + 20]}…")
    return found


# What a page said before the glossary, and what it says now: the README's examples (not looked up).
EXAMPLES = (
    ("(+1.05 within-site SDs)", "1.05 times the usual spread within a site higher (+1.05 within-site SDs)"),
    ("scaled ×0.019 around 37 °C (w_in = 0.019)",
     "squeezed to 0.019 of its spread around 37 °C (input scale w_in = 0.019)"),
    ("class scores scaled ×-1.4 (w_out = -1.4)", "outcome scores turned around, ×-1.4 (output scale w_out = -1.4)"),
    ("Open Feature shifts for run 20261125-142222-ifedavg-57763d0d", "Open Feature shifts for ifedavg #1"),
    ("q: Benjamini–Hochberg over all 720 cells",
     "q: the false-alarm control over every cell tested (Benjamini–Hochberg) over all 720 cells"),
    ("roc_auc, balanced_accuracy (table headers)", "ROC AUC, Balanced accuracy"),
    ("config.rounds, params.server_share (settings)", "rounds, server share"),
)


def markdown() -> str:
    """The glossary as the README shows it (tests/test_plain_words.py keeps the two the same)."""
    rows = ["| technical name | what a reader sees |", "|---|---|"]
    rows += [f"| `{name}` | {term(name)} |" for name in TERMS]
    rows += [f"| column `{name}` | {words} |" for name, words in COLUMNS.items()]
    rows += [f"| score `{key}` | {words} |" for key, words in METRIC_WORDS.items()]
    rows += [f"| setting `{key}` | {words} |" for key, words in SETTING_WORDS.items()]
    examples = ["| before | now |", "|---|---|", *(f"| {before} | {now} |" for before, now in EXAMPLES)]
    return "\n".join(rows) + "\n\nFor example:\n\n" + "\n".join(examples)
