"""The operation-mix phase of `storlab meta --mix` (measure/opmix.py): real runs on /dev/shm. The
shares each operation gets lie within a binomial tolerance of the asked ones, a delete re-creates
its file so the tree keeps every file, every file is removed at the end, a failing operation
names its path, bad mix text is refused in one line; under mpiexec the ranks' mixes merge."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from storlab.cli.main import main
from storlab.jobs import meta_options
from storlab.jobs.options import OptionError
from storlab.measure import meta, stats
from storlab.measure.benchmark import PhaseHooks
from storlab.measure.opmix import merge_mix
from storlab.output import meta_table
from storlab.schemas import validate
from test_mpi_meta import leftovers, meta_run, mpi

ASKED = "read=40,write=30,stat=20,delete=5,list=5"


def values(**over):
    return meta_options.resolve_meta_options(over)


def files_below(root: str) -> dict[str, int]:
    """Files (relative path -> size) below root."""
    out = {}
    for d, _dn, fn in os.walk(root):
        for n in fn:
            out[os.path.relpath(os.path.join(d, n), root)] = os.path.getsize(os.path.join(d, n))
    return out


def mix_of(doc) -> dict:
    (phase,) = [p for p in doc["phases"] if p["name"] == "mix"]
    return phase


def within_binomial(observed: int, n: int, percent: float, sigmas: float = 4.5) -> bool:
    """observed of n draws is within `sigmas` standard deviations of n * p (p = percent / 100)."""
    p = percent / 100
    return abs(observed - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


# -- the mix text -------------------------------------------------------------------------------
def test_mix_text_becomes_a_percentage_per_operation():
    assert meta_options.parse_mix(ASKED) == {"read": 40, "write": 30, "stat": 20, "delete": 5, "list": 5}
    assert meta_options.parse_mix("stat=100") == {"read": 0, "write": 0, "stat": 100, "delete": 0, "list": 0}
    assert meta_options.parse_mix({"read": 50, "write": 50})["write"] == 50   # a TOML table
    assert meta_options.parse_mix(" read = 33.5 , list=66.5")["read"] == 33.5


@pytest.mark.parametrize("text, says", [
    ("read=50,write=40", "add up to 90, not 100"),
    ("read=50,rename=50", "unknown operation 'rename'"),
    ("read=50,read=50", "read given twice"),
    ("read=150,write=-50", "read=150 is not a percentage"),
    ("read=x,write=100", "read=x is not a percentage"),
    ("read=nan,write=100", "is not a percentage"),
    ("read 100", "'read 100' is not OP=PERCENT"),
    ("", "is no mix"),
])
def test_bad_mix_text_is_refused_naming_the_field_and_the_allowed_values(text, says):
    with pytest.raises(OptionError) as e:
        values(mix=text)
    message = str(e.value)
    assert says in message and message.count("\n") == 0
    assert "mix" in message and "read,write,stat,delete,list" in message


def test_bad_mix_on_the_command_line_is_one_line_and_exit_2(shm_dir, capsys):
    rc = main(["meta", "--target", shm_dir, "--mix", "read=50,write=40", "--no-store"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "mix" in err and "not 100" in err
    assert os.listdir(shm_dir) == []


@pytest.mark.parametrize("over, says", [
    ({"mix_ops": 10}, "give --mix too"),
    ({"mix_time": "1s"}, "give --mix too"),
    ({"phases": "create,mix"}, "mix runs exactly when --mix is given"),
    ({"mix": ASKED, "phases": "create,remove"}, "mix runs exactly when --mix is given"),
    ({"mix": ASKED, "phases": "create,mix,stat"}, "in the order create,stat,read,mix,rename"),
])
def test_mix_options_without_a_mix_or_out_of_order_are_refused(over, says):
    with pytest.raises(OptionError, match=says):
        values(**over)


def test_phase_defaults_with_a_mix():
    assert values(mix=ASKED)["phases"] == ("create", "mix", "remove", "rmdir")
    assert values(mix=ASKED, keep=True)["phases"] == ("create", "mix")
    assert values(mix=ASKED, phases="create,stat,read,mix,rename,remove,rmdir")["phases"][3] == "mix"
    spec = meta.meta_spec(values(mix=ASKED, mix_ops=5), "/x")
    assert spec["phases"] == ["mkdir", "create", "remove", "rmdir"]
    assert not set(meta_options.MIX_OPTIONS) & set(spec)     # the engine never sees the mix


# -- runs ---------------------------------------------------------------------------------------
def test_observed_shares_lie_within_a_binomial_tolerance_of_the_asked_ones(shm_dir):
    threads, per_thread = 2, 5000
    v = values(target=shm_dir, threads=threads, files=200, mix=ASKED, mix_ops=per_thread, depth=1, fanout=3)
    doc = meta.run_meta(v)
    assert doc["complete"] is True, doc["error"]
    phase = mix_of(doc)
    ops = phase["mix"]["operations"]
    n = threads * per_thread
    assert phase["ops"] == n and phase["items_per_worker"] == [per_thread] * threads
    assert sum(ops[op]["ops"] for op in meta_options.MIX_OPERATIONS) == n
    for op, percent in meta_options.parse_mix(ASKED).items():
        assert within_binomial(ops[op]["ops"], n, percent), (op, ops[op]["ops"], n, percent)
        assert ops[op]["share"] == pytest.approx(ops[op]["ops"] / n)
        assert stats.count(ops[op]["lat_hist"]["buckets"]) == ops[op]["ops"]
        assert 0 < ops[op]["lat_ns"]["min"] <= ops[op]["lat_ns"]["p50"] <= ops[op]["lat_ns"]["max"]
    # every delete was followed by its re-create, which is not drawn
    assert ops["recreate"]["ops"] == ops["delete"]["ops"] and ops["recreate"]["share"] is None
    # together: the five drawn operations' histograms added
    assert stats.count(phase["lat_hist"]["buckets"]) == n
    assert phase["lat_ns"]["max"] == max(ops[op]["lat_ns"]["max"] for op in meta_options.MIX_OPERATIONS)
    assert validate(doc) == "meta-1.schema.json"
    assert doc["cleanup"]["files_removed"] == 0 and doc["cleanup"]["error"] is None   # remove did it all
    assert os.listdir(shm_dir) == []


def test_an_operation_asked_at_zero_percent_never_runs(shm_dir):
    doc = meta.run_meta(values(target=shm_dir, files=20, mix="stat=70,list=30", mix_ops=2000))
    ops = mix_of(doc)["mix"]["operations"]
    assert (ops["read"]["ops"], ops["write"]["ops"], ops["delete"]["ops"], ops["recreate"]["ops"]) == (0, 0, 0, 0)
    assert ops["stat"]["ops"] + ops["list"]["ops"] == 2000
    assert mix_of(doc)["bytes"] == 0


class AfterMix(PhaseHooks):
    """What exists in the working folder when the mix phase has ended."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.files: dict[str, dict[str, int]] = {}

    def after_end(self, phase, run, result):
        self.files[phase] = files_below(self.workdir)


def test_deletes_recreate_their_files_so_the_tree_keeps_every_file_and_its_size(shm_dir):
    workdir = os.path.join(shm_dir, "w")
    os.mkdir(workdir)
    hooks = AfterMix(workdir)
    v = values(threads=2, files=30, file_size=3000, dir="shared", depth=1, fanout=2,
               mix="delete=60,write=20,read=20", mix_ops=1500)
    out = meta.run_meta_phase(v, workdir, hooks=hooks)
    assert out["complete"] is True, out["error"]
    assert hooks.files["mix"] == hooks.files["create"]        # the same names, the same sizes
    assert len(hooks.files["mix"]) == 60 and set(hooks.files["mix"].values()) == {3000}
    (phase,) = [p for p in out["phases"] if p["name"] == "mix"]
    ops = phase["mix"]["operations"]
    assert ops["delete"]["ops"] == ops["recreate"]["ops"] > 0
    assert phase["bytes"] == 3000 * (ops["read"]["ops"] + ops["write"]["ops"] + ops["recreate"]["ops"])
    assert files_below(workdir) == {} and os.listdir(workdir) == []


def test_a_time_limit_ends_the_mix_and_every_file_is_removed_after_it(shm_dir):
    doc = meta.run_meta(values(target=shm_dir, threads=2, files=50, mix=ASKED, mix_time="0.3s",
                               phases="create,stat,read,mix,rename,remove,rmdir"))
    assert doc["complete"] is True, doc["error"]
    names = [p["name"] for p in doc["phases"]]
    assert names == ["mkdir", "create", "stat", "read", "mix", "rename", "remove", "rmdir"]
    phase = mix_of(doc)
    assert 0.3 <= phase["seconds"] < 3.0 and phase["mix"]["limit_ops"] is None
    assert all(w["end_s"] >= 0.3 for w in phase["workers"])
    assert os.listdir(shm_dir) == []


def test_with_keep_the_tree_stays_as_create_made_it(shm_dir):
    doc = meta.run_meta(values(target=shm_dir, files=10, mix="delete=100", mix_ops=100, keep=True))
    assert [p["name"] for p in doc["phases"]] == ["mkdir", "create", "mix"]
    assert files_below(doc["job"]["workdir"]) == {f"w0/f0.{i}": 0 for i in range(10)}   # shm_dir goes after


class RemoveOneFile(PhaseHooks):
    """Removes thread 0's only file before the mix starts, as another client might."""

    def __init__(self, workdir: str):
        self.workdir = workdir

    def before_start(self, phase, run):
        if phase == "mix":
            (name,) = [n for n in os.listdir(os.path.join(self.workdir, "w0")) if n.startswith("f0.")]
            self.gone = os.path.join(self.workdir, "w0", name)
            os.unlink(self.gone)


def test_a_failing_operation_names_its_path_and_the_run_still_removes_everything(shm_dir):
    workdir = os.path.join(shm_dir, "w")
    os.mkdir(workdir)
    hooks = RemoveOneFile(workdir)
    out = meta.run_meta_phase(values(files=1, mix="stat=100", mix_ops=10), workdir, hooks=hooks)
    assert out["complete"] is False and out["stop_reason"] == "error"
    assert out["error"] == f"mix stat of {hooks.gone} failed at stat: No such file or directory (os error 2)"
    assert [p["name"] for p in out["phases"]] == ["mkdir", "create", "mix"]
    assert out["cleanup"]["error"] is None and os.listdir(workdir) == []


def test_an_interrupt_stops_the_mix_keeps_its_figures_and_removes_everything(shm_dir):
    class Interrupt(PhaseHooks):
        def poll(self, phase, run):
            if phase == "mix" and run.progress()[2] > 100:
                run.interrupt()

    seen = []
    out = meta.run_meta_phase(values(threads=2, files=50, mix=ASKED, mix_time="60s"), shm_dir, hooks=Interrupt(),
                              progress=lambda *a: seen.append(a), progress_interval_s=0.02)
    assert (out["complete"], out["stop_reason"], out["error"]) == (False, "interrupted", None)
    assert [p["name"] for p in out["phases"]] == ["mkdir", "create", "mix"]
    phase = out["phases"][2]
    assert phase["stop_reason"] == "interrupted" and 100 < phase["ops"] and phase["seconds"] < 30
    assert any(s[0] == "mix" and s[1] > 0 for s in seen)      # the progress line follows the mix
    assert out["cleanup"]["files_removed"] == 100 and out["cleanup"]["error"] is None
    assert os.listdir(shm_dir) == []


def test_the_table_shows_each_operation_below_the_mix(shm_dir, capsys):
    rc = main(["meta", "--target", shm_dir, "--files-per-thread", "20", "--mix", "read=50,list=50",
               "--mix-ops", "400", "--no-store"])
    out, _err = capsys.readouterr()
    assert rc == 0
    lines = out.splitlines()
    assert lines[1].startswith("mix: read=50,list=50 per thread, each 400 ops")
    names = [line.split()[0] for line in lines[3:]]
    assert names[:5] == ["mkdir", "create", "mix", "read", "list"]
    (read_row,) = [line for line in lines if line.startswith("  read ")]
    assert read_row.split()[2] == "(50%)"
    rows = out.split("mix:")[1].split("\n", 1)[1]
    assert "write" not in rows and "recreate" not in rows    # operations asked at 0 % get no row
    assert os.listdir(shm_dir) == []


def test_merged_mix_of_two_parts_adds_counts_and_histograms(shm_dir):
    docs = [meta.run_meta(values(target=shm_dir, files=20, mix=ASKED, mix_ops=300, seed=s)) for s in (1, 2)]
    parts = [mix_of(d)["mix"] for d in docs]
    merged = meta_table.mix_rows({"seconds": 2.0, "mix": merge_mix(parts, 2.0)})
    by_op = {r["name"].split()[0]: r for r in merged}
    for op in ("read", "write", "stat", "delete", "list", "recreate"):
        want = sum(p["operations"][op]["ops"] for p in parts)
        assert by_op[op]["ops"] == want and by_op[op]["ops_per_s"] == want / 2.0
        assert by_op[op]["lat_hist"]["buckets"] == stats.merge(*(p["operations"][op]["lat_hist"]["buckets"]
                                                                  for p in parts))
    assert sum(by_op[op]["share"] for op in ("read", "write", "stat", "delete", "list")) == pytest.approx(1.0)


# -- under mpiexec ------------------------------------------------------------------------------
@mpi
def test_every_ranks_mix_is_merged_and_every_file_removed(shm_dir):
    d = Path(shm_dir)
    p, doc, _ = meta_run(3, ["--target", str(d), "--threads", "2", "--files-per-thread", "40", "--mix", ASKED,
                             "--mix-ops", "500"], d)
    assert p.returncode == 0, p.stderr
    assert doc["complete"] is True, doc["error"]
    phase = mix_of(doc)
    n = 3 * 2 * 500
    assert phase["ops"] == n and phase["items_per_worker"] == [500] * 6
    ops = phase["mix"]["operations"]
    assert sum(ops[op]["ops"] for op in meta_options.MIX_OPERATIONS) == n
    assert phase["mix"]["files_per_worker"] == [40] * 6
    for op, percent in meta_options.parse_mix(ASKED).items():
        assert within_binomial(ops[op]["ops"], n, percent), (op, ops[op]["ops"])
    assert stats.count(phase["lat_hist"]["buckets"]) == n
    assert validate(doc) == "meta-1.schema.json"
    assert [r["ops"] for r in phase["mpi"]["ranks"]] == [1000] * 3
    assert leftovers(d) == []
