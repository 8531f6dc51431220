"""Warnings on a stack, each pinned to the seed it comes from: the Dell study's reliability placement
(R5/R50 for scratch, R6/12 and R60 for long-term storage) and its controller saturation (24 NL-SAS
drives per H800 at about 1,300 MB/s), the Engenio host-bus comparison (O300 / O350 / A350 against a
5884), and the geometry flags repeated in every plan document."""
import json
import re
from pathlib import Path

import pytest
from storlab.cli.main import main
from storlab.model.advice import (
    HOST_BUS_HEADROOM,
    REBUILD_URE_WARN_PROBABILITY,
    SINGLE_PARITY_MAX_SPAN,
    reliability_warnings,
    stack_warnings,
)
from storlab.model.performance import performance_of
from storlab.model.quantities import HOURS_PER_YEAR
from storlab.model.reliability import mttdl_raid5_exact_h, ure_probability
from storlab.model.stack import Component, DriveType, load_stack, stack_from_notation

K = 1024
MB = 10**6
STACKS = Path(__file__).resolve().parents[1] / "examples" / "stacks"
# The Dell study's reliability assumptions: 2 TB nearline SAS, MTBF 600,000 h, BER 1e-15.
NL_SAS = DriveType("2TB NL-SAS", capacity_bytes=2 * 10**12, mtbf_h=600_000, ber_per_bit=1e-15)


def codes(warnings):
    return [w.code for w in warnings]


# --- reliability: single parity for long-term storage --------------------------------------------

def test_r50_of_2tb_drives_warns_with_its_mttdl_and_the_r60_alternative():
    stack = stack_from_notation("R50/6/24", 512 * K, drive=NL_SAS, rebuild_rate_bytes=50e6)
    [warning] = reliability_warnings(stack)
    assert warning.code == "single-parity-long-term"
    # closed form: four R5/6 spans in series, each reading 5 x 2 TB in its critical rebuild
    mttr_h = 2e12 / 50e6 / 3600
    h = ure_probability(5 * 2e12 * 8, 1e-15)
    mttdl_years = mttdl_raid5_exact_h(6, 600_000, mttr_h, h) / 4 / HOURS_PER_YEAR
    assert f"MTTDL {mttdl_years:,.0f} years" in warning.message            # 37 years
    assert f"{100 * h:.1f} % chance of an unreadable sector" in warning.message
    assert "R60/12/24 of the same drives has an MTTDL of 94,677 years" in warning.message
    assert "scratch" in warning.message and "assumed" not in warning.message


@pytest.mark.parametrize("layout, drive_bytes, warns, why", [
    ("R5/12", 36 * 10**9, True, f"per single-parity group (the Dell study kept at most {SINGLE_PARITY_MAX_SPAN})"),
    ("R5/6", 2 * 10**12, True, "chance of an unreadable sector"),         # the Dell study's R5/6: scratch only
    ("R5/5", 146 * 10**9, False, ""),     # Engenio's 4+1 of 146 GB: narrow, 0.47 % URE per rebuild
    ("R6/12", 2 * 10**12, False, ""),     # the study's long-term layout
    ("R60/12/24", 2 * 10**12, False, ""),
    ("R10/12", 2 * 10**12, False, ""),
])
def test_which_layouts_warn_for_long_term_storage(layout, drive_bytes, warns, why):
    drive = DriveType("d", capacity_bytes=drive_bytes, mtbf_h=600_000, ber_per_bit=1e-15)
    warnings = reliability_warnings(stack_from_notation(layout, 512 * K, drive=drive, mttr_h=24))
    assert codes(warnings) == (["single-parity-long-term"] if warns else [])
    if warns:
        assert why in warnings[0].message


def test_the_large_drive_threshold_is_the_rebuild_ure_probability():
    # R5/5 reads 4 drives in a critical rebuild: the warning starts where that passes 1 %
    threshold_bytes = -__import__("math").log1p(-REBUILD_URE_WARN_PROBABILITY) / 1e-15 / 8 / 4
    below = DriveType("d", capacity_bytes=int(threshold_bytes * 0.99), mtbf_h=600_000, ber_per_bit=1e-15)
    above = DriveType("d", capacity_bytes=int(threshold_bytes * 1.01), mtbf_h=600_000, ber_per_bit=1e-15)
    assert reliability_warnings(stack_from_notation("R5/5", 64 * K, drive=below, mttr_h=24)) == []
    assert codes(reliability_warnings(stack_from_notation("R5/5", 64 * K, drive=above, mttr_h=24))) == [
        "single-parity-long-term"]


def test_without_a_rebuild_figure_the_assumed_rate_is_stated():
    [warning] = reliability_warnings(stack_from_notation("R5/6", 512 * K, drive=NL_SAS))
    assert "MTTR from an assumed 50 MB/s rebuild" in warning.message


# --- controllers with more drives than they carry (Dell: 24 NL-SAS per H800) ----------------------

def _h800_stack(drives: int, write_mb_per_drive: float):
    drive = DriveType("NL-SAS", capacity_bytes=2 * 10**12, mtbf_h=600_000, seq_read_bw_bytes=130 * MB,
                      seq_write_bw_bytes=write_mb_per_drive * MB)
    h800 = Component("h800", kind="controller", read_bw_bytes=4000 * MB, write_bw_bytes=1300 * MB,
                     raid_engine=True, groups=drives // 12)
    return stack_from_notation(f"R60/12/{drives}", 512 * K, drive=drive, mttr_h=24,
                               path=Component("host", kind="host", children=(h800,)))


def test_48_nl_sas_drives_behind_one_h800_warn_and_name_its_limit():
    # 1,300 MB/s of writes / 65 MB/s per data drive = 20 data drives = 24 drives of R60/12: the
    # study's saturation point; 48 drives deliver 2,600 MB/s, so 24 add nothing.
    stack = _h800_stack(48, 65)
    warnings = [w for w in stack_warnings(stack) if w.code == "controller-oversubscribed"]
    assert len(warnings) == 1
    message = warnings[0].message
    assert message.startswith("host/h800 carries 1,300 MB/s of sequential writes but its 48 drives could deliver "
                              "2,600 MB/s: about 24 drives saturate it and the other 24 add no streaming throughput")
    assert "another adapter" in message and "24 NL-SAS drives per H800" in message


def test_24_nl_sas_drives_behind_one_h800_do_not_warn():
    assert "controller-oversubscribed" not in codes(stack_warnings(_h800_stack(24, 65)))


def test_the_dell_example_stack_the_study_recommends_does_not_warn():
    # issue 36: 24 drives per adapter is the study's own configuration; at 130 MB/s per drive its
    # writes saturate the adapter but its reads (2,600 of 4,000 MB/s) do not: no drive is wasted
    stack = load_stack(STACKS / "sas-jbod-4x12-two-raid-adapters.toml")
    assert "controller-oversubscribed" not in codes(stack_warnings(stack))


def test_a_controller_saturated_both_ways_warns():
    # the same adapters with a 1,300 MB/s read limit too: 12 drives saturate both directions
    drive = DriveType("NL-SAS", capacity_bytes=2 * 10**12, mtbf_h=600_000, seq_read_bw_bytes=130 * MB,
                      seq_write_bw_bytes=130 * MB)
    h800 = Component("h800", kind="controller", read_bw_bytes=1300 * MB, write_bw_bytes=1300 * MB,
                     raid_engine=True, groups=2)
    stack = stack_from_notation("R60/12/24", 512 * K, drive=drive, mttr_h=24,
                                path=Component("host", kind="host", children=(h800,)))
    [warning] = [w for w in stack_warnings(stack) if w.code == "controller-oversubscribed"]
    assert "about 12 drives saturate it and the other 12" in warning.message


def test_a_mirrored_controller_pair_counts_its_partners_writes():
    # two controllers of a pair, 1,300 MB/s each way, 24 drives each: reads saturate each (24 x 130
    # > 1,300) and, mirrored, each carries both halves of the writes: 2,600 MB/s of drive writes
    # for one controller's 1,300, so half the drives add nothing either way. Without the mirror the
    # writes still add (24 drives write 20 x 65 = 1,300 MB/s, just its limit): no warning
    drive = DriveType("NL-SAS", capacity_bytes=2 * 10**12, mtbf_h=600_000, seq_read_bw_bytes=130 * MB,
                      seq_write_bw_bytes=65 * MB)

    def stack(mirror):
        ctl = Component("ctl", kind="controller", count=2, read_bw_bytes=1300 * MB, write_bw_bytes=1300 * MB,
                        raid_engine=True, mirror_writes=mirror, groups=2)
        return stack_from_notation("R60/12/24", 512 * K, drive=drive, count=2, mttr_h=24,
                                   path=Component("host", kind="host", children=(ctl,)))
    assert "controller-oversubscribed" not in codes(stack_warnings(stack(False)))
    [warning] = [w for w in stack_warnings(stack(True)) if w.code == "controller-oversubscribed"]
    assert "about 12 drives saturate it and the other 12" in warning.message


# --- host buses against the array (Engenio O300 / O350 / A350 with a 5884) ------------------------

def _host_over_5884(buses_mb):
    fast = DriveType("fast", capacity_bytes=146 * 10**9, mtbf_h=1e6, seq_read_bw_bytes=10**10,
                     seq_write_bw_bytes=10**10)
    host = Component("host", kind="host", children=tuple(
        Component(f"bus{i}", kind="host bus", read_bw_bytes=bw * MB, write_bw_bytes=bw * MB,
                  children=(Component(f"fc{i}", kind="port", count=2, read_bw_bytes=212.5 * MB,
                                      write_bw_bytes=212.5 * MB, groups=1),))
        for i, bw in enumerate(buses_mb)))
    array = Component("5884", kind="array", read_bw_bytes=800 * MB, write_bw_bytes=630 * MB, children=(host,))
    return stack_from_notation("R5/5", 64 * K, drive=fast, count=4, aggregate="none", mttr_h=24, path=array)


@pytest.mark.parametrize("host, buses, warns", [
    ("O300", (512, 512), "only 1.28 x the 800 MB/s"),       # "may not have enough I/O bandwidth"
    ("O350", (770, 512), None),                             # 1.60 x: "may have enough"
    ("A350", (770, 770), None),                             # 1.93 x: "should have enough"
    ("slow", (300, 300), "less than the 800 MB/s the array delivers: the host cannot drive the array"),
])
def test_host_buses_need_headroom_over_the_array(host, buses, warns):
    stack = _host_over_5884(buses)
    found = [w for w in stack_warnings(stack, performance_of(stack, mode="independent")) if w.code == "host-buses-short"]
    if warns is None:
        assert found == [] and sum(buses) >= 800 * HOST_BUS_HEADROOM
    else:
        [warning] = found
        assert warns in warning.message and "O300" in warning.message


def test_the_engenio_example_stack_warns_for_its_o300():
    stack = load_stack(STACKS / "engenio-o300-5884.toml")
    [warning] = [w for w in stack_warnings(stack) if w.code == "host-buses-short"]
    assert warning.message.startswith("the host buses (pci-64-66) carry 1,024 MB/s of sequential reads, only 1.28 x "
                                      "the 800 MB/s the array delivers")


def test_the_bus_headroom_rule_does_not_judge_fibre_channel_links():
    # issue 36: two 770 MB/s buses carry 1,540 MB/s (1.9 x the 5884's 800: enough, the A350 case);
    # the four 212.5 MB/s FC links below them carry 850 MB/s, more than the array: no warning,
    # although the links alone are under 1.5 x (the rule is for buses shared with base I/O)
    assert "host-buses-short" not in codes(stack_warnings(_host_over_5884((770, 770))))


def test_a_default_drive_gets_no_reliability_verdict():
    # issue 36: R5/12 of the default drive nobody named: the width rule only, no MTTDL
    [warning] = reliability_warnings(stack_from_notation("R5/12", 512 * K), drive_named=False)
    assert "no drive was named" in warning.message and "MTTDL" in warning.message
    assert "years" not in warning.message
    assert reliability_warnings(stack_from_notation("R5/6", 512 * K), drive_named=False) == []
    [warning] = [w for w in stack_warnings(stack_from_notation("R5/12", 512 * K))
                 if w.code == "single-parity-long-term"]
    assert "no drive was named" in warning.message


def test_the_p690_drawers_balanced_against_their_adapters_do_not_warn():
    # The study sized adapters to the drawers (16,800 MB/s both): no bus shares base I/O in the tree.
    stack = load_stack(STACKS / "p690-rio2-fastt600.toml")
    assert "host-buses-short" not in codes(stack_warnings(stack))


def test_a_striped_volume_over_unequal_buses_is_a_warning():
    fast = DriveType("fast", capacity_bytes=10**12, mtbf_h=1e6, seq_read_bw_bytes=10**10, seq_write_bw_bytes=10**10)
    o350 = Component("O350", kind="host", children=(
        Component("bus-64-100", kind="host bus", read_bw_bytes=770 * MB, write_bw_bytes=770 * MB, groups=1),
        Component("bus-64-66", kind="host bus", read_bw_bytes=512 * MB, write_bw_bytes=512 * MB, groups=1)))
    stack = stack_from_notation("R5/5", 64 * K, drive=fast, count=2, mttr_h=24, path=o350)
    unequal = [w.message for w in stack_warnings(stack) if w.code == "unequal-stripes"]
    assert "seq_read: host buses 1,282 MB/s; a striped volume gets 1,024 MB/s because its stripes are equal" in \
        "\n".join(unequal)


# --- every plan document, geometry flags repeated ---------------------------------------------------

def _json(capsys, *argv):
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_inter_chunk_below_intra_chunk_is_repeated_in_geometry_perf_and_script(capsys):
    layout = ["R6/10", "--count", "2", "--chunk", "512k", "--inter-chunk", "64k", "--parity", "md"]
    for command in ("geometry", "perf", "script"):
        doc = _json(capsys, command, *layout)
        assert "inter-chunk-smaller" in [w["code"] for w in doc["warnings"]], command
    assert main(["plan", "perf", *layout]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^warnings:\n(  .*\n)*  inter-chunk-smaller: host inter-chunk 64 KiB is smaller", out, re.M)
    assert main(["plan", "script", *layout]) == 0
    assert "# warning: inter-chunk-smaller: host inter-chunk 64 KiB" in capsys.readouterr().out


def test_partial_stripes_are_repeated_in_recommend(capsys):
    doc = _json(capsys, "recommend", "--drives", "12", "--levels", "5", "--chunks", "64k", "--request", "1MiB")
    r5_12 = next(c for c in doc["pareto"] if c["layout"] == "R5/12")
    assert "partial-stripe-requests" in [w["code"] for w in r5_12["warnings"]]
    assert any(w["code"] == "partial-stripe-requests" and w["message"].startswith("R5/12, chunk 64 KiB: ")
               for w in doc["warnings"])
    assert main(["plan", "recommend", "--drives", "12", "--levels", "5", "--chunks", "64k"]) == 0
    assert "    warning: partial-stripe-requests: 1 MiB requests" in capsys.readouterr().out


def test_reliability_text_lists_the_warning(capsys):
    assert main(["plan", "reliability", "R50/6/24", "--rebuild-rate", "50MB/s"]) == 0
    out = capsys.readouterr().out
    assert "\nwarnings:\n" in out and "\n  single-parity-long-term: R50/6/24 of 2.00 TB drives: " in out


def test_a_group_too_narrow_for_raid6_names_the_wider_alternative():
    # three drives have no RAID 6 of their own: the alternative says it takes a drive more per group
    [warning] = reliability_warnings(stack_from_notation("R5/3", 64 * K, drive=NL_SAS, count=2, mttr_h=24))
    assert "R6/4 x 2 with one drive more per group has an MTTDL of" in warning.message
