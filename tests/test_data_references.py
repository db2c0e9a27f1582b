"""Data references (string and JSON forms), early validation in resolve_spec, and the CLI:
`inspect`, data flags, and one end-to-end run per new tabular source."""

import json
from pathlib import Path

import pytest

from data_adapters import (
    check_reference,
    describe_reference,
    normalize_reference,
    parse_reference,
    reference_dict,
)
from application.cli import main
from fedcore.errors import DataError
from application.runner import resolve_spec
from fedcore.store import RunStore

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "assets" / "sample_sites").glob("synthetic_*.csv"))


def test_the_string_and_object_forms_mean_the_same():
    text = ("csv:a.csv,b.csv,target=outcome,exclude=id,exclude=ward,kinds=ca:categorical,"
            "missing_indicators=yes,split=dirichlet:0.3,sites=5,inject=flip:a")
    source, options = parse_reference(text)
    assert source.name == "csv"
    assert options == {"files": ["a.csv", "b.csv"], "target": "outcome", "exclude": ["id", "ward"],
                       "kinds": {"ca": "categorical"}, "missing_indicators": True, "split": "dirichlet:0.3",
                       "sites": 5, "inject": ["flip:a"]}
    assert parse_reference({"source": "csv", **options})[1] == options
    assert reference_dict(text)["files"] == ["a.csv", "b.csv"]
    assert parse_reference("csv:only.csv,target=y")[1]["files"] == ["only.csv"]  # a list even for one file


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nowhere:x", "Unknown data source 'nowhere'. Available: demo, csv, heart, har, vehicle, npz, idx, images, synthetic_scans."),
        ({"files": ["a.csv"]}, "Unknown data source ''"),
        ("demo:colour=blue", "Data source 'demo' does not understand 'colour=blue'. Options: data_seed=..., standardization=..."),
        ({"source": "heart", "path": "x", "target": "num"}, "Data source 'heart' does not understand 'target'."),
        ("demo:somefile.csv", "Data source 'demo' does not understand 'somefile.csv' (it reads no files)."),
        ("csv:a.csv", "Data source 'csv' needs target."),
        ("csv:target=y", "Data source 'csv' needs files (e.g. csv:PATH)."),
        ("npz:a.npz,sites=many", "Data option sites must be a int, not 'many'."),
        ({"source": "npz", "path": "a.npz", "sites": "4"}, "Data option sites must be a int, not '4'."),
        ("csv:a.csv,target=y,missing_indicators=perhaps", "Data option missing_indicators must be true or false"),
        ("csv:a.csv,target=y,kinds=ca", "Data option kinds is written kinds=column:value, not 'ca'."),
        ("heart:a,b", "Data option path takes one value, not 2."),
        (["csv"], "A data reference is a string or an object with a 'source', not list."),
    ],
)
def test_bad_references_are_named(ref, message):
    with pytest.raises(DataError) as error:
        parse_reference(ref)
    assert message in str(error.value)


def test_normalizing_keeps_the_form_and_makes_paths_absolute(monkeypatch, shared_data):
    monkeypatch.chdir(shared_data)
    assert normalize_reference("demo:standardization=site") == "demo:standardization=site"
    assert normalize_reference("heart:heart_disease/canonical") == f"heart:{shared_data / 'heart_disease' / 'canonical'}"
    as_object = normalize_reference({"source": "csv", "files": ["heart_disease/heart_disease_4sites.csv"],
                                     "target": "num", "site_column": "site"})
    assert as_object["files"] == [str(shared_data / "heart_disease" / "heart_disease_4sites.csv")]
    json.dumps(as_object)
    with pytest.raises(DataError, match="missing.csv does not exist."):
        normalize_reference("csv:heart_disease/heart_disease_4sites.csv,missing.csv,target=num")
    with pytest.raises(DataError, match="Unknown split 'halves'"):
        normalize_reference("npz:medmnist/breastmnist.npz,split=halves")
    with pytest.raises(DataError, match="Unknown injection 'melt'"):
        normalize_reference("npz:medmnist/breastmnist.npz,inject=melt:site1")


def test_resolve_spec_checks_the_data_before_any_run_exists(tmp_path, shared_data):
    heart = str(shared_data / "heart_disease" / "canonical")
    spec = resolve_spec({"algorithm": "ifedavg", "data": {"source": "heart", "path": heart}})
    assert spec["data"] == {"source": "heart", "path": heart}
    assert resolve_spec({"algorithm": "fedavg"})["data"] == "demo"
    with pytest.raises(DataError, match="does not exist"):
        resolve_spec({"algorithm": "fedavg", "data": f"csv:{tmp_path / 'gone.csv'},target=y"})
    combined = str(shared_data / "heart_disease" / "heart_disease_4sites.csv")
    with pytest.raises(DataError, match="heart_disease_4sites.csv \\(site 'heart_disease_4sites'\\) has no target column 'outcome'"):
        resolve_spec({"algorithm": "fedavg", "data": {"source": "csv", "files": [combined], "target": "outcome"}})
    assert check_reference({"source": "csv", "files": [combined], "target": "num", "site_column": "site"})


def test_describe_reference():
    assert describe_reference("demo") == "demo"
    assert describe_reference({"source": "csv", "files": ["/x/a.csv", "/x/b.csv"], "target": "outcome",
                               "split": "iid", "sites": 3, "inject": ["flip:site1"]}) == \
        "csv: a.csv, b.csv · target outcome · iid × 3 sites · 1 injected"
    assert describe_reference("heart:/data/uci/canonical") == "heart: canonical"


# -- CLI -------------------------------------------------------------------------------------------
def test_inspect_prints_the_heart_disease_alignment_report(shared_data, capsys):
    assert main(["inspect", "--data", f"heart:{shared_data / 'heart_disease' / 'canonical'}"]) == 0
    out = capsys.readouterr().out
    assert "Alignment of 4 sites · target 'num' · classes: no disease, disease" in out
    for line in ("cleveland    processed.cleveland.data    303   303   comma      utf-8     164 (54%)   139 (46%)",
                 "switzerland  processed.switzerland.data  123   123   comma      utf-8     8 (7%)      115 (93%)",
                 "categorical    4  cp (4 values), restecg (3 values), slope (3 values), thal (3 values)",
                 "  switzerland / chol: switzerland's chol is 0 in 100% of its rows",  # the check-up's finding
                 "ca        1.3%       99.0%      95.9%        99.0%"):
        assert line in out
    assert main(["inspect", "--data", f"heart:{shared_data / 'heart_disease' / 'canonical'}", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sites"][3]["rows"] == 200


def test_inspect_a_federation_without_an_alignment_report(shared_data, capsys):
    assert main(["inspect", "--data", f"npz:{shared_data / 'medmnist' / 'breastmnist.npz'}", "--split", "dirichlet:1",
                 "--sites", "3", "--inject", "stamp:site1"]) == 0
    out = capsys.readouterr().out
    assert "3 sites · input 1 × 28 × 28" in out and "Server test set: 156 rows." in out
    assert "site1 / –: stamp: a 7×7 smiley stamped at row 1, column 1" in out


def test_inspect_exits_2_when_the_files_do_not_combine(tmp_path, capsys):
    (tmp_path / "a.csv").write_text("x,y\n" + "1,0\n2,1\n" * 15)
    (tmp_path / "b.csv").write_text("z,y\n" + "1,0\n2,1\n" * 15)
    assert main(["inspect", "--data", f"csv:{tmp_path / 'a.csv'},{tmp_path / 'b.csv'}", "--target", "y"]) == 2
    assert "Errors (1):\n  - No feature column is present at every site" in capsys.readouterr().out


def run_cli(store, *args):
    return main(["run", "--store", str(store), "-q", "--rounds", "2", *args])


def test_csv_sites_train_end_to_end_and_the_flags_land_in_the_spec(tmp_path, capsys):
    files = ",".join(str(path) for path in SAMPLES)
    assert run_cli(tmp_path, "-a", "ifedavg", "--data", f"csv:{files}", "--target", "diabetes",
                   "--kind", "family_history=binary", "--missing-indicators", "--inject", "flip:synthetic_west_clinic") == 0
    out = capsys.readouterr().out
    assert "synthetic_east_clinic" in out and "worst site" in out
    (run,) = RunStore(tmp_path).runs()
    assert run.status.state == "done"
    data = run.spec.data
    assert data["source"] == "csv" and data["target"] == "diabetes" and data["missing_indicators"] is True
    assert data["kinds"] == {"family_history": "binary"} and all(Path(f).is_absolute() for f in data["files"])
    federation = run.federation
    assert "bmi (missing)" in federation.feature_names
    assert federation.ground_truth[0].kind == "label_flip"
    assert main(["list", "--store", str(tmp_path)]) == 0
    assert "csv: synthetic_east_clinic.csv, synthetic_north_clinic.csv" in capsys.readouterr().out


def test_heart_disease_trains_end_to_end(tmp_path, shared_data, capsys):
    assert run_cli(tmp_path, "-a", "ifedavg", "--data", f"heart:{shared_data / 'heart_disease' / 'canonical'}",
                   "--inject", "offset:va:chol:3", "--inject", "mnar:hungarian:thal") == 0
    (run,) = RunStore(tmp_path).runs()
    summary = run.summary
    assert set(summary.sites) == {"cleveland", "hungarian", "switzerland", "va"}
    assert 0 < summary.mean["f1"] <= 1
    # The injected truth reaches the detection report (with 4 sites no mark can be significant).
    assert [(e.site, e.feature) for e in summary.detection.injected] == [
        ("hungarian", "thal=3"), ("va", "chol")]
    assert "switzerland" in capsys.readouterr().out


def test_har_by_subject_trains_end_to_end(tmp_path, shared_data, capsys):
    har = shared_data / "uci_har" / "uci_har_time265_by_subject.csv.gz"
    assert run_cli(tmp_path, "-a", "ifedavg", "--data", f"har:{har}") == 0
    (run,) = RunStore(tmp_path).runs()
    assert len(run.summary.sites) == 30 and run.federation.input_shape == [265]
    assert run.load_arrays(2)["b_in"].shape == (30, 265)
    assert run.summary.mean["f1"] > 0.5  # six activities; chance is about 0.17


def test_an_image_federation_is_refused_by_a_tabular_algorithm_with_a_clear_message(tmp_path, shared_data, capsys):
    npz = shared_data / "medmnist" / "breastmnist.npz"
    assert run_cli(tmp_path, "-a", "ifedavg", "--data", f"npz:{npz}") == 2
    err = capsys.readouterr().err
    assert "holds images (1×28×28); iFedAvg trains tables only. For images use: " in err
    offered = set(err.split("For images use: ")[1].split(".")[0].split(", "))
    assert {"local", "centralized", "fedavg", "fedbn", "indisco-gm"} <= offered and "apfl" not in offered
    assert "Traceback" not in err


def test_typed_options_of_a_text_reference_stay_typed_when_flags_are_merged(tmp_path):
    from data_adapters import reference_dict

    assert reference_dict("synthetic_scans:images=120,size=16") == {"source": "synthetic_scans", "images": 120,
                                                                    "size": 16}
    assert run_cli(tmp_path, "-a", "fedavg", "--data", "synthetic_scans:images=120,size=16", "--split", "iid",
                   "--sites", "3", "--rounds", "1") == 0
