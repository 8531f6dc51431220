"""Preconditioning (`precondition_method`): the option's forms, fio's sprandom model against fio's own code
and its closed form, the phases a job gets, and runs on a loop device that reach steady state, say
so, record it apart from the job's phases and pass the write-safety gate."""
from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest
from storlab.cli.main import main
from storlab.jobs.fio import translator
from storlab.jobs.job import resolve_job
from storlab.jobs.options import OptionError, parse_value
from storlab.jobs.precondition import DEFAULT_SS, PREFIX, RANDOM_BS, invalid_shares, sprandom_plan
from storlab.jobs.precondition_job import phases
from storlab.jobs.translation import Refusal
from storlab.measure.runner import run_job
from storlab.output.table import render_table
from test_cli_run import run_cli  # tests/ is on sys.path (pytest prepend mode)

MiB = 1 << 20


# --- the option ----------------------------------------------------------------------------------

def test_forms_are_kept_with_both_numbers_of_sprandom():
    assert parse_value("precondition_method", "off") == "off"
    assert parse_value("precondition_method", "Sequential") == "sequential"
    assert parse_value("precondition_method", "sprandom") == "sprandom:0.15:100"     # fio's spr_op, spr_num_regions
    assert parse_value("precondition_method", "sprandom:0.28") == "sprandom:0.28:100"
    assert parse_value("precondition_method", "sprandom:0.07:400") == "sprandom:0.07:400"


@pytest.mark.parametrize("bad", ["on", "sprandom:1", "sprandom:0", "sprandom:0.1:0", "sprandom:x",
                                 "sequential:0.2", "sprandom:0.1:2:3"])
def test_a_bad_value_names_the_option_and_its_forms(bad):
    with pytest.raises(OptionError) as e:
        parse_value("precondition_method", bad)
    assert str(e.value) == (f"precondition_method: {bad!r} is not allowed; use off, sequential, or "
                            f"sprandom[:OP[:REGIONS]] (OP between 0 and 1 exclusive, REGIONS 1 to 10000)")


def test_a_bad_value_on_the_command_line_is_one_line(capsys):
    assert main(["run", "--precondition-method", "fill", "--engine", "null", "--size", "1m", "-q", "--no-store"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "precondition_method: 'fill' is not allowed" in err and "Traceback" not in err


# --- fio's sprandom model ------------------------------------------------------------------------

def test_invalid_shares_are_fios():
    """fio's compute_validity_dist (sprandom.c of fio f5344384, compiled alone) prints these
    invalid shares in 1/10000ths for spr_op 0.15 with 10 regions and 0.28 with 5."""
    assert [round(s * 10_000) for s in invalid_shares(0.15, 10)] == [2479, 2237, 1988, 1730, 1464, 1190,
                                                                      906, 614, 312, 0]
    assert [round(s * 10_000) for s in invalid_shares(0.28, 5)] == [4023, 3201, 2272, 1211, 0]
    assert invalid_shares(0.15, 1) == [0.0]


@pytest.mark.parametrize("op", [0.07, 0.15, 0.28])
def test_invalid_shares_leave_the_over_provisioned_space_invalid(op):
    """Closed form: a device whose logical capacity is all valid has OP / (1 + OP) of its physical
    space invalid; the model's regions average that within its write-amplification approximation."""
    shares = invalid_shares(op, 200)
    assert shares[0] == pytest.approx(1 / (0.5 / op + 0.7), abs=1e-4)   # the greedy GC block: 1/WA
    assert all(a >= b for a, b in zip(shares, shares[1:])) and shares[-1] == 0.0
    assert sum(shares) / len(shares) == pytest.approx(op / (1 + op), rel=0.02)


def test_sprandom_plan_writes_the_range_once_and_the_physical_capacity_in_all():
    blocks = (64 * MiB) // RANDOM_BS
    plan = sprandom_plan(64 * MiB, 0.15, 10)
    per_region = (blocks + -(-blocks * 15 // 100)) // 10
    assert [first for first, _, _ in plan] == [sum(n for _, n, _ in plan[:k]) for k in range(10)]   # contiguous
    assert sum(n for _, n, _ in plan) == blocks                                                      # each block once
    for (_, _, rewritten), (_, new, _) in zip(plan, plan[1:-1]):   # a region: last one's rewrites + its new blocks
        assert rewritten + new == per_region
    total = blocks + sum(inv for _, _, inv in plan)
    assert total == pytest.approx(blocks * 1.15, rel=0.01)         # fio writes the physical capacity once


# --- the phases a job gets -----------------------------------------------------------------------

def test_sequential_mode_fills_twice_in_128k_then_random_4k_writes_until_steady(tmp_path):
    job = resolve_job({"target": [str(tmp_path / "f")], "size": "8m", "rw": "randread", "bs": "1m", "qd": "8",
                       "engine": "io_uring", "precondition_method": "sequential", "precondition_time": "10m"})
    built = phases(job, lambda t, v: pytest.fail("sequential needs no size"))
    assert [p.name for p in built] == [f"{PREFIX}: sequential fill 1/2", f"{PREFIX}: sequential fill 2/2",
                                       f"{PREFIX}: steady state"]
    for p in built:
        (g,) = p.groups
        # where and how the job reaches the target is kept; what it does is not
        assert (g.values["target"], g.values["size"], g.values["qd"], g.values["engine"]) == \
            ((str(tmp_path / "f"),), 8 * MiB, 8, "io_uring")
    assert [(p.groups[0].values["rw"], p.groups[0].values["bs"]) for p in built] == \
        [("write", 128 << 10), ("write", 128 << 10), ("randwrite", 4096)]
    assert built[2].groups[0].values["time"] == 600.0 and built[2].own == DEFAULT_SS
    assert job.phases[0].groups[0].values["rw"] == "randread"   # the job itself is untouched


def test_sprandom_mode_writes_regions_and_invalidates_each_one(tmp_path):
    job = resolve_job({"target": [str(tmp_path / "f")], "offset": "1m", "precondition_method": "sprandom:0.15:4",
                       "ss": "iops:20%", "ss_dur": "2s", "precondition_time": "30s"})
    sized = []
    built = phases(job, lambda t, v: sized.append(t) or 16 * MiB)
    assert sized == [str(tmp_path / "f")]
    names = [p.name for p in built]
    assert names == [f"{PREFIX}: sprandom region 1/4", f"{PREFIX}: sprandom invalidate 1/4",
                     f"{PREFIX}: sprandom region 2/4", f"{PREFIX}: sprandom invalidate 2/4",
                     f"{PREFIX}: sprandom region 3/4", f"{PREFIX}: sprandom invalidate 3/4",
                     f"{PREFIX}: sprandom region 4/4", f"{PREFIX}: steady state"]   # the newest: none invalid
    plan = sprandom_plan(16 * MiB, 0.15, 4)
    regions = [p.groups[0].values for p in built if "region" in p.name]
    rewrites = [p.groups[0].values for p in built if "invalidate" in p.name]
    assert [(v["offset"], v["size"]) for v in regions] == [(MiB + f * 4096, n * 4096) for f, n, _ in plan]
    assert [v["io_size"] for v in rewrites] == [inv * 4096 for _, _, inv in plan[:3]]
    assert all(v["rw"] == "randwrite" and v["random_map"] for v in regions + rewrites)
    # the run set ss: the steady-state phase judges by it
    assert built[-1].own == {"ss": "iops:20%", "ss_dur": 2.0, "ss_ramp": 0.0, "ss_interval": 1.0}


def test_a_limit_shorter_than_the_steady_state_window_is_refused(tmp_path):
    job = resolve_job({"target": [str(tmp_path / "f")], "size": "1m", "precondition_method": "sequential",
                       "precondition_time": "100s"})
    with pytest.raises(OptionError, match=r"^precondition_time: 100 s is shorter than the steady-state check "
                                          r"needs \(ss_ramp 0 s \+ ss_dur 300 s\); allowed: at least 300 s$"):
        phases(job, lambda t, v: 0)


def test_the_job_phases_and_passes_are_reported_without_the_preconditioning():
    """The null engine: preconditioning runs once before all passes, its phases apart."""
    r = run_cli("--engine", "null", "--size", "4m", "--rw", "randread", "--io-size", "1m", "--passes", "2",
                "--precondition-method", "sequential", "--ss", "iops:50%", "--ss-dur", "1s", "--ss-interval", "0.25s",
                "--precondition-time", "20s")
    assert r["rc"] == 0
    doc = r["doc"]
    assert [(p["name"], p["pass"]) for p in doc["phases"]] == [("randread", 1), ("randread", 2)]
    pre = doc["precondition"]
    assert [p["name"] for p in pre["phases"]] == [f"{PREFIX}: sequential fill 1/2", f"{PREFIX}: sequential fill 2/2",
                                                  f"{PREFIX}: steady state"]
    assert pre["phases"][0]["bytes"] == 4 * MiB and pre["reached"] is True
    assert doc["job"]["precondition_method"] == "sequential" and doc["job"]["rw"] == "randread"


def test_checkpoints_while_preconditioning_keep_its_phases_out_of_the_jobs():
    job = resolve_job({"engine": "null", "size": "4m", "rw": "randread", "io_size": "1m",
                       "precondition_method": "sequential", "ss": "iops_slope:0.000001", "ss_dur": "1s",
                       "ss_interval": "0.25s", "precondition_time": "1.5s", "checkpoint_every": "0.2s"})
    snapshots = []
    doc = run_job(job, checkpoint=snapshots.append)
    during = [snap for snap in snapshots if not snap["phases"]]
    assert during and all(snap["precondition"]["method"] == "sequential" for snap in during)
    assert all(not p["name"].startswith(PREFIX) for snap in snapshots for p in snap["phases"])
    assert len(doc["precondition"]["phases"]) == 3 and [p["name"] for p in doc["phases"]] == ["randread"]


def test_steady_state_not_reached_within_the_limit_is_said_and_warned(capsys):
    args = ["run", "--engine", "null", "--size", "4m", "--rw", "randread", "--io-size", "1m",
            "--precondition-method", "sequential", "--ss", "iops_slope:0.000001", "--ss-dur", "1s",
            "--ss-interval", "0.25s", "--precondition-time", "1.5s", "--no-store"]
    r = run_cli(*args[1:-1])
    pre = r["doc"]["precondition"]
    assert r["rc"] == 0 and pre["reached"] is False and pre["reached_after_s"] is None
    assert pre["phases"][-1]["stop_reason"] == "done"
    (warning,) = [w for w in r["doc"]["warnings"] if w["code"] == "precondition_not_steady"]
    assert "not reached within the limit (1.5 s)" in warning["message"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "steady state (iops_slope:1e-06 over 1 s) not reached within the limit (1.5 s)" in out


def test_sprandom_on_a_target_it_cannot_size_asks_for_size_in_one_line(tmp_path, capsys):
    missing = tmp_path / "not-yet.dat"
    assert main(["run", "--target", str(missing), "--rw", "randread", "--precondition-method", "sprandom",
                 "-q", "--no-store"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"precondition_method: cannot size {missing} (No such file or directory); give size")
    assert "\n" not in err and not missing.exists()


# --- fio's sprandom ------------------------------------------------------------------------------

def test_storlab_fio_refuses_sprandom_and_names_the_storlab_way(tmp_path):
    job = tmp_path / "spr.fio"
    job.write_text("[pre]\nfilename=/tmp/x\nrw=randwrite\nbs=4k\nnorandommap=1\nsprandom=1\nspr_op=0.2\n")
    with pytest.raises(Refusal) as e:
        translator.translate(str(job))
    text = str(e.value)
    assert "sprandom" in text and "--precondition-method sprandom:OP:REGIONS" in text


# --- on a loop device ----------------------------------------------------------------------------


def _first_mib_sha(dev: str) -> str:
    with open(dev, "rb") as f:
        return hashlib.sha256(f.read(MiB)).hexdigest()


@pytest.mark.root
@pytest.mark.loop
def test_sprandom_reaches_steady_state_on_a_loop_device_and_says_so(loop_device):
    dev = loop_device(64 * MiB)
    r = run_cli("--target", dev, "--direct", "--precondition-method", "sprandom:0.15:16", "--ss", "iops:25%",
                "--ss-dur", "2s", "--ss-interval", "0.5s", "--precondition-time", "60s",
                "--rw", "randread", "--bs", "4k", "--time", "1")
    assert r["rc"] == 0, r
    doc = r["doc"]
    pre = doc["precondition"]
    assert doc["complete"] and pre["method"] == "sprandom:0.15:16" and pre["reached"] is True
    assert 1.0 <= pre["reached_after_s"] < 60 and pre["steadystate"]["attained"]
    steady = pre["phases"][-1]
    assert steady["name"] == f"{PREFIX}: steady state" and steady["stop_reason"] == "steady_state"
    # the fill wrote every block of the device once, and the over-provisioned share again
    fill = sum(p["bytes"] for p in pre["phases"][:-1])
    assert fill == pytest.approx(64 * MiB * 1.15, rel=0.02) and fill >= 64 * MiB
    assert [p["name"] for p in doc["phases"]] == ["randread"]
    # only the last phase judged steady state: every fill phase wrote its whole share
    assert all(p["stop_reason"] == "done" for p in pre["phases"][:-1])
    # and says so under the table
    table = render_table(doc)
    assert "precondition sprandom:0.15:16: " in table and "steady state (iops:25% over 2 s) reached after" in table


@pytest.mark.root
@pytest.mark.loop
def test_a_device_holding_data_is_refused_unless_allow_destroy_names_it(loop_device, capsys):
    """The job only reads; preconditioning writes, so the gate refuses a device holding a file
    system before anything is written, and lets it be written when --allow-destroy names it."""
    if not shutil.which("mkfs.ext4"):
        pytest.skip("mkfs.ext4 not installed")
    dev = loop_device(64 * MiB)
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
    before = _first_mib_sha(dev)
    args = ["run", "--target", dev, "--precondition-method", "sequential", "--ss", "iops:50%", "--ss-dur", "2s",
            "--precondition-time", "30s", "--rw", "randread", "--time", "0.5", "-q", "--no-store"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert f"refusing to write to {dev}: ext4" in err
    assert "\n" not in err and f"--allow-destroy {dev}" in err
    assert _first_mib_sha(dev) == before          # nothing was written
    r = run_cli(*args[1:-2], "--allow-destroy", dev)
    assert r["rc"] == 0 and _first_mib_sha(dev) != before
    pre = r["doc"]["precondition"]
    # SNIA's workload-independent step wrote the device twice, then steady state was reached
    assert [p["bytes"] for p in pre["phases"][:2]] == [64 * MiB, 64 * MiB] and pre["reached"] is True
