"""The command line: run, list, show; bad input; Ctrl-C; a worker killed mid-run."""

import contextlib
import json

import numpy as np
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from application.cli import main
from application.runner import resolve_spec
from fedcore.errors import SpecError
from fedcore.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def cli(store, *args):
    return main([*args[:1], "--store", str(store), *args[1:]])


def only_run(store):
    runs = RunStore(store).runs()
    assert len(runs) == 1
    return runs[0]


def test_run_then_show_json_reports_final_metrics(tmp_path, capsys):
    assert cli(tmp_path, "run", "--algorithm", "fedavg", "--rounds", "3", "--quiet") == 0
    out = capsys.readouterr().out
    assert "mean" in out and "worst site" in out
    run = only_run(tmp_path)
    assert cli(tmp_path, "show", run.id, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "done" and report["algorithm"] == "fedavg"
    assert report["round"] == report["total_rounds"] == 3
    final = report["final"]
    assert len(final["sites"]) == 8 and final["round"] == 3
    assert final["worst"]["f1"] == min(m["f1"] for m in final["sites"].values())
    assert report["spec"]["config"]["lr"] == 0.002  # every default is written down
    assert run.status.execution == "compiled"  # the demo takes the fast path by default ('auto')


def test_list_shows_runs(tmp_path, capsys):
    cli(tmp_path, "run", "-a", "local", "--rounds", "1", "-q")
    capsys.readouterr()
    assert cli(tmp_path, "list") == 0
    out = capsys.readouterr().out
    assert "local" in out and "done" in out and "1/1" in out
    assert cli(tmp_path, "list", "--json") == 0
    assert json.loads(capsys.readouterr().out)[0]["state"] == "done"


def test_several_algorithms_in_one_command(tmp_path, capsys):
    assert cli(tmp_path, "run", "-a", "fedavg,ifedavg", "--rounds", "2", "--local-f-out", "-q") == 0
    specs = {r.spec.algorithm: r.spec for r in RunStore(tmp_path).runs()}
    assert set(specs) == {"fedavg", "ifedavg"}
    assert specs["ifedavg"].params["local_f_out"] is True


def test_spec_file_with_flag_override(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"algorithm": "adafed", "params": {"weight_rule": "power", "power": 3.0},
                                "config": {"rounds": 5, "seed": 4}}))
    assert cli(tmp_path, "run", "--spec", str(spec), "--rounds", "2", "-q") == 0
    stored = only_run(tmp_path).spec
    assert stored.rounds == 2 and stored.seed == 4
    assert stored.params["power"] == 3.0 and stored.params["weight_rule"] == "power"
    toml = tmp_path / "spec.toml"
    toml.write_text('algorithm = "fedbn"\n[config]\nrounds = 1\n')
    assert cli(tmp_path, "run", "--spec", str(toml), "-q") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "-a", "fedsgd"], "Unknown algorithm 'fedsgd'"),
        (["run", "-a", "fedavg", "--mu", "0.1"], "--mu is not a parameter of FedAvg"),
        (["run", "-a", "fedavg", "--rounds", "0"], "rounds must be at least 1"),
        (["run", "-a", "fedavg", "--data", "nowhere"], "Unknown data source 'nowhere'"),
        (["run", "-a", "fedavg", "--data", "demo:colour=blue"], "does not understand 'colour=blue'"),
        (["run", "--spec", "missing.json"], "does not exist"),
        (["run"], "Name an algorithm"),
        (["show", "20990101"], "No run '20990101'"),
    ],
)
def test_bad_input_gets_a_specific_message_and_exit_code_2(tmp_path, capsys, args, message):
    assert cli(tmp_path, *args) == 2
    assert message in capsys.readouterr().err


def test_invalid_spec_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli(tmp_path, "run", "--spec", str(bad)) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_an_unknown_data_source_creates_no_run(tmp_path, capsys):
    assert cli(tmp_path, "run", "-a", "fedavg", "--data", "nowhere") == 2
    assert RunStore(tmp_path).runs() == []


def test_a_bad_data_value_marks_the_run_failed_with_its_message(tmp_path, capsys):
    # Option values are checked by the loader when the run starts; the run records why it failed.
    assert cli(tmp_path, "run", "-a", "fedavg", "--data", "demo:standardization=sideways", "--rounds", "1", "-q") == 2
    assert "Standardization must be one of" in capsys.readouterr().err
    status = only_run(tmp_path).status
    assert status.state == "failed" and "sideways" in status.error


def test_resolve_spec_rejects_unknown_keys_and_parameters():
    with pytest.raises(SpecError, match="Unknown spec keys"):
        resolve_spec({"algorithm": "fedavg", "rounds": 3})
    with pytest.raises(SpecError, match="no parameter lam"):
        resolve_spec({"algorithm": "fedavg", "params": {"lam": 0.3}})
    with pytest.raises(SpecError, match="must be one of"):
        resolve_spec({"algorithm": "adafed", "params": {"weight_rule": "best"}})
    with pytest.raises(SpecError, match="Unknown engine settings"):
        resolve_spec({"algorithm": "fedavg", "config": {"epochs": 3}})
    assert resolve_spec({"algorithm": "apfl"})["config"]["momentum"] == 0.0
    assert resolve_spec({"algorithm": "apfl", "config": {"momentum": 0.3}})["config"]["momentum"] == 0.3


# Rounds no run gets through before its test stops it: with 500 (about 6 s of rounds) a run once
# ended on a loaded CI machine before the Ctrl-C landed, and exited 0 as done.
LONG_RUN = 20_000


def _as_at_a_terminal() -> None:
    """The child's Ctrl-C as at a terminal: SIGINT handled. A suite started in the background by a
    non-interactive shell (`make test &`, a CI runner's `cmd &`) inherits SIGINT ignored, and an
    ignored signal stays ignored across exec: the run trained on through the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def _running_cli(store):
    """`fedcore run` of LONG_RUN rounds in a subprocess, killed when the test leaves (a run the
    test failed to stop must not train on after it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "fedcore", "run", "--store", str(store), "-a", "ifedavg",
         "--rounds", str(LONG_RUN), "--eval-every", "1", "-q"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_as_at_a_terminal,
    )
    try:
        yield process
    finally:
        process.kill()
        process.communicate()


def _wait_for_rounds(store, n, process, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        runs = RunStore(store).runs()
        if runs and len(runs[0].rounds()) >= n:
            return runs[0]
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    raise AssertionError("the run did not make progress")


def test_ctrl_c_stops_cleanly_and_marks_the_run_cancelled(tmp_path):
    with _running_cli(tmp_path) as process:
        run = _wait_for_rounds(tmp_path, 2, process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Cancelled" in err and "Traceback" not in err
    status = run.status
    assert status.state == "cancelled" and "Stopped by the user" in status.error
    assert len(run.rounds()) >= 2


def test_sigterm_also_cancels(tmp_path):
    with _running_cli(tmp_path) as process:
        run = _wait_for_rounds(tmp_path, 1, process)
        process.terminate()
        process.communicate(timeout=60)
    assert process.returncode == 130 and run.status.state == "cancelled"


def test_a_run_killed_mid_way_leaves_a_readable_store(tmp_path, capsys):
    with _running_cli(tmp_path) as process:
        run = _wait_for_rounds(tmp_path, 3, process)
        process.kill()
        process.communicate(timeout=60)
    assert run.status.state == "interrupted"
    records = run.rounds()
    assert len(records) >= 3 and records[-1].round >= 3
    arrays = run.load_arrays(run.array_rounds()[-1])
    assert arrays["b_in"].shape == (8, 12)
    assert cli(tmp_path, "show", run.id, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "interrupted" and report["final"]["round"] >= 3


def test_the_sites_disclosure_policy_is_a_flag_recorded_with_the_run(tmp_path, capsys):
    """--min-count / --dp-epsilon: the spec records the policy, the stored profile every site's
    policy and what it withheld; a minimum below 3 is refused before any run exists."""
    from fedcore.interpret.profile import Profile

    assert cli(tmp_path, "run", "-a", "fedavg", "--rounds", "1", "-q", "--min-count", "400") == 0
    run = only_run(tmp_path)
    assert run.spec.disclosure == {"min_count": 400, "dp_epsilon": None}
    profile = Profile.from_npz(run.load_profile_arrays())
    assert all(p == {"min_count": 400, "dp_epsilon": None} for p in profile.policies.values())
    oak = profile.sites.index("Oak District")  # 340 rows
    assert np.isnan(profile.mean[oak]).all() and profile.withheld["Oak District"]["mean"] == \
        "not shared (fewer than 400 rows)"
    counts = {s.name: s.test_class_counts for s in run.federation.sites}
    assert counts["Oak District"] == [None, None]  # its hold-out's classes too
    assert cli(tmp_path / "bad", "run", "-a", "fedavg", "--rounds", "1", "-q", "--min-count", "2") == 2
    assert "min-count must be at least 3" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists() or not list(RunStore(tmp_path / "bad").runs())
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lr", "nan"], "lr must be a finite number, not nan"),
        (["--lr", "inf"], "lr must be a finite number, not inf"),
        (["--lr=-inf"], "lr must be a finite number, not -inf"),
        (["--weight-decay", "inf"], "weight_decay must be a finite number, not inf"),
        (["-a", "fedprox", "--mu", "nan"], "mu must be a finite number, not nan"),
        (["-a", "fedprox", "--mu=-1"], "mu cannot be negative (-1.0)"),
        (["-a", "apfl", "--alpha", "nan"], "alpha must be a finite number, not nan"),
        (["--hidden", "0"], "hidden: each width must be from 1 to"),
        (["--hidden", "64,0"], "hidden: each width must be from 1 to"),
        (["--dropout", "nan"], "dropout must be a finite number, not nan"),
    ],
)
def test_numbers_that_are_not_finite_or_out_of_range_are_refused_before_a_run_exists(tmp_path, capsys, args, message):
    # The probe: --lr nan created a run that then failed with an internal TypeError (exit 1), and
    # --hidden 0 trained a degenerate model to 'done'.
    algorithm = [] if "-a" in args else ["-a", "fedavg"]
    assert cli(tmp_path, "run", *algorithm, *args, "--rounds", "1", "-q") == 2
    assert message in capsys.readouterr().err
    assert RunStore(tmp_path).runs() == []


@pytest.mark.parametrize(("config", "params"), [({"lr": float("nan")}, {}), ({"lr": "0.1"}, {}), ({"rounds": True}, {}),
                                                ({}, {"mu": float("inf")}), ({}, {"mu": "x"})])
def test_a_spec_file_with_such_numbers_is_refused_too(config, params):
    with pytest.raises(SpecError):
        resolve_spec({"algorithm": "fedprox", "config": config, "params": params})


@pytest.mark.parametrize(("suffix", "text", "message"), [
    (".json", '{"a":' * 100_000 + "1" + "}" * 100_000, "nests objects and lists 100,000 deep (at most 64): not a spec."),
    (".json", '{"algorithm": "fedavg", "config": {"rounds": ' + "9" * 5_000 + "}}",
     "holds a number written with 5,000 characters (at most 40): not a spec."),
    (".toml", "algorithm = 'fedavg'\nrounds = " + "9" * 5_000 + "\n", "cannot be read as a spec (ValueError)"),
    (".toml", "a = " + "[" * 100_000 + "]" * 100_000 + "\n", "cannot be read as a spec (RecursionError)"),
])
def test_a_hostile_spec_file_gets_a_message_and_exit_2_not_a_traceback(tmp_path, capsys, suffix, text, message):
    spec = tmp_path / f"spec{suffix}"
    spec.write_text(text)
    assert cli(tmp_path, "run", "--spec", str(spec)) == 2
    assert message in capsys.readouterr().err


# -- the HTML reports ---------------------------------------------------------------------------------------
def test_checkup_and_show_write_the_dashboards_html_reports(tmp_path, capsys):
    from fedcore.__main__ import html_reports

    out = tmp_path / "reports"
    out.mkdir()
    assert main(["checkup", "--store", str(tmp_path / "runs"), "--data", "demo", "--html", str(out / "checkup.html")],
                reports=html_reports) == 0
    capsys.readouterr()
    report = (out / "checkup.html").read_text(encoding="utf-8")
    # the page's report: the grid and the findings with the data behind them, plotly.js inline (offline)
    assert "<h1>Check-up: demo</h1>" in report and report.count("Plotly.newPlot") >= 5
    assert "Elm Regional" in report and "°F" in report and "<script src=" not in report
    assert cli(tmp_path / "runs", "run", "--algorithm", "fedavg", "--rounds", "2", "--quiet") == 0
    run = only_run(tmp_path / "runs")
    assert main(["show", "--store", str(tmp_path / "runs"), run.id, "--html", str(out / "run.html")],
                reports=html_reports) == 0
    assert f"run {run.id}" in (out / "run.html").read_text(encoding="utf-8")
    # a folder, or no reports to hand (application.cli.main called without them): a message, nothing written
    assert main(["show", "--store", str(tmp_path / "runs"), run.id, "--html", str(out)], reports=html_reports) == 2
    assert "that is a folder" in capsys.readouterr().err
    assert cli(tmp_path / "runs", "show", run.id, "--html", str(out / "none.html")) == 2
    assert "python -m fedcore" in capsys.readouterr().err and not (out / "none.html").exists()


def test_python_m_fedcore_writes_a_checkups_html_report(tmp_path):
    """The same file from the command line: `python -m fedcore` hands the command its reports."""
    store = tmp_path / "runs"
    assert main(["checkup", "--store", str(store), "--data", "demo"]) == 0
    target = tmp_path / "checkup.html"
    done = subprocess.run([sys.executable, "-m", "fedcore", "checkup", "--store", str(store), "--check-up", "latest",
                           "--html", str(target)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Wrote the HTML report" in done.stderr and "<h1>Check-up: demo</h1>" in target.read_text(encoding="utf-8")


def test_checkup_reach_says_what_nothing_found_covers(tmp_path, capsys):
    """`checkup --reach`: per site and continuous column, how far its median would have to sit to
    be reported. Known answer against the check-up's own decisions: a column is found shifted now
    exactly where it sits at least its distance away (to the 0.05-SD grid), and those are the
    significant location cells of the findings; the terminal gets one summary line per site."""
    store = tmp_path / "runs"
    assert main(["checkup", "--store", str(store), "--data", "demo", "--reach", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    reach, sites = out["reach"], out["sites"]
    assert len(reach) == 8 * 9 and {r["site"] for r in reach} == set(sites)
    shifted = {(f["site"], f["feature"]) for f in out["findings"] if f["kind"] == "location"}
    found = {(r["site"], r["feature"]) for r in reach if r["found"]}
    # found shifted: reported as such, or explained by what is reported there (Elm Regional's °F)
    assert shifted and shifted <= found <= shifted | {(f["site"], f["feature"]) for f in out["findings"]}
    assert ("Elm Regional", "temperature") in found - shifted
    for r in reach:
        assert r["distance"] is not None and r["distance"] >= 0.25 and r["beyond"] is None
        assert r["found"] == (abs(r["now"]) >= r["distance"] - 0.05), r
    assert main(["checkup", "--store", str(store), "--check-up", "latest", "--reach"]) == 0
    text = capsys.readouterr().out
    assert "What 'nothing found' covers" in text
    assert all(sum(line.startswith(f"  {site}: ") for line in text.splitlines()) == 1 for site in sites)
    assert main(["checkup", "--store", str(store), "--check-up", "latest"]) == 0
    assert "nothing found' covers" not in capsys.readouterr().out  # only when asked: it costs seconds
