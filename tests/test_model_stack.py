"""Stack description: TOML loading, Python API, and one-line validation errors."""
import pytest
from storlab.model.stack import Component, StackError, Volume, load_stack, stack_from_dict, stack_from_notation

MINIMAL = {
    "drive": {"capacity": "2TB", "mtbf": "600000h", "ber": 1e-15, "seq_read": "150MB/s", "random_iops": 80},
    "raid": {"layout": "R6/12", "chunk": "512KiB", "rebuild_rate": "50MB/s"},
}


def test_minimal_stack_from_dict_units():
    stack = stack_from_dict(MINIMAL)
    assert stack.drive.capacity_bytes == 2 * 10**12
    assert stack.drive.mtbf_h == 600_000
    assert stack.drive.seq_read_bw_bytes == 150e6 and stack.drive.seq_write_bw_bytes == 150e6
    assert stack.raid.chunk_bytes == 512 * 1024
    # MTTR from capacity and rebuild rate: 2e12 B / 50e6 B/s = 40,000 s = 11.11 h
    assert stack.mttr_h == pytest.approx(40000 / 3600)


def test_a_drive_s_data_sheet_latencies_are_read_from_the_stack_file():
    stack = stack_from_dict({**MINIMAL, "drive": {"capacity": "2TB", "rotational": False, "read_latency": "80us",
                                                  "write_latency": "20us"}})
    assert stack.drive.read_latency_s == pytest.approx(80e-6)
    assert stack.drive.write_latency_s == pytest.approx(20e-6)


def test_a_drive_s_write_cache_is_read_from_the_stack_file_and_a_bad_value_is_one_line():
    assert stack_from_dict(MINIMAL).drive.write_cache is True
    off = stack_from_dict({**MINIMAL, "drive": {"capacity": "2TB", "write_cache": False}})
    assert off.drive.write_cache is False
    with pytest.raises(StackError, match=r"^\[drive\]: write_cache: expected true or false, got 'off'$"):
        stack_from_dict({**MINIMAL, "drive": {"capacity": "2TB", "write_cache": "off"}})


def test_afr_converts_to_mtbf_with_the_exponential_model():
    # 1,000,000 h MTBF: AFR = 1 - exp(-8760 / 1e6) = 0.8721743 %; and 0.876 % (= 8760/MTBF, the linear
    # rule) gives MTBF = -8760 / ln(1 - 0.00876) = 995,614 h.
    data = {**MINIMAL, "drive": {"capacity": "4TB", "afr": "0.8721743%"}}
    assert stack_from_dict(data).drive.mtbf_h == pytest.approx(1_000_000, rel=1e-6)
    data = {**MINIMAL, "drive": {"capacity": "4TB", "afr": 0.00876}}
    assert stack_from_dict(data).drive.mtbf_h == pytest.approx(995_614, rel=1e-6)


def test_drives_key_resolves_x():
    stack = stack_from_dict({**MINIMAL, "raid": {"layout": "R50/6/x", "drives": 24, "chunk": "256k"}})
    assert stack.raid.groups == 4 and stack.raid.devices == 1 and stack.raid.drives == 24


@pytest.mark.parametrize("data, message", [
    ({"drive": {"capacity": "2TB"}}, "stack: a [raid] table is required"),
    ({**MINIMAL, "raid": {"layout": "R6/3", "chunk": "64k"}}, "[raid]: layout: R6/3: RAID 6 needs at least 4 drives per span"),
    ({**MINIMAL, "raid": {"layout": "R6/12"}}, "[raid]: chunk is required"),
    ({**MINIMAL, "raid": {"layout": "R6/12", "chunk": "64q"}}, "[raid]: chunk: chunk: unknown size unit"),
    ({**MINIMAL, "raid": {"layout": "R6/12", "chunk": "64k", "colour": 1}}, "[raid]: unknown key 'colour'"),
    ({**MINIMAL, "drive": {"capacity": "2TB", "mtbf": "1h", "afr": "1%"}}, "[drive]: give mtbf or afr, not both"),
    ({**MINIMAL, "volume": {"aggregate": "stripe"}}, "volume: aggregate = 'stripe' needs at least 2 RAID devices"),
    ({**MINIMAL, "volume": {"aggregate": "mirror"}}, "volume: aggregate must be one of stripe, concat, none"),
    ({**MINIMAL, "filesystem": {"type": "zfs"}}, "filesystem: type must be one of xfs, ext4, btrfs, none"),
    ({**MINIMAL, "drive": {"capacity": "2TB", "read_latency": "0us"}},
     "[drive]: drive 'drive': read_latency 0 s is out of range; allowed: above 0 to 1 s"),
    ({**MINIMAL, "drive": {"capacity": "2TB", "read_latency": "fast"}}, "[drive]: read_latency: read_latency: cannot read"),
    ({**MINIMAL, "drive": {"capacity": "2TB", "write_latency": "2s"}},
     "[drive]: drive 'drive': write_latency 2 s is out of range; allowed: above 0 to 1 s"),
])
def test_validation_messages(data, message):
    with pytest.raises(StackError) as info:
        stack_from_dict(data)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_component_tree_from_parent_rows_expands_counts():
    data = {**MINIMAL, "raid": {"layout": "R6/12", "chunk": "512k", "count": 4},
            "volume": {"aggregate": "stripe", "inter_chunk": "1MiB"},
            "component": [
                {"name": "host", "bw": "4GB/s"},
                {"name": "adapter", "parent": "host", "count": 2, "write": "1300MB/s", "raid_engine": True},
                {"name": "enclosure", "parent": "adapter", "count": 2, "bw": "2400MB/s", "groups": 1},
            ]}
    stack = stack_from_dict(data)
    root = stack.instances()
    paths = [instance.path for instance in root.walk()]
    assert paths == ["host", "host/adapter[1]", "host/adapter[1]/enclosure[1]", "host/adapter[1]/enclosure[2]",
                     "host/adapter[2]", "host/adapter[2]/enclosure[1]", "host/adapter[2]/enclosure[2]"]
    assert root.all_group_ids() == (0, 1, 2, 3)
    # parity is added inside the adapter: its host side carries host bytes, the enclosures parity too
    assert [i.carries_parity for i in root.walk()] == [False, False, True, True, False, True, True]


@pytest.mark.parametrize("rows, message", [
    ([{"name": "a"}, {"name": "b"}], "exactly one component must have no parent"),
    ([{"name": "a", "groups": 1}, {"name": "b", "parent": "zz"}], "parent 'zz' is not a component"),
    ([{"name": "a", "groups": 2}], "components carry 2 RAID groups but the stack has 1"),
    ([{"name": "a", "groups": 1, "bw": "1GB/s", "read": "1GB/s"}], r"give bw \(both directions\) or read/write"),
    ([{"name": "a", "groups": 1}, {"name": "a", "parent": "a"}], "name used twice"),
    ([{"name": "a", "groups": 1, "mirror_writes": "yes"}], "mirror_writes: expected true or false"),
])
def test_component_errors(rows, message):
    with pytest.raises(StackError, match=message):
        stack_from_dict({**MINIMAL, "component": rows})


def test_load_stack_names_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text('[raid]\nlayout = "R6/3"\nchunk = "64k"\n')
    with pytest.raises(StackError, match=r"broken.toml: \[raid\]: layout: R6/3: RAID 6 needs at least 4"):
        load_stack(path)
    with pytest.raises(StackError, match="no such stack file"):
        load_stack(tmp_path / "missing.toml")


def test_python_api_defaults_to_striping_several_devices():
    stack = stack_from_notation("R6/12", 512 * 1024, count=2)
    assert stack.volume == Volume("stripe", None)
    assert stack_from_notation("R6/12", 512 * 1024).volume.aggregate == "none"


def test_mttr_required_for_reliability():
    with pytest.raises(StackError, match="give mttr or rebuild_rate"):
        _ = stack_from_notation("R6/12").mttr_h


def test_component_limits_must_be_positive():
    with pytest.raises(StackError, match="read limit must be positive"):
        Component("x", read_bw_bytes=0)


def test_a_mirrored_controller_pair_carries_both_halves_of_the_writes():
    # a pair of controllers mirroring their write cache (mirror_writes): each carries its own
    # group's writes and its partner's copies, so the pair writes one controller's 1300 MB/s; its
    # reads are not mirrored (performance_of, the ceilings)
    from storlab.model.performance import performance_of
    from storlab.model.stack import write_carried_groups
    rows = [{"name": "host"},
            {"name": "array", "parent": "host"},
            {"name": "ctl", "parent": "array", "count": 2, "read": "2000MB/s", "write": "1300MB/s",
             "raid_engine": True, "mirror_writes": True, "groups": 1}]
    data = {**MINIMAL, "raid": {"layout": "R6/12", "chunk": "512k", "count": 2},
            "volume": {"aggregate": "stripe", "inter_chunk": "1MiB"}, "component": rows}
    stack = stack_from_dict(data)
    carried = write_carried_groups(stack.instances())
    # host, array and each controller carry both groups' writes (a controller alone would carry one)
    assert list(carried.values()) == [2, 2, 2, 2]
    mirrored = performance_of(stack)
    rows[2]["mirror_writes"] = False
    plain = performance_of(stack_from_dict(data))
    assert mirrored.value("seq_write") == pytest.approx(min(1300e6, plain.value("seq_write")))
    assert plain.value("seq_write") > 1300e6
    assert mirrored.value("seq_read") == plain.value("seq_read")
