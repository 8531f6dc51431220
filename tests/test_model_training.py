"""The training and checkpoint model (storlab.model.training): the epoch formulas against values
worked by hand, the accelerator search (monotonic in the storage, exact at the threshold, bounded
by the dataset), the first-step edge, the eval phase (DLIO's evaluation, apart from training) and a
checkpoint's seconds."""
from __future__ import annotations

import dataclasses
import math

import pytest
from storlab.errors import UserError
from storlab.model.predict import Device
from storlab.model.stack import stack_from_notation
from storlab.model.training import (
    CheckpointLoad,
    TrainingLoad,
    accelerators_fed,
    checkpoint_shard_bytes,
    checkpoint_writers,
    epoch_figures,
    evaluation_load,
    predict_checkpoint,
    predict_evaluation,
    predict_training,
)

MiB = 1 << 20


def throttle(bps: float, name: str = "throttled loop") -> Device:
    """A blkio-throttled loop device: a rate limiter, no queue (as tests/test_model_validation.py)."""
    return Device(bps, bps, 1e6, 1e6, 20e-6, name, shared_time=False, counts_every_request=True, queues=False)


def load(**kw) -> TrainingLoad:
    base = dict(name="t", record_bytes=MiB, batch=1, computation_s=0.1, read_threads=2, prefetch=2,
                transfer_bytes=0, samples=100_000, au_threshold=0.75, file_per_sample=True, rule_sized=True,
                total_training_steps=500)
    base.update(kw)
    return TrainingLoad(**base)


def test_epoch_figures_worked_by_hand():
    ld = load(batch=2, samples=2000, rule_sized=False, total_training_steps=0)
    # n = 2, D = 20 MiB/s: L = 2 x 2 x 1 MiB / 20 MiB/s = 0.2 s per step, S = 2000 // 2 // 2 = 500, k = 2:
    # wall = max(500 x 0.2 + 0.1, 2 x 0.2 + 500 x 0.1) = 100.1 s; first step 0.4 + 0.1 = 0.5 s;
    # AU = 499 x 0.1 / (100.1 - 0.5) = 0.501004; samples/s = 2 x 2 x 500 / 100.1 = 19.98
    au, sps, wall = epoch_figures(ld, 2, 20 * MiB)
    assert wall == pytest.approx(100.1)
    assert au == pytest.approx(49.9 / 99.6)
    assert sps == pytest.approx(2000 / 100.1)
    # compute paces: n = 1 (S = 1000, L = 0.1 s): the readers keep ahead, AU 1
    assert epoch_figures(ld, 1, 20 * MiB)[0] == pytest.approx(1.0)
    # no reader threads: read, then compute: AU = t / (t + L) = 0.1 / 0.3
    assert epoch_figures(dataclasses.replace(ld, read_threads=0), 2, 20 * MiB)[0] == pytest.approx(1 / 3)


def test_the_first_step_edge_raises_a_short_epochs_au():
    # 10 steps, 4 readers: the 4 batches read during the first step are left out with it:
    # AU = (S - 1) t / ((S - k) L) = 9 x 0.1 / (6 x 0.25) = 0.6, where a long epoch gives t / L = 0.4
    short = load(samples=10, read_threads=4, rule_sized=False, total_training_steps=0)
    assert epoch_figures(short, 1, 4 * MiB)[0] == pytest.approx(0.6)
    long = dataclasses.replace(short, samples=100_000)
    assert epoch_figures(long, 1, 4 * MiB)[0] == pytest.approx(0.4, rel=0.01)
    # one step or no compute: nothing is counted, AU 0 (as measure/training.py's au_of_block)
    assert epoch_figures(dataclasses.replace(short, samples=1), 1, 4 * MiB)[0] == 0.0
    assert epoch_figures(dataclasses.replace(short, computation_s=0.0), 1, 4 * MiB)[0] == 0.0


def test_accelerators_fed_on_a_throttled_device_worked_by_hand():
    # 32 MiB/s, 1 MiB samples, batch 1, 0.1 s compute, 500 steps, 2 readers:
    # AU(n) = min(1, 499 x 0.1 / (498 x n / 32)) = 3.2064 / n: AU(4) = 0.80 >= 0.75 > AU(5) = 0.64
    fc = accelerators_fed(None, load(), [throttle(32 * MiB)])
    assert fc.fed == 4
    assert fc.at_fed.au == pytest.approx(3.2064 / 4, rel=0.01)
    assert fc.beyond.accelerators == 5 and not fc.beyond.passed
    assert fc.beyond.au == pytest.approx(3.2064 / 5, rel=0.01)
    assert fc.at_fed.delivered_bytes_per_s == pytest.approx(32 * MiB, rel=0.01)
    assert fc.at_fed.demand_bytes_per_s == pytest.approx(4 * MiB / 0.1)
    assert fc.at_fed.concurrency == 8 and fc.at_fed.limiting == "throttled loop"
    assert [t.accelerators for t in fc.trials] == [1, 2, 4, 5, 6, 8]   # doubling, then bisection
    assert not fc.bound


def test_the_search_is_monotonic_in_the_storage_and_the_demand():
    fed_by_bandwidth = [accelerators_fed(None, load(), [throttle(x * MiB)]).fed for x in (4, 8, 16, 32, 64, 128)]
    assert fed_by_bandwidth == sorted(fed_by_bandwidth) and fed_by_bandwidth[0] < fed_by_bandwidth[-1]
    fed_by_record = [accelerators_fed(None, load(record_bytes=r), [throttle(64 * MiB)]).fed
                     for r in (MiB // 4, MiB // 2, MiB, 2 * MiB)]
    assert fed_by_record == sorted(fed_by_record, reverse=True) and fed_by_record[0] > fed_by_record[-1]
    au = [predict_training(None, load(), n, [throttle(32 * MiB)]).au for n in range(1, 17)]
    assert all(a >= b for a, b in zip(au, au[1:]))


def test_the_threshold_is_held_at_equality_and_lost_just_above():
    ld = load()
    at4 = predict_training(None, ld, 4, [throttle(32 * MiB)]).au
    assert accelerators_fed(None, dataclasses.replace(ld, au_threshold=at4), [throttle(32 * MiB)]).fed == 4
    assert accelerators_fed(None, dataclasses.replace(ld, au_threshold=at4 + 1e-9), [throttle(32 * MiB)]).fed == 3
    # a threshold of 1 with storage always short: not even one accelerator
    assert accelerators_fed(None, dataclasses.replace(ld, au_threshold=1.0), [throttle(8 * MiB)]).fed == 0


def test_the_dataset_and_the_bound_limit_the_search():
    # 20 samples, batch 2: 5 accelerators get 2 steps each, 6 get one, and one step counts nothing
    # (AU leaves the first step out): fast storage feeds 5
    ld = load(samples=20, batch=2, rule_sized=False, total_training_steps=0, computation_s=1.0)
    fc = accelerators_fed(None, ld, [throttle(10_000 * MiB)])
    assert fc.fed == 5 and fc.at_fed.au == pytest.approx(1.0)
    assert fc.beyond.accelerators == 6 and fc.beyond.steps == 1 and fc.beyond.au == 0.0
    bounded = accelerators_fed(None, load(), [throttle(10_000 * MiB)], max_accelerators=7)
    assert bounded.fed == 7 and bounded.beyond is None and "bound of 7" in bounded.bound


def test_a_raid0_of_two_feeds_twice_a_single_member():
    one = accelerators_fed(None, load(), [throttle(32 * MiB)]).fed
    two = accelerators_fed(stack_from_notation("R0/2", 64 << 10), load(), [throttle(32 * MiB)]).fed
    assert two == pytest.approx(2 * one, abs=1)


def test_transfer_size_splits_a_sample_into_sequential_calls():
    ld = load(record_bytes=3 * MiB, transfer_bytes=MiB)
    assert ld.calls_per_sample == 3 and ld.request_bytes == MiB and ld.pattern == "read"
    assert load(record_bytes=1000).request_bytes == 1024 and load().pattern == "randread"
    point = predict_training(None, ld, 1, [throttle(32 * MiB)])
    assert point.delivered_bytes_per_s == pytest.approx(32 * MiB, rel=0.01)


def test_bad_loads_are_refused():
    with pytest.raises(UserError, match="batch"):
        load(batch=0)
    with pytest.raises(UserError, match="au_threshold"):
        load(au_threshold=1.5)
    with pytest.raises(UserError, match="accelerators"):
        predict_training(None, load(), 0, [throttle(MiB)])


def test_checkpoint_sharding_as_measure_does_it():
    assert checkpoint_writers("all", 8, 8) == 8
    assert checkpoint_writers("all", 8, 4) == 4            # subset mode: 4 of 8 ranks write their share
    assert checkpoint_writers("zero", 0, 16) == 1
    assert checkpoint_shard_bytes(105_000_000_000, 8) == 13_125_000_000
    assert checkpoint_shard_bytes(499_153_191, 0) == 499_153_191


def test_checkpoint_seconds_worked_by_hand():
    # 8 writers x 1 GiB on one device writing 100 MB/s and reading 200 MB/s: 85.9 s and 42.9 s
    dev = Device(200e6, 100e6, 1e4, 1e4, 1e-4, "disk", shared_time=False)
    fc = predict_checkpoint(None, CheckpointLoad("c", 8, 1 << 30), [dev])
    assert fc.write.seconds == pytest.approx(8 * 2**30 / 100e6, rel=0.01)
    assert fc.read.seconds == pytest.approx(8 * 2**30 / 200e6, rel=0.01)
    assert fc.write.gb_per_s == pytest.approx(0.1, rel=0.01) and fc.write.limiting == "disk"
    assert math.isfinite(fc.read.gb_per_s)


def test_a_sample_larger_than_the_full_stripe_is_one_positioning_then_a_stream_per_member():
    # R0/2 with 64 KiB chunks (full stripe 128 KiB), 1 MiB samples: each member streams 512 KiB after one
    # positioning of 10 ms at 100 MB/s: 524288 / (5.24 ms + 10 ms) = 34.4 MB/s each, 68.8 MB/s both
    disk = Device(100e6, 100e6, 100, 100, 0.01, "disk")
    point = predict_training(stack_from_notation("R0/2", 64 << 10), load(read_threads=4), 8, [disk])
    assert point.prediction.workload.rw == "read"
    assert point.delivered_bytes_per_s == pytest.approx(2 * 524288 / (524288 / 100e6 + 0.01), rel=0.02)
    # a sample within the full stripe stays a random read (one positioning per member it touches)
    small = predict_training(stack_from_notation("R0/2", 1 << 20), load(read_threads=4), 8, [disk])
    assert small.prediction.workload.rw == "randread"


def test_a_rate_limiter_pays_no_positioning_per_streamed_sample():
    # a throttle fitted with a long mean latency (its budget waits) still streams at its cap
    slow_wait = Device(32 * MiB, 32 * MiB, 1e6, 1e6, 0.005, "throttle", shared_time=False, counts_every_request=True,
                       queues=False)
    point = predict_training(stack_from_notation("R0/2", 64 << 10), load(), 8, [slow_wait])
    assert point.delivered_bytes_per_s == pytest.approx(64 * MiB, rel=0.02)


def eval_of(train: TrainingLoad, **kw) -> TrainingLoad:
    base = dict(batch=2, computation_s=0.05, samples=4000)
    base.update(kw)
    return evaluation_load(train, **base)


def test_evaluation_worked_by_hand():
    # the training load of the search test (32 MiB/s, 1 MiB samples, 2 readers) evaluating 4000 eval
    # samples in batches of 2 at 0.05 s per batch, at 4 accelerators: Se = 4000 // 2 // 4 = 500,
    # Le = 4 x 2 x 1 MiB / 32 MiB/s = 0.25 s, k = 2: wall = max(500 x 0.25 + 0.05, 2 x 0.25 + 500 x 0.05)
    # = 125.05 s, first step 0.5 + 0.05 = 0.55 s, AU = 499 x 0.05 / (125.05 - 0.55) = 24.95 / 124.5;
    # samples/s = 4 x 2 x 500 / 125.05; demand 4 x 2 x 1 MiB / 0.05 s = 160 MiB/s
    fc = predict_evaluation(None, eval_of(load()), 4, 2, [throttle(32 * MiB)])
    p = fc.point
    assert p.steps == 500 and p.epoch_s == pytest.approx(125.05, rel=1e-3)
    assert p.au == pytest.approx(24.95 / 124.5, rel=1e-3) and not p.passed
    assert p.samples_per_s == pytest.approx(4000 / 125.05, rel=1e-3)
    assert p.demand_bytes_per_s == pytest.approx(160 * MiB)
    assert p.delivered_bytes_per_s == pytest.approx(32 * MiB, rel=0.01) and p.concurrency == 8
    assert fc.evaluations == 2 and fc.seconds_per_run == pytest.approx(2 * 125.05, rel=1e-3) and not fc.note
    # at 8: Se = 250, Le = 0.5 s: wall = max(125.05, 13.5) = 125.05, first 1.05: AU = 249 x 0.05 / 124.0
    assert predict_evaluation(None, eval_of(load()), 8, 1, [throttle(32 * MiB)]).point.au == \
        pytest.approx(12.45 / 124.0, rel=1e-3)
    # compute paces at 1 on 64 MiB/s (Le = 2/64 s < 0.05 s): the readers keep ahead, AU 1;
    # wall = k Le + Se t = 2 x 2/64 + 2000 x 0.05
    one = predict_evaluation(None, eval_of(load()), 1, 1, [throttle(64 * MiB)]).point
    assert one.au == pytest.approx(1.0) and one.passed and one.epoch_s == pytest.approx(2 * (2 / 64) + 2000 * 0.05, rel=1e-5)


def test_evaluation_uses_the_training_machinery_and_its_own_files():
    train = load()                      # rule-sized, total_training_steps 500
    ev = eval_of(train)
    # the eval files as written: no size rule, no training-steps cap; the same reads as training's
    assert not ev.rule_sized and ev.total_training_steps == 0 and ev.steps(1) == 2000
    assert (ev.request_bytes, ev.pattern, ev.read_threads, ev.file_per_sample) == \
        (train.request_bytes, train.pattern, train.read_threads, train.file_per_sample)
    # the same concurrency reaches the same bandwidth, whatever the batch and compute
    t4 = predict_training(None, train, 4, [throttle(32 * MiB)])
    e4 = predict_evaluation(None, ev, 4, 1, [throttle(32 * MiB)]).point
    assert e4.delivered_bytes_per_s == pytest.approx(t4.delivered_bytes_per_s) and e4.limiting == t4.limiting
    # its AU is epoch_figures' on the eval load: first step left out, as measure/training.py's eval block
    assert e4.au == pytest.approx(epoch_figures(ev, 4, e4.delivered_bytes_per_s)[0])


def test_evaluation_with_nothing_to_count():
    # 6 eval samples, batch 2, 4 accelerators: not one step each (DLIO evaluates nothing)
    none = predict_evaluation(None, eval_of(load(), samples=6), 4, 3, [throttle(32 * MiB)])
    assert none.point.steps == 0 and none.point.au == 0.0 and "no evaluation step" in none.note
    assert none.seconds_per_run == 0.0
    # one step each, or no compute: AU 0 (the first step is left out), time still spent
    one = predict_evaluation(None, eval_of(load(), samples=8), 4, 1, [throttle(32 * MiB)])
    assert one.point.steps == 1 and one.point.au == 0.0 and one.point.epoch_s > 0 and "first step" in one.note
    idle = predict_evaluation(None, eval_of(load(), computation_s=0.0), 4, 1, [throttle(32 * MiB)])
    assert idle.point.au == 0.0 and idle.point.epoch_s == pytest.approx(500 * 0.25, rel=1e-3)


def test_a_call_carrying_several_samples_worked_by_hand():
    # a parquet row group read a column chunk at a time: 64 KiB of read columns per row, 4 MiB calls, batch 16,
    # 0.1 s compute, 32 MiB/s: L = n x 16 x 64 KiB / 32 MiB/s = n / 32 s, the AU of the 1 MiB case above:
    # AU(n) = 499 x 0.1 / (498 x n / 32) = 3.2064 / n: 4 fed (0.80), 5 not (0.64)
    ld = load(record_bytes=64 << 10, batch=16, call_bytes=4 * MiB, file_per_sample=False, shuffled=False)
    assert ld.calls_per_sample == 1 and ld.request_bytes == 4 * MiB and ld.bytes_per_call == 4 * MiB
    fc = accelerators_fed(None, ld, [throttle(32 * MiB)])
    assert fc.fed == 4 and fc.at_fed.au == pytest.approx(3.2064 / 4, rel=0.01)
    assert fc.at_fed.delivered_bytes_per_s == pytest.approx(32 * MiB, rel=0.01)
    assert fc.at_fed.prediction.workload.request_bytes == 4 * MiB and fc.at_fed.prediction.workload.rw == "read"
    assert "one call of 4194304 bytes per 64 samples" in fc.assumptions[0]


def test_v3_formats_as_the_model_reads_them(tmp_path):
    from storlab.jobs.workload import spec_from_table
    from storlab.model.training_load import sample_read, training_load

    columns = [{"name": "label", "dtype": "float16", "read": False}, {"name": "dense", "dtype": "float32", "size": 13},
               {"name": "sparse", "dtype": "int8", "size": 26}]
    spec = spec_from_table({"workload": {"name": "p"}, "dataset": {
        "folder": str(tmp_path), "format": "parquet", "files": 4, "samples_per_file": 8, "record_length": 2 + 52 + 26,
        "parquet": {"row_group_size": 3, "columns": columns}}})
    # the read columns: 52 + 26 = 78 bytes a row; a row group of 3 rows read as 2 column chunks of 3 x 78 / 2 bytes
    assert sample_read(spec) == (78, 117)
    spec.dataset.parquet.read_mode = "default"          # the whole file at once: 8 x 78 / 2 per chunk
    assert sample_read(spec) == (78, 312)
    ld = training_load(spec, "as-written")
    assert ld.record_bytes == 78 and ld.call_bytes == 312 and not ld.file_per_sample
    pytest.importorskip("PIL", reason="Pillow encodes the JPEG whose bytes the model reads")
    import numpy as np
    from storlab.jobs.sample_bytes import jpeg_side, noise_jpeg

    jpeg = spec_from_table({"workload": {"name": "j"}, "dataset": {"folder": str(tmp_path), "format": "jpeg",
                                                                    "record_length": 322957}})
    read, call = sample_read(jpeg)
    # DLIO's 568 x 568 noise image: the file a reader reads whole, smaller than the pixels it holds
    assert call == 0 and read == len(noise_jpeg(jpeg_side(322957), np.random.default_rng(10))) and read < 322957
