"""The glossary (fedcore/glossary.py): the README shows it as it is, and its check finds a technical
name shown before its plain words (the page tests run it on what each clinician-facing page shows)."""

from pathlib import Path

from fedcore.glossary import COLUMNS, METRIC_WORDS, TERMS, markdown, setting_words, technical_first, term

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_shows_the_glossary_as_it_is():
    assert markdown() in (ROOT / "README.md").read_text(encoding="utf-8"), \
        "README.md's Glossary differs from fedcore.glossary.markdown(): paste its output there"


def test_the_words_come_first_and_the_technical_name_after():
    assert term("w_in") == "input scale (w_in)" and term("hold-out") == "test rows kept aside (hold-out)"
    assert term("not a term") == "not a term"
    assert setting_words("config.lr") == "learning rate" and setting_words("params.server_share") == "server share"
    assert all(technical_first(term(name)) == [] for name in TERMS)
    assert all(technical_first(words) == [] for words in [*COLUMNS.values(), *METRIC_WORDS.values()])


def test_a_technical_name_before_its_words_or_a_raw_key_is_found():
    assert technical_first("the input scale w_in of a site") == []
    assert technical_first("w_in = 0.3, the input scale") != []  # the name first
    assert technical_first("Its w_in is low. The input scale says so.") != []  # the words in another sentence
    assert technical_first("shown per roc_auc") != [] and technical_first("the config.rounds differ") != []
    assert technical_first("q: Benjamini–Hochberg over all cells") != []
    assert technical_first("scaled_w_in and w_inner are other words") == []  # whole names only
