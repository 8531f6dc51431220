"""Verification end to end: stamped writes, checked reads, every kind of mismatch reported."""
from __future__ import annotations

import json
import random

import jsonschema
import pytest
from storlab.cli.main import main
from test_cli_run import run_cli, schema  # tests/ is on sys.path (pytest prepend mode)

BS = 4096


def flip(path: str, position: int, mask: int = 0x01) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ mask]))


@pytest.mark.parametrize("kind", ["crc32c", "xxh3"])
@pytest.mark.parametrize("engine", [("psync", "1"), ("io_uring", "8")], ids=["psync", "io_uring"])
def test_byte_flipped_between_write_and_read_is_caught(shm_dir, kind, engine, capsys):
    path = f"{shm_dir}/v.dat"
    common = ["--target", path, "--bs", "4k", "--verify", kind, "--engine", engine[0], "--qd", engine[1]]
    assert run_cli(*common, "--size", "1m", "--rw", "write")["rc"] == 0
    rng = random.Random(1)
    block = rng.randrange(256)
    position = block * BS + rng.randrange(64, BS)  # somewhere in the payload
    flip(path, position)
    r = run_cli(*common, "--rw", "read")
    assert r["rc"] == 1
    v = r["doc"]["phases"][0]["verify"]
    assert (v["checked_blocks"], v["mismatches"]) == (256, 1)
    m = v["first"][0]
    assert (m["target"], m["offset"], m["field"]) == (path, block * BS, "payload")
    assert m["first_bad_byte"] == position - block * BS
    assert "verification failed" in capsys.readouterr().err


HEADER_FIELDS = {0: "magic", 5: "kind", 9: "offset", 17: "pass", 21: "length", 27: "seed", 35: "sequence",
                 44: "checksum"}


def test_flips_in_the_header_are_caught_too(shm_dir):
    path = f"{shm_dir}/h.dat"
    assert run_cli("--target", path, "--size", "64k", "--rw", "write", "--verify", "crc32c")["rc"] == 0
    for block, byte in enumerate(HEADER_FIELDS):  # magic .. checksum fields
        flip(path, block * BS + byte)
    r = run_cli("--target", path, "--rw", "read", "--verify", "crc32c", "--verify-report", "3")
    v = r["doc"]["phases"][0]["verify"]
    assert v["mismatches"] == 8 and len(v["first"]) == 3  # first 3 in full, the rest counted


def test_a_flipped_header_byte_is_named_as_its_field_not_as_payload_byte_48(shm_dir, capsys):
    path = f"{shm_dir}/h.dat"
    assert run_cli("--target", path, "--size", "64k", "--rw", "write", "--verify", "xxh3")["rc"] == 0
    for block, byte in enumerate(HEADER_FIELDS):
        flip(path, block * BS + byte)
    r = run_cli("--target", path, "--rw", "read", "--verify", "xxh3")
    jsonschema.validate(r["doc"], schema())
    first = r["doc"]["phases"][0]["verify"]["first"]
    assert [(m["offset"] // BS, m["field"]) for m in first] == list(enumerate(HEADER_FIELDS.values()))
    for m, byte in zip(first, HEADER_FIELDS):
        if m["field"] != "sequence":
            assert m["first_bad_byte"] == byte
            assert m["message"].startswith(f"header field `{m['field']}` at byte +{byte}: expected ")
    err = capsys.readouterr().err
    assert f"offset {2 * BS}: header field `offset` at byte +9: expected {2 * BS}, found {2 * BS + 256}" in err


@pytest.mark.parametrize("written, read", [(4096, 8192), (8192, 4096), (65536, 4096)])
def test_reading_back_with_another_block_size_is_a_block_size_mismatch_not_corruption(shm_dir, written, read,
                                                                                     capsys):
    path = f"{shm_dir}/bs.dat"
    assert run_cli("--target", path, "--size", "256k", "--rw", "write", "--bs", str(written),
                   "--verify", "crc32c")["rc"] == 0
    r = run_cli("--target", path, "--rw", "read", "--bs", str(read), "--verify", "crc32c")
    jsonschema.validate(r["doc"], schema())
    v = r["doc"]["phases"][0]["verify"]
    blocks = 256 * 1024 // read
    assert (v["checked_blocks"], v["mismatches"], v["bs_mismatches"], v["first"]) == (blocks, 0, blocks, [])
    m = v["first_bs_mismatch"]
    assert (m["field"], m["offset"], m["written_bs"], m["read_bs"]) == ("bs", 0, written, read)
    assert m["message"] == f"written with bs {written}, read with {read}"
    assert r["rc"] == 1
    err = capsys.readouterr().err
    assert f"{blocks} of {blocks} blocks could not be verified: written with bs {written}, read with {read}" in err
    assert "verification failed" not in err


def test_random_mixed_run_verifies_clean_and_verify_only_rereads(shm_dir):
    path = f"{shm_dir}/m.dat"
    r = run_cli("--target", path, "--size", "2m", "--rw", "randrw", "--verify", "xxh3", "--threads", "2",
                "--io-size", "1m")
    v = r["doc"]["phases"][0]["verify"]
    reads = r["doc"]["phases"][0]["read"]["ops"]
    assert r["rc"] == 0 and v["mismatches"] == 0 and v["checked_blocks"] == reads + v["readback_blocks"]
    assert v["readback_blocks"] > 0
    # verify-only: a plain read of data an earlier run wrote
    r = run_cli("--target", path, "--rw", "read", "--verify", "xxh3")
    assert r["rc"] == 0 and r["doc"]["phases"][0]["verify"]["checked_blocks"] == 512


def test_stale_pass_and_unstamped_data_are_named(shm_dir):
    path = f"{shm_dir}/p.dat"
    run_cli("--target", path, "--size", "64k", "--rw", "write", "--verify", "crc32c", "--verify-pass", "1")
    r = run_cli("--target", path, "--rw", "read", "--verify", "crc32c", "--verify-pass", "2")
    v = r["doc"]["phases"][0]["verify"]
    assert v["mismatches"] == 16 and v["first"][0]["field"] == "pass"
    # a file storlab did not write with --verify
    with open(f"{shm_dir}/plain.dat", "wb") as f:
        f.write(bytes(64 * 1024))
    r = run_cli("--target", f"{shm_dir}/plain.dat", "--rw", "read", "--verify", "crc32c")
    assert r["doc"]["phases"][0]["verify"]["first"][0]["field"] == "magic"


def test_verify_needs_room_for_the_header(shm_dir, capsys):
    rc = main(["run", "--target", f"{shm_dir}/x.dat", "--size", "1m", "--bs", "32", "--verify", "crc32c",
               "--no-store", "-q"])
    assert rc == 2 and "verify needs bs >= 64" in capsys.readouterr().err


def test_bare_verify_means_crc32c_like_fios_default(shm_dir):
    path = f"{shm_dir}/bare.dat"
    r = run_cli("--target", path, "--size", "64k", "--rw", "write", "--verify")
    assert r["rc"] == 0 and r["doc"]["job"]["verify"] == "crc32c"
    r = run_cli("--target", path, "--rw", "read", "--verify", "--bs", "4k")
    assert r["rc"] == 0 and r["doc"]["phases"][0]["verify"]["kind"] == "crc32c"
    assert r["doc"]["phases"][0]["verify"]["checked_blocks"] == 16


def test_bare_verify_before_a_job_file_leaves_the_job_file_alone(shm_dir, tmp_path):
    path = f"{shm_dir}/jf.dat"
    job = tmp_path / "job.toml"
    job.write_text(f'target = "{path}"\nsize = "64k"\nrw = "write"\n')
    out = tmp_path / "r.json"
    assert main(["run", "--verify", str(job), "--json", str(out), "--no-store", "-q"]) == 0
    doc = json.loads(out.read_text())
    assert doc["job"]["verify"] == "crc32c" and doc["job"]["target"] == [path]


def test_a_misspelt_verify_value_is_still_an_error_naming_the_values(shm_dir, capsys):
    rc = main(["run", "--target", f"{shm_dir}/x.dat", "--size", "64k", "--verify", "crc23c", "--no-store", "-q"])
    assert rc == 2 and "verify: 'crc23c' is not allowed; use one of: off, crc32c, xxh3" in capsys.readouterr().err


@pytest.mark.parametrize("engine", [("psync", "1"), ("io_uring", "8")], ids=["psync", "io_uring"])
def test_fill_verification_compares_every_byte_without_stamping_writes(shm_dir, engine):
    # verify = fill (IOR -R): every write carries the same seeded data; a read compares each byte
    path = f"{shm_dir}/f.dat"
    common = ["--target", path, "--bs", "47008", "--verify", "fill", "--engine", engine[0], "--qd", engine[1]]
    assert run_cli(*common, "--size", str(47008 * 40), "--rw", "write", "--no-verify-readback")["rc"] == 0
    with open(path, "rb") as f:
        data = f.read()
    assert data[:47008] == data[47008 * 7:47008 * 8], "every block holds the same fill"
    assert run_cli(*common, "--rw", "read")["rc"] == 0
    flip(path, 47008 * 13 + 30000)
    r = run_cli(*common, "--rw", "read")
    assert r["rc"] == 1
    v = r["doc"]["phases"][0]["verify"]
    assert (v["kind"], v["checked_blocks"], v["mismatches"]) == ("fill", 40, 1)
    assert (v["first"][0]["offset"], v["first"][0]["first_bad_byte"]) == (47008 * 13, 30000)
    # data written with another seed is caught too
    r = run_cli(*common, "--rw", "read", "--seed", "99")
    assert r["doc"]["phases"][0]["verify"]["mismatches"] == 40
