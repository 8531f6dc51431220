"""The honesty checks of `storlab workload` on a throttled loop device (ext4 on a loop device
whose reads are capped by a cgroup): one accelerator with prefetch gives
AU ~ min(1, t x X / (B x R)) within 15 %, and doubling the accelerators halves the
per-accelerator AU (the same bandwidth shared by twice the demand)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from testbed import REPO_ROOT, Limits, Testbed, testbed_unavailable

pytestmark = [pytest.mark.root, pytest.mark.loop, pytest.mark.slow]

X = 16 << 20            # device read cap, bytes/s
R = 1 << 20             # record length: one sample per file
B = 2                   # batch
T = 0.0625              # compute per batch: expected AU = T x X / (B x R) = 0.5 with one accelerator
FILES = 48


def workload_toml(folder: str, accelerators: int) -> str:
    return f"""[workload]
name = "honesty"
accelerators = {accelerators}
au_threshold = 0.9
[dataset]
folder = "{folder}"
format = "npz"
files = {FILES}
record_length = {R}
[reader]
batch_size = {B}
read_threads = 2
prefetch = 4
[train]
epochs = 1
computation_time = {T}
drop_cache = "always"
"""


def run(bed: Testbed, src: str) -> dict:
    out = bed.workdir / f"wl-{len(bed.children)}.json"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    child = bed.popen([sys.executable, "-m", "storlab", "workload", src, "--json", str(out), "--no-store", "--quiet"],
                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    return json.loads(out.read_text())


def test_throttled_device_gives_the_expected_au_and_doubling_halves_it():
    why = testbed_unavailable()
    if why:
        pytest.skip(why)
    with Testbed() as bed:
        (dev,) = bed.add_devices(1, 160 << 20, Limits(read_bps=X))
        bed.mkfs_ext4(dev)
        mnt = bed.mount(dev, "ext4")
        folder = os.path.join(mnt, "data")
        figures = {}
        for n in (1, 2):
            src = str(bed.workdir / f"w{n}.toml")
            with open(src, "w") as f:
                f.write(workload_toml(folder, n))
            if n == 1:      # generate outside the throttle's clock: a first short run
                from storlab.jobs.workload import DatasetSpec
                from storlab.suites.training.dataset import prepare

                prepare(DatasetSpec(folder=folder, format="npz", files=FILES, record_length=R))
            figures[n] = run(bed, src)
    expected = min(1.0, T * X / (B * R))
    print(f"expected AU {expected:.3f}; 1 accelerator: AU {figures[1]['au']:.3f}, {figures[1]['samples_per_s']:.2f} "
          f"samples/s; 2 accelerators: AU {figures[2]['au']:.3f}, {figures[2]['samples_per_s']:.2f} samples/s")
    one, two = figures[1], figures[2]
    assert one["au"] == pytest.approx(expected, rel=0.15), one["epochs"]
    assert two["au"] == pytest.approx(one["au"] / 2, rel=0.15), (one["au"], two["au"])
    # the same bytes per second either way: samples/s is the device's rate over the record
    assert one["samples_per_s"] == pytest.approx(X / R, rel=0.15)
