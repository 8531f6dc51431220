"""CPU accounting: host shares from /proc/stat deltas and the normalised cost per 100 MB/s."""

from storlab.measure.cpu import CpuSample, cpu_usage


def test_cpu_usage_from_known_samples(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    host0 = dict(user=0, nice=0, system=0, idle=0, iowait=0, irq=0, softirq=0, steal=0)
    host1 = dict(user=60, nice=0, system=20, idle=100, iowait=20, irq=0, softirq=0, steal=0)
    before = CpuSample(wall_s=0.0, host=host0, self_user_s=0.0, self_system_s=0.0)
    after = CpuSample(wall_s=2.0, host=host1, self_user_s=0.5, self_system_s=0.5)
    u = cpu_usage(before, after, bw_bytes=200e6)  # 200 MB/s
    assert u["host_user_pct"] == 30.0 and u["host_system_pct"] == 10.0 and u["host_iowait_pct"] == 10.0
    assert u["host_busy_pct"] == 40.0
    assert u["self_pct"] == 25.0                      # 1 CPU-second over 2 s of a 2-CPU host
    assert u["host_pct_per_100MBps"] == 20.0 and u["self_pct_per_100MBps"] == 12.5


def test_a_real_sample_moves_forward():
    a = CpuSample.now()
    sum(i * i for i in range(200000))
    b = CpuSample.now()
    u = cpu_usage(a, b, 0)
    assert b.wall_s > a.wall_s and u["self_user_s"] + u["self_system_s"] >= 0
    assert "host_pct_per_100MBps" not in u  # no throughput, no normalised cost
