"""A fast slice of the suggestions' suite (benchmarks/evidence/mapping.py measures 480 draws): a few
messy multi-site exports drawn from each base with a known true dictionary, drafted as *Accept all*
and `inspect --draft-dictionary` draft them, and scored decision by decision. Accepting every
suggestion must apply no wrong decision, and the decisions the truth needs must be pre-filled or
asked; the scoring itself is checked on a hand-made draft."""

from __future__ import annotations

import copy

import pytest

from data_adapters import draft_dictionary
from tests.messy_study import TYPES, Score, messy_case, score

# Calibration seeds (benchmarks/evidence/mapping.py), one per base and family mix.
DRAWS = (("heart", 3), ("demo", 4), ("vehicle", 6), ("har", 8))


@pytest.fixture(scope="module")
def drafted(tmp_path_factory):
    out = []
    for base, seed in DRAWS:
        case = messy_case(base, seed, tmp_path_factory.mktemp(f"{base}-{seed}"))
        questions = []
        draft = draft_dictionary(case.reference(), questions=questions)
        out.append((case, draft, score(case, draft, [q.to_dict() for q in questions])))
    return out


def test_accepting_every_suggestion_applies_no_wrong_decision_and_finds_what_the_truth_needs(drafted):
    total = Score()
    for _, _, found in drafted:
        total.add(found)
    assert {t: total.wrong[t] for t in TYPES if total.wrong[t]} == {}
    for kind in TYPES:
        if total.truth(kind):
            assert total.found(kind) >= 0.9, (kind, total.asked[kind], total.missed[kind])
    # the draws hold every kind of decision, most of them pre-filled
    assert all(total.truth(kind) for kind in TYPES) and sum(total.right.values()) >= 0.75 * sum(map(total.truth, TYPES))


def test_the_scoring_counts_a_wrong_and_a_missed_decision_of_a_hand_made_draft(drafted):
    case, draft, _ = drafted[0]
    truth = copy.deepcopy(case.truth)
    right = score(case, truth)
    assert all(not right.wrong[t] and not right.missed[t] and not right.asked[t] for t in TYPES)
    worse = copy.deepcopy(truth)
    site, entry = next((s, e) for s, e in worse["sites"].items() if e.get("missing"))
    column = next(iter(entry["missing"]))
    entry["missing"][column] = [12345]  # a wrong code instead of the right one
    found = score(case, worse)
    assert len(found.wrong["missing"]) == 1 and len(found.missed["missing"]) == 1
    assert found.right["missing"] == right.right["missing"] - 1
