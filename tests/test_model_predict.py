"""Expected rates (storlab.model.predict) against figures worked out by hand: Little's law at a given
queue depth, striping over members, a slow member, RAID 5 small writes, mirrors read per thread, the
controller cache in and out of cache, and shared path components."""
from __future__ import annotations

import dataclasses

import pytest
from storlab.model.costs import ARRAY_REQUEST_OVERHEAD_S, CONTROLLER_REQUEST_LATENCY_S
from storlab.model.performance import performance_of
from storlab.model.predict import ControllerCache, Device, Workload, predict
from storlab.model.stack import Component, DriveType, StackError, stack_from_dict, stack_from_notation

MB = 10**6
KiB = 1024
MiB = 1 << 20
DRIVE = DriveType("d", 10**12, 1e6)


def dev(bw=100 * MB, iops=150.0, latency_s=0.010, shared_time=True, name="d", queues=True):
    return Device(bw, bw, iops, iops, latency_s, name, shared_time, queues=queues)


def test_one_disk_qd1_is_one_over_latency_and_deep_queues_reach_its_iops():
    # QD1: 1 / (10 ms + 4096 B / 100 MB/s = 0.041 ms) = 99.6 IOPS, below the 150 IOPS the disk does
    p = predict(None, Workload("randread", 4096, qd=1), [dev()])
    assert p.iops == pytest.approx(1 / (0.010 + 4096 / 100e6))
    assert p.limiting == "queue depth"
    # QD16: 16 requests queue at the disk (service 1/150 s, the rest of the 10 ms a delay): the
    # closed network keeps it busy all the time, so its 150 IOPS bind
    # a random request holds the disk for its positioning (1/150 s) plus its transfer
    busy = 1 / 150 + 4096 / 100e6
    p = predict(None, Workload("randread", 4096, qd=16), [dev()])
    assert p.iops == pytest.approx(1 / busy)
    assert p.limiting == "d"
    # a rate limiter (the blkio throttle) has no queue: Little's bound 16 / 10.04 ms stands beside it
    t = predict(None, Workload("randread", 4096, qd=16), [dev(queues=False, shared_time=False)])
    assert t.iops == pytest.approx(150)
    assert t.component("queue depth").headroom_fraction == pytest.approx(1 - 150 * (0.010 + 4096 / 100e6) / 16)


def test_striped_sequential_read_needs_enough_outstanding_bytes():
    stack = stack_from_notation("R0/4", 64 * KiB, drive=DRIVE)
    d = dev(latency_s=0.001)
    # 1 MiB over 4 members = 256 KiB each, in parallel: 1 ms + 262144 / 100 MB/s = 3.62 ms per request
    p = predict(stack, Workload("read", MiB, qd=1), [d])
    assert p.iops == pytest.approx(1 / (0.001 + 262144 / 100e6))
    assert p.bw_bytes == pytest.approx(MiB / (0.001 + 262144 / 100e6))      # 289.6 MB/s
    # QD4: Little allows 1105 requests/s; each member carries 256 KiB per request: 381 requests/s
    p = predict(stack, Workload("read", MiB, qd=4), [d])
    assert p.bw_bytes == pytest.approx(4 * 100 * MB, rel=1e-3)     # the queue keeps the members 99.9 % busy
    assert p.limiting.startswith("member[0]")


def test_a_slow_member_slows_the_whole_striped_volume():
    # the seed: "a slow physical volume ... may slow down the overall striped LV"; each member gets half
    # of every request, so the 50 MB/s member caps the volume at 2 x 50 MB/s
    stack = stack_from_notation("R0/2", 64 * KiB, drive=DRIVE)
    p = predict(stack, Workload("read", MiB, qd=8), [dev(name="fast"), dev(bw=50 * MB, name="slow")])
    assert p.bw_bytes == pytest.approx(2 * 50 * MB, rel=1e-4)
    assert p.limiting == "member[1] slow"
    # at QD 1 with a short latency the queue-depth bound is a hair below the slow member's: the
    # member is busy all the time and is named, with the queue depth's headroom still reported
    q1 = predict(stack, Workload("read", MiB, qd=1), [dev(name="fast", latency_s=1e-5),
                                                      dev(bw=50 * MB, name="slow", latency_s=1e-5)])
    assert q1.bw_bytes == pytest.approx(MiB / (1e-5 + 524288 / 50e6))
    assert q1.limiting == "member[1] slow"
    assert q1.component("queue depth").binding
    assert p.component("member[0] fast").headroom_fraction == pytest.approx(0.5, rel=1e-4)


def test_raid5_small_random_writes_cost_four_operations():
    # 4+1, 64 KiB chunk, 4 KiB aligned random writes: read old data + parity, write both = 4 ops
    # over 5 disks of 150 IOPS: 5 x 150 / 4 = 187.5 IOPS (transfer time negligible beside 1/150 s)
    stack = stack_from_notation("R5/5", 64 * KiB, drive=DRIVE)
    p = predict(stack, Workload("randwrite", 4096, qd=32), [dev(bw=10**12)])
    assert p.component("member[0] d").capacity_iops == pytest.approx(5 * 150 / 4)
    # each write keeps two of the five drives busy (its data's and its parity's): 32 requests keep
    # the drives busy nearly all the time, never past their capacity (two balanced queues: 32 / 33)
    assert 5 * 150 / 4 * 0.95 < p.iops <= 5 * 150 / 4


def test_full_stripe_writes_move_parity_but_no_reads():
    # 4+1 at 64 KiB: 256 KiB requests are full stripes; every member writes 64 KiB per request:
    # 100 MB/s / 65536 = 1526 requests/s = 400 MB/s of host data (4 data disks' worth)
    stack = stack_from_notation("R5/5", 64 * KiB, drive=DRIVE)
    p = predict(stack, Workload("write", 256 * KiB, qd=16), [dev(latency_s=0.0001)])
    assert p.bw_bytes == pytest.approx(4 * 100 * MB)


def test_mirror_read_by_one_thread_uses_one_copy_with_the_per_thread_policy():
    stack = stack_from_notation("R10/4", 64 * KiB, drive=DRIVE)
    d = dev(iops=500, latency_s=20e-6, shared_time=False, queues=False)
    one = predict(stack, Workload("randread", 4096, qd=16), [d], mirror_read="per-thread")
    assert one.iops == pytest.approx(2 * 500)
    two = predict(stack, Workload("randread", 4096, qd=16, threads=2), [d], mirror_read="per-thread")
    assert two.iops == pytest.approx(4 * 500)
    assert predict(stack, Workload("randread", 4096, qd=16), [d]).iops == pytest.approx(4 * 500)


def test_in_cache_reads_run_at_the_cache_rate_and_out_of_cache_at_the_members():
    stack = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE)
    cache = ControllerCache(8 * 10**9, read_bw_bytes=700 * MB, write_bw_bytes=500 * MB)
    # in cache: 128 MB region in an 8 GB cache -> 700 MB/s, the cache is the limit
    p = predict(stack, Workload("read", MiB, qd=8, working_set_bytes=128 * 10**6), [dev(iops=10**6)], cache=cache)
    assert p.bw_bytes == pytest.approx(700 * MB) and p.limiting == "cache"
    # out of cache: 9 members x 100 MB/s serve the sweep (parity rotates, every member holds data)
    p = predict(stack, Workload("read", MiB, qd=32, working_set_bytes=50 * 10**9), [dev(iops=10**6, latency_s=1e-4)],
                cache=cache)
    assert p.bw_bytes == pytest.approx(min(700 * MB, 9 * 100 * MB))
    # random 4 KiB reads over 32 GB: a quarter hit, members carry 3/4: 9 x 150 / 0.75 = 1800 IOPS
    p = predict(stack, Workload("randread", 4096, qd=64, working_set_bytes=32 * 10**9), [dev()], cache=cache)
    # (random requests queue at the member they land on: 64 outstanding over 9 queues keep them
    # busy 87 % of the time, mean-value analysis of the closed network)
    assert 0.85 * 9 * 150 / 0.75 < p.iops < 9 * 150 / 0.75


def test_a_cache_without_a_named_controller_takes_the_default_controller_time():
    # a RAID notation given a cache names no controller; the cache's controller still takes its
    # time for every request: one 4 KiB hit at depth one is the host's 50 us, the HBA's 20 us and
    # the default controller's 200 us (costs.py), not 70 us
    from storlab.model.costs import CONTROLLER_REQUEST_LATENCY_S, HBA_REQUEST_OVERHEAD_S, HOST_REQUEST_OVERHEAD_S
    stack = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE)
    hit = Workload("randread", 4096, working_set_bytes=10**8)
    p = predict(stack, hit, [dev()], cache=ControllerCache(10**9, 700 * MB, 700 * MB))
    lone = HOST_REQUEST_OVERHEAD_S + HBA_REQUEST_OVERHEAD_S + CONTROLLER_REQUEST_LATENCY_S
    assert p.iops == pytest.approx(1 / (lone + 4096 / (700 * MB)))
    # a cache that states its latency states the controller's time; a named controller brings its own
    stated = predict(stack, hit, [dev()], cache=ControllerCache(10**9, 700 * MB, 700 * MB, latency_s=50e-6))
    assert stated.iops == pytest.approx(1 / (120e-6 + 4096 / (700 * MB)))
    named = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE,
                                path=Component("raid", kind="controller", cpu_per_request_s=10e-6, groups=1))
    p = predict(named, hit, [dev()], cache=ControllerCache(10**9, 700 * MB, 700 * MB))
    assert p.iops == pytest.approx(1 / (80e-6 + 4096 / (700 * MB)))


def test_the_implied_controller_handles_the_vendors_request_rate():
    # a RAID notation's controller, stated by nobody, handles costs.CONTROLLER_REQUEST_RATE host
    # requests/s (the vendor's 60,000 for 6 Gb/s SAS RAID-on-chip controllers): eight flash drives
    # that serve 720,000 reads/s between them read 60,000 at depth 256, the controller named
    from storlab.model.costs import CONTROLLER_REQUEST_RATE
    from storlab.model.stack import IMPLIED_CONTROLLER
    ssd = DriveType("ssd", 10**12, 1e6, seq_read_bw_bytes=500 * MB, random_read_iops=90_000, rotational=False,
                    read_latency_s=90e-6)
    stack = stack_from_notation("R5/8", 64 * KiB, drive=ssd)
    deep = Workload("randread", 4 * KiB, qd=256)
    p = predict(stack, deep)
    assert CONTROLLER_REQUEST_RATE == 60_000
    assert p.iops == pytest.approx(60_000, rel=1e-3) and p.limiting == IMPLIED_CONTROLLER
    assert any("handles at most 60,000 requests/s" in a for a in p.assumptions)
    # its queue: 256 requests through one server of 1 / 60,000 s each wait 256 / 60,000 s in all
    assert p.latency_mean_s == pytest.approx(256 / 60_000, rel=0.01)
    # one request at a time does not reach it: the delay (drive, host, HBA, controller time) binds
    assert predict(stack, Workload("randread", 4 * KiB)).limiting == "queue depth"
    # a stated rate replaces the default (--controller-iops, a [cache] table's iops)
    stated = predict(stack, deep, cache=ControllerCache(None, 1e15, 1e15, iops=200_000))
    assert stated.iops == pytest.approx(200_000, rel=1e-3) and stated.limiting == IMPLIED_CONTROLLER
    assert not any("handles at most" in a for a in stated.assumptions)
    # Linux md has no controller; measured members hold what was in front of them
    md = stack_from_notation("R5/8", 64 * KiB, drive=ssd, engine="md")
    assert predict(md, deep).iops > 100_000
    measured = Device(500 * MB, 500 * MB, 90_000, 90_000, 90e-6, "profile", False, parallelism=8)
    assert predict(stack, deep, [measured]).iops > 100_000
    # spinning drives stay far below it: no assumption printed
    spinning = predict(stack_from_notation("R5/8", 64 * KiB, drive=DRIVE), deep)
    assert spinning.iops < 10_000 and not any("requests/s" in a for a in spinning.assumptions)


def test_a_named_controller_that_states_no_rate_takes_the_default_one():
    # as it takes the default controller time: a [[component]] of controller kind with neither
    # iops nor a CPU cost handles CONTROLLER_REQUEST_RATE requests/s; its own iops replaces it
    ssd = DriveType("ssd", 10**12, 1e6, seq_read_bw_bytes=500 * MB, random_read_iops=90_000, rotational=False,
                    read_latency_s=90e-6)
    deep = Workload("randread", 4 * KiB, qd=256)
    bare = stack_from_notation("R5/8", 64 * KiB, drive=ssd, path=Component("raid", kind="controller", groups=1))
    p = predict(bare, deep)
    assert p.iops == pytest.approx(60_000, rel=1e-3) and p.limiting == "raid"
    own = stack_from_notation("R5/8", 64 * KiB, drive=ssd,
                              path=Component("raid", kind="controller", iops=150_000, groups=1))
    assert predict(own, deep).iops == pytest.approx(150_000, rel=1e-3)
    # a CPU cost with cores states its rate: 4 cores x 1 / 10 us
    cpu = stack_from_notation("R5/8", 64 * KiB, drive=ssd,
                              path=Component("raid", kind="controller", cpu_per_request_s=10e-6, cores=4, groups=1))
    assert predict(cpu, deep).iops == pytest.approx(400_000, rel=0.01)
    # an adapter in the host is no array controller: no default rate
    adapter = stack_from_notation("R5/8", 64 * KiB, drive=ssd, engine="md",
                                  path=Component("hba", kind="adapter", groups=1))
    assert predict(adapter, deep).iops > 100_000


def test_the_ceilings_pass_the_implied_controller():
    # plan perf's ceilings (performance_of) and its curve name the same controller: flash drives'
    # 4 KiB random reads stop at its 60,000 requests/s, a 4 KiB stream at 60,000 x 4 KiB
    from storlab.model.stack import IMPLIED_CONTROLLER
    ssd = DriveType("ssd", 10**12, 1e6, seq_read_bw_bytes=500 * MB, random_read_iops=90_000, rotational=False)
    report = performance_of(stack_from_notation("R5/8", 64 * KiB, drive=ssd), 4 * KiB)
    assert report.value("random_read") == pytest.approx(60_000) and report.metrics["random_read"].limiting == IMPLIED_CONTROLLER
    assert report.value("seq_read") == pytest.approx(60_000 * 4 * KiB)
    # spinning drives: the controller is a row with headroom, not the limit
    spinning = performance_of(stack_from_notation("R6/12", 512 * KiB, drive=DRIVE))
    row = next(c for c in spinning.metrics["random_read"].components if c.name == IMPLIED_CONTROLLER)
    assert row.capacity == 60_000 and not row.binding and spinning.metrics["random_read"].limiting == "drives"
    # md parity: no controller row at all
    md = performance_of(stack_from_notation("R6/12", 512 * KiB, drive=DRIVE, engine="md"))
    assert all(c.name != IMPLIED_CONTROLLER for c in md.metrics["random_read"].components)


def test_write_back_coalesces_partial_sequential_writes_into_full_stripes():
    # 8+1 at 128 KiB (1 MiB stripe): 256 KiB sequential writes are partial stripes (RMW without a
    # cache); a write-back cache out of cache destages full stripes: 9/8 drive bytes per host byte
    stack = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE, engine="md")
    cache = ControllerCache(10**9, 2000 * MB, 2000 * MB)
    d = dev(latency_s=0.0001)
    without = predict(stack, Workload("write", 256 * KiB, qd=8), [d])
    with_cache = predict(stack, Workload("write", 256 * KiB, qd=8, working_set_bytes=10**11), [d], cache=cache)
    assert with_cache.bw_bytes == pytest.approx(8 * 100 * MB, rel=0.02)
    assert without.bw_bytes < with_cache.bw_bytes / 2
    write_through = predict(stack, Workload("write", 256 * KiB, qd=8), [d],
                            cache=dataclasses.replace(cache, write_back=False))
    assert write_through.bw_bytes == pytest.approx(without.bw_bytes, rel=0.01)


def test_a_raid_controller_gathers_sequential_writes_unless_it_is_said_to_write_through():
    # A hardware RAID controller writes back by default (Stack.gathers_sequential_writes): the same
    # partial-stripe stream through one whose cache the stack does not describe reaches the drives
    # as full stripes, where md (parity per request) and a stated write-through cache read first
    d = dev(latency_s=0.0001)
    w = Workload("write", 256 * KiB, qd=8)
    controller = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE)
    md = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE, engine="md")
    through = dataclasses.replace(controller, cache=ControllerCache(10**9, 2000 * MB, 2000 * MB, write_back=False))
    assert controller.gathers_sequential_writes and not md.gathers_sequential_writes
    assert not through.gathers_sequential_writes
    gathered = predict(controller, w, [d])
    assert gathered.bw_bytes == pytest.approx(8 * 100 * MB, rel=0.02)
    assert any("write-back cache, on by default" in a for a in gathered.assumptions)
    for stack in (md, through):
        assert predict(stack, w, [d]).bw_bytes < gathered.bw_bytes / 2
    # random writes are not gathered: the controller's read-modify-write stays
    rnd = Workload("randwrite", 16 * KiB, qd=8)
    assert predict(controller, rnd, [d]).bw_bytes == pytest.approx(predict(md, rnd, [d]).bw_bytes)
    # the ceilings agree: the sequential write ceiling of a 256 KiB stream is the drives' full-stripe rate
    assert performance_of(controller, 256 * KiB).value("seq_write") == pytest.approx(8 * DRIVE.seq_write_bw_bytes)
    assert performance_of(md, 256 * KiB).value("seq_write") < 4 * DRIVE.seq_write_bw_bytes


TWO_ADAPTERS = """
[drive]
capacity = "2TB"
seq = "100MB/s"
random_iops = 100
[raid]
layout = "R6/12"
chunk = "512KiB"
count = 2
[[component]]
name = "host"
[[component]]
name = "adapter"
parent = "host"
count = {count}
bw = "800MB/s"
raid_engine = true
groups = {groups}
"""


def test_a_second_adapter_doubles_what_one_adapter_caps():
    import tomllib
    one = stack_from_dict(tomllib.loads(TWO_ADAPTERS.format(count=1, groups=2)))
    two = stack_from_dict(tomllib.loads(TWO_ADAPTERS.format(count=2, groups=1)))
    # two independent devices (aggregate none): one thread on each (a thread works on its own device)
    w = Workload("read", 5 * MiB, qd=8, threads=2)
    d = dev(iops=10**6, latency_s=0.001)
    # drives: 2 x 10 data x 100 MB/s = 2000 MB/s; one adapter carries both groups: 800 MB/s
    p1 = predict(one, w, [d])
    assert p1.bw_bytes == pytest.approx(800 * MB) and p1.limiting == "host/adapter"
    p2 = predict(two, w, [d])
    assert p2.bw_bytes == pytest.approx(1600 * MB, rel=1e-3) and p2.limiting.startswith("host/adapter[")


def test_bad_inputs_are_one_line_errors():
    with pytest.raises(StackError, match="rw must be one of read, write, randread, randwrite"):
        Workload("seq", 4096)
    with pytest.raises(StackError, match="devices: 3 given; the stack has 2 members"):
        predict(stack_from_notation("R0/2", 64 * KiB, drive=DRIVE), Workload("read", 4096), [dev()] * 3)
    with pytest.raises(StackError, match="latency_s must be a positive finite number"):
        dev(latency_s=0)


def test_in_cache_small_requests_follow_littles_law_and_large_ones_the_port():
    # one host behind a 200 MB/s port, 4 outstanding, a cache that answers in 0.6 ms:
    # 4 KiB: 4 / (0.6 ms + 70 us host and HBA + 4096 / 200 MB/s) = 5789 requests/s; 1 MiB: the port's 200 MB/s
    from storlab.model.stack import Component
    path = Component("fabric", children=(Component("port", read_bw_bytes=200 * MB, groups=1),))
    stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, path=path)
    cache = ControllerCache(10**9, 10**12, 10**12, latency_s=0.0006)
    small = predict(stack, Workload("randread", 4096, qd=4, working_set_bytes=10**8), [dev()], cache=cache)
    # (within 1 %: the four requests also queue a little for the port's 20 us transfer); a hit
    # also costs the host's and the HBA's own time per request (costs.py)
    from storlab.model.costs import HBA_REQUEST_OVERHEAD_S, HOST_REQUEST_OVERHEAD_S
    fixed = 0.0006 + HOST_REQUEST_OVERHEAD_S + HBA_REQUEST_OVERHEAD_S
    assert small.iops == pytest.approx(4 / (fixed + 4096 / 200e6), rel=0.01) and small.limiting == "queue depth"
    large = predict(stack, Workload("read", MiB, qd=4, working_set_bytes=10**8), [dev()], cache=cache)
    assert large.bw_bytes == pytest.approx(200 * MB, rel=1e-4) and large.limiting == "fabric/port"


def test_a_small_mirror_write_at_qd1_takes_one_transfer_not_two():
    # RAID 1 over 2: a 64 KiB write goes to both members at once, so at QD 1 it takes
    # latency + 64 KiB / 100 MB/s, not twice the transfer (regression: the spread of a write was
    # taken from its read pieces, 1, so both copies were charged to one member's time)
    stack = stack_from_notation("R1/2", 64 * KiB, drive=DRIVE)
    p = predict(stack, Workload("write", 64 * KiB, qd=1), [dev(latency_s=0.001)])
    assert p.iops == pytest.approx(1 / (0.001 + 65536 / 100e6))


# --- issue 36: striped requests over paths, independent devices, RAID writes, the cache component --

def _adapters(count: int, mb: float) -> Component:
    return Component("host", kind="host", children=(
        Component("adapter", kind="adapter", count=count, read_bw_bytes=mb * MB, write_bw_bytes=mb * MB, groups=1),))


def test_a_striped_request_splits_over_the_adapters_that_carry_its_pieces():
    # 16 R0/2 groups striped with a 1 MiB inter-chunk, each behind its own 100 MB/s adapter, fast
    # drives: one 16 MiB read puts 1 MiB on every adapter at once, so one thread at QD1 takes
    # L + 1 MiB / 100 MB/s per request (L: the host's, the HBA's and the controller's time, which
    # the RAID 0 groups imply), not L + 16 MiB / 100 MB/s
    from storlab.model.costs import CONTROLLER_REQUEST_LATENCY_S, HBA_REQUEST_OVERHEAD_S, HOST_REQUEST_OVERHEAD_S
    from storlab.model.predict import groups_touched
    fast = DriveType("fast", 10**12, 1e6, seq_read_bw_bytes=1e10, seq_write_bw_bytes=1e10)
    stack = stack_from_notation("R0/2", 512 * KiB, drive=fast, count=16, aggregate="stripe", inter_chunk_bytes=MiB,
                                path=_adapters(16, 100))
    assert groups_touched(stack, 16 * MiB) == 16 and groups_touched(stack, MiB) == 1
    one = predict(stack, Workload("read", 16 * MiB, qd=1))
    expected = 16 * MiB / (HOST_REQUEST_OVERHEAD_S + HBA_REQUEST_OVERHEAD_S + CONTROLLER_REQUEST_LATENCY_S
                           + MiB / (100 * MB))
    assert one.bw_bytes == pytest.approx(expected, rel=1e-6)
    assert one.bw_bytes > 10 * 100 * MB          # not one adapter's rate
    # enough threads reach the sixteen adapters' 1,600 MB/s, never more
    many = predict(stack, Workload("read", 16 * MiB, qd=1, threads=16))
    assert 0.95 * 1600 * MB < many.bw_bytes <= 1600 * MB * (1 + 1e-9)


def test_two_threads_on_two_independent_devices_get_twice_one_thread():
    # issue 36: separate arrays behind separate adapters are separate queues (aggregate none, one
    # thread per device): 2 threads = 2 x 1 thread exactly, not the 1.6 x of one pooled station
    stack = stack_from_notation("R5/5", 64 * KiB, drive=DRIVE, count=2, aggregate="none", path=_adapters(2, 200))
    for rw, size in (("read", MiB), ("randread", 4 * KiB), ("randwrite", 4 * KiB)):
        one = predict(stack, Workload(rw, size, qd=4, threads=1))
        two = predict(stack, Workload(rw, size, qd=4, threads=2))
        assert two.iops == pytest.approx(2 * one.iops, rel=1e-9), rw


def test_a_raid5_small_write_reads_then_writes_at_depth_one():
    # Chen et al. 1994: a one-chunk RAID 5 write reads old data and parity, then writes both: two
    # positionings in series, so at QD1 it takes twice a read's fixed time (10 ms each here)
    stack = stack_from_notation("R5/5", 64 * KiB, drive=DRIVE)
    d = dev(bw=100 * MB, iops=100.0, latency_s=0.010)
    read = predict(stack, Workload("randread", 4 * KiB), [d])
    write = predict(stack, Workload("randwrite", 4 * KiB), [d])
    assert read.iops == pytest.approx(1 / (0.010 + 4 * KiB / (100 * MB)), rel=1e-6)
    assert write.iops < 0.55 * read.iops
    assert write.iops == pytest.approx(1 / (0.020 + 4 * 4 * KiB / 4 / (100 * MB)), rel=1e-6)


CACHED_STACK = """
[raid]
layout = "R5/5"
chunk = "64KiB"
[cache]
size = "1GiB"
bw = "400MB/s"
latency = "0.1ms"
read_ahead = true
"""


def test_a_stack_file_cache_is_used_by_predict():
    import tomllib
    from storlab.model.costs import HBA_REQUEST_OVERHEAD_S, HOST_REQUEST_OVERHEAD_S
    stack = stack_from_dict(tomllib.loads(CACHED_STACK))
    assert stack.cache is not None and stack.cache.read_ahead
    fixed = HOST_REQUEST_OVERHEAD_S + HBA_REQUEST_OVERHEAD_S + 0.1e-3
    # in cache: one 4 KiB read at a time takes the host's, the HBA's and the cache's time plus
    # its transfer at the cache's 400 MB/s
    hit = predict(stack, Workload("randread", 4 * KiB, working_set_bytes=100 * MiB))
    assert hit.iops == pytest.approx(1 / (fixed + 4 * KiB / (400 * MB)), rel=1e-6)
    # out of cache, sequential: read-ahead serves each request at the cache's time too; the
    # members (4 data drives x 150 MB/s = 600 MB/s) stream behind and the cache's 400 MB/s binds
    ahead = predict(stack, Workload("read", MiB, qd=8, working_set_bytes=100 * 2**30))
    assert ahead.bw_bytes == pytest.approx(400 * MB, rel=0.01)
    one = predict(stack, Workload("read", 64 * KiB, working_set_bytes=100 * 2**30))
    assert one.iops == pytest.approx(1 / (fixed + 64 * KiB / (400 * MB)), rel=1e-6)
    # a sweep whose size is not given is taken as beyond the cache: read-ahead serves it the same
    unsized = predict(stack, Workload("read", 64 * KiB))
    assert unsized.iops == pytest.approx(one.iops, rel=1e-9)
    # without the controller's read-ahead the drives' own look-ahead streams the sweep: the four
    # data drives' 600 MB/s stay behind the cache's 400 MB/s, and the request has no cache time
    import dataclasses
    plain = dataclasses.replace(stack, cache=dataclasses.replace(stack.cache, read_ahead=False))
    drives = predict(plain, Workload("read", 64 * KiB, working_set_bytes=100 * 2**30))
    seq_fixed = HOST_REQUEST_OVERHEAD_S + HBA_REQUEST_OVERHEAD_S
    assert drives.iops == pytest.approx(1 / (seq_fixed + 64 * KiB / (400 * MB)), rel=1e-6)
    # members that do not read ahead: the request waits for its drive (one 64 KiB chunk at 150 MB/s)
    no_look = dataclasses.replace(Device.from_drive(plain.drive), look_ahead=False)
    waits = predict(plain, Workload("read", 64 * KiB, working_set_bytes=100 * 2**30), [no_look])
    assert waits.iops == pytest.approx(1 / (seq_fixed + 64 * KiB / (150 * MB)), rel=1e-6)


def test_drive_look_ahead_streams_a_sequential_read_over_the_stripe():
    # Ruemmler and Wilkes 1994 (read-ahead into the drive's buffer): a 16 KiB sequential read at
    # QD1 lands on one drive of an R5 4+1 (64 KiB chunk); while the stream is on the other drives
    # each reads its next piece ahead, so the stream takes the 4 data drives' 4 x 150 MB/s
    import dataclasses
    stack = stack_from_notation("R5/5", 64 * KiB, drive=DRIVE)
    drive = Device.from_drive(stack.drive)
    assert drive.look_ahead and stack.drive.rotational
    # the drive's sequential time and the time of the controller its parity implies (costs.py)
    fixed = drive.latency_for(True) + CONTROLLER_REQUEST_LATENCY_S
    ahead = predict(stack, Workload("read", 16 * KiB))
    assert ahead.iops == pytest.approx(1 / (fixed + 16 * KiB / (4 * DRIVE.seq_read_bw_bytes)), rel=1e-6)
    # the same drives without look-ahead: each request waits for its piece at one drive's rate
    plain = predict(stack, Workload("read", 16 * KiB), [dataclasses.replace(drive, look_ahead=False)])
    assert plain.iops == pytest.approx(1 / (fixed + 16 * KiB / DRIVE.seq_read_bw_bytes), rel=1e-6)
    # writes and random reads are not helped: a write waits for its media, a random read seeks
    for rw in ("write", "randread"):
        a = predict(stack, Workload(rw, 16 * KiB))
        b = predict(stack, Workload(rw, 16 * KiB), [dataclasses.replace(drive, look_ahead=False)])
        assert a.iops == pytest.approx(b.iops, rel=1e-9), rw
    # a solid-state drive does not read ahead
    ssd = dataclasses.replace(stack.drive, rotational=False)
    assert not Device.from_drive(ssd).look_ahead


@pytest.mark.parametrize("table, words", [
    ('[cache]\nsize = "0"\n', "size: must be positive"),
    ('[cache]\nsize = "1GiB"\nflush = true\n', "unknown key 'flush'"),
    ('[cache]\nsize = "1GiB"\nwrite_back = "yes"\n', "write_back: expected true or false"),
])
def test_a_bad_cache_table_names_the_key(table, words):
    import tomllib
    data = tomllib.loads('[raid]\nlayout = "R5/5"\nchunk = "64KiB"\n' + table)
    with pytest.raises(StackError) as e:
        stack_from_dict(data)
    assert words in str(e.value) and "[cache]" in str(e.value)


def test_the_implied_controller_acknowledges_writes_to_datasheet_drives():
    # R5/9 of datasheet drives names no controller: the one its parity implies writes back, so a
    # lone 4 KiB sequential write is acknowledged after the host's, the HBA's and the controller's
    # time (costs.py: 0.27 ms, the Engenio write L), the drives draining behind
    stack = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE)
    one = predict(stack, Workload("write", 4 * KiB))
    assert one.iops == pytest.approx(1 / ARRAY_REQUEST_OVERHEAD_S, rel=0.01)
    assert any("acknowledges writes" in a for a in one.assumptions)
    # a lone random write no longer waits for its read-modify-write: the members' drain binds it
    through = dataclasses.replace(stack, cache=ControllerCache(10**9, 1e15, 1e15, write_back=False))
    rnd = Workload("randwrite", 4 * KiB)
    assert predict(stack, rnd).iops > 1.5 * predict(through, rnd).iops
    # reads pass the same controller, whose cache is not described: no hits, its time
    read = Workload("read", 4 * KiB)
    assert predict(stack, read).iops == pytest.approx(predict(through, read).iops, rel=1e-6)
    # measured members (a profile, an array seen from its host) hold what was in front of them, and
    # a stack that names its controller states its cache: neither implies one
    measured = predict(stack, rnd, [dev()])
    assert not any("acknowledges writes" in a for a in measured.assumptions)
    named = dataclasses.replace(stack, path=Component("raid", kind="controller", groups=1))
    assert not any("acknowledges writes" in a for a in predict(named, rnd).assumptions)
    md = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE, engine="md")
    assert not any("acknowledges writes" in a for a in predict(md, rnd).assumptions)


def test_a_cache_without_a_size_writes_through_or_reads_ahead_but_holds_no_working_set():
    import tomllib
    data = tomllib.loads('[raid]\nlayout = "R5/9"\nchunk = "128KiB"\n[cache]\nwrite_back = false\n')
    stack = dataclasses.replace(stack_from_dict(data), drive=DRIVE)
    assert stack.cache.size_bytes is None and not stack.gathers_sequential_writes
    d = dev(latency_s=0.0001)
    # a controller said to write through: the partial-stripe stream reads before it writes, as md's does
    md = stack_from_notation("R5/9", 128 * KiB, drive=DRIVE, engine="md")
    w = Workload("write", 256 * KiB, qd=8)
    assert predict(stack, w, [d]).bw_bytes == pytest.approx(predict(md, w, [d]).bw_bytes, rel=0.01)
    # no working set fits a cache of no stated size: random reads miss
    r = predict(stack, Workload("randread", 4 * KiB, qd=8, working_set_bytes=10**6), [d])
    assert any("cache size not given" in a for a in r.assumptions)
    assert not any("in-cache" in a for a in r.assumptions)


def test_a_hosts_time_per_byte_is_paid_by_each_thread_and_overlapped_by_several():
    # a host (kind host) with cpu_rate 250 MB/s on 2 cores above a 200 MB/s port and a device with a
    # 0.5 ms per-request time: one thread pays host time, latency and transfer in series
    port = Component("port", kind="link", read_bw_bytes=200 * MB, groups=1)
    host = Component("host", kind="host", cores=2, cpu_rate_bytes=250 * MB, children=(port,))
    stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, aggregate="none", path=host)
    d = dev(bw=1e12, iops=1e12, latency_s=0.0005, shared_time=False, queues=False)
    one = predict(stack, Workload("read", MiB, qd=1), [d])
    assert one.bw_bytes == pytest.approx(MiB / (0.0005 + MiB / 250e6 + MiB / 200e6))
    assert one.limiting == "queue depth"
    # eight threads overlap it: the port binds, not the host's 2 cores (500 MB/s)
    eight = predict(stack, Workload("read", MiB, qd=1, threads=8), [d])
    assert eight.bw_bytes == pytest.approx(200 * MB, rel=0.02)
    assert eight.limiting == "host/port"
    # without the port, the cores bind: 2 x 250 MB/s
    alone = Component("host", kind="host", cores=2, cpu_rate_bytes=250 * MB, groups=1)
    stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, aggregate="none", path=alone)
    deep = predict(stack, Workload("read", MiB, qd=1, threads=16), [d])
    assert deep.bw_bytes == pytest.approx(500 * MB, rel=0.02)
    assert deep.limiting == "host"


def test_two_streams_into_one_shared_controller_wait_beside_their_own_adapters():
    # seed 001's Table 1 shape: one 370 MB/s controller over two arrays, each behind its own
    # 195 MB/s adapter, one 4 MiB stream on each. Alone a stream takes L + S / 195 MB/s; with two,
    # each waits at the controller (MVA: D Q(1), D = S / 370 MB/s), but that wait runs beside its
    # own adapter's longer transfer (S / 195 - S / 370), so it costs nothing here
    adapters = Component("adapter", kind="adapter", count=2, read_bw_bytes=195 * MB, groups=1)
    ctl = Component("ctl", read_bw_bytes=370 * MB, children=(adapters,))
    stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=2, aggregate="none", path=ctl)
    d = dev(bw=1e12, iops=1e12, latency_s=0.003, shared_time=False, queues=False)
    size = 4 * MiB
    alone = 0.003 + size / 195e6
    demand = size / 370e6
    wait = demand * demand / alone                       # D Q(1), Q(1) = D / (Z + D) = D / alone
    assert wait < size / 195e6 - demand
    two = predict(stack, Workload("read", size, qd=1, threads=2), [d])
    assert two.bw_bytes == pytest.approx(2 * size / alone)      # 342 MB/s, under the controller's 370


def _mirrored_pair(mirror: bool, hosts=(1, 1)) -> Component:
    """Two controllers of one array, each with its own ports (one device each) under it."""
    nodes = tuple(Component(f"ctl {n}", kind="controller", read_bw_bytes=400 * MB, write_bw_bytes=300 * MB,
                            cpu_per_request_s=0.0, mirror_writes=mirror,
                            children=(Component(f"port {n}", kind="link", count=h, read_bw_bytes=200 * MB,
                                                write_bw_bytes=200 * MB, groups=1),))
                  for n, h in enumerate(hosts) if h)
    return Component("array", children=(Component("pair", children=nodes),))


def test_a_mirrored_write_cache_gives_the_pair_one_controllers_writes():
    # each cached write lands in both controllers of the pair (the 3PAR guides: "Within the pair,
    # nodes mirror their write cache to each other"): four streams through four 200 MB/s ports into
    # two 300 MB/s controllers write 300 MB/s in all mirrored and 600 without; reads are not mirrored
    d = dev(bw=1e12, iops=1e12, latency_s=0.0005, shared_time=False, queues=False)
    for mirror, writes in ((True, 300 * MB), (False, 600 * MB)):
        stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=4, aggregate="none",
                                    path=_mirrored_pair(mirror, (2, 2)))
        w = predict(stack, Workload("write", MiB, qd=8, threads=4), [d])
        r = predict(stack, Workload("read", MiB, qd=8, threads=4), [d])
        assert w.bw_bytes == pytest.approx(writes, rel=1e-3), mirror
        assert r.bw_bytes == pytest.approx(800 * MB, rel=1e-3), mirror
    # one controller in use: its partner only takes the copies, so it keeps its whole 300 MB/s
    alone = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=2, aggregate="none",
                                path=_mirrored_pair(True, (2, 0)))
    assert predict(alone, Workload("write", MiB, qd=8, threads=2), [d]).bw_bytes == pytest.approx(300 * MB, rel=1e-3)


def test_a_mirrored_write_waits_for_the_partners_copy():
    # a mirrored write is acknowledged once the partner holds the copy, which the partner handles
    # as a request of its own: the controller's 0.3 ms per request counts twice for a write (the
    # S400: 1 KB writes 1.24 ms a request against 0.61 ms for reads), once for a read or unmirrored
    import dataclasses
    d = dev(bw=1e12, iops=1e12, latency_s=0.0005, shared_time=False, queues=False)

    def timed(mirror: bool, rw: str) -> float:
        pair = _mirrored_pair(mirror, (1, 1))
        nodes = tuple(dataclasses.replace(n, cpu_per_request_s=0.3e-3) for n in pair.children[0].children)
        path = Component("array", children=(Component("pair", children=nodes),))
        stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=2, aggregate="none", path=path)
        return predict(stack, Workload(rw, 4 * KiB), [d]).latency_mean_s

    transfer = 4 * KiB / (200 * MB)
    assert timed(True, "write") == pytest.approx(0.0005 + 0.6e-3 + transfer, rel=1e-6)
    assert timed(False, "write") == pytest.approx(0.0005 + 0.3e-3 + transfer, rel=1e-6)
    assert timed(True, "read") == pytest.approx(0.0005 + 0.3e-3 + transfer, rel=1e-6)


def test_a_mirrored_write_costs_its_controller_two_handlings():
    # each write costs its controller its own handling and the copy's, and each partner's copy one
    # more: two busy controllers of 9,000 requests/s write 2 x 9,000 / 3 = 6,000/s and read 18,000;
    # one alone (the S400 node of D.3.3: 18,721 reads/s, 9,463 writes/s) writes half its reads
    import dataclasses
    d = dev(bw=1e12, iops=1e12, latency_s=1e-5, shared_time=False, queues=False)

    def rate(mirror: bool, rw: str, hosts=(2, 2)) -> float:
        pair = _mirrored_pair(mirror, hosts)
        nodes = tuple(dataclasses.replace(n, iops=9000.0) for n in pair.children[0].children)
        path = Component("array", children=(Component("pair", children=nodes),))
        stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=sum(hosts), aggregate="none", path=path)
        return predict(stack, Workload(rw, 4 * KiB, qd=64, threads=sum(hosts)), [d]).iops

    assert rate(True, "randwrite") == pytest.approx(6000, rel=0.02)
    assert rate(True, "randread") == pytest.approx(18000, rel=0.02)
    assert rate(False, "randwrite") == pytest.approx(18000, rel=0.02)
    assert rate(True, "randwrite", (2, 0)) == pytest.approx(4500, rel=0.02)


def test_independent_branches_add_their_own_rates():
    # two controller pairs of one array share nothing: three streams on one pair (300 MB/s of
    # mirrored writes between them) and one on the other (its 200 MB/s port) write 500 MB/s, not
    # four times the slowest stream's 100
    pair = _mirrored_pair(True, (2, 1)).children[0]
    other = Component("other pair", children=(_mirrored_pair(True, (1, 0)).children[0].children[0],))
    stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=4, aggregate="none",
                                path=Component("array", children=(pair, other)))
    d = dev(bw=1e12, iops=1e12, latency_s=0.0005, shared_time=False, queues=False)
    p = predict(stack, Workload("write", MiB, qd=8, threads=4), [d])
    assert p.bw_bytes == pytest.approx(500 * MB, rel=1e-3)
    assert p.limiting == "array/pair/ctl 0"
    assert any("share no limit" in a for a in p.assumptions)
    # a root with a limit of its own is shared: no split, the symmetric solution stands
    capped = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=4, aggregate="none",
                                 path=Component("array", write_bw_bytes=10_000 * MB, children=(pair, other)))
    q = predict(capped, Workload("write", MiB, qd=8, threads=4), [d])
    assert q.bw_bytes == pytest.approx(4 * 100 * MB, rel=1e-3)


def test_a_request_pays_the_cpu_time_of_one_branch_not_of_both():
    # two controllers side by side (two templates under one parent): a request crosses one of them,
    # so one controller's default time per request is added, not two
    from storlab.model.costs import CONTROLLER_REQUEST_LATENCY_S
    sides = tuple(Component(f"ctl {n}", kind="controller", groups=1) for n in range(2))
    stack = stack_from_notation("R0/4", 256 * KiB, drive=DRIVE, count=2, path=Component("array", children=sides))
    d = dev(bw=1e12, iops=1e12, latency_s=0.001, shared_time=False, queues=False)
    p = predict(stack, Workload("randread", 4 * KiB, qd=1), [d])
    # (a device's own latency is seen from the host: it holds the host's and the HBA's time)
    assert p.latency_mean_s == pytest.approx(0.001 + CONTROLLER_REQUEST_LATENCY_S, rel=1e-3)


def test_a_datasheet_spinning_drive_reorders_its_queue_and_a_measured_device_keeps_what_it_measured():
    # a datasheet drive's IOPS are one request at a time; queued deeper it serves the soonest
    # first (costs.reordered_positioning_fraction). A measured device (a profile, an array seen from
    # its host) reorders nothing more: its figures already hold its queueing
    from storlab.model.costs import DRIVE_REORDER_DEPTH
    drive = Device.from_drive(DRIVE)
    assert drive.reorder_depth == DRIVE_REORDER_DEPTH
    ssd = Device.from_drive(DriveType("ssd", 10**12, 1e6, random_read_iops=50_000, rotational=False))
    assert ssd.reorder_depth == 1
    measured = dataclasses.replace(drive, reorder_depth=1, from_datasheet=False)
    rates = {qd: (predict(None, Workload("randread", 4 * KiB, qd=qd), [drive]).iops,
                  predict(None, Workload("randread", 4 * KiB, qd=qd), [measured]).iops) for qd in (1, 4, 16)}
    assert rates[1][0] == pytest.approx(rates[1][1])
    assert rates[1][0] < rates[4][0] < rates[16][0] < 2.5 * rates[1][0]
    assert rates[16][1] == pytest.approx(rates[1][1], rel=0.01)
    # sequential pieces need no positioning: nothing to reorder
    seq = [predict(None, Workload("read", MiB, qd=qd), [drive]).bw_bytes for qd in (1, 16)]
    seq_measured = [predict(None, Workload("read", MiB, qd=qd), [measured]).bw_bytes for qd in (1, 16)]
    assert seq == pytest.approx(seq_measured)


def test_random_writes_behind_write_back_drain_at_the_drives_rate_whatever_the_host_keeps_outstanding():
    # the implied controller's write-back cache acknowledges; out of cache it stays full of pending
    # writes and keeps every drive's queue full as it destages, whatever the host keeps outstanding:
    # R5/9's nine drives, four operations per 4 KiB write (read data and parity, write both), each
    # drive reordering a full queue (costs.DRIVE_REORDER_DEPTH)
    from storlab.model.costs import DRIVE_REORDER_DEPTH, reordered_time
    from storlab.model.performance import performance_of
    stack = stack_from_notation("R5/9", 64 * KiB, drive=DRIVE)
    one = predict(stack, Workload("randwrite", 4 * KiB, qd=1))
    # a 4 KiB operation takes the data sheet's 1 / IOPS, its transfer included (they were taken at 4 KiB),
    # of which the positioning shrinks with the queue
    positioning = Device.from_drive(DRIVE).positioning_s(write=True)
    per_operation = reordered_time(1 / DRIVE.random_write_iops, positioning, DRIVE_REORDER_DEPTH)
    assert one.iops == pytest.approx(9 / (4 * per_operation), rel=1e-6)
    assert one.iops > 2 * 9 * DRIVE.random_write_iops / 4
    assert one.limiting.startswith("member[")
    # write-through: each write's read-modify-write in series, then the drives' queues
    write_through = ControllerCache(None, 1e12, 1e12, write_back=False)
    assert predict(stack, Workload("randwrite", 4 * KiB, qd=1), cache=write_through).iops < one.iops / 3
    # deeper changes nothing: the drain is the ceiling's (which scales the stated IOPS, transfer and
    # all, by the reordering gain: 0.4 % apart)
    deep = predict(stack, Workload("randwrite", 4 * KiB, qd=64))
    assert deep.iops == pytest.approx(one.iops)
    ceiling = performance_of(stack, random_request_bytes=4 * KiB).value("random_write")
    assert one.iops == pytest.approx(ceiling, rel=0.01)


def test_a_vendors_twelve_drive_raid0_reads_within_5_percent_and_writes_outrun_them_behind_the_cache():
    # HP, "HP Smart Array Controllers and basic RAID performance factors" (2012): twelve 15K rpm SAS
    # drives in one RAID 0 logical drive, 4 KiB aligned, the best of QD 1 to 256: 4,850 random
    # reads/s and 8,350 writes/s. The model's 15K rpm drive states 182 IOPS (costs.ENTERPRISE_SEEK_S);
    # nothing in the model was taken from these figures. The writes land 32 % short (docs/model.md:
    # the controller's own reordering over its cache is not modelled); their order holds
    drive = DriveType("15k", 600 * 10**9, 1.6e6, random_read_iops=182, random_write_iops=182)
    stack = stack_from_notation("R0/12", 512 * KiB, drive=drive)
    reads = predict(stack, Workload("randread", 4 * KiB, qd=256)).iops
    writes = [predict(stack, Workload("randwrite", 4 * KiB, qd=qd)).iops for qd in (16, 256)]
    assert reads == pytest.approx(4_850, rel=0.05)
    assert writes[0] == pytest.approx(writes[1]) and reads < writes[1] < 8_350


def test_a_device_refuses_a_reorder_depth_below_one():
    with pytest.raises(StackError, match="reorder_depth"):
        dataclasses.replace(Device.from_drive(DRIVE), reorder_depth=0)


def test_a_datasheet_iops_figure_holds_its_4k_transfer():
    # data sheets state random IOPS with 4 KiB requests: a 4 KiB random read alone takes 1 / IOPS,
    # a 64 KiB one its positioning (1 / IOPS less 4 KiB's transfer) plus 64 KiB's transfer
    from storlab.model.costs import DATASHEET_IOPS_REQUEST_BYTES
    assert DATASHEET_IOPS_REQUEST_BYTES == 4 * KiB
    drive = Device.from_drive(DRIVE)
    assert predict(None, Workload("randread", 4 * KiB), [drive]).iops == pytest.approx(DRIVE.random_read_iops)
    positioning = 1 / DRIVE.random_read_iops - 4 * KiB / DRIVE.seq_read_bw_bytes
    assert predict(None, Workload("randread", 64 * KiB), [drive]).iops == pytest.approx(
        1 / (positioning + 64 * KiB / DRIVE.seq_read_bw_bytes))
    # an SSD at its data sheet's depth reaches its stated IOPS, not IOPS less a transfer on top
    ssd = DriveType("ssd", 10**12, 1e6, seq_read_bw_bytes=500 * MB, random_read_iops=75_000, rotational=False)
    deep = predict(None, Workload("randread", 4 * KiB, qd=32), [Device.from_drive(ssd)])
    assert deep.iops == pytest.approx(75_000, rel=0.01)
    # figures whose IOPS x 4 KiB exceed the bandwidth still leave each request a fixed time
    odd = Device.from_drive(dataclasses.replace(ssd, random_read_iops=200_000))
    assert odd.positioning_s(write=False) == pytest.approx(0.01 / 200_000)


def test_an_ssd_with_a_stated_latency_serves_iops_x_latency_at_once():
    # a data sheet's 80 us QD1 read latency and 75,000 IOPS at depth: six requests at once
    # (Little's law), each 80 us alone; a 1 MiB read alone spreads over every channel at the
    # device's bandwidth, not over one sixth of it
    ssd = DriveType("ssd", 10**12, 1e6, seq_read_bw_bytes=500 * MB, random_read_iops=75_000, rotational=False,
                    read_latency_s=80e-6)
    device = Device.from_drive(ssd)
    assert device.parallelism == 6 and device.reorder_depth == 1
    rates = {qd: predict(None, Workload("randread", 4 * KiB, qd=qd), [device]) for qd in (1, 2, 32)}
    assert rates[1].iops == pytest.approx(1 / 80e-6)
    # two at once nearly double it (the multi-server approximation queues a little: within 5 %)
    assert 0.95 * 2 / 80e-6 <= rates[2].iops <= 2 / 80e-6
    assert 0.97 * 75_000 <= rates[32].iops <= 75_000 * (1 + 1e-9)
    big = predict(None, Workload("randread", MiB), [device])
    assert big.iops == pytest.approx(1 / (80e-6 - 4 * KiB / (500 * MB) + MiB / (500 * MB)))
    # the same bandwidth through a device of six units read one request at a time as before: a
    # measured profile's parallelism serves a large request at the whole bandwidth too
    profile_like = dataclasses.replace(device, from_datasheet=False)
    assert predict(None, Workload("read", MiB), [profile_like]).bw_bytes == pytest.approx(big.bw_bytes, rel=0.01)
    # flash has no seek to save: sequential 4 KiB requests count against the IOPS too, and take
    # the drive's fixed time
    seq = predict(None, Workload("read", 4 * KiB), [device])
    assert seq.iops == pytest.approx(rates[1].iops)
    # a write takes the read latency unless the data sheet states its own (a write lands in the
    # SSD's buffer): 20 us alone, and the stated write IOPS at depth
    same = Device.from_drive(dataclasses.replace(ssd, random_write_iops=75_000, seq_write_bw_bytes=500 * MB))
    assert predict(None, Workload("randwrite", 4 * KiB), [same]).iops == pytest.approx(1 / 80e-6)
    buffered = Device.from_drive(dataclasses.replace(ssd, write_latency_s=20e-6, random_write_iops=60_000,
                                                     seq_write_bw_bytes=500 * MB))
    assert predict(None, Workload("randwrite", 4 * KiB), [buffered]).iops == pytest.approx(1 / 20e-6)
    assert predict(None, Workload("randwrite", 4 * KiB, qd=32), [buffered]).iops == pytest.approx(60_000, rel=0.01)
    assert predict(None, Workload("randread", 4 * KiB), [buffered]).iops == pytest.approx(1 / 80e-6)


def test_an_ssd_without_a_stated_latency_says_it_serves_one_at_a_time():
    ssd = DriveType("ssd", 10**12, 1e6, seq_read_bw_bytes=500 * MB, random_read_iops=75_000, rotational=False)
    stack = stack_from_notation("R0/1", 64 * KiB, drive=ssd)
    p = predict(stack, Workload("randread", 4 * KiB, qd=4))
    assert any("read latency is not stated" in a for a in p.assumptions)
    stated = stack_from_notation("R0/1", 64 * KiB, drive=dataclasses.replace(ssd, read_latency_s=80e-6))
    assert not any("read latency" in a for a in predict(stated, Workload("randread", 4 * KiB, qd=4)).assumptions)
    # behind the controller a RAID notation implies, whose own request rate nobody stated: the
    # model's default controller's, said with flash drives and wherever it binds
    assert any("handles at most 60,000 requests/s" in a for a in p.assumptions)
    spinning = stack_from_notation("R0/1", 64 * KiB, drive=DRIVE)
    assert not any("requests/s" in a for a in predict(spinning, Workload("randread", 4 * KiB)).assumptions)
    # figures that cannot both hold: 75,000 x 4 KiB is 307 MB/s, above the default 150 MB/s write rate
    odd = stack_from_notation("R0/1", 64 * KiB, drive=dataclasses.replace(ssd, random_write_iops=75_000))
    said = predict(odd, Workload("randwrite", 4 * KiB)).assumptions
    assert any("random write IOPS x 4 KiB (307 MB/s) exceed their sequential write rate (150 MB/s)" in a for a in said)
    assert not any("random read IOPS x 4 KiB" in a for a in said + p.assumptions)


def test_a_large_random_request_positions_each_drive_once():
    # a 4 MiB random read over twelve drives with 64 KiB chunks is 64 pieces, but each drive's five
    # or six lie in consecutive stripe rows, contiguous on it: one positioning and 341 KiB to move
    # per drive, not five or six positionings (before: 15 IOPS at QD1, a quarter of this)
    stack = stack_from_notation("R0/12", 64 * KiB, drive=DRIVE)
    plain = dataclasses.replace(Device.from_drive(DRIVE), reorder_depth=1, revolution_s=0.0)
    p = predict(stack, Workload("randread", 4 * MiB), [plain])
    positioning = 1 / DRIVE.random_read_iops - 4 * KiB / DRIVE.seq_read_bw_bytes
    alone = CONTROLLER_REQUEST_LATENCY_S + positioning + 4 * MiB / 12 / DRIVE.seq_read_bw_bytes
    assert p.iops == pytest.approx(1 / alone, rel=0.02)
    # a throttle counts every piece it is sent (the blkio throttle counts bios): 8 of 16 per member
    throttled = Device(1e12, 1e12, 800.0, 800.0, 1e-4, "t", shared_time=False, counts_every_request=True,
                       queues=False)
    two = stack_from_notation("R0/2", 64 * KiB, drive=DRIVE)
    assert predict(two, Workload("randread", MiB, qd=8), [throttled]).iops == pytest.approx(2 * 800 / 16)


def test_a_random_request_over_several_spinning_drives_waits_for_the_slowest_to_turn():
    # unsynchronised spindles: each of the k drives waits a uniform part of a revolution, the
    # slowest k / (k + 1) of one where one drive waits half
    from storlab.model.costs import revolution_of, slowest_rotation_extra
    drive = Device.from_drive(DRIVE)
    positioning = 1 / DRIVE.random_read_iops - 4 * KiB / DRIVE.seq_read_bw_bytes
    assert drive.revolution_s == pytest.approx(revolution_of(positioning))
    assert drive.revolution_s == pytest.approx(60 / 7200, rel=0.02)     # the 7.2K rpm proportions
    assert slowest_rotation_extra(1, 1.0) == 0 and slowest_rotation_extra(3, 1.0) == pytest.approx(0.25)
    stack = stack_from_notation("R0/12", 64 * KiB, drive=DRIVE)
    spinning = predict(stack, Workload("randread", MiB), [drive]).latency_mean_s
    still = predict(stack, Workload("randread", MiB), [dataclasses.replace(drive, revolution_s=0.0)]).latency_mean_s
    assert spinning - still == pytest.approx(drive.revolution_s * 11 / 26, rel=1e-6)
    # one drive per request: nothing to wait for; flash: no rotation at all
    assert predict(stack, Workload("randread", 4 * KiB), [drive]).latency_mean_s == pytest.approx(
        predict(stack, Workload("randread", 4 * KiB), [dataclasses.replace(drive, revolution_s=0.0)]).latency_mean_s)
    ssd = Device.from_drive(DriveType("ssd", 10**12, 1e6, random_read_iops=50_000, rotational=False))
    assert ssd.revolution_s == 0.0
    # a small RAID 5 write through: the reads of data and parity, then their writes, each pass on
    # two drives at once
    r5 = stack_from_notation("R5/9", 64 * KiB, drive=DRIVE)
    through = ControllerCache(None, 1e12, 1e12, write_back=False)
    rmw = predict(r5, Workload("randwrite", 4 * KiB), [drive], cache=through).latency_mean_s
    rmw_still = predict(r5, Workload("randwrite", 4 * KiB), [dataclasses.replace(drive, revolution_s=0.0)],
                        cache=through).latency_mean_s
    assert rmw - rmw_still == pytest.approx(2 * drive.revolution_s / 6, rel=1e-6)


def test_several_sequential_streams_on_spinning_drives_say_what_is_left_if_nothing_reads_ahead():
    # the prediction takes each stream as read ahead (the drives' look-ahead, a controller's
    # read-ahead); the rate if every piece repositioned between the other streams' is printed
    stack = stack_from_notation("R6/12", 512 * KiB, drive=DRIVE)
    eight = predict(stack, Workload("read", MiB, threads=8))
    scattered = predict(stack, Workload("randread", MiB, threads=8))
    said = [a for a in eight.assumptions if "8 sequential streams share the drives" in a]
    assert len(said) == 1 and f"falls to {scattered.bw_bytes / 1e6:,.1f} MB/s" in said[0]
    assert scattered.bw_bytes < 0.85 * eight.bw_bytes
    # one stream, writes (gathered by the write-back cache), flash: nothing to say
    assert not any("streams share" in a for a in predict(stack, Workload("read", MiB)).assumptions)
    assert not any("streams share" in a for a in predict(stack, Workload("write", MiB, threads=8)).assumptions)
    # with no write-back cache the drives' own write cache decides
    through = ControllerCache(None, 1e12, 1e12, write_back=False)
    raw = predict(stack, Workload("write", MiB, threads=8), cache=through)
    random_writes = predict(stack, Workload("randwrite", MiB, threads=8), cache=through)
    said = [a for a in raw.assumptions if "the drives' write cache gathers it" in a]
    assert len(said) == 1 and f"falls to {random_writes.bw_bytes / 1e6:,.1f} MB/s (random writes" in said[0]
    ssd = DriveType("ssd", 10**12, 1e6, seq_read_bw_bytes=500 * MB, random_read_iops=75_000, rotational=False)
    flash = stack_from_notation("R6/12", 512 * KiB, drive=ssd)
    assert not any("streams share" in a for a in predict(flash, Workload("read", MiB, threads=8)).assumptions)


def test_a_spinning_drive_s_p99_at_qd1_holds_its_positioning_spread():
    # one random read alone: its seek and rotation vary (costs.slowest_positioning_spread), so the
    # p99 lies above the mean; flash and a measured device give the mean
    from storlab.model.costs import slowest_positioning_spread
    drive = Device.from_drive(DRIVE)
    p = predict(None, Workload("randread", 4 * KiB), [drive])
    assert p.latency_tail_s - p.latency_mean_s == pytest.approx(
        drive.positioning_s(write=False) * slowest_positioning_spread(1), rel=1e-6)
    ssd = Device.from_drive(DriveType("ssd", 10**12, 1e6, random_read_iops=50_000, rotational=False))
    flat = predict(None, Workload("randread", 4 * KiB), [ssd])
    assert flat.latency_tail_s == pytest.approx(flat.latency_mean_s)
    # a sequential stream needs no positioning
    seq = predict(None, Workload("read", MiB), [drive])
    assert seq.latency_tail_s == pytest.approx(seq.latency_mean_s)


def test_device_figures_of_this_kind_are_refused_with_their_name():
    with pytest.raises(StackError, match="iops_request_bytes must be at least 0"):
        dataclasses.replace(Device.from_drive(DRIVE), iops_request_bytes=-1)
    with pytest.raises(StackError, match="request_bw_bytes must be a positive finite rate"):
        dataclasses.replace(Device.from_drive(DRIVE), request_bw_bytes=float("inf"))


# ------------------------------------------------------------------------------------------------
# The drives' own write caches (no RAID controller in front: Linux md, a bare drive)

def _md(notation: str, write_cache: bool = True):
    drive = dataclasses.replace(DRIVE, write_cache=write_cache)
    return stack_from_notation(notation, 512 * KiB, drive=drive, engine="md")


def test_a_drives_write_cache_drains_random_writes_reordering_a_full_queue_whatever_the_host_keeps():
    # one default drive: 80 IOPS alone; its cache takes each 4 KiB write and drains them choosing
    # among a full queue (costs.DRIVE_REORDER_DEPTH), at QD1 as at QD16
    from storlab.model.costs import DRIVE_REORDER_DEPTH, reordered_time
    positioning = Device.from_drive(DRIVE).positioning_s(write=True)
    drained = 1 / reordered_time(1 / DRIVE.random_write_iops, positioning, DRIVE_REORDER_DEPTH)
    rates = [predict(_md("R0/1"), Workload("randwrite", 4 * KiB, qd=qd)) for qd in (1, 16)]
    for p in rates:
        assert p.iops == pytest.approx(drained, rel=1e-6)
        assert any("write caches" in a for a in p.assumptions)
    assert drained > 2.5 * DRIVE.random_write_iops
    # off: each write waits for its positioning, one at a time at QD1, reordered deeper
    off = [predict(_md("R0/1", write_cache=False), Workload("randwrite", 4 * KiB, qd=qd)).iops for qd in (1, 16)]
    assert off[0] == pytest.approx(DRIVE.random_write_iops, rel=1e-6)
    assert off[0] < off[1] < drained
    # a controller in front takes the writes itself (its write-back cache): the drives' setting
    # changes nothing there
    controller = [predict(stack_from_notation("R5/6", 512 * KiB, drive=dataclasses.replace(DRIVE, write_cache=c)),
                          Workload("randwrite", 4 * KiB)).iops for c in (True, False)]
    assert controller[0] == pytest.approx(controller[1])


def test_md_raid5_small_writes_wait_for_their_reads_only_when_the_drives_cache_the_writes():
    # R5/6 under md, 4 KiB at QD1: read the old data and parity (two drives, the slower of the two
    # to turn), then the drives' caches acknowledge the writes, where without them the writes
    # position too (two passes)
    from storlab.model.costs import slowest_rotation_extra
    stack = _md("R5/6")
    device = Device.from_drive(DRIVE)
    one = predict(stack, Workload("randwrite", 4 * KiB, qd=1))
    off = predict(_md("R5/6", write_cache=False), Workload("randwrite", 4 * KiB, qd=1))
    read_pass = device.latency_for(False, False) + slowest_rotation_extra(2, device.revolution_s)
    ack = device.latency_for(True, True)
    # the reads, the acknowledgement and each request's transfer; beside them the drives drain the
    # writes, which a read now and then waits behind: a little slower than the reads alone, far
    # faster than two positioned passes
    alone = read_pass + ack + 2 * 4 * KiB / DRIVE.seq_read_bw_bytes
    assert 1 / one.iops > alone
    assert 1 / one.iops < 1.15 * alone
    assert one.iops > 1.6 * off.iops
    # deep queues: the drives' capacity (their reads reordered among the host's, their writes
    # among a full queue) binds, never above the ceiling, which reorders both fully
    ceiling = performance_of(stack, random_request_bytes=4 * KiB).value("random_write")
    deep = predict(stack, Workload("randwrite", 4 * KiB, qd=256))
    assert 0.9 * ceiling < deep.iops <= ceiling * (1 + 1e-9)
    assert "write cache" in deep.component(deep.limiting).why


def test_background_work_slows_a_station_as_a_mixed_network_has_it():
    # one station of demand D beside a delay Z, with b seconds a request of background work there:
    # at one request X = 1 / (Z + D / (1 - X b)), the root of -Z b X^2 + (Z + D + b) X - 1 = 0
    import math

    from storlab.model.predict import _solve_with_background, _with_background
    from storlab.model.queueing import Station, solve_closed
    z, d, b = 0.004, 0.010, 0.006
    stations = [Station("disk", d)]
    solution = _solve_with_background(lambda busy: solve_closed(_with_background(stations, busy), z, 1),
                                      {"disk": b})
    s = z + d + b
    expected = (s - math.sqrt(s * s - 4 * z * b)) / (2 * z * b)
    assert solution.throughput == pytest.approx(expected, rel=1e-6)
    # nothing in the background: the station as it is
    assert _with_background(stations, {}) is stations


def test_a_drive_writing_through_waits_a_revolution_for_each_sequential_write_at_qd1_only():
    # write cache off, no controller: each 4 KiB sequential write arrives as its sector has passed
    device = Device.from_drive(DRIVE)
    off = _md("R0/1", write_cache=False)
    one = predict(off, Workload("write", 4 * KiB, qd=1))
    assert 1 / one.iops == pytest.approx(device.latency_for(True, True) + device.revolution_s
                                         + 4 * KiB / DRIVE.seq_write_bw_bytes, rel=1e-6)
    assert any("revolution" in a for a in one.assumptions)
    # a second request queued behind it: the drive streams them
    two = predict(off, Workload("write", 4 * KiB, qd=2))
    assert two.iops > 20 * one.iops
    # the cache on: no revolution to wait
    on = predict(_md("R0/1"), Workload("write", 4 * KiB, qd=1))
    assert on.iops > 20 * one.iops
