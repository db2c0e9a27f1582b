"""The alignments a process keeps (`data_adapters/alignment/cache.py`): one reference checked and
loaded many times (a check-up's runs) is aligned once, and a file changed on disk, other options
or another dictionary are aligned anew."""

import os
from pathlib import Path

import pytest

from data_adapters import check_reference, inspect_data, load_federation
from data_adapters.alignment import align, cache
from data_adapters.mapping.dictionary import FORMAT
from fedcore.execution import processes
from test_data_csv import ref, rows, write


@pytest.fixture
def alignments(monkeypatch):
    """How many alignments were made (each `Alignment` constructed), from an empty cache."""
    cache.forget()
    made = []
    original = align.Alignment.__init__

    def counted(self, *args, **kwargs):
        made.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(align.Alignment, "__init__", counted)
    yield made
    cache.forget()


@pytest.fixture
def two_sites(tmp_path):
    return write(tmp_path, "north.csv", rows(30, 1)), write(tmp_path, "south.csv", rows(40, 2))


def test_a_check_up_s_checks_and_loads_of_one_reference_align_once(two_sites, alignments):
    reference = check_reference(ref(*two_sites))
    for seed in range(3):  # a check-up: every run checks its reference, then loads it with its seed
        check_reference(reference)
        load_federation(reference, seed)
    assert inspect_data(reference).sites[0]["rows"] == 30
    assert len(alignments) == 1


def test_a_file_changed_on_disk_is_read_again(two_sites, alignments):
    north, south = two_sites
    assert inspect_data(ref(north, south)).sites[0]["rows"] == 30
    write(Path(north).parent, "north.csv", rows(36, 1))
    assert inspect_data(ref(north, south)).sites[0]["rows"] == 36  # the new rows, not the kept alignment
    assert len(alignments) == 2


def test_other_options_or_another_dictionary_are_aligned_anew(two_sites, alignments):
    north, south = two_sites
    assert set(inspect_data(ref(north, south)).features) == {"age", "sex", "chol", "smoker"}
    assert set(inspect_data(ref(north, south, exclude=["chol"])).features) == {"age", "sex", "smoker"}
    assert "age" in load_federation(ref(north, south), 0).feature_names
    assert len(alignments) == 2  # the plain reading was kept, the excluded one made anew
    renamed = {"format": FORMAT, "sites": {site: {"rename": {"age": "age_years"}} for site in ("north", "south")}}
    federation = load_federation(ref(north, south), 0, dictionary=renamed)
    assert "age_years" in federation.feature_names and "age" not in federation.feature_names
    assert len(alignments) == 3


def test_files_fixed_after_an_error_are_read_again(tmp_path, alignments):
    north = write(tmp_path, "north.csv", rows(30, 1))
    south = write(tmp_path, "south.csv", rows(40, 2), header="age,sex,chol,smoker,result")  # no target
    with pytest.raises(Exception, match="no target column 'outcome'"):
        load_federation(ref(north, south), 0)
    write(tmp_path, "south.csv", rows(40, 2))
    assert inspect_data(ref(north, south)).ok


def test_files_and_folders_are_fingerprinted_and_a_large_folder_is_never_kept(tmp_path, monkeypatch):
    folder = tmp_path / "hospital"
    folder.mkdir()
    for k in range(3):
        (folder / f"site{k}.data").write_text("1,2\n")
    options = {"source": "heart", "reader": {"path": str(folder)}}
    first = cache._key(options, [str(folder)])
    assert first is not None and first == cache._key(options, [str(folder)])
    (folder / "site1.data").write_text("1,2,3\n")  # one file inside changed
    assert cache._key(options, [str(folder)]) != first
    assert cache._key(options, [str(tmp_path / "absent.csv")]) is None  # nothing on disk: never kept
    monkeypatch.setattr(cache, "MAX_FOLDER_ENTRIES", 2)
    assert cache._key(options, [str(folder)]) is None


def test_a_simulation_s_workers_are_closed_only_by_the_process_that_started_them():
    """A worker forked while an earlier simulation was still uncollected holds a copy of it; its
    finalizer must not join the other process's children (it did: 'can only join a child process')."""

    class Pipe:
        closed = False

        def send(self, message):
            raise AssertionError("a process that did not start the workers wrote to their pipe")

        def close(self):
            self.closed = True

    class Worker:
        def join(self, timeout=None):
            raise AssertionError("can only join a child process")

    pipe = Pipe()
    processes._close([pipe], [Worker()], owner=os.getpid() + 1)
    assert not pipe.closed
    with pytest.raises(AssertionError, match="pipe"):
        processes._close([pipe], [Worker()], owner=os.getpid())
