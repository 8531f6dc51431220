"""`storlab plan` run in-process: rendered text, JSON on stdout only, one-line errors with exit code 2."""
import json
from pathlib import Path

import pytest
from storlab.cli.main import main

STACKS = Path(__file__).resolve().parents[1] / "examples" / "stacks"


def run(capsys, *argv):
    code = main(["plan", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_reliability_from_notation_matches_the_model(capsys):
    code, out, err = run(capsys, "reliability", "R60/6/48", "--drive", "2TB", "--mtbf", "600000h",
                         "--ber", "1e-15", "--rebuild-rate", "50MB/s", "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["schema"] == "storlab.plan.reliability/1"
    assert doc["groups_in_series"] == 8
    assert doc["mttr_h"] == pytest.approx(2e12 / 50e6 / 3600)
    # critical RAID 6 rebuild of a 6-drive span reads 4 x 2 TB: h = 1 - exp(-6.4e13 * 1e-15) = 6.2 %
    assert doc["group"]["critical_ure_probability"] == pytest.approx(0.06199, abs=1e-5)


def test_reliability_human_output(capsys):
    code, out, _ = run(capsys, "reliability", "R50/8/24", "--drive", "16TB", "--mtbf", "1.2e6", "--ber", "1e-15",
                       "--rebuild-rate", "100MB/s", "--period", "5y")
    assert code == 0
    assert "3 group(s) in series" in out
    assert "MTTDL of the volume: 9.646 years" in out
    assert "in 5 year(s): 0.4045" in out


def test_reliability_without_a_rebuild_rate_uses_the_documented_default(capsys):
    # issue 36: it exited 2 although --help says the default is 50 MB/s
    code, out, err = run(capsys, "reliability", "R6/12", "--drive", "2TB", "--json")
    assert code == 0 and err == ""
    assert json.loads(out)["mttr_h"] == pytest.approx(2e12 / 50e6 / 3600)
    code, out, _ = run(capsys, "reliability", "R6/12", "--drive", "2TB")
    assert code == 0 and "(default rebuild rate 50 MB/s)" in out


def test_a_one_drive_raid_0_lun_is_a_stack(capsys):
    # issue 36: R0/1 (a JBOD LUN) was refused
    code, out, _ = run(capsys, "geometry", "R0/1", "--json")
    assert code == 0
    capacity = json.loads(out)["capacity"]
    assert capacity["usable_bytes"] == capacity["raw_bytes"] == 2 * 10**12
    code, _, _ = run(capsys, "perf", "R0/1", "--rw", "randread", "--request", "4K")
    assert code == 0


def test_geometry_text_and_flags(capsys):
    code, out, _ = run(capsys, "geometry", "R5/8", "--chunk", "64k", "--request", "1MiB")
    assert code == 0
    assert "stripe width: group 448 KiB" in out
    assert "uneven:" in out and "partial-stripe-requests:" in out


def test_geometry_json_of_the_ltg_match(capsys):
    code, out, _ = run(capsys, "geometry", "R5/9", "--chunk", "128k", "--count", "4", "--inter-chunk", "1MiB",
                       "--request", "1MiB", "--pattern", "aligned", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "storlab.plan.geometry/1"
    assert doc["group_stripe_width_bytes"] == 1 << 20 and doc["full_stripe_bytes"] == 4 << 20
    assert doc["alignment"]["full_stripe_fraction"] == 1.0
    assert doc["alignment"]["write_penalty"] == pytest.approx(9 / 8)
    assert doc["flags"] == []


def test_perf_from_file_names_the_bottleneck(capsys):
    code, out, _ = run(capsys, "perf", str(STACKS / "sas-jbod-4x12-two-raid-adapters.toml"))
    assert code == 0
    assert "seq_write" in out and "limited by host/raid-adapter[1]" in out
    assert "at its limit" in out


def test_perf_caps_and_json(capsys):
    code, out, _ = run(capsys, "perf", "R6/12", "--count", "4", "--drive-read", "130MB/s", "--cap", "pcie=4GB/s",
                       "--cap", "ctl=3GB/s/1.3GB/s", "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["metrics"]["seq_read"]["value"] == pytest.approx(3e9)
    assert doc["metrics"]["seq_write"]["value"] == pytest.approx(1.3e9)
    assert doc["metrics"]["seq_write"]["limiting"] == "pcie/ctl"


def test_recommend(capsys):
    code, out, _ = run(capsys, "recommend", "--drives", "12", "--bays", "12", "--levels", "5,6", "--chunks", "64k",
                       "--capacity", "21TB")
    assert code == 0
    assert "7 candidate layouts" in out and "1 meet every need" in out and "- R5/12" in out
    code, out, _ = run(capsys, "recommend", "--drives", "24", "--controllers", "2", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "storlab.plan.recommend/1" and doc["pareto"]


def test_script_to_stdout_and_file(capsys, tmp_path):
    code, out, err = run(capsys, "script", "R6/10", "--parity", "md", "--chunk", "512k", "--fs", "ext4")
    assert code == 0
    assert "mkfs.ext4 -b 4096 -E stride=128,stripe_width=1024 /dev/md0" in out
    assert "placeholders" in err
    target = tmp_path / "build.sh"
    code, out, _ = run(capsys, "script", str(STACKS / "r6-12-nlsas-md.toml"), "--output", str(target),
                       "--devices", ",".join(f"/dev/sd{c}" for c in "bcdefghijklm"))
    assert code == 0 and "wrote" in out
    assert "mkfs.xfs -b size=4096 -d su=512k,sw=10 -l su=256k /dev/md0" in target.read_text()


@pytest.mark.parametrize("argv, message", [
    (["geometry", "R6/3"], "storlab plan: error: R6/3: RAID 6 needs at least 4 drives per span\n"),
    (["geometry", "R50/6/x"], "storlab plan: error: R50/6/x: total number of drives is not chosen (x); give the number of drives\n"),
    (["geometry", "missing.toml"], "storlab plan: error: missing.toml: no such stack file\n"),
    (["geometry", "R6/12", "--chunk", "12parsecs"], None),
    (["perf", "R6/12", "--cap", "oops"], None),
    (["script", str(STACKS / "p690-rio2-fastt600.toml"), "--count", "3"], None),
])
def test_errors_are_one_line_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("storlab plan: error: ")
    if message:
        assert err == message


def test_x_resolved_with_drives(capsys):
    code, out, _ = run(capsys, "geometry", "R50/6/x", "--drives", "24", "--chunk", "256k", "--json")
    assert code == 0 and json.loads(out)["groups"] == 4


def test_every_example_stack_loads_and_runs(capsys):
    for path in sorted(STACKS.glob("*.toml")):
        for command in ("geometry", "reliability", "perf"):
            code, out, err = run(capsys, command, str(path), "--json")
            assert code == 0, (path, command, err)
            json.loads(out)


def test_perf_prints_the_curve_over_queue_depth_and_request_size_with_the_limit_at_each_point(capsys):
    assert main(["plan", "perf", "R0/4", "--drive-read", "150MB/s", "--drive-iops", "80", "--rw", "randread",
                 "--request", "4k,1m", "--qd", "1,4,32"]) == 0
    out = capsys.readouterr().out
    curve = out[out.index("curve ("):].splitlines()[2:]
    assert len(curve) == 6
    assert all(line.split()[-1] in ("depth", "drive") for line in curve)     # "queue depth" or "member[i] drive"
    assert "queue depth" in curve[0]
    # 4 KiB random reads: each drive reorders its queue, so depth keeps paying (qd 32: 8 at each drive)
    iops = [float(line.split()[5].replace(",", "")) for line in curve[:3]]
    assert iops[0] < iops[1] < iops[2] and iops[2] > 4 * 80
    assert "one request at a time 320 IOPS at most" in out


def test_perf_curve_in_json_has_latency_and_limit_per_point(capsys, tmp_path):
    out = tmp_path / "perf.json"
    assert main(["plan", "perf", "R10/4", "--rw", "read,randread", "--qd", "1,16", "--threads", "1,2",
                 "--mirror-read", "per-thread", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert len(doc["curve"]) == 8
    point = doc["curve"][0]
    assert {"rw", "request_bytes", "qd", "threads", "iops", "bw_bytes", "latency_mean_s", "latency_p99_s",
            "limiting"} <= set(point)
    assert point["latency_p99_s"] >= point["latency_mean_s"] > 0
    # two threads read both copies of each mirror with btrfs's policy: more than one thread's rate
    one = next(p for p in doc["curve"] if p["rw"] == "randread" and p["qd"] == 16 and p["threads"] == 1)
    two = next(p for p in doc["curve"] if p["rw"] == "randread" and p["qd"] == 16 and p["threads"] == 2)
    assert two["iops"] > one["iops"]


def test_sector_is_deprecated_and_changes_nothing(capsys):
    assert main(["plan", "reliability", "R5/6", "--rebuild-rate", "50MB/s", "--json", "-"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["plan", "reliability", "R5/6", "--rebuild-rate", "50MB/s", "--sector", "4096", "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert "--sector is deprecated" in captured.err
    assert json.loads(captured.out)["mttdl_h"] == plain["mttdl_h"]


def test_working_set_without_a_cache_is_refused(capsys):
    # issue 36: --working-set was accepted and changed nothing
    code, out, err = run(capsys, "perf", "R5/9", "--working-set", "1G")
    assert code == 2 and out == ""
    assert err == ("storlab plan: error: --working-set needs a controller cache size: give --controller-cache SIZE or a "
                   "[cache] table with a size in the stack file\n")
    code, out, err = run(capsys, "perf", "R5/9", "--write-through", "--working-set", "1G")
    assert code == 2 and "--working-set needs a controller cache size" in err


def test_write_through_alone_says_the_controller_does_not_write_back(capsys):
    # a RAID controller writes back by default, gathering a sequential stream into full stripes;
    # --write-through alone says it does not: the 1 MiB writes to the 5 MiB stripe read first
    argv = ("perf", "R6/12", "--request", "1m", "--rw", "write", "--qd", "8", "--json")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    gathered = json.loads(out)["curve"][0]
    code, out, _ = run(capsys, *argv, "--write-through")
    assert code == 0
    through = json.loads(out)["curve"][0]
    assert through["bw_bytes"] < gathered["bw_bytes"] / 2
    assert any("write-through" in a for a in through["assumptions"])
    # the text curve prints what its points assume, each once
    code, out, _ = run(capsys, *argv[:-1], "--rw", "write,randwrite")
    assert code == 0
    line = "  assumption: the RAID controller's write-back cache, on by default and not described here"
    assert sum(1 for row in out.splitlines() if row.startswith(line)) == 1


def test_controller_iops_states_the_implied_controllers_rate(capsys):
    # the controller a RAID notation implies handles 60,000 requests/s unless --controller-iops
    # states its own; a bad value is one line naming the flag
    argv = ("perf", "R5/8", "--ssd", "--drive-iops", "90000", "--drive-read", "500MB/s", "--drive-latency", "90us",
            "--rw", "randread", "--request", "4K", "--qd", "256", "--json")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    default = json.loads(out)
    assert default["curve"][0]["iops"] == pytest.approx(60_000, rel=1e-3)
    assert default["metrics"]["random_read"]["limiting"] == "controller (implied)"
    code, out, _ = run(capsys, *argv, "--controller-iops", "200000")
    assert code == 0
    stated = json.loads(out)
    assert stated["curve"][0]["iops"] == pytest.approx(200_000, rel=1e-3)
    assert stated["curve"][0]["limiting"] == "controller (implied)"
    code, out, err = run(capsys, "perf", "R5/8", "--controller-iops", "0")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--controller-iops" in err


def test_the_cache_flags_reach_the_curve(capsys):
    argv = ("perf", "R5/9", "--chunk", "128K", "--rw", "randread", "--request", "4K", "--threads", "4",
            "--controller-cache", "4G", "--controller-cache-rate", "800MB/s", "--json")
    code, out, _ = run(capsys, *argv, "--working-set", "1G")
    assert code == 0
    in_cache = json.loads(out)["curve"][0]
    code, out, _ = run(capsys, *argv, "--working-set", "100G")
    beyond = json.loads(out)["curve"][0]
    assert in_cache["bw_bytes"] > 5 * beyond["bw_bytes"]
    assert any("in-cache" in a for a in in_cache["assumptions"])
    assert not any("in-cache" in a for a in beyond["assumptions"])


def test_a_stack_file_cache_table_is_accepted(capsys, tmp_path):
    # issue 36: a [cache] table was refused as an unknown key
    path = tmp_path / "cached.toml"
    path.write_text('[raid]\nlayout = "R5/5"\nchunk = "64KiB"\n[cache]\nsize = "2GiB"\nbw = "1GB/s"\n'
                    'read_ahead = true\n')
    code, out, err = run(capsys, "perf", str(path), "--rw", "read", "--request", "64K", "--working-set", "100G",
                         "--json")
    assert code == 0 and err == ""
    point = json.loads(out)["curve"][0]
    assert any("read-ahead" in a for a in point["assumptions"])


def test_recommend_refuses_a_bad_controller_iops_in_one_line(capsys):
    code, out, err = run(capsys, "recommend", "--drives", "12", "--controller-iops", "0")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--controller-iops" in err


def test_plan_perf_drive_write_cache_off_waits_for_the_media_and_a_bad_value_is_one_line(capsys):
    # md over one default drive, 4 KiB random writes at QD1: its cache drains them reordered (209/s),
    # off each waits for its positioning (80/s)
    code, on, _ = run(capsys, "perf", "R0/1", "--parity", "md", "--rw", "randwrite", "--request", "4KiB",
                      "--qd", "1", "--json", "-")
    assert code == 0
    code, off, _ = run(capsys, "perf", "R0/1", "--parity", "md", "--rw", "randwrite", "--request", "4KiB",
                       "--qd", "1", "--drive-write-cache", "off", "--json", "-")
    assert code == 0
    rates = [json.loads(doc)["curve"][0]["iops"] for doc in (on, off)]
    assert rates[0] == pytest.approx(209, rel=0.01) and rates[1] == pytest.approx(80, rel=0.01)
    code, out, err = run(capsys, "perf", "R0/1", "--drive-write-cache", "maybe")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--drive-write-cache" in err
