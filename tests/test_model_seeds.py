"""The seeds' measured tables against `storlab.model.predict` (benchmarks/model_seeds.py): the table in
docs/model.md is the one the script produces now, and a few rows keep their hand-checked values."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def seeds():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))          # model_seeds imports tests.testbed.report
    spec = importlib.util.spec_from_file_location("model_seeds", ROOT / "benchmarks" / "model_seeds.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["model_seeds"] = module        # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_seeds_table_in_docs_is_current(seeds):
    page = (ROOT / "docs" / "model.md").read_text()
    block = page.split("<!-- BEGIN generated:seeds-validation -->\n", 1)[1].split("\n<!-- END", 1)[0]
    assert block == seeds.render(seeds.all_rows()).rstrip(), \
        "docs/model.md is stale: run python3 benchmarks/model_seeds.py --write-doc docs/model.md"


def test_hand_checked_rows(seeds):
    rows = {(r.study, r.figure): r for r in seeds.all_rows()}
    # 7 drawers x 2 planars x 1200 MB/s (planar rule) = 16,800 MB/s, under the 18 GB/s system rule
    assert rows[("p690 RIO2 profile", "p690, 7 drawers")].predicted_mb == pytest.approx(16800)
    # 8 hosts out of cache: the back end's 800 MB/s binds before 8 ports x 200 MB/s
    assert rows[("Yotta Yotta GSX 2400", "out-cache read, 8 host(s)")].predicted_mb == pytest.approx(800)
    # Engenio reads, 256K: R / (L + R / B) with L, B from the 16K and 512K figures
    t16, t512 = 16 * 1024 / 46.97e6, 512 * 1024 / 174.01e6
    per_byte = (t512 - t16) / (496 * 1024)
    expected = 256 * 1024 / (t16 + 240 * 1024 * per_byte) / 1e6
    assert rows[("Engenio 8+1, 1 thread", "read 256K")].predicted_mb == pytest.approx(expected)
    # the 4+1 LUN through the same connection: one thread as the 8+1's; four threads with tag
    # queueing keep the connection busy (B = 1 / per_byte); without it, one command at a time
    assert rows[("Engenio 4+1, 1 thread, A350", "read 256K")].predicted_mb == pytest.approx(expected)
    assert rows[("Engenio 2882 4+1", "read 512K, 4 threads, XFS on XVM, CTQ")].predicted_mb == \
        pytest.approx(1 / per_byte / 1e6, rel=0.01)
    assert rows[("Engenio 2882 4+1", "read 256K, 4 threads, XFS on XVM, no CTQ")].predicted_mb == \
        pytest.approx(expected)
    # MPTIO, one process: 1 MiB / (L + the host's time for the bytes + the port's transfer), in series
    lat, per_byte = seeds._s400_fit("read")
    one = 1024 * 1024 / (lat + 1024 * 1024 * per_byte + 1024 * 1024 / 200e6) / 1e6
    table = "S400 MPTIO 1 MB, RAID-1 vs RAID-5"
    assert rows[(table, "in-cache read R5, 1 process(es), 1 client(s)")].predicted_mb == pytest.approx(one)
    # clients on hosts and ports of their own add up
    assert rows[(table, "in-cache read R5, 1 process(es), 4 client(s)")].predicted_mb == pytest.approx(4 * one)
    # the S400's node pairs mirror their cached writes: eight clients, two on each node, write two
    # pairs' worth, each one node's ceiling from D.3.3 (344.12 MB/s); their reads are not mirrored
    gpfs = "GPFS SAN mode, S400"
    assert rows[(gpfs, "in-cache write, 8 client(s)")].predicted_mb == pytest.approx(2 * 344.12, rel=1e-3)
    assert rows[(gpfs, "in-cache read, 8 client(s)")].predicted_mb > 4 * 344.12
    # iperf over GigE: one stream's round trip from its default-window figure, so two streams through
    # the hop carry about two windows per round trip, and a 256 KB window fills the link (a 1,500-byte
    # MTU's TCP payload, 1448 of 1538 bytes of a 1 Gbit/s line)
    rtt = seeds.iperf_gige_rtt("through the E7i")
    assert rtt == pytest.approx(85.3 * 1024 * 8 / 361e6, rel=0.01)
    two = rows[("iperf, GigE (Mb/s)", "through the E7i, 85.3 KB window, 2 stream(s), 25->26")].predicted_mb
    assert 1.8 * 361 < two < 2 * 361
    wide = rows[("iperf, GigE (Mb/s)", "one switch, 256 KB window, 1 stream(s), 25->26")].predicted_mb
    assert wide == pytest.approx(1000 * 1448 / 1538, rel=0.01)
