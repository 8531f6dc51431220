"""`storlab report` on stored runs: with no run named it reports the most recent one, and `last~N`
picks an earlier one (the store's selectors, shared with `storlab results`)."""
from __future__ import annotations

import json

import pytest
from storlab import store
from storlab.cli.main import main


@pytest.fixture
def two_runs(tmp_path, monkeypatch, capsys):
    """Two real (tiny) runs stored one after the other; their run ids, oldest first."""
    db = tmp_path / "results.db"
    monkeypatch.setenv("STORLAB_STORE", str(db))
    monkeypatch.chdir(tmp_path)
    ids = []
    for n in range(2):
        assert main(["run", "--target", str(tmp_path / "t.dat"), "--size", "1m", "--rw", "read",
                     "--bs", "64k", "--time", "0.2s", "--json", f"run{n}.json"]) == 0
        ids.append(json.loads((tmp_path / f"run{n}.json").read_text())["run_id"])
    capsys.readouterr()
    return ids


def test_report_without_a_run_renders_the_most_recent_one(two_runs, tmp_path, capsys):
    first, second = two_runs
    assert main(["report", "-o", "r.html"]) == 0
    html = (tmp_path / "r.html").read_text()
    assert second[:8] in html and first[:8] not in html
    assert "wrote r.html" in capsys.readouterr().err


def test_report_last_n_renders_an_earlier_run(two_runs, tmp_path):
    first, second = two_runs
    assert main(["report", "last~1", "-o", "prev.html"]) == 0
    html = (tmp_path / "prev.html").read_text()
    assert first[:8] in html and second[:8] not in html
    assert main(["report", "last", "last~1", "-o", "both.html"]) == 0
    both = (tmp_path / "both.html").read_text()
    assert first[:8] in both and second[:8] in both


def test_report_without_runs_in_an_empty_store_is_one_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "empty.db"
    store.Store(path).close()
    monkeypatch.chdir(tmp_path)
    assert main(["report", "-o", "r.html", "--store", str(path)]) == 2
    err = capsys.readouterr().err
    assert "holds no runs yet" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()
