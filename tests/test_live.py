"""Live figures while a run goes on (output/live.py): the combined rate, ranks done and the
slowest node from each rank's own counters; the live line (`--live`); the OpenMetrics endpoint
(`--metrics-listen`), scraped during a real run on tmpfs and read with prometheus-client's parser."""
from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from storlab.cli.main import main
from storlab.jobs.listen import parse_listen
from storlab.output.live import LiveFigures, LiveLine, MetricsServer

STORLAB = [sys.executable, "-m", "storlab"]


def om_parser():
    return pytest.importorskip("prometheus_client.openmetrics.parser",
                               reason="prometheus-client not installed (pip install prometheus-client)")


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        text = r.read().decode()
    return {f.name: f for f in om_parser().text_string_to_metric_families(text)}


# -- the figures --------------------------------------------------------------------------------
def test_rates_are_each_ranks_own_counters_over_its_own_elapsed_time():
    live = LiveFigures()
    live.start(["n1", "n1", "n2"])
    # rank 2's elapsed time is its own: no wall clock is compared, so a skewed host changes nothing
    for rank, (b0, t0, b1, t1) in enumerate([(0, 0.0, 100, 1.0), (0, 0.0, 300, 1.0), (50, 10.5, 250, 11.5)]):
        live.report(rank, 0, "write", b0, b0 // 10, t0, False)
        live.report(rank, 0, "write", b1, b1 // 10, t1, False)
    s = live.summary()
    assert s.phase == "write" and s.ranks == 3 and s.ranks_done == 0
    assert s.bw_bytes == pytest.approx(100 + 300 + 200)
    assert s.by_node["n1"][0] == pytest.approx(400) and s.by_node["n2"][0] == pytest.approx(200)
    assert s.slowest == ("node n2", pytest.approx(200))


def test_ranks_done_leave_the_rate_and_a_late_report_of_an_old_phase_is_dropped():
    live = LiveFigures()
    live.start(["a", "a"])
    live.report(0, 0, "write", 0, 0, 0.0, False)
    live.report(0, 0, "write", 1000, 10, 1.0, False)
    live.report(1, 0, "write", 0, 0, 0.0, False)
    live.report(1, 0, "write", 500, 5, 1.0, True)
    s = live.summary()
    assert s.ranks_done == 1 and s.bw_bytes == pytest.approx(1000) and s.bytes == 1500
    assert s.slowest is None          # one running rank: nobody to be slower than
    live.report(0, 1, "read", 200, 2, 0.5, False)
    live.report(1, 0, "write", 600, 6, 1.2, True)   # late: rank 1 is already in phase 1 for rank 0
    live.report(1, 1, "read", 100, 1, 0.5, False)
    s = live.summary()
    assert s.phase == "read" and s.ranks_done == 0 and s.bytes == 300
    assert s.slowest == ("rank 1", pytest.approx(200))


def test_one_process_progress_starts_a_new_phase_when_the_name_changes():
    live = LiveFigures()
    live("write", 0, 0, 0.0)
    live("write", 4096, 1, 1.0)
    live("read", 8192, 2, 0.5)
    s = live.summary()
    assert s.phase == "read" and s.bytes == 8192 and s.bw_bytes == pytest.approx(8192 / 0.5)


def test_the_line_redraws_in_place_on_a_terminal_and_prints_plain_lines_elsewhere():
    tty, plain = io.StringIO(), io.StringIO()
    for stream, is_plain in ((tty, False), (plain, True)):
        live = LiveFigures(LiveLine(stream, plain=is_plain))
        live.start(["n1", "n2"])
        live.report(1, 0, "randread", 0, 0, 0.0, False)
        live.report(1, 0, "randread", 1 << 20, 256, 1.0, False)
        live("randread", 2 << 20, 512, 1.0)
        live("randread", 4 << 20, 1024, 1.5)   # within a second of the last plain line: not printed
        live.finish()
    assert tty.getvalue().startswith("\r\x1b[Krandread:") and tty.getvalue().endswith("\r\x1b[K")
    assert "ranks done 0/2" in tty.getvalue() and "slowest node n2" in tty.getvalue()
    lines = plain.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("live randread:") and "\x1b" not in plain.getvalue()


# -- --metrics-listen ---------------------------------------------------------------------------
@pytest.mark.parametrize("raw, canonical", [("9100", "127.0.0.1:9100"), (":0", "127.0.0.1:0"),
                                             ("localhost:9100", "127.0.0.1:9100"), ("10.0.0.5:9100", "10.0.0.5:9100"),
                                             ("[::1]:80", "[::1]:80"), ("0.0.0.0:9100", "0.0.0.0:9100")])
def test_listen_addresses(raw, canonical):
    assert parse_listen(raw, "metrics_listen") == canonical


@pytest.mark.parametrize("raw", ["node7:9100", "example.org:80", "127.0.0.1", "127.0.0.1:70000", "1.2.3:80", ""])
def test_a_host_name_or_a_missing_port_is_refused_naming_the_field(raw):
    with pytest.raises(ValueError, match="^metrics_listen: .*PORT alone listens on loopback"):
        parse_listen(raw, "metrics_listen")


def test_the_endpoint_serves_the_figures_as_openmetrics():
    server = MetricsServer("127.0.0.1:0")
    live = LiveFigures(server=server, labels={"job": "ckpt", "target": "/mnt/x", "host": "n1"})
    try:
        assert scrape(server.url) == {}              # nothing reported yet: only # EOF
        live.start(["n1", "n2"])
        for rank in (0, 1):
            live.report(rank, 0, "write", 0, 0, 0.0, False)
            live.report(rank, 0, "write", (rank + 1) * 1000, 10, 1.0, rank == 1)
        fams = scrape(server.url)
        bw = {s.labels["host"]: s.value for s in fams["storlab_live_bandwidth_bytes_per_second"].samples}
        assert bw == {"n1": 1000.0, "n2": 0.0}
        (done,) = fams["storlab_live_ranks_done"].samples
        assert done.value == 1 and done.labels == {"host": "n1", "job": "ckpt", "target": "/mnt/x", "phase": "write"}
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(server.url.replace("/metrics", "/other"), timeout=5)
    finally:
        live.finish()
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=2)


def test_a_bad_address_or_a_busy_port_stops_the_run_before_it_starts(capsys, shm_dir):
    code = main(["run", "--target", f"{shm_dir}/f", "--size", "1m", "--time", "1s", "--no-store",
                 "--metrics-listen", "storage-head:9100"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "metrics_listen" in err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["run", "--target", f"{shm_dir}/f", "--size", "1m", "--time", "1s", "--no-store",
                     "--metrics-listen", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"cannot listen on 127.0.0.1:{port}" in err
    assert not os.path.exists(f"{shm_dir}/f")   # nothing ran


def _start_run(shm_dir: str, *extra: str, seconds: float = 4.0) -> subprocess.Popen:
    return subprocess.Popen([*STORLAB, "run", "--target", f"{shm_dir}/f.dat", "--size", "8m", "--bs", "4k",
                             "--rw", "randread", "--time", f"{seconds}s", "--no-store", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _announced_url(proc: subprocess.Popen) -> str:
    line = proc.stderr.readline()
    assert "live metrics at http://" in line, line
    return line.split(" at ", 1)[1].strip()


def _scrape_until_figures(url: str, proc: subprocess.Popen, timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        fams = scrape(url)
        if "storlab_live_bandwidth_bytes_per_second" in fams:
            return fams
        time.sleep(0.1)
    raise AssertionError(f"no live figures at {url} in {timeout_s} s")


def test_a_running_job_answers_a_scrape_with_its_live_figures(shm_dir):
    om_parser()
    proc = _start_run(shm_dir, "--metrics-listen", "127.0.0.1:0")
    try:
        url = _announced_url(proc)
        first = _scrape_until_figures(url, proc)
        time.sleep(1.2)
        second = scrape(url)
        assert proc.poll() is None, "the run ended before the second scrape"
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    for fams in (first, second):
        (bw,) = fams["storlab_live_bandwidth_bytes_per_second"].samples
        assert bw.value > 0 and bw.labels["phase"] == "randread" and bw.labels["host"] == os.uname().nodename
        assert bw.labels["target"] == f"{shm_dir}/f.dat" and bw.labels["job"] == "run"
        assert fams["storlab_live_ranks"].samples[0].value == 1
    moved = [f["storlab_live_io_bytes"].samples[0].value for f in (first, second)]
    assert moved[1] > moved[0]     # a counter, growing while the run goes on
    assert [s.value for s in second["storlab_live_elapsed_seconds"].samples][0] > 1.0
    with pytest.raises(OSError):   # the endpoint ends with the run
        urllib.request.urlopen(url, timeout=2)


@pytest.mark.parametrize("mode, lines", [("on", True), ("off", False), ("auto", False)])
def test_live_on_forces_plain_lines_once_a_second_where_stderr_is_no_terminal(shm_dir, mode, lines):
    proc = _start_run(shm_dir, "--live", mode, seconds=3.0)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    live = [line for line in err.splitlines() if line.startswith("live ")]
    assert "\x1b" not in err and "live " not in out     # plain, and not mixed into the table
    if not lines:
        assert live == []
        return
    assert 2 <= len(live) <= 4, live           # a 3 s phase: about one a second
    assert all("randread:" in line and "IOPS" in line and "ranks done 0/1" in line for line in live)
