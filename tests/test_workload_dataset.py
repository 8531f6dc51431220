"""The training dataset: real files of their format (numpy, h5py, a TFRecord reader open them),
a manifest, reuse, regeneration after an interrupted generation, and a folder of other files
refused."""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from storlab.jobs import workload
from storlab.jobs.workload import DatasetSpec
from storlab.suites.training import dataset as ds
from storlab.suites.training import formats
from storlab.suites.training.formats import crc32c, read_tfrecords


def spec(tmp_path, **kw) -> DatasetSpec:
    base = dict(folder=str(tmp_path / "data"), format="npz", files=6, samples_per_file=3, record_length=5000)
    base.update(kw)
    return DatasetSpec(**base)


def sample_bytes(data: ds.Dataset, f: int, s: int) -> bytes:
    lay = data.layouts[f]
    with open(data.paths[f], "rb") as fh:
        fh.seek(lay.data_offset + s * lay.stride)
        return fh.read(lay.length)


def test_crc32c_known_value():
    assert crc32c(b"123456789") == 0xE3069283          # the CRC-32C check value
    long = bytes(range(256)) * 50                        # longer than one numpy lane
    from storlab.suites.training.formats import _raw_scalar
    assert crc32c(long) == _raw_scalar(0xFFFFFFFF, long) ^ 0xFFFFFFFF


@pytest.mark.parametrize("fmt", ["npz", "npy", "tfrecord", "hdf5"])
def test_files_open_in_their_format_and_samples_lie_where_recorded(tmp_path, fmt):
    if fmt == "hdf5":
        h5py = pytest.importorskip("h5py")
    data = ds.prepare(spec(tmp_path, format=fmt))
    assert data.generated and len(data.paths) == 6
    assert sorted(os.listdir(tmp_path / "data")) == [ds.MANIFEST, "train"]
    path = data.paths[2]
    assert os.path.basename(path) == f"img_2_of_6.{fmt}"
    if fmt == "npz":
        x = np.load(path)["x"]
        assert x.shape[0] == 3 and x[0].size == 5000
        assert x[1].tobytes() == sample_bytes(data, 2, 1)
    elif fmt == "npy":
        x = np.load(path)
        assert x[2].tobytes() == sample_bytes(data, 2, 2)
    elif fmt == "hdf5":
        with h5py.File(path, "r") as h:
            assert h["records"].shape[0] == 3
            assert h["records"][1].tobytes() == sample_bytes(data, 2, 1)
    else:
        records = read_tfrecords(path)          # checks both CRCs of every record
        assert len(records) == 3 and len(records[0]["image"][0]) == 5000
        assert records[0]["size"] == [5000]
        framed = sample_bytes(data, 2, 1)            # the whole framed record: 12 + Example + 4 bytes
        assert records[1]["image"][0] in framed and len(framed) < 5000 + 64


def test_indexed_binary_is_dlios_layout_data_then_int64_offsets_and_sizes(tmp_path):
    data = ds.prepare(spec(tmp_path, format="indexed_binary", files=2, samples_per_file=5, record_length=3000))
    path = data.paths[1]
    assert sorted(os.listdir(os.path.dirname(path))) == [
        f"img_{i}_of_2.indexed_binary{suffix}" for i in range(2) for suffix in ("", ".off.idx", ".sz.idx")]
    # DLIO's IndexedBinaryReader: np.int64 arrays of num_samples_per_file entries beside the data file
    offsets = np.fromfile(path + ".off.idx", dtype=np.int64)
    sizes = np.fromfile(path + ".sz.idx", dtype=np.int64)
    assert offsets.tolist() == [0, 3000, 6000, 9000, 12000] and sizes.tolist() == [3000] * 5
    assert os.path.getsize(path) == 15000 and sample_bytes(data, 1, 3) == open(path, "rb").read()[9000:12000]
    assert not ds.prepare(spec(tmp_path, format="indexed_binary", files=2, samples_per_file=5,
                               record_length=3000)).generated
    os.unlink(path + ".sz.idx")                  # an index file gone: the dataset is not whole
    again = ds.prepare(spec(tmp_path, format="indexed_binary", files=2, samples_per_file=5, record_length=3000))
    assert again.generated and again.regenerated_because.endswith(".sz.idx is missing")


def test_indexed_binary_is_written_piecewise_not_held_in_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "_memory_available", lambda: 1 << 20)
    monkeypatch.setattr("storlab.suites.training.formats._PIECE_BYTES", 64 << 10)
    data = ds.prepare(spec(tmp_path, format="indexed_binary", files=1, samples_per_file=1000, record_length=4096))
    assert data.layouts[0].size == 1000 * 4096


def test_tfrecord_is_read_by_tensorflow_when_installed(tmp_path):
    tf = pytest.importorskip("tensorflow")
    data = ds.prepare(spec(tmp_path, format="tfrecord"))
    n = 0
    for raw in tf.data.TFRecordDataset(data.paths[0]):
        ex = tf.train.Example.FromString(raw.numpy())
        assert len(ex.features.feature["image"].bytes_list.value[0]) == 5000
        n += 1
    assert n == 3


def test_reused_when_matching_and_regenerated_when_not(tmp_path):
    s = spec(tmp_path)
    first = ds.prepare(s)
    again = ds.prepare(s)
    assert first.generated and not again.generated
    assert [lay.size for lay in again.layouts] == [lay.size for lay in first.layouts]
    other = ds.prepare(dataclasses.replace(s, record_length=6000))
    assert other.generated and "record_length" in other.regenerated_because
    os.truncate(other.paths[3], 10)            # a file changed behind storlab's back
    fixed = ds.prepare(dataclasses.replace(s, record_length=6000))
    assert fixed.generated and "img_3_of_6" in fixed.regenerated_because


def test_interrupted_generation_is_detected_and_redone(tmp_path):
    s = spec(tmp_path)
    data = ds.prepare(s)
    os.unlink(os.path.join(data.folder, ds.MANIFEST))         # as if killed before the manifest
    with open(os.path.join(data.folder, ds.PARTIAL), "w") as f:
        f.write("x")
    os.unlink(data.paths[4])
    again = ds.prepare(s)
    assert again.generated and again.regenerated_because == "a previous generation did not finish"
    assert os.path.exists(data.paths[4]) and not os.path.exists(os.path.join(data.folder, ds.PARTIAL))


def test_record_length_stdev_varies_file_sizes(tmp_path):
    data = ds.prepare(spec(tmp_path, record_length=4000, record_length_stdev=1000, samples_per_file=1, files=8))
    lengths = {lay.length for lay in data.layouts}
    assert len(lengths) > 4 and all(lay.length >= 1 for lay in data.layouts)


def test_folder_holding_other_files_is_refused_and_untouched(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "thesis.tex").write_text("mine")
    with pytest.raises(ds.DatasetError, match=r"^dataset.folder: .* holds files storlab did not write \(e.g. thesis.tex\)"):
        ds.prepare(spec(tmp_path))
    assert os.listdir(folder) == ["thesis.tex"]
    (folder / "thesis.tex").unlink()
    (folder / "train").mkdir()
    (folder / "train" / "notes.txt").write_text("mine")
    with pytest.raises(ds.DatasetError, match="train/notes.txt"):
        ds.prepare(spec(tmp_path))


def test_dataset_larger_than_the_free_space_is_refused_before_a_byte_is_written(tmp_path):
    with pytest.raises(ds.DatasetError, match=r"^dataset: 6 files x 1000000 samples x 1000000000 B = .* B do not "
                                              r"fit the \d+ B free in .*; use fewer dataset.files"):
        ds.prepare(spec(tmp_path, samples_per_file=10**6, record_length=10**9))
    assert not os.path.exists(spec(tmp_path).folder)


def test_file_larger_than_memory_is_refused_naming_samples_per_file(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "_memory_available", lambda: 1 << 20)
    with pytest.raises(ds.DatasetError, match=r"^dataset.samples_per_file: 100 is not allowed: a npz file of 100 x "
                                              r"5000 B is generated in memory .*; use 1..69"):
        ds.prepare(spec(tmp_path, samples_per_file=100))


def test_symlink_escape_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    s = spec(tmp_path)
    os.makedirs(s.folder)
    os.symlink(outside, os.path.join(s.folder, "train"))
    with pytest.raises(ds.DatasetError):
        ds.prepare(s)
    assert os.listdir(outside) == []


def test_hdf5_without_h5py_is_one_line_naming_the_install(tmp_path, monkeypatch):
    real = formats.importlib.util.find_spec
    monkeypatch.setattr(formats.importlib.util, "find_spec", lambda name, *a: None if name == "h5py" else real(name, *a))
    with pytest.raises(ds.DatasetError, match=r"^dataset.format: hdf5 files are written with h5py, which is not "
                                              r"installed; pip install 'storlab\[workload\]'"):
        ds.prepare(spec(tmp_path, format="hdf5"))
    assert not (tmp_path / "data").exists()          # refused before anything is written


def test_every_format_the_workload_job_allows_is_one_record():
    """jobs/workload.py's allowed formats (the option's choices, below suites/) and the records
    of suites/training/formats.py are the same list, in the same order."""
    assert tuple(formats.FORMATS) == workload.FORMATS
    assert [f.name for f in formats.FORMATS.values() if f.side_suffixes] == ["indexed_binary"]
    assert [f.name for f in formats.FORMATS.values() if f.requires] == ["hdf5", "jpeg", "parquet"]


@pytest.mark.parametrize("fmt", ["npz", "npy", "tfrecord", "indexed_binary"])
def test_a_files_side_files_and_its_data_are_the_records(tmp_path, fmt):
    record = formats.FORMATS[fmt]
    data = ds.prepare(spec(tmp_path, format=fmt, files=2, samples_per_file=4, record_length=3000))
    on_disk = [p for path in data.paths for p in (path, *record.side_paths(path))]
    assert data.files_on_disk() == on_disk
    assert sorted(os.listdir(tmp_path / "data" / "train")) == sorted(os.path.basename(p) for p in on_disk)
    for path in data.paths:
        assert path.endswith("." + record.extension)
        for side in record.side_paths(path):
            assert os.path.getsize(side) == record.side_bytes(4)
