"""Throughput and bottleneck: drive-level formulas (OSTEP's table, the IOPS-mix rule) and the path caps,
pinned to the seed 001 sizing chain and the seed 000 host-bus comparison, computed by hand."""
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storlab.model.costs import DRIVE_REORDER_DEPTH, reordered_positioning_fraction
from storlab.model.performance import METRICS, SHARING_MODES, mixed_iops, performance_of, with_cap_chain
from storlab.model.stack import Component, DriveType, load_stack, stack_from_notation

K, M = 1024, 1024 * 1024
MB = 10**6
STACKS = Path(__file__).resolve().parents[1] / "examples" / "stacks"
S, R = 100 * MB, 200.0          # per-drive sequential bytes/s and random IOPS (one request at a time)
# the random ceilings are with each spinning drive's queue as deep as it reorders: R x G
G = 1 / reordered_positioning_fraction(DRIVE_REORDER_DEPTH)
DRIVE = DriveType("test", capacity_bytes=10**12, mtbf_h=1e6, seq_read_bw_bytes=S, seq_write_bw_bytes=S,
                  random_read_iops=R, random_write_iops=R)


def perf(layout, chunk=64 * K, **kwargs):
    return performance_of(stack_from_notation(layout, chunk, drive=DRIVE, **kwargs))


# --- drive level: OSTEP Figure 38.8 with N = 4 (and RAID 6 by the same accounting) ---------------

@pytest.mark.parametrize("layout, seq_read, seq_write, random_read, random_write", [
    ("R0/4", 4 * S, 4 * S, 4 * R, 4 * R),
    ("R10/4", 2 * S, 2 * S, 4 * R, 2 * R),       # RAID-1 column: N/2 S, N R, N/2 R
    ("R5/4", 3 * S, 3 * S, 4 * R, 1 * R),        # RAID-5: (N-1) S, N R, N/4 R
    ("R4/4", 3 * S, 3 * S, 3 * R, R / 2),        # RAID-4: random read (N-1) R, random write R/2
    ("R6/6", 4 * S, 4 * S, 6 * R, 1 * R),        # RAID 6: (N-2) S, N R, N/6 R
])
def test_ostep_table(layout, seq_read, seq_write, random_read, random_write):
    report = perf(layout)
    assert report.value("seq_read") == pytest.approx(seq_read)
    assert report.value("seq_write") == pytest.approx(seq_write)
    assert report.value("random_read") == pytest.approx(random_read * G)
    assert report.value("random_write") == pytest.approx(random_write * G)
    assert all(m.limiting == "drives" for m in report.metrics.values())
    # the textbook figure, one request at a time on each drive, is printed beside it
    assert f"one request at a time {random_read:,.0f} IOPS" in report.metrics["random_read"].drives_note


def test_random_ceilings_of_drives_that_do_not_reorder_are_the_textbook_figures():
    ssd = DriveType("ssd", capacity_bytes=10**12, mtbf_h=1e6, seq_read_bw_bytes=S, seq_write_bw_bytes=S,
                    random_read_iops=R, random_write_iops=R, rotational=False)
    report = performance_of(stack_from_notation("R5/4", 64 * K, drive=ssd))
    assert report.value("random_read") == pytest.approx(4 * R)
    assert report.value("random_write") == pytest.approx(R)
    assert report.metrics["random_read"].drives_note == ""


def test_groups_multiply():
    # RAID x0 with G groups = G x group value: R60/6/18 = 3 x (4 data drives)
    assert perf("R60/6/18").value("seq_read") == pytest.approx(12 * S)
    assert perf("R60/6/18").value("random_write") == pytest.approx(18 * R * G / 6)


def test_partial_stripe_writes_cost_bandwidth():
    # 8+P with 256 KiB segments under 1 MiB writes: 9 chunk-sized drive transfers per 4 host chunks,
    # so 9 drives x S / 2.25 = 4 S instead of 8 S for full stripes (md: parity per request)
    assert perf("R5/9", 256 * K).value("seq_write") == pytest.approx(8 * S)
    partial = performance_of(stack_from_notation("R5/9", 256 * K, drive=DRIVE, engine="md"), seq_request_bytes=1 * M)
    assert partial.value("seq_write") == pytest.approx(4 * S)
    # a RAID controller's write-back cache (on by default) gathers the stream into full stripes
    gathered = performance_of(stack_from_notation("R5/9", 256 * K, drive=DRIVE), seq_request_bytes=1 * M)
    assert gathered.value("seq_write") == pytest.approx(8 * S)


def test_mixed_iops_rule():
    # n I / (R + F W): raw 900, W = 16 %, F = 4 -> 900 / (0.84 + 0.64) = 608 (not the "functional" 792)
    assert mixed_iops(900, 900 / 4, 0.84) == pytest.approx(608.108, abs=1e-3)


# --- caps -----------------------------------------------------------------------------------------

def test_hardware_raid_adapter_caps_host_bytes_and_ports_carry_parity():
    stack = load_stack(STACKS / "sas-jbod-4x12-two-raid-adapters.toml")
    report = performance_of(stack)
    # drives: 2 devices x 2 spans x 10 data drives x 130 MB/s = 5200 MB/s read
    read = report.metrics["seq_read"]
    assert read.value == pytest.approx(5200 * MB) and read.limiting == "drives"
    loads = {c.name: c for c in read.components}
    assert loads["sas-port"].load == pytest.approx(1300 * MB)           # 10 drives x 130 per port
    assert loads["sas-port"].headroom == pytest.approx(1100 * MB)
    # writes: each adapter saturates at 1300 MB/s (host side) -> 2600 MB/s; each port carries
    # 650 MB/s of host data plus parity: 650 x 12/10 = 780 MB/s.
    write = report.metrics["seq_write"]
    assert write.value == pytest.approx(2600 * MB)
    assert write.limiting.startswith("host/raid-adapter")
    loads = {c.name: c for c in write.components}
    assert loads["raid-adapter"].binding and loads["raid-adapter"].headroom == pytest.approx(0)
    assert loads["sas-port"].load == pytest.approx(780 * MB)


def test_software_raid_moves_parity_over_every_component():
    # md RAID 5 4+1, full stripes: 1000 MB/s cap on the host bus carries 5/4 bytes per host byte.
    # Drives of 500 MB/s could take 4 x 500 = 2000 MB/s of host writes.
    fast = DriveType("fast", capacity_bytes=10**12, mtbf_h=1e6, seq_read_bw_bytes=500 * MB, seq_write_bw_bytes=500 * MB)
    md = with_cap_chain(stack_from_notation("R5/5", 64 * K, drive=fast, engine="md"), [("pci", 1000 * MB, 1000 * MB)])
    assert performance_of(md).value("seq_write") == pytest.approx(800 * MB)
    assert performance_of(md).value("seq_read") == pytest.approx(1000 * MB)     # reads carry no parity
    # the same cap above a hardware controller carries host bytes only
    hw = with_cap_chain(stack_from_notation("R5/5", 64 * K, drive=fast), [("pci", 1000 * MB, 1000 * MB)])
    assert performance_of(hw).value("seq_write") == pytest.approx(1000 * MB)


def test_p690_sizing_chain_with_the_planning_rules():
    # 150 MB/s per adapter x 16 adapters = 2400 MB/s per drawer; 3 adapters saturate a 450 MB/s PHB;
    # 5 adapters saturate a 750 MB/s RIO2 link; 7 drawers -> 16,800 MB/s, under the 18 GB/s system.
    stack = load_stack(STACKS / "p690-rio2-fastt600.toml")
    assert stack.raid.groups == 112
    assert stack.drive.capacity_bytes == 36 * 10**9      # "14 drives (36 GB, 15 K RPM)"
    result = performance_of(stack).metrics["seq_read"]
    assert result.value == pytest.approx(16_800 * MB)
    loads = {c.name: c for c in result.components}
    assert loads["rio2-drawer"].instances == 7 and loads["adapter-phb1"].instances == 42
    assert loads["rio2-drawer"].load == pytest.approx(2400 * MB)
    for saturated in ("rio2-drawer", "planar", "link1", "phb1", "phb2", "adapter-phb1", "adapter-phb3"):
        assert loads[saturated].binding, saturated
    assert loads["link0"].headroom == pytest.approx(300 * MB)        # link0 feeds only PHB1: 450 of 750
    assert loads["phb3"].headroom == pytest.approx(150 * MB)         # two adapters: 300 of 450
    assert loads["p690"].headroom == pytest.approx(1200 * MB)
    assert not loads["fastt600-phb1"].binding
    # every limit ties; the one nearest the host is named
    assert result.limiting == "p690/rio2-drawer[1]"


def _measured_drawer(extra_phb3_adapters: int = 0, planar_mb: float | None = 1350) -> Component:
    """One RIO2 drawer with the study's measured ceilings: adapter 195, link0 ~820, link1 814,
    planar 1350 (engineering projection), PHBs unlimited (never reached in the profile)."""
    def adapters(name, count):
        return Component(name, count=count, read_bw_bytes=195 * MB, groups=1)
    planar = Component("planar", count=2, read_bw_bytes=None if planar_mb is None else planar_mb * MB, children=(
        Component("link0", read_bw_bytes=820 * MB, children=(Component("phb1", children=(adapters("a1", 3),)),)),
        Component("link1", read_bw_bytes=814 * MB, children=(
            Component("phb2", children=(adapters("a2", 3),)),
            Component("phb3", children=(adapters("a3", 2 + extra_phb3_adapters),)))),
    ))
    return Component("drawer", children=(planar,))


def test_p690_measured_profile_link1_binds_and_the_planar_cuts_both_links():
    drive = DriveType("fc", capacity_bytes=36 * 10**9, mtbf_h=1e6, seq_read_bw_bytes=60 * MB)   # the study's 36 GB
    # Without the planar's projection, link1 is the bottleneck: PHB1 path 3 x 195 = 585 MB/s (link0
    # not reached); link1 is offered 3 x 195 + 2 x 195 = 975 > 814.
    open_planar = stack_from_notation("R5/9", 128 * K, drive=drive, count=16, aggregate="none",
                                      path=_measured_drawer(planar_mb=None))
    result = performance_of(open_planar, mode="independent").metrics["seq_read"]
    loads = {c.name: c for c in result.components}
    assert loads["link0"].load == pytest.approx(585 * MB) and not loads["link0"].binding
    assert loads["link1"].load == pytest.approx(814 * MB) and loads["link1"].binding
    assert result.value == pytest.approx(2 * 1399 * MB) and result.limiting == "drawer/planar[1]/link1"
    # With it, the planar passes 1350 of the 1399 offered and cuts both links in proportion: what
    # flows through link1 is then below its limit, and the planar is named.
    stack = stack_from_notation("R5/9", 128 * K, drive=drive, count=16, aggregate="none", path=_measured_drawer())
    result = performance_of(stack, mode="independent").metrics["seq_read"]
    loads = {c.name: c for c in result.components}
    assert result.value == pytest.approx(2700 * MB) and result.limiting == "drawer/planar[1]"
    assert loads["planar"].binding and loads["planar"].load == pytest.approx(1350 * MB)
    assert loads["link1"].load == pytest.approx(814 * MB * 1350 / 1399) and not loads["link1"].binding
    assert loads["link0"].load == pytest.approx(585 * MB * 1350 / 1399)
    # "adding additional adapters under either PHB2 or PHB3 cannot improve the overall bandwidth"
    more = stack_from_notation("R5/9", 128 * K, drive=drive, count=18, aggregate="none",
                               path=_measured_drawer(extra_phb3_adapters=1))
    assert performance_of(more, mode="independent").value("seq_read") == pytest.approx(2700 * MB)


@pytest.mark.parametrize("host, buses, total", [
    ("O300", (512, 512), 1024),    # 2 PCI 64/66 buses x 512 MB/s
    ("O350", (770, 512), 1282),    # 1 PCI 64/100 @ 770 + 1 PCI 64/66 @ 512
    ("A350", (770, 770), 1540),    # 2 PCI 64/100 buses x 770 MB/s
])
def test_engenio_host_bus_capacity_against_the_array(host, buses, total):
    # Host I/O capability = sum of its PCI buses; the 5884 array delivers 800 MB/s read / 630 write
    # over 4 x 2 Gb ports of 212.5 MB/s, two ports per bus here.
    fast = DriveType("fast", capacity_bytes=10**12, mtbf_h=1e6, seq_read_bw_bytes=10**10, seq_write_bw_bytes=10**10)
    host_only = Component(host, children=tuple(
        Component(f"bus{i}", read_bw_bytes=bw * MB, children=(Component(f"port{i}", count=2, read_bw_bytes=212.5 * MB,
                                                                          groups=1),))
        for i, bw in enumerate(buses)))
    stack = stack_from_notation("R5/5", 64 * K, drive=fast, count=4, aggregate="none", path=host_only)
    assert performance_of(stack, mode="independent").value("seq_read") == pytest.approx(min(total, 850) * MB)
    array = Component("array", read_bw_bytes=800 * MB, write_bw_bytes=630 * MB, children=(host_only,))
    stack = stack_from_notation("R5/5", 64 * K, drive=fast, count=4, aggregate="none",
                                path=Component("root", children=(array,)))
    report = performance_of(stack, mode="independent")
    assert report.value("seq_read") == pytest.approx(800 * MB) and report.metrics["seq_read"].limiting == "root/array"


# --- the limiting component ------------------------------------------------------------------------

@pytest.mark.parametrize("mode", SHARING_MODES)
@pytest.mark.parametrize("upper_mb, lower_mb, named", [
    (400, 405, "upper"),            # the host-side cap is tighter
    (405, 400, "upper/lower"),      # the drive-side cap is tighter
    (400, 400, "upper"),            # a tie goes to the component nearest the host
])
def test_independent_mode_named_the_looser_of_two_chained_caps(mode, upper_mb, lower_mb, named):
    """`--cap upper=400MB/s --cap lower=405MB/s --mode independent` named `lower`: the flow through
    `lower` was what it could pass, not what `upper` let through. Every mode names the tightest."""
    stack = with_cap_chain(stack_from_notation("R6/12", 512 * K, drive=DRIVE),
                           [("upper", upper_mb * MB, upper_mb * MB), ("lower", lower_mb * MB, lower_mb * MB)])
    for metric in ("seq_read", "seq_write"):
        result = performance_of(stack, mode=mode).metrics[metric]
        assert result.value == pytest.approx(min(upper_mb, lower_mb) * MB)
        assert result.limiting == named
        loads = {c.name: c for c in result.components}
        assert loads["upper"].load == loads["lower"].load == pytest.approx(min(upper_mb, lower_mb) * MB)
        assert loads["upper"].binding == (upper_mb <= lower_mb)
        assert loads["lower"].binding == (lower_mb <= upper_mb)
        assert loads["lower"].headroom == pytest.approx(max(0, lower_mb - upper_mb) * MB)


def _two_branches(left_mb: float, right_mb: float) -> Component:
    return Component("host", kind="host", children=(
        Component("left", kind="bus", read_bw_bytes=left_mb * MB, groups=1),
        Component("right", kind="bus", read_bw_bytes=right_mb * MB, groups=1)))


@pytest.mark.parametrize("mode, value_mb, named", [
    ("lockstep", 2 * 300, "host/left"),          # both stripes wait for the 300 MB/s branch
    ("independent", 300 + 800, "host/left"),     # left cuts 900 of its 1,200; right only 400
])
def test_the_branch_that_cuts_most_is_named_in_a_tree(mode, value_mb, named):
    stack = stack_from_notation("R0/12", 64 * K, drive=DRIVE, count=2, path=_two_branches(300, 800))
    result = performance_of(stack, mode=mode).metrics["seq_read"]
    assert result.value == pytest.approx(value_mb * MB) and result.limiting == named


def test_a_striped_volume_over_unequal_buses_states_both_figures():
    """Engenio's O350: one PCI 64/100 bus at 770 MB/s and one 64/66 at 512 MB/s carry 1,282 MB/s, but a
    volume striped over a LUN on each gets 2 x 512 = 1,024 (aggregate = n x the slowest member)."""
    fast = DriveType("fast", capacity_bytes=10**12, mtbf_h=1e6, seq_read_bw_bytes=10**10, seq_write_bw_bytes=10**10)
    o350 = Component("O350", kind="host", children=(
        Component("bus-64-100", kind="host bus", read_bw_bytes=770 * MB, write_bw_bytes=770 * MB, groups=1),
        Component("bus-64-66", kind="host bus", read_bw_bytes=512 * MB, write_bw_bytes=512 * MB, groups=1)))
    stack = stack_from_notation("R5/5", 64 * K, drive=fast, count=2, path=o350)
    striped = performance_of(stack).metrics["seq_read"]
    assert striped.value == pytest.approx(1024 * MB) and striped.unequal_paths_value == pytest.approx(1282 * MB)
    assert striped.note.startswith("host buses 1,282 MB/s; a striped volume gets 1,024 MB/s because its "
                                   "stripes are equal")
    separate = performance_of(stack, mode="independent").metrics["seq_read"]
    assert separate.value == pytest.approx(1282 * MB) and separate.unequal_paths_value is None and not separate.note
    equal = stack_from_notation("R5/5", 64 * K, drive=fast, count=2, path=_two_branches(512, 512))
    assert performance_of(equal).metrics["seq_read"].note == ""


# --- properties -----------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["R5/6", "R6/12", "R10/4", "R50/6/12", "R0/4", "R1/2"]), st.integers(1, 4),
       st.floats(10, 10_000), st.floats(10, 10_000), st.sampled_from(["lockstep", "independent"]),
       st.sampled_from(["controller", "md"]))
def test_a_cap_never_raises_throughput(layout, count, read_cap_mb, write_cap_mb, mode, engine):
    base = stack_from_notation(layout, 256 * K, drive=DRIVE, count=count, engine=engine)
    capped = with_cap_chain(base, [("cap", read_cap_mb * MB, write_cap_mb * MB)])
    before, after = performance_of(base, mode=mode), performance_of(capped, mode=mode)
    for metric in METRICS:
        assert after.value(metric) <= before.value(metric) * (1 + 1e-12)
        assert after.value(metric) <= after.metrics[metric].drives_value * (1 + 1e-12)
    if engine == "controller":
        assert after.value("seq_read") <= read_cap_mb * MB * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(st.floats(100, 5000), st.floats(100, 5000))
def test_adding_a_second_cap_never_raises_throughput(first_mb, second_mb):
    base = stack_from_notation("R6/12", 512 * K, drive=DRIVE, count=2)
    one = with_cap_chain(base, [("a", first_mb * MB, first_mb * MB)])
    two = with_cap_chain(base, [("a", first_mb * MB, first_mb * MB), ("b", second_mb * MB, second_mb * MB)])
    for metric in METRICS:
        assert performance_of(two).value(metric) <= performance_of(one).value(metric) * (1 + 1e-12)
