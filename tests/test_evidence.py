"""The evidence report (benchmarks/evidence) rebuilds from its recorded runs: every part imports,
renders its section from the committed results, and says how many of its planned runs it holds;
the committed benchmarks/RESULTS.md is exactly that rebuild."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

EVIDENCE = Path(__file__).resolve().parents[1] / "benchmarks" / "evidence"


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory) -> str:
    output = tmp_path_factory.mktemp("evidence") / "RESULTS.md"
    done = subprocess.run([sys.executable, str(EVIDENCE / "run.py"), "--parts", "--output", str(output)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return output.read_text()


def test_results_md_rebuilds_from_the_recorded_runs(rebuilt):
    headings = re.findall(r"^## (\d)\. ", rebuilt, flags=re.M)
    # 5 and 6: the check-up suite (under each policy); 7: mapping; 8: the data lens where no site differs;
    # 9: the families the detector was never tuned on
    assert headings == ["1", "2", "3", "4", "5", "6", "7", "8", "9"]
    sys.path.insert(0, str(EVIDENCE))
    from common import load_results

    for part in ("paper_tables", "adafed_sims", "fedhealth2_skew", "detection", "checkup_families", "mapping",
                 "random_split_null", "unseen_families"):
        recorded = len(load_results(part))
        assert re.search(rf"_Runs recorded: {recorded} of \d+ planned\._", rebuilt), part


def test_the_committed_report_is_what_the_scripts_make_of_the_recorded_runs(rebuilt):
    """RESULTS.md may not drift from the scripts or the recorded results (only the line saying when
    and where it was generated may differ)."""
    def body(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("Last generated ")]

    assert body(rebuilt) == body((EVIDENCE.parent / "RESULTS.md").read_text())


def test_the_readme_table_of_the_check_up_suite_is_what_its_recorded_cases_give():
    """The README's check-up table (between its markers) is rendered from the recorded cases
    (`checkup_families.py --write`), so it cannot drift from RESULTS.md §5 either."""
    sys.path.insert(0, str(EVIDENCE))
    import checkup_families

    readme = (EVIDENCE.parents[1] / "README.md").read_text()
    block = readme[readme.index(checkup_families.README_BEGIN):readme.index(checkup_families.README_END)]
    expected = checkup_families.readme_table(checkup_families.cached_results(checkup_families.PART,
                                                                            checkup_families.tasks()))
    assert block + checkup_families.README_END == expected
