"""The pure parts of storlab.measure.mpi, without MPI: launcher detection, rank-aware target names and
layouts, reorder, stonewall wear-out, clock-offset math, cross-rank aggregation, scaling curve,
the binomial tree of the collectives and how it heals around gone ranks."""
from __future__ import annotations

import math
import random

import pytest
from storlab.jobs.job import resolve_job
from storlab.measure import aggregate, launch, stats
from storlab.measure.mpi import clock, rewrite, scaling, tree

# -- launcher detection ---------------------------------------------------------------------------


def test_detect_reads_each_launchers_variables():
    assert launch.detect({"PMI_SIZE": "4", "PMI_RANK": "2"}) == launch.Launch("pmi", 4, 2)
    assert launch.detect({"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_RANK": "0"}) == launch.Launch("openmpi", 8, 0)
    assert launch.detect({"SLURM_NTASKS": "16", "SLURM_PROCID": "3", "SLURM_STEP_ID": "0"}) == \
        launch.Launch("slurm", 16, 3, "srun")


# Rank 1's variables under `srun --mpi=pmi2 -n 2` (Slurm 22.05) and `mpiexec -n 2` (MPICH hydra), as
# printed by `env` on this machine: both set PMI_RANK/PMI_SIZE.
SRUN_PMI2 = {"PMI_FD": "13", "PMI_JOBID": "2.0", "PMI_RANK": "1", "PMI_SIZE": "2", "SLURM_JOB_ID": "2",
             "SLURM_NTASKS": "2", "SLURM_PROCID": "1", "SLURM_STEPID": "0", "SLURM_STEP_ID": "0",
             "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "vm"}
HYDRA = {"HYDI_CONTROL_FD": "7", "MPI_LOCALNRANKS": "2", "MPI_LOCALRANKID": "1", "PMI_FD": "9",
         "PMI_HOSTNAME": "vm", "PMI_RANK": "1", "PMI_SIZE": "2"}


def test_srun_with_pmi2_is_told_from_mpiexec_although_both_set_pmi_rank():
    assert launch.detect(SRUN_PMI2) == launch.Launch("pmi", 2, 1, "srun")
    assert launch.detect(HYDRA) == launch.Launch("pmi", 2, 1, "mpiexec")
    # srun without an MPI plugin (--mpi=none): Slurm's own variables still make it a launch
    no_pmi = {k: v for k, v in SRUN_PMI2.items() if not k.startswith("PMI_")}
    assert launch.detect(no_pmi) == launch.Launch("slurm", 2, 1, "srun")


def test_mpiexec_inside_an_allocation_is_not_taken_for_srun():
    # hydra started its proxies with srun (one task per node): the ranks are in a step, with hydra's marks
    assert launch.detect({**HYDRA, "SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_STEP_ID": "0",
                          "SLURM_STEP_NUM_TASKS": "1"}).launcher == "mpiexec"
    # an mpiexec without marks of its own: the step's task number and count are not the MPI rank and size
    assert launch.detect({"PMI_RANK": "5", "PMI_SIZE": "8", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0",
                          "SLURM_STEP_NUM_TASKS": "2"}).launcher == "mpiexec"


def test_launch_environment_names_the_launcher_and_the_slurm_job():
    assert launch.launch_environment(SRUN_PMI2) == {"launcher": "srun", "slurm_job_id": "2", "slurm_step_id": "0"}
    assert launch.launch_environment(HYDRA) == {"launcher": "mpiexec", "slurm_job_id": None, "slurm_step_id": None}
    assert launch.launch_environment({}) == {"launcher": None, "slurm_job_id": None, "slurm_step_id": None}
    # a plain process in a batch script (no srun): the job, but no launcher and no step
    assert launch.launch_environment({"SLURM_JOB_ID": "41", "SLURM_NTASKS": "4"}) == \
        {"launcher": None, "slurm_job_id": "41", "slurm_step_id": None}
    # `srun -n 1`: one task, no MPI launch, but srun started it
    assert launch.detect({**SRUN_PMI2, "PMI_SIZE": "1", "PMI_RANK": "0", "SLURM_PROCID": "0",
                          "SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1"}) is None
    assert launch.launch_environment({**SRUN_PMI2, "PMI_SIZE": "1", "PMI_RANK": "0", "SLURM_PROCID": "0",
                                      "SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1"})["launcher"] == "srun"


def test_detect_ignores_single_rank_and_a_batch_script_outside_srun():
    assert launch.detect({}) is None
    assert launch.detect({"PMI_SIZE": "1", "PMI_RANK": "0"}) is None          # mpiexec -n 1
    assert launch.detect({"SLURM_NTASKS": "16", "SLURM_PROCID": "0"}) is None  # sbatch script, no srun step
    assert launch.detect({"PMI_SIZE": "x"}) is None


# -- names and layouts ---------------------------------------------------------------------------


def test_mpi_is_asked_to_pause_while_waiting_only_when_ranks_outnumber_cores():
    assert launch.local_ranks({"MPI_LOCALNRANKS": "64"}) == 64
    assert launch.local_ranks({"OMPI_COMM_WORLD_LOCAL_SIZE": "8"}) == 8
    assert launch.local_ranks({"SLURM_STEP_TASKS_PER_NODE": "4(x2),3"}) == 4
    assert launch.local_ranks({}) is None
    assert launch.spinning_defaults({"MPI_LOCALNRANKS": "64"}, cores=2) == {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1"}
    assert launch.spinning_defaults({"MPI_LOCALNRANKS": "2"}, cores=2) == {}
    assert launch.spinning_defaults({}, cores=2) == {}
    # a setting of the user's own is left as it is
    assert launch.spinning_defaults({"MPI_LOCALNRANKS": "64", "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "0"}, cores=2) == {}


def test_substitute_fills_rank_node_size_and_rejects_typos():
    assert rewrite.substitute("/s/{node}/f{rank}of{size}", 3, "n17", 8) == "/s/n17/f3of8"
    assert rewrite.substitute("/plain/path", 3, "n17", 8) == "/plain/path"
    with pytest.raises(ValueError, match=r"unknown placeholder \{ranks\}"):
        rewrite.substitute("/s/f{ranks}", 0, "n", 2)


def test_data_rank_shifts_only_read_only_phases():
    assert rewrite.data_rank(3, 4, 1, True) == 0
    assert rewrite.data_rank(1, 4, 2, True) == 3
    assert rewrite.data_rank(1, 4, 2, False) == 1
    assert rewrite.data_rank(1, 4, 0, True) == 1


def two_phase_job(target: str, **extra):
    phases = [{"name": "write", "options": {"rw": "write", **extra.get("write", {})}},
              {"name": "read", "options": {"rw": "read"}}]
    return resolve_job({"target": [target], "size": "1m", "threads": 2, **extra.get("cli", {})}, phases=phases)


def test_file_per_process_targets_and_reorder_swap_only_the_read_phase():
    job = two_phase_job("/d/f{rank}")
    nodes = ["a", "a", "b", "b"]
    for rank in range(4):
        j = rewrite.rewrite_job(job, rank, nodes, reorder=2)
        w, r = (p.groups[0].values for p in j.phases)
        assert w["target"] == (f"/d/f{rank}",)
        assert r["target"] == (f"/d/f{(rank + 2) % 4}",)
        assert w["participants"] == r["participants"] == 0       # nobody shares the file
    assert job.phases[0].groups[0].values["target"] == ("/d/f{rank}",)   # template untouched


def test_shared_file_spreads_participants_over_ranks_and_reorder_takes_the_other_place():
    job = two_phase_job("/d/shared")
    nodes = ["a", "a", "b", "b"]
    for rank in range(4):
        w, r = (p.groups[0].values for p in rewrite.rewrite_job(job, rank, nodes, reorder=1).phases)
        assert w["participants"] == r["participants"] == 8      # 4 ranks x 2 threads
        assert w["participant_base"] == rank * 2
        assert r["participant_base"] == (rank + 1) % 4 * 2


def test_node_placeholder_shares_a_file_among_the_ranks_of_a_node():
    job = two_phase_job("/d/{node}.dat")
    nodes = ["a", "a", "b", "b"]
    vals = [rewrite.rewrite_job(job, r, nodes).phases[0].groups[0].values for r in range(4)]
    assert [v["target"] for v in vals] == [("/d/a.dat",), ("/d/a.dat",), ("/d/b.dat",), ("/d/b.dat",)]
    assert [v["participants"] for v in vals] == [4, 4, 4, 4]
    assert [v["participant_base"] for v in vals] == [0, 2, 0, 2]


@pytest.mark.parametrize("templates", [("/d/f",), ("/d/f{rank}",), ("/d/{node}/f",), ("/d/{size}",),
                                       ("/d/f{rank}", "/e/{node}"), ("/d/{node}", "/e/g"),
                                       ("/d/{node}{rank}",), ("/x{rank}y{rank}",)])
def test_the_ranks_sharing_a_target_are_those_whose_paths_are_equal(templates):
    """Which ranks share a target, found from the placeholders, is what substituting every
    rank's paths and comparing them gives, including a template where two ranks collide
    ("{node}{rank}": node n1 with rank 23 and node n12 with rank 3 both give n123)."""
    nodes = ["a" if r % 3 else "b" for r in range(30)]
    nodes[3], nodes[23] = "n12", "n1"
    for role in range(len(nodes)):
        mine = rewrite._paths(templates, role, nodes)
        expected = [r for r in range(len(nodes)) if rewrite._paths(templates, r, nodes) == mine]
        assert list(rewrite._sharing(templates, role, nodes)) == expected
    if templates == ("/d/{node}{rank}",):      # the collision is real, and found
        assert rewrite._paths(templates, 3, nodes) == rewrite._paths(templates, 23, nodes) == ("/d/n123",)
        assert list(rewrite._sharing(templates, 3, nodes)) == [3, 23]


def test_io_total_is_split_over_the_ranks():
    job = resolve_job({"target": ["/d/f{rank}"], "size": "1m", "io_total": "4m"})
    assert rewrite.rewrite_job(job, 0, ["a"] * 4).phases[0].groups[0].values["io_total"] == 1 << 20


def test_reorder_warnings_say_what_to_use():
    job = two_phase_job("/d/f{rank}")
    assert rewrite.rewrite_warnings(job, ["a", "b"], 0) == []
    assert rewrite.rewrite_warnings(job, ["a", "b"], 2)[0]["code"] == "reorder_own_data"
    w = rewrite.rewrite_warnings(job, ["a", "a", "b", "b"], 1)[0]
    assert w["code"] == "reorder_same_node" and "--reorder 2" in w["message"]
    assert rewrite.rewrite_warnings(job, ["a", "a", "b", "b"], 2) == []
    writes_only = resolve_job({"target": ["/d/f{rank}"], "size": "1m", "rw": "write"})
    assert rewrite.rewrite_warnings(writes_only, ["a", "b"], 1)[0]["code"] == "reorder_unused"


def test_wearout_pairs_a_read_with_the_time_limited_write_before_it():
    assert rewrite.wearout_pairs(two_phase_job("/d/f{rank}", write={"time": "1s"})) == {1: 0}
    assert rewrite.wearout_pairs(two_phase_job("/d/f{rank}")) == {}                 # write not stonewalled
    other = resolve_job({"size": "1m"}, phases=[
        {"name": "w", "options": {"rw": "write", "time": "1s", "target": ["/d/f{rank}"]}},
        {"name": "r", "options": {"rw": "read", "target": ["/d/g{rank}"]}}])
    assert rewrite.wearout_pairs(other) == {}                                         # other files
    timed_read = resolve_job({"target": ["/d/f"], "size": "1m"}, phases=[
        {"name": "w", "options": {"rw": "write", "time": "1s"}},
        {"name": "r", "options": {"rw": "read", "time": "1s"}}])
    assert rewrite.wearout_pairs(timed_read) == {}                                    # read has its own end


def test_a_phase_may_be_built_before_the_others_finish_only_when_no_rank_touches_anothers_files():
    """Private targets let the phase boundary be one barrier; a shared file, a node's file or
    reading another rank's data (reorder) keep a barrier after each phase too."""
    assert rewrite.private_targets(two_phase_job("/d/f{rank}"), reorder=0)
    assert rewrite.private_targets(resolve_job({"size": "1m"}), reorder=0)           # scratch file per rank
    assert not rewrite.private_targets(two_phase_job("/d/shared"), reorder=0)
    assert not rewrite.private_targets(two_phase_job("/d/{node}.dat"), reorder=0)
    assert not rewrite.private_targets(two_phase_job("/d/f{rank}"), reorder=1)      # the read is another's


def test_wearout_io_size_is_the_smallest_thread_in_whole_transfers():
    assert rewrite.wearout_io_size([40960, 45056], 4096) == 40960
    assert rewrite.wearout_io_size([40000, 45056], 4096) == 36864
    assert rewrite.wearout_io_size([0, 4096], 4096) == 4096          # the engine's minimum
    with pytest.raises(ValueError):
        rewrite.wearout_io_size([], 4096)


# -- clock offsets -------------------------------------------------------------------------------


def test_offset_from_a_symmetric_exchange_is_exact():
    # rank clock = root clock - 2.5 s; request and reply take 1 ms each
    s = clock.ClockSample(t0_s=100.0, root_s=102.501, t1_s=100.002)
    assert s.offset_s == pytest.approx(2.5)
    assert s.rtt_s == pytest.approx(0.002)


def test_best_offset_keeps_the_shortest_round_trip_and_bounds_the_error():
    true_offset = -0.75
    samples = []
    rng = random.Random(1)
    for _ in range(8):
        t0 = rng.uniform(0, 10)
        up, down = rng.uniform(1e-4, 5e-3), rng.uniform(1e-4, 5e-3)   # asymmetric delays
        samples.append(clock.ClockSample(t0, t0 + up + true_offset, t0 + up + down))
    best = clock.best_offset(samples)
    assert best.rtt_s == min(s.rtt_s for s in samples)
    assert abs(best.offset_s - true_offset) <= best.error_s + 1e-12


def test_node_offsets_are_zero_on_rank_0s_node_and_shared_within_a_node():
    fast = clock.ClockSample(0.0, 5.0005, 0.001)     # offset 5.0, rtt 1 ms
    slow = clock.ClockSample(0.0, 5.004, 0.010)      # offset 4.999, rtt 10 ms
    offs = clock.node_offsets([[], [fast], [slow], [fast]], ["a", "a", "b", "b"])
    assert offs[0].offset_s == offs[1].offset_s == 0.0    # same node as rank 0: same clock
    assert offs[2].offset_s == offs[3].offset_s == pytest.approx(5.0)   # node b's best exchange
    assert offs[2].error_s == pytest.approx(0.0005)


# -- aggregation -----------------------------------------------------------------------------------


def rank_result(start_unix_s, offset_s, workers, lat_values=(), read=True, name="read"):
    """A phase result as one rank's runner returns it (only the fields merge_phase reads)."""
    hist = stats.histogram(lat_values)
    nbytes = sum(w[2] for w in workers)
    d = {"bytes": nbytes, "ops": len(lat_values), "seconds": 1.0, "iops": 0.0, "bw_bytes": 0.0,
         "lat_ns": {"min": min(lat_values), "mean": sum(lat_values) / len(lat_values),
                    "stddev": _stddev(lat_values), "p50": 0, "p90": 0, "p99": 0, "p999": 0,
                    "max": max(lat_values)} if lat_values else None,
         "lat_hist": {"scheme": "loglinear6", "buckets": hist},
         "timeseries": {"interval_s": 1.0, "bw_bytes": [float(nbytes)], "iops": [float(len(lat_values))]}}
    return {"name": name, "rw": "read", "groups": [""], "complete": True, "stop_reason": "done",
            "error": None, "seconds": 1.0, "ramp_s": 0.0, "start_unix_s": start_unix_s, "offset_s": offset_s,
            "workers": [{"id": i, "group": "", "target": "/t", "start_s": s, "end_s": e,
                         "read_bytes": b if read else 0, "write_bytes": 0 if read else b,
                         "read_ops": 0, "write_ops": 0} for i, (s, e, b) in enumerate(workers)],
            "read": d}


def _stddev(v):
    if len(v) < 2:
        return 0.0
    m = sum(v) / len(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))


def test_times_are_put_on_rank_0s_clock_before_the_window_is_taken():
    # Rank 1's clock is 10 s ahead (offset -10): it really started 0.5 s after rank 0.
    r0 = rank_result(1000.0, 0.0, [(0.0, 2.0, 100)], [1000])
    r1 = rank_result(1010.5, -10.0, [(0.0, 2.0, 100)], [1000])
    t0, shifts, window = aggregate.deskew_window([r0, r1])
    assert t0 == 1000.0 and shifts == [0.0, 0.5]
    assert window == [0.5, 2.0]      # rank 1's start to rank 0's finish


def test_merged_series_mean_latency_weights_each_ranks_mean_by_its_requests():
    r0 = rank_result(1000.0, 0.0, [(0.0, 1.0, 100)], [1000, 3000])
    r1 = rank_result(1000.0, 0.0, [(0.0, 1.0, 100)], [8000])
    for r, means in ((r0, [2000.0, 0.0]), (r1, [8000.0, 5000.0])):
        ts = r["read"]["timeseries"]
        ts["iops"] = [ts["iops"][0], 0.0 if r is r0 else 2.0]
        ts["bw_bytes"].append(0.0)
        ts["lat_mean_ns"], ts["clat_mean_ns"], ts["slat_mean_ns"] = means, means, [0.0, 0.0]
    ts = aggregate.merge_phase([r0, r1], window_bytes=[1.0, 1.0], nodes=["a", "a"])["read"]["timeseries"]
    assert ts["iops"] == [3.0, 2.0]
    assert ts["lat_mean_ns"] == [4000.0, 5000.0] == ts["clat_mean_ns"]     # (2 x 2000 + 8000) / 3
    assert ts["slat_mean_ns"] == [0.0, 0.0]


def test_merge_sums_bytes_and_takes_the_plain_and_deskewed_rates():
    r0 = rank_result(1000.0, 0.0, [(0.0, 2.0, 2000), (0.0, 2.0, 2000)], [1000, 1100])
    r1 = rank_result(1000.5, 0.0, [(0.0, 2.0, 2000)], [1200])
    m = aggregate.merge_phase([r0, r1], window_bytes=[1500.0, 750.0], nodes=["a", "b"])
    a = m["aggregate"]
    assert a["bytes"] == 6000 == m["read"]["bytes"]
    assert a["first_start_s"] == 0.0 and a["last_done_s"] == 2.5
    assert a["bw_bytes"] == pytest.approx(6000 / 2.5)                   # all bytes / whole span
    assert a["deskew_window_s"] == [0.5, 2.0]
    assert a["deskew_bytes"] == 2250.0
    assert a["deskew_bw_bytes"] == pytest.approx(2250 / 1.5)
    assert a["straggler_s"] == pytest.approx(0.5)
    assert m["seconds"] == pytest.approx(2.5)
    assert m["mpi"]["last_done"]["rank"] == 1 and m["mpi"]["first_done"]["rank"] == 0
    assert m["mpi"]["stragglers"][0]["rank"] == 1
    assert m["mpi"]["stragglers"][0]["behind_s"] == pytest.approx(0.5)
    assert [n["node"] for n in m["mpi"]["nodes"]] == ["a", "b"]
    assert [w["rank"] for w in m["workers"]] == [0, 0, 1]
    assert m["workers"][2]["start_s"] == 0.5                             # on the merged time base
    assert m["complete"] and m["stop_reason"] == "done"


def test_trims_of_every_rank_merge_into_one_trim_direction():
    ranks = []
    for start, lat in ((1000.0, [500, 700]), (1000.0, [900])):
        r = rank_result(start, 0.0, [(0.0, 1.0, 4096 * len(lat))], lat, read=False, name="trim")
        r["trim"] = r.pop("read")
        r["rw"] = "trim"
        for w in r["workers"]:
            w["trim_bytes"], w["trim_ops"], w["write_bytes"] = w["write_bytes"], len(lat), 0
        ranks.append(r)
    m = aggregate.merge_phase(ranks, nodes=["a", "b"])
    assert "read" not in m and "write" not in m
    assert (m["trim"]["bytes"], m["trim"]["ops"]) == (3 * 4096, 3)
    assert m["trim"]["lat_ns"]["min"] == 500 and m["trim"]["lat_ns"]["max"] == 900
    assert m["aggregate"]["bytes"] == 3 * 4096, "trimmed bytes count in the aggregate"
    assert [rank["bytes"] for rank in m["mpi"]["ranks"]] == [2 * 4096, 4096]


def test_merged_histogram_equals_the_histogram_of_all_samples_and_moments_are_exact():
    rng = random.Random(7)
    samples = [[int(rng.lognormvariate(10, 1)) for _ in range(n)] for n in (500, 300, 700)]
    results = [rank_result(1000.0, 0.0, [(0.0, 1.0, 4096 * len(s))], s) for s in samples]
    m = aggregate.merge_phase(results)
    everything = [x for s in samples for x in s]
    assert m["read"]["lat_hist"]["buckets"] == stats.histogram(everything)
    assert m["read"]["ops"] == len(everything)
    lat = m["read"]["lat_ns"]
    assert lat["min"] == min(everything) and lat["max"] == max(everything)
    assert lat["mean"] == pytest.approx(sum(everything) / len(everything))
    assert lat["stddev"] == pytest.approx(_stddev(everything))
    assert lat["p99"] == stats.percentile(stats.histogram(everything), 99)


def test_merged_percentiles_lie_within_the_exact_merged_min_and_max():
    # regression: p99.9 6,652 us against a max of 6,626 us (the midpoint of the max's bucket)
    r0 = rank_result(1000.0, 0.0, [(0.0, 1.0, 4096 * 1000)], [5_000_000] * 997 + [6_600_000] * 3)
    r1 = rank_result(1000.0, 0.0, [(0.0, 1.0, 4096 * 1000)], [5_000_000] * 997 + [6_626_000] * 3)
    lat = aggregate.merge_phase([r0, r1])["read"]["lat_ns"]
    assert lat["max"] == 6_626_000
    assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert lat["p999"] == 6_626_000


def test_no_window_when_a_rank_finished_before_another_started():
    r0 = rank_result(1000.0, 0.0, [(0.0, 1.0, 10)], [5])
    r1 = rank_result(1002.0, 0.0, [(0.0, 1.0, 10)], [5])
    m = aggregate.merge_phase([r0, r1], window_bytes=[None, None])
    assert m["aggregate"]["deskew_window_s"] is None and m["aggregate"]["deskew_bw_bytes"] is None


def test_a_missing_or_failed_rank_makes_the_phase_incomplete_and_names_it():
    r0 = rank_result(1000.0, 0.0, [(0.0, 1.0, 10)], [5])
    m = aggregate.merge_phase([r0, None])
    assert not m["complete"] and m["stop_reason"] == "error"
    assert m["error"] == "no result from rank 1" and m["mpi"]["missing_ranks"] == [1]
    bad = rank_result(1000.0, 0.0, [(0.0, 0.5, 10)], [5])
    bad.update(complete=False, stop_reason="error", error="rank 1 (node b) failed: disk on fire")
    m = aggregate.merge_phase([r0, bad])
    assert m["error"] == "rank 1 (node b) failed: disk on fire"


def test_verification_counts_add_up_and_each_mismatch_names_its_rank():
    r0 = rank_result(1000.0, 0.0, [(0.0, 1.0, 10)], [5])
    r1 = rank_result(1000.0, 0.0, [(0.0, 1.0, 10)], [5])
    r0["verify"] = {"kind": "crc32c", "checked_blocks": 10, "mismatches": 0, "first": []}
    r1["verify"] = {"kind": "crc32c", "checked_blocks": 10, "mismatches": 1,
                    "first": [{"target": "/t", "offset": 4096, "field": "checksum"}]}
    v = aggregate.merge_phase([r0, r1])["verify"]
    assert (v["checked_blocks"], v["mismatches"]) == (20, 1)
    assert v["first"][0]["rank"] == 1


# -- scaling ---------------------------------------------------------------------------------------


def test_rank_counts_double_up_to_the_launch_size():
    assert scaling.rank_counts(1) == [1]
    assert scaling.rank_counts(4) == [1, 2, 4]
    assert scaling.rank_counts(6) == [1, 2, 4, 6]
    assert scaling.rank_counts(8, [8, 2, 2]) == [2, 8]
    with pytest.raises(ValueError, match="between 1 and the 4 ranks"):
        scaling.rank_counts(4, [8])


def fake_run(ranks, bw, deskew):
    return {"mpi": {"size": ranks, "nodes": [{"node": "a"}]},
            "phases": [{"name": "write", "complete": True, "seconds": 1.0,
                        "aggregate": {"bytes": int(bw), "bw_bytes": bw, "deskew_bw_bytes": deskew}}]}


def test_efficiency_is_speedup_over_the_ideal_speedup():
    curve = scaling.scaling_curve([fake_run(1, 100.0, 100.0), fake_run(2, 180.0, 200.0), fake_run(4, 200.0, None)])
    pts = curve[0]["points"]
    assert [p["speedup"] for p in pts] == [1.0, 1.8, 2.0]
    assert [p["efficiency"] for p in pts] == [1.0, 0.9, 0.5]
    assert pts[1]["deskew_efficiency"] == 1.0 and pts[2]["deskew_efficiency"] is None
    from_two = scaling.scaling_curve([fake_run(2, 180.0, 200.0), fake_run(4, 270.0, 300.0)])
    assert from_two[0]["base_ranks"] == 2 and from_two[0]["points"][1]["efficiency"] == pytest.approx(0.75)


# -- the tree of the collectives ------------------------------------------------------------------

@pytest.mark.parametrize("n", range(1, 71))
def test_the_tree_spans_every_rank_once_with_log_n_children_and_depth(n):
    """Parent and children agree; every rank is below rank 0 exactly once; subtrees are the
    ranks below; no rank has more than ceil(log2 n) children and no path is longer."""
    bound = math.ceil(math.log2(n)) if n > 1 else 0
    seen = []
    for r in range(n):
        kids = tree.children(r, n)
        assert len(kids) <= bound
        assert all(tree.parent(c) == r for c in kids)
        seen.extend(kids)
        assert list(tree.subtree(r, n)) == sorted([r] + [x for c in kids for x in tree.subtree(c, n)])
        depth, up = 0, r
        while up:
            up, depth = tree.parent(up), depth + 1
        assert depth <= bound
        assert tree.height(r, n) <= bound - depth if r else tree.height(0, n) == bound
    assert sorted(seen) == list(range(1, n))
    assert tree.parent(0) is None


@pytest.mark.parametrize("n", [7, 12, 33, 70])
def test_the_tree_heals_around_gone_ranks(n):
    """With some ranks gone, every living rank still reaches rank 0 through living ancestors, and
    the living ranks rank 0's gather waits for are exactly the living ones, each heard once."""
    rng = random.Random(n)
    for _ in range(20):
        gone = set(rng.sample(range(1, n), k=rng.randint(1, max(1, n // 4))))
        living = [r for r in range(n) if r not in gone]
        heard_by: dict[int, int] = {}
        for r in living:
            for c in tree.living_children(r, n, gone):
                assert c not in gone and c not in heard_by
                heard_by[c] = r
                assert tree.living_parent(c, gone) == r        # both ends agree on the edge
            assert all(p not in gone for p in [tree.living_parent(r, gone)] if p is not None)
        assert sorted(heard_by) == living[1:]
        # neighbours are symmetric, so heartbeats go both ways along every edge
        for r in living:
            assert all(r in tree.neighbours(x, n, gone) for x in tree.neighbours(r, n, gone))


def test_a_child_already_heard_from_is_not_waited_for_again_nor_what_is_below_it():
    assert list(tree.living_children(0, 8, gone=set(), done={4})) == [1, 2]
    assert list(tree.living_children(0, 8, gone={4}, done=set())) == [1, 2, 5, 6]
    assert list(tree.living_children(0, 8, gone={4, 6}, done={5})) == [1, 2, 7]


def _random_report(rng: random.Random, complete: bool = True) -> dict:
    workers = [{"start_s": rng.uniform(0, 0.2), "end_s": rng.uniform(0.5, 3.0)} for _ in range(rng.randint(0, 3))]
    return {"start_unix_s": 1e9 + rng.uniform(0, 0.3), "offset_s": rng.uniform(-0.01, 0.01), "complete": complete,
            "stop_reason": "done" if complete else "error", "error": None if complete else "boom", "workers": workers}


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 33])
def test_the_window_merged_along_the_tree_is_the_window_of_all_reports(n):
    """The phase boundary merges a few numbers per rank pairwise up the tree (any grouping):
    the window, the time base, each rank's shift and the first stop are those found from every
    rank's full report."""
    rng = random.Random(n)
    reports = [_random_report(rng, complete=rng.random() > 0.2) for _ in range(n)]
    if all(not r["workers"] for r in reports):
        reports[0]["workers"] = [{"start_s": 0.0, "end_s": 1.0}]
    t0, shifts, window = aggregate.deskew_window(reports)

    def up(r: int) -> dict:      # what rank r sends its parent: its subtree merged
        s = aggregate.window_summary(r, reports[r])
        for c in tree.children(r, n):
            s = aggregate.merge_window_summaries(s, up(c))
        return s

    merged = up(0)
    got_t0, got_window = aggregate.window_of_summary(merged)
    assert got_t0 == t0 and got_window == window
    for r, x in enumerate(reports):
        assert x["start_unix_s"] + x["offset_s"] - got_t0 == shifts[r]
    first = next((r for r, x in enumerate(reports) if not x["complete"]), None)
    assert (merged["stop"] or {}).get("rank") == first
