"""What a column's name or a code says, whatever its spelling: the one rule for telling that two
names (or two codes) are one thing — the mapping step's renames and codings
(`suggestions.py`), its target's candidates (`study_view.py`) and the alignment report's hint
that a column is spelled differently at some sites read it.

name_key   case, accents, punctuation and spacing set aside, bracketed parts and unit words
           dropped, then a synonym (SYNONYMS, and the unit catalogue's analyte names) mapped to
           its group's first name: 'Cholestérol (mmol/L)' -> 'cholesterol', 'Gender' -> 'sex'.
code_key   a code's words the same way, through CODE_SYNONYMS: 'M', 'male', 'Mann' -> 'male'.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from fedcore.interpret import unit_conversions as catalogue

UNIT_WORDS = {"mg", "dl", "mmol", "umol", "mol", "l", "g", "kg", "lb", "lbs", "cm", "mm", "in", "inch", "inches",
              "degc", "degf", "pct", "percent", "mmhg", "kpa", "bpm", "yrs", "unit", "units"}
SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("age", "age years", "patient age", "age at admission"),
    ("sex", "gender"),
    ("weight", "body weight", "wt"),
    ("height", "body height", "ht"),
    ("bmi", "body mass index"),
    ("heart rate", "hr", "pulse", "pulse rate"),
    ("systolic blood pressure", "sbp", "systolic bp", "systolic"),
    ("diastolic blood pressure", "dbp", "diastolic bp", "diastolic"),
    ("outcome", "target", "label", "class", "diagnosis"),
    ("smoker", "smoking", "smokes"),
    catalogue.GLUCOSE, catalogue.CHOLESTEROL, catalogue.TRIGLYCERIDES, catalogue.CREATININE, catalogue.UREA,
    catalogue.BILIRUBIN, catalogue.LACTATE, catalogue.HAEMOGLOBIN, catalogue.ALBUMIN, catalogue.HBA1C,
    catalogue.TEMPERATURE,
)
CODE_SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("male", "m", "man", "men", "masculine", "masculin", "h", "homme", "mann", "männlich"),
    ("female", "f", "woman", "women", "feminine", "feminin", "w", "femme", "frau", "weiblich"),
    ("yes", "y", "true", "t", "1", "ja", "oui", "si", "positive", "pos", "present"),
    ("no", "n", "false", "0", "nein", "non", "negative", "neg", "absent"),
)


def plain(text: str) -> str:
    """Lower case, accents and punctuation gone, words separated by one space."""
    ascii_text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode().lower()
    return " ".join(re.findall(r"[a-z0-9]+", ascii_text))


def _synonym_index(groups: Iterable[Sequence[str]]) -> dict[str, str]:
    index: dict[str, str] = {}
    for group in groups:
        for member in group:
            index.setdefault(plain(member).replace(" ", ""), plain(group[0]).replace(" ", ""))
    return index


SYNONYM_OF = _synonym_index(SYNONYMS)
CODE_OF = _synonym_index(CODE_SYNONYMS)


def name_key(name: str) -> str:
    """What a column's name says, whatever its spelling: 'Cholestérol (mmol/L)' -> 'cholesterol',
    'Gender' -> 'sex'."""
    words = plain(re.sub(r"[\(\[].*?[\)\]]", " ", name)).split() or plain(name).split()
    kept = [w for w in words if w not in UNIT_WORDS] or words
    joined = "".join(kept)
    return SYNONYM_OF.get(joined, joined)


def code_key(value: str) -> str:
    joined = plain(value).replace(" ", "")
    return CODE_OF.get(joined, joined)
