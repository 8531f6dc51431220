"""The closed queueing network (storlab.model.queueing) against cases worked out by hand, and the
prediction's concurrency never above the ceilings of performance_of."""
from __future__ import annotations

import dataclasses
import glob
import math
import os

import pytest
from storlab.model.costs import reordered_positioning_fraction
from storlab.model.predict import Device, Workload, predict
from storlab.model.queueing import Station, solve_closed
from storlab.model.stack import DriveType, load_stack, stack_from_notation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_one_request_is_littles_law_one_over_the_time_of_a_request():
    # QD1: X = 1 / (Z + D); Little's law N = X R gives R = Z + D
    s = solve_closed([Station("disk", 0.008)], 0.002, 1)
    assert s.throughput == pytest.approx(1 / 0.010)
    assert s.response_s == pytest.approx(0.010)
    assert s.utilisation["disk"] == pytest.approx(0.8)


def test_two_requests_by_hand():
    # n=1: R=D=4 ms, X=1/(6 ms), Q=4/6; n=2: R=4 (1 + 2/3) = 6.667 ms, X = 2 / 8.667 ms = 230.8/s
    s = solve_closed([Station("disk", 0.004)], 0.002, 2)
    assert s.throughput == pytest.approx(2 / (0.002 + 0.004 * (1 + 4 / 6)))


def test_no_delay_keeps_a_single_server_busy_at_any_depth():
    for n in (1, 2, 8, 64):
        assert solve_closed([Station("d", 0.005)], 0.0, n).throughput == pytest.approx(200)


def test_balanced_stations_follow_n_over_n_plus_k_minus_one():
    # K balanced stations without delay: X(N) = N / ((N + K - 1) D), the random-routing loss
    for n in (1, 4, 16):
        s = solve_closed([Station(f"m{i}", 0.001) for i in range(4)], 0.0, n)
        assert s.throughput == pytest.approx(n / ((n + 3) * 0.001))


def test_throughput_rises_with_depth_towards_the_bottleneck_and_never_above_it():
    stations = [Station("cpu", 0.001, servers=4), Station("link", 0.0002)]
    last = 0.0
    for n in (1, 2, 4, 8, 16, 64, 256, 4096):
        x = solve_closed(stations, 0.0005, n).throughput
        assert last <= x <= min(st.capacity for st in stations) * (1 + 1e-12)
        last = x
    assert last == pytest.approx(4000, rel=1e-3)


def test_multi_server_is_exact_at_one_request():
    s = solve_closed([Station("ssd", 0.0001, servers=32)], 0.00002, 1)
    assert s.throughput == pytest.approx(1 / 0.00012)


def test_tail_is_above_the_mean_and_grows_with_queueing():
    light = solve_closed([Station("d", 0.005)], 0.05, 1)
    heavy = solve_closed([Station("d", 0.005)], 0.0, 32)
    assert light.tail_s == pytest.approx(light.response_s)      # nothing waits: the tail is the mean
    assert heavy.tail_s > heavy.response_s
    assert heavy.response_s == pytest.approx(32 * 0.005)


def test_the_tail_of_a_saturated_station_is_an_erlang_wait_not_an_exponential_one():
    # 32 requests at one disk and nothing else: each waits for the 31 others, a sum of 31 services
    # (Erlang), whose 99th percentile is about 1.4 x its mean; the exponential figure would be 4.6
    heavy = solve_closed([Station("d", 0.005)], 0.0, 32)
    wait = heavy.response_s - 0.005
    assert 1.3 * wait < heavy.tail_s - 0.005 < 1.6 * wait


def test_the_wait_multiple_has_the_m_m_1_and_the_erlang_limits():
    from storlab.model.queueing import wait_quantile_multiple
    # many requests, light use: the M/M/1 wait, P(W > t) = rho exp(-(1 - rho) t / S): its 99th
    # percentile is ln(100 rho) / rho times its mean
    for rho in (0.5, 0.9):
        assert wait_quantile_multiple(100_000, 1.0, 100_000 / rho) == pytest.approx(math.log(100 * rho) / rho,
                                                                                  rel=0.01)
    # all at the station: an Erlang wait of N - 1 services (its p99 from the gamma quantile:
    # 15 services, mean 15, p99 about 25)
    assert wait_quantile_multiple(16, 1.0, 0.0) == pytest.approx(25.0 / 15.0, rel=0.03)
    # nobody else: nothing to wait for
    assert wait_quantile_multiple(1, 1.0, 1.0) == 1.0


def test_bad_stations_are_refused():
    with pytest.raises(ValueError, match="service_scv"):
        Station("x", 1.0, service_scv=-0.5)
    with pytest.raises(ValueError):
        Station("x", -1.0)
    with pytest.raises(ValueError):
        Station("x", 1.0, servers=0)
    with pytest.raises(ValueError):
        solve_closed([], 0.0, 0)


def test_a_disk_curve_over_queue_depth_rises_to_its_iops():
    disk = Device(150e6, 150e6, 150.0, 150.0, 1 / 150, "disk")
    rates = [predict(None, Workload("randread", 4096, qd=q), [disk]).iops for q in (1, 2, 4, 8, 32)]
    assert rates == sorted(rates)
    assert rates[0] == pytest.approx(1 / (1 / 150 + 4096 / 150e6))
    assert rates[-1] == pytest.approx(1 / (1 / 150 + 4096 / 150e6), rel=1e-6)   # positioning + transfer
    p = predict(None, Workload("randread", 4096, qd=32), [disk])
    assert p.latency_mean_s == pytest.approx(32 / p.iops)
    assert p.latency_tail_s > p.latency_mean_s


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "examples", "stacks", "*.toml"))))
def test_deep_queues_never_exceed_the_ceilings_of_performance_of(path):
    from storlab.model.performance import performance_of
    stack = load_stack(path)
    ceiling = performance_of(stack, 1 << 20, 4096)
    for rw, metric, request in (("read", "seq_read", 1 << 20), ("write", "seq_write", 1 << 20),
                                ("randread", "random_read", 4096), ("randwrite", "random_write", 4096)):
        for qd in (1, 8, 256):
            p = predict(stack, Workload(rw, request, qd=qd, threads=4))
            value = p.bw_bytes if metric.startswith("seq") else p.iops
            assert value <= ceiling.value(metric) * (1 + 1e-6), (rw, qd)


def test_spinning_drive_random_reads_are_seek_bound_and_sequential_reads_stream():
    drive = DriveType("nl", 10**12, 1e6, seq_read_bw_bytes=150e6, random_read_iops=80, random_write_iops=80)
    stack = stack_from_notation("R0/4", 64 << 10, drive=drive)
    seq = predict(stack, Workload("read", 1 << 20, qd=8))
    rnd = predict(stack, Workload("randread", 4096, qd=64))
    assert seq.bw_bytes == pytest.approx(4 * 150e6, rel=0.01)
    # one request at a time: below four drives' stated 80 IOPS (each request also transfers)
    alone = predict(stack, Workload("randread", 4096, qd=1))
    assert 0.9 * 80 < alone.iops < 80
    # 64 outstanding put 16 on each drive, which serves the soonest first: more than the stated
    # IOPS, at most what 16 queued allow
    assert 4 * 80 < rnd.iops < 4 * 80 / reordered_positioning_fraction(16)
    assert math.isfinite(rnd.latency_tail_s)


SERVER_STACK = """
[drive]
capacity = "1TB"
seq = "10GB/s"
random_iops = 1000000
rotational = false
[raid]
layout = "R0/2"
chunk = "1MiB"
[[component]]
name = "nfs-server"
cpu_per_request = "100us"
cpu_rate = "500MB/s"
cores = 2
groups = 1
"""


def test_a_file_server_s_cpu_caps_small_requests_per_request_and_large_ones_per_byte():
    import tomllib
    from storlab.model.stack import stack_from_dict
    stack = stack_from_dict(tomllib.loads(SERVER_STACK))
    small = predict(stack, Workload("randread", 4096, qd=256))
    assert small.iops == pytest.approx(2 / (100e-6 + 4096 / 500e6), rel=0.01)
    assert small.limiting == "nfs-server"
    large = predict(stack, Workload("read", 1 << 20, qd=64))
    assert large.bw_bytes == pytest.approx(2 / (100e-6 + (1 << 20) / 500e6) * (1 << 20), rel=0.01)
    # one request at a time pays the CPU time on top of the drives'
    one = predict(stack, Workload("randread", 4096, qd=1))
    assert one.latency_mean_s > 100e-6 + 4096 / 500e6


def test_a_wait_beside_the_requests_own_transfer_is_hidden_up_to_the_overlap():
    # one station D = 10 ms; Z = 1 ms fixed + 15 ms of the request's own slower transfer (overlap)
    st = [Station("shared", 0.010)]
    plain = solve_closed(st, 0.016, 2)
    hidden = solve_closed(st, 0.016, 2, overlap_s=0.015)
    # n = 1: no wait, nothing to hide: X = 1 / (Z + D) either way
    assert solve_closed(st, 0.016, 1, overlap_s=0.015).throughput == pytest.approx(1 / 0.026)
    # n = 2: R = D (1 + Q(1)), Q(1) = D / (Z + D); the wait D Q(1) = 3.85 ms < 15 ms is all hidden
    q1 = 0.010 / 0.026
    r2 = 0.010 * (1 + q1)
    assert plain.throughput == pytest.approx(2 / (0.016 + r2))
    assert hidden.throughput == pytest.approx(2 / (0.016 + r2 - 0.010 * q1))
    # with many requests the station's capacity binds all the same, never exceeded
    deep = solve_closed(st, 0.016, 50, overlap_s=0.015)
    assert deep.throughput == pytest.approx(100, rel=1e-3) and deep.throughput <= 100 * (1 + 1e-12)


def test_the_overlap_must_be_part_of_the_delay():
    with pytest.raises(ValueError, match="overlap"):
        solve_closed([Station("s", 0.01)], 0.001, 2, overlap_s=0.002)


# --- a station that reorders its queue (a spinning drive's rotational position ordering) ----------

def test_a_reordering_station_alone_is_the_plain_station_at_one_request():
    plain = Station("drive", 0.0127)
    reordering = Station("drive", 0.0127, positioning_s=0.0125, reorder_depth=32)
    assert solve_closed([reordering], 0.001, 1).throughput == pytest.approx(solve_closed([plain], 0.001, 1).throughput)


def test_a_reordering_station_serves_faster_the_more_it_holds_and_stops_at_its_depth():
    d, p = 0.0127, 0.0125
    st = Station("drive", d, positioning_s=p, reorder_depth=32)
    x = {n: solve_closed([st], 0.0, n).throughput for n in (1, 2, 4, 16, 32, 64, 256)}
    # it chooses among those left when one finishes: with two outstanding, the other one alone
    assert x[2] == pytest.approx(x[1])
    assert all(x[a] < x[b] for a, b in ((2, 4), (4, 16), (16, 32)))
    # with no delay every request waits at the drive: n - 1 left to choose from when one finishes
    assert x[16] == pytest.approx(1 / (d - p * (1 - reordered_positioning_fraction(15))), rel=0.01)
    # beyond its depth it chooses among 32 at most: its capacity, never more
    assert x[256] == pytest.approx(st.capacity, rel=1e-6)
    assert x[64] <= st.capacity * (1 + 1e-9)
    assert st.capacity == pytest.approx(1 / (d - p * (1 - reordered_positioning_fraction(32))))


def test_a_station_that_does_not_reorder_ignores_its_queue():
    st = Station("limiter", 0.01, positioning_s=0.01, reorder_depth=1)
    assert solve_closed([st], 0.0, 64).throughput == pytest.approx(100.0)


def test_a_station_refuses_a_positioning_beyond_its_demand_or_a_depth_below_one():
    with pytest.raises(ValueError, match="positioning"):
        Station("drive", 0.01, positioning_s=0.02, reorder_depth=32)
    with pytest.raises(ValueError, match="reorder depth"):
        Station("drive", 0.01, positioning_s=0.005, reorder_depth=0)


def _drive_draw():
    """benchmarks/model_drive_draw.py: random reads drawn on drives with head positions."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("model_drive_draw", os.path.join(ROOT, "benchmarks",
                                                                                    "model_drive_draw.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("drives, requests", [(12, 16), (12, 32), (4, 8), (1, 8)])
def test_reordering_drives_follow_a_seeded_draw(drives, requests):
    # A drive serves the soonest of its queue, so it serves faster exactly while its queue is long:
    # the queue-length distribution, not the mean queue, sets the rate (twelve drives, 16 requests:
    # 595 reads/s from the mean queue, 727 drawn with the heads where their last request left
    # them). The model follows the draw within 5 %.
    draw = _drive_draw()
    stack = stack_from_notation(f"R0/{drives}", 64 * 1024, drive=draw.DRIVE, engine="md")
    predicted = predict(stack, Workload("randread", 4096, qd=requests)).latency_mean_s
    drawn, _ = draw.draw(drives, requests, 4096, completions=20_000)
    assert predicted == pytest.approx(drawn, rel=0.05)


def test_serving_in_no_order_of_arrival_spreads_the_wait():
    # Kingman (1962): the same mean wait, its second moment 2 / (2 - load) times the first-come one
    from storlab.model.queueing import wait_quantile_multiple
    fcfs = wait_quantile_multiple(64, 0.01, 0.02)
    assert wait_quantile_multiple(64, 0.01, 0.02, random_order=True) > fcfs * 1.1
    # two requests at one station: the other is in service or gone, never waiting: no order to change
    assert wait_quantile_multiple(2, 0.01, 0.0, random_order=True) == pytest.approx(wait_quantile_multiple(2, 0.01, 0.0))
    # a station that reorders is served so in the network's tail
    plain = Station("drive", 0.0127, service_scv=0.1)
    reordering = Station("drive", 0.0127, positioning_s=0.0125, reorder_depth=32, service_scv=0.1)
    assert solve_closed([reordering], 0.001, 8).tail_s > solve_closed([plain], 0.001, 8).tail_s


def test_a_station_refuses_a_visit_share_outside_one():
    with pytest.raises(ValueError, match="visit share"):
        Station("drive", 0.01, visit_share=0.0)
    with pytest.raises(ValueError, match="visit share"):
        Station("drive", 0.01, visit_share=1.5)


@pytest.mark.parametrize("drives, chunk_kib, request_kib, requests, within", [
    (12, 64, 256, 4, 0.05), (12, 64, 256, 16, 0.05), (12, 64, 256, 64, 0.05), (12, 64, 1024, 4, 0.20),
    (12, 64, 1024, 16, 0.05), (12, 64, 1024, 64, 0.05), (8, 128, 512, 8, 0.10), (6, 64, 384, 8, 0.10),
    (16, 64, 128, 32, 0.05)])
def test_a_read_split_over_drives_waits_for_the_drive_that_serves_it_last(drives, chunk_kib, request_kib, requests,
                                                                          within):
    # each drive serves the soonest of its own queue, so a request's pieces finish apart: served as
    # one team the drives came out 7 to 24 % fast on twelve drives; each drive's own order, the
    # request waiting for the last, follows the draw (the last three layouts were drawn after the
    # mechanism was written against the first six)
    draw = _drive_draw()
    stack = stack_from_notation(f"R0/{drives}", chunk_kib * 1024, drive=draw.DRIVE, engine="md")
    predicted = predict(stack, Workload("randread", request_kib * 1024, qd=requests))
    drawn, drawn_p99 = draw.draw(drives, requests, request_kib * 1024, chunk_kib * 1024, completions=20_000)
    assert predicted.latency_mean_s == pytest.approx(drawn, rel=within)
    assert predicted.latency_tail_s == pytest.approx(drawn_p99, rel=0.5)


def test_the_last_of_several_drives_orders():
    from storlab.model.queueing import _last_of
    # one drive: the first-come count, whatever the load; nobody found: none
    assert _last_of(1, 5, 0.3) == 4 and _last_of(3, 1, 1.0) == 0
    # a queue kept full: two drives that found two each (one in service) pick it first with chance
    # 1/2 at every choice, P(G >= g) = 2^-g, E[max of two] = sum 1 - (1 - 2^-g)^2 = 2 - 1/3
    assert _last_of(2, 2, 1.0) == pytest.approx(5 / 3, rel=1e-6)
    # nothing refills it: found four (one in service), a uniform place among the four it then
    # chooses from (three waiting and itself), 0 to 3 services first; the later of two drives'
    # places: P(max = v) = ((v + 1)^2 - v^2) / 16, E = (0 + 3 + 10 + 21) / 16 = 17 / 8
    assert _last_of(2, 4, 0.0) == pytest.approx(17 / 8, rel=1e-6)
    # between the two, and the more drives the longer the wait for the last
    assert _last_of(2, 4, 0.0) < _last_of(2, 4, 0.5) < _last_of(2, 4, 1.0) < _last_of(4, 4, 1.0)
    with pytest.raises(ValueError, match="fork"):
        Station("drives", 0.01, fork=0)


@pytest.mark.parametrize("parities, drives, requests, within", [
    (1, 6, 4, 0.12), (1, 6, 16, 0.12), (1, 6, 64, 0.15), (1, 12, 4, 0.12), (1, 12, 16, 0.12), (1, 12, 64, 0.12),
    (1, 6, 1, 0.25), (2, 8, 16, 0.12), (2, 12, 4, 0.18), (2, 12, 64, 0.12)])
def test_raid5_and_6_small_writes_follow_a_seeded_draw(parities, drives, requests, within):
    # a read-modify-write with no cache to take it reads the old data and parities on two (RAID 5)
    # or three (RAID 6) drives, then writes them, each drive serving its queue in its own order:
    # the request waits for the later drives of each pass. Served as one team of its operations
    # the model came out 10 to 19 % fast on RAID 5 from 4 requests on; now within 11 %, and within
    # 15 % on the RAID 6 layouts drawn afterwards. One request alone is 19 % slow: its write finds
    # the head over its sector and waits a revolution, where the model charges a seek and half a
    # revolution (docs/model.md, "Writes split over drives")
    draw = _drive_draw()
    drive = dataclasses.replace(draw.DRIVE, write_cache=False)
    stack = stack_from_notation(f"R{4 + parities}/{drives}", 64 * 1024, drive=drive, engine="md")
    predicted = predict(stack, Workload("randwrite", 4096, qd=requests))
    drawn, drawn_p99 = draw.draw_writes(drives, requests, completions=10_000, parities=parities)
    assert predicted.latency_mean_s == pytest.approx(drawn, rel=within)
    assert predicted.latency_tail_s == pytest.approx(drawn_p99, rel=0.5)
