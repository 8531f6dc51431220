"""In-process tests of `storlab results list|show|compare|export|delete|tag`."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "results"))

import rundoc  # noqa: E402
from storlab import store
from storlab.cli.main import main


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "results.db"
    monkeypatch.setenv("STORLAB_STORE", str(path))
    return path


@pytest.fixture
def filled(db):
    sweep = rundoc.bs_sweep(sizes=(4096, 65536, 1 << 20))
    for d in sweep:
        store.save(d, db, tags=["sweep"])
    odd = rundoc.interrupted(rundoc.make_run(seed=77, rw="randrw", kernel="6.1.0",
                                            started_at="2026-11-22T09:00:00.000Z"))
    store.save(odd, db, note="stopped by hand")
    return sweep, odd


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_every_run_with_incomplete_marked(filled, capsys):
    sweep, odd = filled
    code, out, err = cli(capsys, "results", "list")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["run", "started", "(UTC)"]
    assert len(lines) == 5
    assert lines[-1].startswith(odd["run_id"][:8]) and " NO " in lines[-1]
    assert "stopped by hand" in lines[-1]
    assert "64KiB" in out and "1MiB" in out


def test_list_filters_and_json(filled, capsys):
    sweep, odd = filled
    code, out, _ = cli(capsys, "results", "list", "--with-tag", "sweep", "--json")
    assert code == 0
    assert [r["run_id"] for r in json.loads(out)] == [d["run_id"] for d in sweep]
    code, out, _ = cli(capsys, "results", "list", "--since", "2026-11-22", "--json")
    assert [r["run_id"] for r in json.loads(out)] == [odd["run_id"]]
    code, out, _ = cli(capsys, "results", "list", "--limit", "2", "--json")
    assert len(json.loads(out)) == 2
    code, out, err = cli(capsys, "results", "list", "--with-tag", "nothing")
    assert code == 0 and out == "" and "no stored runs" in err


def test_show_prints_environment_job_and_table(filled, capsys):
    sweep, _ = filled
    code, out, _ = cli(capsys, "results", "show", sweep[1]["run_id"][:10])
    assert code == 0
    assert f"run {sweep[1]['run_id']}" in out
    assert "kernel 6.18.44" in out and "bs=64KiB" in out and "tags: sweep" in out
    assert "bw MiB/s" in out
    code, out, _ = cli(capsys, "results", "show", sweep[1]["run_id"], "--json")
    assert json.loads(out) == sweep[1]


def test_show_reads_a_json_result_file(tmp_path, db, capsys):
    doc = rundoc.make_run(seed=3)
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    code, out, _ = cli(capsys, "results", "show", str(f))
    assert code == 0 and doc["run_id"] in out


def test_compare_prints_ratios_and_warnings(filled, capsys):
    sweep, odd = filled
    code, out, _ = cli(capsys, "results", "compare", sweep[0]["run_id"][:8], odd["run_id"][:8])
    assert code == 0
    assert "x" in out.splitlines()[1]
    assert "WARNING" in out and "kernel differs" in out and "incomplete" in out
    code, out, _ = cli(capsys, "results", "compare", sweep[0]["run_id"], sweep[2]["run_id"], "--json")
    cmp = json.loads(out)
    assert cmp["job_differences"] == [{"option": "bs", "values": [4096, 1 << 20]}]


def test_compare_needs_two_runs(filled, capsys):
    sweep, _ = filled
    code, _, err = cli(capsys, "results", "compare", sweep[0]["run_id"])
    assert code == 2 and "at least two" in err


def test_export_formats(filled, capsys, tmp_path):
    sweep, _ = filled
    code, out, _ = cli(capsys, "results", "export", "--with-tag", "sweep", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [int(r["bs"]) for r in rows] == [4096, 65536, 1 << 20]
    code, out, _ = cli(capsys, "results", "export", sweep[0]["run_id"])
    assert json.loads(out) == sweep[0]
    dest = tmp_path / "out.md"
    code, out, err = cli(capsys, "results", "export", "--with-tag", "sweep", "-f", "md", "-o", str(dest))
    assert code == 0 and out == "" and "wrote 3 run(s)" in err
    assert dest.read_text().startswith("| run |")


def test_export_openmetrics_of_one_run_or_every_run_a_filter_selects(filled, capsys, tmp_path):
    parser = pytest.importorskip("prometheus_client.openmetrics.parser",
                                 reason="prometheus-client not installed (pip install prometheus-client)")
    sweep, odd = filled

    def run_ids(text: str) -> set[str]:
        fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
        return {s.labels["run_id"] for s in fams["storlab_bandwidth_bytes_per_second"].samples}

    code, out, err = cli(capsys, "results", "export", "--with-tag", "sweep", "--format", "openmetrics")
    assert code == 0 and err == "" and out.endswith("# EOF\n")
    assert run_ids(out) == {d["run_id"] for d in sweep}
    code, out, _ = cli(capsys, "results", "export", "last", "-f", "openmetrics")
    assert code == 0 and run_ids(out) == {odd["run_id"]}
    dest = tmp_path / "runs.om"
    code, out, err = cli(capsys, "results", "export", "--since", "2026-11-01", "-f", "openmetrics", "-o", str(dest))
    assert code == 0 and out == "" and "wrote 4 run(s) as openmetrics" in err
    assert run_ids(dest.read_text()) == {d["run_id"] for d in [*sweep, odd]}


def test_export_refuses_an_unknown_format_in_one_line(filled, capsys):
    code, out, err = cli(capsys, "results", "export", "last", "-f", "prometheus")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "openmetrics" in err and "format" in err


def test_export_needs_a_selection(filled, capsys):
    code, _, err = cli(capsys, "results", "export")
    assert code == 2 and "name the runs" in err
    code, _, err = cli(capsys, "results", "export", "abc", "--with-tag", "x")
    assert code == 2 and "not both" in err


def test_tag_note_and_delete(filled, capsys, db):
    sweep, odd = filled
    rid = sweep[0]["run_id"]
    code, out, err = cli(capsys, "results", "tag", rid[:8], "nvme", "baseline", "--note", "fw 2.1")
    assert code == 0 and out == "" and "baseline, nvme, sweep" in err
    s = store.summary(rid, db)
    assert s["tags"] == ["baseline", "nvme", "sweep"] and s["note"] == "fw 2.1"
    code, _, err = cli(capsys, "results", "tag", rid[:8], "nvme", "--remove")
    assert store.summary(rid, db)["tags"] == ["baseline", "sweep"]
    code, _, err = cli(capsys, "results", "tag", rid[:8])
    assert code == 2 and "--note" in err
    code, out, err = cli(capsys, "results", "delete", rid[:8], odd["run_id"][:8])
    assert code == 0 and "deleted 2 run(s)" in err
    assert len(store.list_runs(db)) == 2


def test_unknown_and_ambiguous_runs_are_usage_errors(filled, capsys):
    code, _, err = cli(capsys, "results", "show", "ffffffff")
    assert code == 2 and "no stored run matches 'ffffffff'" in err
    assert len(err.strip().splitlines()) == 1


def test_explicit_store_option_wins_over_environment(tmp_path, db, capsys):
    other = tmp_path / "other.db"
    store.save(rundoc.make_run(seed=5), other)
    code, out, _ = cli(capsys, "results", "list", "--store", str(other), "--json")
    assert len(json.loads(out)) == 1
    code, out, _ = cli(capsys, "results", "--store", str(other), "list", "--json")
    assert len(json.loads(out)) == 1
    code, out, err = cli(capsys, "results", "list", "--json")   # the environment's store: never saved to
    assert (code, out) == (2, "") and "does not exist" in err and not db.exists()


def _with_passes(doc, figures):
    """`doc` with its one phase repeated as passes of (MiB/s, seconds)."""
    import copy

    base = doc["phases"][0]
    doc["phases"] = []
    for n, (mib_s, secs) in enumerate(figures, start=1):
        p = copy.deepcopy(base)
        d = p[[k for k in ("read", "write") if k in p][0]]
        d.update(bytes=int(mib_s * (1 << 20) * secs), seconds=secs, bw_bytes=mib_s * (1 << 20))
        p["pass"] = n
        doc["phases"].append(p)
    return doc


def test_list_bandwidth_is_the_pass_mean_and_says_so(db, capsys):
    # the README's two passes: 206.9 MiB/s over 9.90 s and 1,135.5 MiB/s over 1.80 s. The pass mean
    # is 671.2 MiB/s; bytes over seconds of both (what the column showed, unnamed) is 349.8 MiB/s
    doc = _with_passes(rundoc.make_run(rw="write", seed=5), [(206.9, 9.90), (1135.5, 1.80)])
    store.save(doc, db)
    code, out, _ = cli(capsys, "results", "list")
    header, row = out.splitlines()
    assert "write MiB/s (pass mean)" in header and "read MiB/s (pass mean)" in header
    assert "p99 us (worst phase)" in header
    assert "671" in row and "349" not in row and "350" not in row
    (s,) = json.loads(cli(capsys, "results", "list", "--json")[1])
    assert s["write_bw_bytes_pass_mean"] / (1 << 20) == pytest.approx(671.2)
    assert s["write_bw_bytes"] / (1 << 20) == pytest.approx(349.8, abs=0.1)   # the blend, kept in JSON
    assert (s["write_phases"], s["write_passes"]) == (1, 2)


def test_list_names_several_phases_instead_of_blending_them(db, capsys):
    doc = rundoc.make_run(rw="write", phases=["seqwrite-1m", "randwrite-4k"], seed=6)
    for p, rw in zip(doc["phases"], ("write", "randwrite")):
        p["rw"] = rw
    store.save(doc, db)
    code, out, _ = cli(capsys, "results", "list")
    row = out.splitlines()[1]
    assert "2 phases" in row
    (s,) = json.loads(cli(capsys, "results", "list", "--json")[1])
    assert s["write_phases"] == 2 and s["write_bw_bytes_pass_mean"] is None and s["read_phases"] == 0


def test_listing_before_the_first_run_is_not_an_error(tmp_path, monkeypatch, capsys):
    # the default store (no --store, no $STORLAB_STORE) appears with the first stored run
    monkeypatch.delenv("STORLAB_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    code, out, err = cli(capsys, "results", "list")
    assert code == 0 and "no stored runs yet" in err and not (tmp_path / "xdg").exists()
    code, out, _ = cli(capsys, "results", "list", "--json")
    assert (code, json.loads(out)) == (0, [])


# -- `last` and `last~N`: the store's one resolver (store.parse_last, Store.resolve) ------------------
def test_last_and_last_n_name_runs_newest_first(filled, capsys, db):
    sweep, odd = filled   # odd started last; the sweep's runs before it, oldest first
    newest_first = [odd, *reversed(sweep)]
    for n, doc in enumerate(newest_first):
        for selector in ((f"last~{n}", "last") if n == 0 else (f"last~{n}",)):
            code, out, _ = cli(capsys, "results", "show", selector, "--json")
            assert code == 0 and json.loads(out)["run_id"] == doc["run_id"], selector
    code, out, _ = cli(capsys, "results", "show", "last")
    assert code == 0 and f"run {odd['run_id']}" in out and "note: stopped by hand" in out


def test_compare_and_tag_take_selectors(filled, capsys, db):
    sweep, odd = filled
    code, out, _ = cli(capsys, "results", "compare", "last~1", "last", "--json")
    assert code == 0
    assert json.loads(out)["runs"] == [sweep[-1]["run_id"], odd["run_id"]]
    code, _, err = cli(capsys, "results", "tag", "last~2", "picked")
    assert code == 0 and "picked" in err
    assert "picked" in store.summary(sweep[1]["run_id"], db)["tags"]
    assert "picked" not in store.summary(odd["run_id"], db)["tags"]
    code, out, _ = cli(capsys, "results", "export", "last", "last~3")
    assert code == 0 and [d["run_id"] for d in json.loads(out)] == [odd["run_id"], sweep[0]["run_id"]]
    code, _, err = cli(capsys, "results", "delete", "last")
    assert code == 0 and odd["run_id"][:8] in err
    assert store.summary("last", db)["run_id"] == sweep[-1]["run_id"]


@pytest.mark.parametrize("selector, says", [
    ("last~x", "'last~x' is not a run selector; allowed: a run id, a unique prefix of one, last"),
    ("last~-1", "'last~-1' is not a run selector"),
    ("last~", "'last~' is not a run selector"),
    ("last~4", "last~4: the store"),
    ("last~99999999999999999999999", "last~99999999999999999999999: the store"),   # beyond SQLite's integers
])
def test_bad_selectors_are_one_line_naming_the_argument(filled, capsys, selector, says):
    for argv in (("results", "show", selector), ("results", "compare", "last", selector),
                 ("results", "tag", selector, "x"), ("report", selector, "-o", "r.html")):
        code, out, err = cli(capsys, *argv)
        assert code == 2 and out == "", argv
        assert says in err and len(err.strip().splitlines()) == 1, (argv, err)
    if selector == "last~4":   # 4 runs stored: last .. last~3
        assert "holds 4 run(s); allowed: last, last~1 .. last~3" in err


def test_a_file_named_like_a_selector_is_read_with_a_path(tmp_path, filled, capsys, monkeypatch):
    doc = rundoc.make_run(seed=9)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "last").write_text(json.dumps(doc))
    code, out, _ = cli(capsys, "results", "show", "./last", "--json")
    assert code == 0 and json.loads(out)["run_id"] == doc["run_id"]
    code, out, _ = cli(capsys, "results", "show", "last", "--json")   # the selector, not the file
    assert code == 0 and json.loads(out)["run_id"] == filled[1]["run_id"]


def test_last_in_an_empty_store_says_so(tmp_path, capsys):
    path = tmp_path / "empty.db"
    store.Store(path).close()
    code, _, err = cli(capsys, "results", "show", "last", "--store", str(path))
    assert code == 2 and f"last: the store {path} holds no runs yet" in err


def test_show_and_compare_read_fixed_buffers_of_either_release(tmp_path, db, capsys):
    """`results show` says whether io_uring registered its buffers against the mode asked for; a
    run of an earlier release recorded the switch as true/false (false: never registered) and
    compares like for like with `on`/`off`, not as a difference."""
    from storlab.output.compare import compare

    def run(mode, registered, seed):
        doc = rundoc.make_run(seed=seed, engine="io_uring", qd=8, extra_job={"uring.fixed_buffers": mode})
        doc["environment"]["io_uring"].update(
            setup_flags=["SINGLE_ISSUER", "DEFER_TASKRUN"] + (["FIXED_BUFFERS"] if registered else []),
            fixed_buffers=registered, requested={"uring.fixed_buffers": mode})
        return doc

    new_off, old_off, new_auto = run("off", False, 1), run(False, False, 2), run("auto", True, 3)
    for doc, line in ((new_off, "io_uring: buffers not registered (uring.fixed_buffers = off); "
                                "set-up flags SINGLE_ISSUER DEFER_TASKRUN"),
                      (old_off, "io_uring: buffers not registered (uring.fixed_buffers = off); "
                                "set-up flags SINGLE_ISSUER DEFER_TASKRUN"),
                      (new_auto, "io_uring: buffers registered (uring.fixed_buffers = auto); "
                                 "set-up flags SINGLE_ISSUER DEFER_TASKRUN FIXED_BUFFERS")):
        f = tmp_path / f"{doc['run_id']}.json"
        f.write_text(json.dumps(doc))
        code, out, _ = cli(capsys, "results", "show", str(f))
        assert code == 0 and line in out.splitlines(), out
    differences = lambda docs: [d["option"] for d in compare(docs)["job_differences"]]  # noqa: E731
    assert "uring.fixed_buffers" not in differences([new_off, old_off])
    assert "uring.fixed_buffers" in differences([old_off, new_auto])


def test_show_prints_each_kinds_own_table(tmp_path):
    """A stored kvcache document is shown with its own table (the one `storlab kvcache` printed),
    not only its header."""
    store_db = tmp_path / "s.db"
    cache = Path("/dev/shm") / f"storlab-show-{tmp_path.name}"
    cache.mkdir()
    try:
        r = subprocess.run([sys.executable, "-m", "storlab", "kvcache", "--cache-dir", str(cache), "--option", "1",
                            "--users", "2", "--duration", "1s", "--scale", "0.01", "--trials", "1",
                            "--inter-option-delay", "0", "--store", str(store_db), "-q"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    finally:
        cache.rmdir()
    r = subprocess.run([sys.executable, "-m", "storlab", "results", "show", "last", "--store", str(store_db)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "kind kvcache" in r.stdout and "tokens" in r.stdout.split("kind kvcache", 1)[1], r.stdout
