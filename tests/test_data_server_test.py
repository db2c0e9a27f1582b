"""A table federation's server test set (csv server_test=FILE): read like a site's file, fitted
onto the features the sites decided, standardised with its own statistics, and used by AdaFed's
server_test 'given' from the CLI."""

import re

import numpy as np
import pytest
import torch

from data_adapters import check_reference, describe_reference, inspect_data, load_federation, normalize_reference
from application.cli import main
from fedcore.errors import DataError
from fedcore.store import RunStore

HEADER = "age,sex,ward,outcome"
SERVER_ROWS = 37  # prime: AdaFed's accuracies on the server's rows are multiples of 1/37


def lines(n, seed, shift=0.0, wards=("a", "b", "c")):
    """Rows of a small table whose outcome depends on age; `shift` moves every age (units)."""
    rng = np.random.default_rng(seed)
    return [f"{rng.normal(50 + 10 * (k % 2) + shift, 5):.1f},{'MF'[k % 3 == 0]},{wards[k % len(wards)]},{k % 2}"
            for k in range(n)]


def write(folder, name, rows, header=HEADER):
    path = folder / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


def reorder(rows, order=(3, 2, 1, 0)):
    """The same rows with the columns in another order, and an extra column the sites lack."""
    return [",".join([*(row.split(",")[j] for j in order), "x"]) for row in rows]


@pytest.fixture
def sites(tmp_path):
    return write(tmp_path, "north.csv", lines(60, 1)), write(tmp_path, "south.csv", lines(60, 2))


@pytest.fixture
def server(tmp_path):
    rows = lines(SERVER_ROWS, 3, shift=100.0, wards=("b", "c", "d"))  # other units; a ward no site has
    rows[0] = ",F,b,0"  # missing age
    rows[1] = "150.0,,c,1"  # missing sex
    return write(tmp_path, "server.csv", reorder(rows), header="outcome,ward,sex,age,note")


def ref(sites, server, **options):
    return {"source": "csv", "files": list(sites), "target": "outcome", "server_test": server, **options}


def test_the_server_file_takes_the_sites_features_and_its_own_standardisation(sites, server):
    plain = load_federation({"source": "csv", "files": list(sites), "target": "outcome"})
    federation = load_federation(ref(sites, server))
    # A test set does not change the model: same features, same site tensors as without it.
    assert federation.feature_names == plain.feature_names == ["age", "sex", "ward=a", "ward=b", "ward=c"]
    for with_server, without in zip(federation.sites, plain.sites):
        assert torch.equal(with_server.x_train, without.x_train) and torch.equal(with_server.x_test, without.x_test)
    x, y = federation.server_test
    assert x.shape == (SERVER_ROWS, 5) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert y.tolist() == [k % 2 for k in range(SERVER_ROWS)]  # read by column name, not position
    # Ages 100 units above the sites' are standardised with the server's own mean and SD.
    observed = np.array([150.0] + [float(r.split(",")[3]) for r in open(server).read().splitlines()[3:]])
    assert abs(float(x[1:, 0].mean())) < 0.2 and abs(float(x[1, 0]) - (150 - observed.mean()) / observed.std()) < 1e-4
    assert float(x[0, 0]) == 0.0 and float(x[1, 1]) == 0.5  # missing: continuous -> 0, binary -> 0.5
    assert float(x[0, 1]) == 0.0  # 'F' is coded 0, as at the sites
    wards = x[:, 2:].numpy()
    assert wards[2].tolist() == [0.0, 0.0, 0.0]  # 'd' (row 3): none of the sites' wards
    assert wards[3].tolist() == [0.0, 1.0, 0.0]  # 'b'
    assert federation.preprocessing["server_test"] == {"file": "server.csv", "rows": SERVER_ROWS}
    assert "its own rows' mean and SD" in federation.preprocessing["server_test_standardization"]
    assert any("server.csv (the server's test set): column 'ward' has categories no site has, 'd'" in w
               for w in federation.warnings)
    kept = load_federation(ref(sites, server, standardization="none")).server_test[0]
    assert float(kept[1, 0]) == 150.0  # standardization none keeps the server's units too


def test_missing_indicators_are_the_sites_columns_at_the_server_too(tmp_path, sites, server):
    gappy = lines(60, 4)
    gappy[5] = "52.0,M,,0"  # a missing ward at a site: 'ward (missing)'; age has no gap at any site
    federation = load_federation(ref([sites[0], write(tmp_path, "west.csv", gappy)], server, missing_indicators=True))
    assert federation.feature_names[-1] == "ward (missing)"
    x = federation.server_test[0]
    assert x.shape[1] == federation.n_features and x[:, -1].tolist() == [0.0] * SERVER_ROWS


def test_the_report_lists_the_server_file_beside_the_sites(sites, server):
    report = inspect_data(ref(sites, server))
    assert report.ok and [s["site"] for s in report.sites] == ["north", "south"]
    assert report.server_test == {"file": "server.csv", "rows": SERVER_ROWS, "rows_used": SERVER_ROWS,
                                  "delimiter": ",", "encoding": "utf-8", "class_counts": {"0": 19, "1": 18}}
    assert re.search(r"\(server test\)\s+server.csv\s+37\s+37", report.to_text())


@pytest.mark.parametrize(
    ("header", "edit", "message"),
    [
        ("age,sex,ward,label", None, "server.csv (the server's test set) lacks column(s) the sites have: 'outcome' "
                                     "— the target among them. It needs the target 'outcome' and every feature column"),
        ("Age,sex,outcome,note", None, "lacks column(s) the sites have: 'age' (did you mean 'Age'?), 'ward'. It needs"),
        (HEADER, (4, "51.0,F,a,2"), "the target 'outcome' has value(s) '2' that no site has, at data row(s) 5; "
                                    "the sites' classes: '0', '1'."),
        (HEADER, (4, "51.0,X,a,0"), "the binary column 'sex' has value(s) 'X' besides the sites' 'F', 'M'."),
        (HEADER, (4, "51.0,F,a,0"), None),  # the unedited file fits: the cases above fail for their reason
    ],
)
def test_a_server_file_that_does_not_fit_is_refused_with_the_reason(tmp_path, sites, header, edit, message):
    rows = lines(SERVER_ROWS, 3)
    if edit:
        rows[edit[0]] = edit[1]
    server = write(tmp_path, "server.csv", rows, header=header)
    report = inspect_data(ref(sites, server))
    if message is None:
        assert report.ok, report.errors
        return
    assert any(message in error for error in report.errors), report.errors
    with pytest.raises(DataError, match="cannot be combined") as error:
        load_federation(ref(sites, server))
    assert message in str(error.value)


def test_text_in_a_numeric_feature_and_too_few_rows(tmp_path, sites):
    words = [f"{'old' if k % 2 else 'young'},F,a,{k % 2}" for k in range(SERVER_ROWS)]
    report = inspect_data(ref(sites, write(tmp_path, "words.csv", words)))
    assert "words.csv (the server's test set): column 'age' holds text ('old', 'young') where the sites have " \
           "numbers." in report.errors
    few = inspect_data(ref(sites, write(tmp_path, "few.csv", lines(5, 3))))
    assert "few.csv (the server's test set) has 5 usable rows; it needs at least 20 (min_rows), like a site." \
        in few.errors


def test_the_server_file_in_text_and_object_references(tmp_path, sites, server, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = normalize_reference("csv:north.csv,south.csv,target=outcome,server_test=server.csv")
    assert text == f"csv:{sites[0]},{sites[1]},target=outcome,server_test={server}"  # absolute, for the spec
    assert normalize_reference(ref(["north.csv", "south.csv"], "server.csv"))["server_test"] == server
    assert describe_reference(text) == "csv: north.csv, south.csv · target outcome · server_test=server.csv"
    with pytest.raises(DataError, match=re.escape("elsewhere.csv (server_test) does not exist or is not a file.")):
        check_reference("csv:north.csv,south.csv,target=outcome,server_test=elsewhere.csv")


def test_adafed_scores_the_sites_on_the_given_server_file_from_the_cli(tmp_path, sites, server, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    store = RunStore(tmp_path / "runs")
    code = main(["run", "--store", str(store.root), "-a", "adafed", "--server-test", "given", "--data",
                 "csv:north.csv,south.csv,server_test=server.csv", "--target", "outcome", "--rounds", "3", "-q"])
    assert code == 0, capsys.readouterr().err
    (run,) = store.runs()
    assert run.spec.data["server_test"] == server and run.spec.params["server_test"] == "given"
    assert run.federation.preprocessing.stored["server_test"]["rows"] == SERVER_ROWS
    rounds = run.rounds()
    assert len(rounds) == 3
    for record in rounds:  # accuracies on the server's 37 rows, not on pooled rows or the sites' hold-outs
        for accuracy in [*record.algorithm.site_accuracy.values(), record.algorithm.server_accuracy]:
            assert abs(accuracy * SERVER_ROWS - round(accuracy * SERVER_ROWS)) < 1e-6
    assert run.status.state == "done"


def test_adafed_given_without_a_server_file_says_how_to_give_one(tmp_path, sites, capsys):
    code = main(["run", "--store", str(tmp_path / "runs"), "-a", "adafed", "--server-test", "given", "--data",
                 f"csv:{sites[0]},{sites[1]}", "--target", "outcome", "--rounds", "1", "-q"])
    assert code != 0
    assert "the data's server_test=FILE.csv for CSV sites" in capsys.readouterr().err
