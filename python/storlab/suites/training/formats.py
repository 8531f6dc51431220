"""Writers of the dataset file formats AI training reads (npz, npy, hdf5, tfrecord,
indexed_binary), each returning where its samples lie in the file, so the training reader can
read a sample as one range of bytes.

The files are real files of their format: numpy opens npz and npy, h5py opens hdf5 (h5py is
needed only to write hdf5), and TFRecord readers (tf.data, DALI's tfrecord2idx) open the
tfrecord files: each record is a serialized tf.train.Example with an `image` bytes feature and a
`size` int64 feature, framed with masked CRC-32C checksums. The CRC is computed with numpy
over many lanes at once (CRC is linear, so chunks are folded together), which keeps generation
at about a hundred MB/s per thread without a compiled dependency.

indexed_binary is DLIO's layout for DLRM-style data: FILE holds the samples back to back, and
beside it FILE.off.idx and FILE.sz.idx hold each sample's offset and size as native int64
(DLIO writes them with struct 'Q' and reads them as int64). It is written piecewise, so a file
need not fit in memory; `index_paths` names the two index files a reader loads before its
first sample of the file.

jpeg is DLIO's image dataset: one grayscale image of random pixels per file, as square as the
record length allows (DLIO: int(sqrt(record_length)) pixels a side), saved by Pillow as JPEG
(quality 75, Pillow's default, as DLIO saves it). The file is smaller than the pixels (JPEG
compresses even noise); the reader reads the whole file, as Pillow does.

parquet is MLPerf Storage v3.0's dlrm and flux dataset: a row per sample, written with pyarrow a
row group (dataset.parquet.row_group_size rows) at a time (compressed as dataset.parquet.compression
says: none unless the file asks; random values gain nothing from it), one column per
dataset.parquet.columns entry (`size` values of its dtype per row; a list column when size > 1).
The reader loads the file's footer (pyarrow) before its first sample of the file, then reads a
sample's row group as the byte ranges of the columns marked `read` (DLIO's row-group read mode
with selective columns); the other samples of that row group come from memory. read_mode
default reads the whole file's read columns at its first sample instead.

Each format is one record, `Format` in `FORMATS` (its writer, its file name extension, the side
files that come with a data file, whether it is written piecewise, whether the reader loads its
side files as an index, the optional module that writes it); the dataset, its generation and the
training reader look a format up there instead of testing its name.
"""
from __future__ import annotations

import importlib.util
import os
import struct
import zipfile
from dataclasses import dataclass
from typing import BinaryIO, Callable

import numpy as np

from ...jobs.sample_bytes import jpeg_side, noise_jpeg
from ...jobs.workload import DatasetSpec

__all__ = ["Format", "FORMATS", "FileLayout", "write_indexed_binary", "index_paths", "read_index", "read_parquet_ranges",
           "jpeg_side", "crc32c",
           "crc32c_rows", "masked_crc", "read_tfrecords", "example_bytes"]

INDEX_SUFFIXES = (".off.idx", ".sz.idx")          # DLIO's index files beside an indexed_binary file
INDEX_ENTRY_BYTES = 8                             # one int64 per sample in each index file
_PIECE_BYTES = 16 << 20


@dataclass
class FileLayout:
    """Where the samples of one file lie: sample i is `length` bytes at data_offset + i x stride."""
    size: int
    data_offset: int
    stride: int
    length: int


# -- CRC-32C (Castagnoli), as TFRecord frames use -------------------------------------------------
_POLY = 0x82F63B78


def _table() -> np.ndarray:
    t = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t[i] = c
    return t


_T = _table()
_LANE = 1024          # bytes per lane: the numpy loop runs this many steps


def _raw_scalar(state: int, data: bytes) -> int:
    t = _T
    for b in data:
        state = int(t[(state ^ b) & 0xFF]) ^ (state >> 8)
    return state


def _shift_tables(nbytes: int) -> np.ndarray:
    """Tables of the linear map state -> raw CRC state after `nbytes` zero bytes, per state byte."""
    basis = []
    for bit in range(32):
        basis.append(_raw_zeros(1 << bit, nbytes))
    tables = np.zeros((4, 256), dtype=np.uint32)
    for k in range(4):
        for v in range(256):
            acc = 0
            for bit in range(8):
                if v >> bit & 1:
                    acc ^= basis[8 * k + bit]
            tables[k, v] = acc
    return tables


def _raw_zeros(state: int, nbytes: int) -> int:
    """The raw CRC state after nbytes zero bytes (square-and-multiply on the 32x32 GF(2) map)."""
    # the one-zero-byte map as a matrix of columns
    col = [_raw_scalar(1 << b, b"\0") for b in range(32)]

    def apply(m: list[int], v: int) -> int:
        acc, b = 0, 0
        while v:
            if v & 1:
                acc ^= m[b]
            v >>= 1
            b += 1
        return acc

    def square(m: list[int]) -> list[int]:
        return [apply(m, m[b]) for b in range(32)]

    n = nbytes
    while n:
        if n & 1:
            state = apply(col, state)
        col = square(col)
        n >>= 1
    return state


_SHIFT = _shift_tables(_LANE)


def _shift(state: np.ndarray) -> np.ndarray:
    s = _SHIFT
    return s[0][state & 0xFF] ^ s[1][(state >> 8) & 0xFF] ^ s[2][(state >> 16) & 0xFF] ^ s[3][state >> 24]


def crc32c_rows(rows: np.ndarray) -> np.ndarray:
    """CRC-32C of each row of a 2-D uint8 array (all rows the same length)."""
    n_rows, n = rows.shape
    lanes = n // _LANE
    state = np.full(n_rows, 0xFFFFFFFF, dtype=np.uint32)
    if lanes:
        body = rows[:, :lanes * _LANE].reshape(n_rows * lanes, _LANE)
        g = np.zeros(n_rows * lanes, dtype=np.uint32)
        t = _T
        for j in range(_LANE):
            g = t[(g ^ body[:, j]) & 0xFF] ^ (g >> 8)
        g = g.reshape(n_rows, lanes)
        for c in range(lanes):      # fold: state after lane c = shift(state) ^ raw CRC of lane c
            state = _shift(state) ^ g[:, c]
    tail = rows[:, lanes * _LANE:]
    out = np.empty(n_rows, dtype=np.uint32)
    for r in range(n_rows):
        out[r] = _raw_scalar(int(state[r]), tail[r].tobytes()) ^ 0xFFFFFFFF
    return out


def crc32c(data: bytes) -> int:
    return int(crc32c_rows(np.frombuffer(data, dtype=np.uint8).reshape(1, -1))[0])


def masked_crc(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- tf.train.Example, written by hand (protobuf wire format) ---------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _example_parts(length: int, size_value: int) -> tuple[bytes, bytes]:
    """An Example {features {feature {"image": bytes_list [IMAGE]}, {"size": int64_list [n]}}}
    as the bytes before and after the IMAGE of `length` bytes."""
    size_feature = _ld(3, _ld(1, _varint(size_value)))                 # Feature.int64_list packed
    size_entry = _ld(1, _ld(1, b"size") + _ld(2, size_feature))
    # image entry: key, then Feature{bytes_list{value: IMAGE}}
    bytes_list_len = len(_varint(1 << 3 | 2)) + len(_varint(length)) + length
    feature_len = len(_varint(1 << 3 | 2)) + len(_varint(bytes_list_len)) + bytes_list_len
    key = _ld(1, b"image")
    entry_len = len(key) + len(_varint(2 << 3 | 2)) + len(_varint(feature_len)) + feature_len
    features_len = len(_varint(1 << 3 | 2)) + len(_varint(entry_len)) + entry_len + len(size_entry)
    head = (_varint(1 << 3 | 2) + _varint(features_len)            # Example.features
            + _varint(1 << 3 | 2) + _varint(entry_len) + key        # Features.feature entry
            + _varint(2 << 3 | 2) + _varint(feature_len)            # entry.value
            + _varint(1 << 3 | 2) + _varint(bytes_list_len)         # Feature.bytes_list
            + _varint(1 << 3 | 2) + _varint(length))                # BytesList.value
    return head, size_entry


def example_bytes(image: bytes, size_value: int) -> bytes:
    head, tail = _example_parts(len(image), size_value)
    return head + image + tail


def _parse_example(buf: bytes) -> dict[str, object]:
    """The features of a serialized Example (bytes_list and int64_list only): for reading back."""
    def fields(b: bytes):
        i = 0
        while i < len(b):
            key, i = _read_varint(b, i)
            if key & 7 == 2:
                n, i = _read_varint(b, i)
                yield key >> 3, b[i:i + n]
                i += n
            elif key & 7 == 0:
                v, i = _read_varint(b, i)
                yield key >> 3, v
            else:
                raise ValueError(f"wire type {key & 7} not expected in an Example")

    out: dict[str, object] = {}
    for f, features in fields(buf):
        if f != 1:
            continue
        for f2, entry in fields(features):
            if f2 != 1:
                continue
            d = dict(fields(entry))
            name = d[1].decode()
            feature = dict(fields(d[2]))
            if 1 in feature:
                out[name] = [v for _, v in fields(feature[1])]
            elif 3 in feature:
                packed, vals, j = feature[3], [], 0
                inner = dict(fields(packed)) if packed else {}
                data = inner.get(1, b"")
                while isinstance(data, bytes) and j < len(data):
                    v, j = _read_varint(data, j)
                    vals.append(v)
                out[name] = vals
    return out


def _read_varint(b: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = b[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def read_tfrecords(path: str) -> list[dict[str, object]]:
    """Every record of a TFRecord file, checking both CRCs (a reader for tests and checks)."""
    out = []
    with open(path, "rb") as f:
        while True:
            head = f.read(12)
            if not head:
                return out
            (length,), (lcrc,) = struct.unpack("<Q", head[:8]), struct.unpack("<I", head[8:])
            if masked_crc(crc32c(head[:8])) != lcrc:
                raise ValueError(f"{path}: length CRC mismatch at offset {f.tell() - 12}")
            data = f.read(length)
            (dcrc,) = struct.unpack("<I", f.read(4))
            if masked_crc(crc32c(data)) != dcrc:
                raise ValueError(f"{path}: data CRC mismatch at offset {f.tell() - length - 4}")
            out.append(_parse_example(data))


# -- writers ---------------------------------------------------------------------------------------
# Every format's writer: write `samples` random samples of `length` bytes to `path` (and its side
# files to `side_paths`), return where the samples lie.
Writer = Callable[[str, int, int, np.random.Generator, list[str]], FileLayout]


def _dims(length: int) -> tuple[int, int]:
    """DLIO's 2-D sample shape: as square as the length allows (dim1 x dim2 == length)."""
    d1 = int(length ** 0.5)
    while d1 > 1 and length % d1:
        d1 -= 1
    return d1, length // d1


def _write_npz(f: BinaryIO, path: str, samples: np.ndarray) -> FileLayout:
    n, length = samples.shape
    d1, d2 = _dims(length)
    np.savez(f, x=samples.reshape(n, d1, d2), y=np.zeros(n, dtype=np.uint8))
    f.flush()
    offset = _npz_member_offset(path, "x.npy")
    return FileLayout(os.fstat(f.fileno()).st_size, offset, length, length)


def _write_npy(f: BinaryIO, path: str, samples: np.ndarray) -> FileLayout:
    n, length = samples.shape
    d1, d2 = _dims(length)
    np.save(f, samples.reshape(n, d1, d2))
    f.flush()
    return FileLayout(os.fstat(f.fileno()).st_size, _npy_data_offset(path, 0), length, length)


def _write_tfrecord(f: BinaryIO, path: str, samples: np.ndarray) -> FileLayout:
    n, length = samples.shape
    head, tail = _example_parts(length, length)
    rec_len = len(head) + length + len(tail)
    payloads = np.empty((n, rec_len), dtype=np.uint8)
    payloads[:, :len(head)] = np.frombuffer(head, dtype=np.uint8)
    payloads[:, len(head):len(head) + length] = samples
    payloads[:, len(head) + length:] = np.frombuffer(tail, dtype=np.uint8)
    crcs = crc32c_rows(payloads)
    len_bytes = struct.pack("<Q", rec_len)
    len_crc = struct.pack("<I", masked_crc(crc32c(len_bytes)))
    for i in range(n):
        f.write(len_bytes + len_crc)
        f.write(payloads[i].data)
        f.write(struct.pack("<I", masked_crc(int(crcs[i]))))
    f.flush()
    return FileLayout(os.fstat(f.fileno()).st_size, 0, rec_len + 16, rec_len + 16)


def _write_hdf5(f: BinaryIO, path: str, samples: np.ndarray) -> FileLayout:
    # the format's optional dependency (Format.requires), checked before generation starts
    import h5py

    n, length = samples.shape
    d1, d2 = _dims(length)
    with h5py.File(f, "w") as h:
        dset = h.create_dataset("records", data=samples.reshape(n, d1, d2))
        h.create_dataset("labels", data=np.zeros(n, dtype=np.uint8))
        offset = dset.id.get_offset()
    f.flush()
    return FileLayout(os.fstat(f.fileno()).st_size, int(offset), length, length)


def _in_memory(write: Callable[[BinaryIO, str, np.ndarray], FileLayout]) -> Writer:
    """A writer of a format written whole: a file's samples drawn at once, then written to `path`."""
    def writer(path: str, samples: int, length: int, rng: np.random.Generator, side_paths: list[str]) -> FileLayout:
        data = rng.integers(0, 256, size=(samples, length), dtype=np.uint8)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w+b") as f:
            return write(f, path, data)
    return writer


def index_paths(path: str) -> list[str]:
    """The offset and size index files of an indexed_binary data file (DLIO's names)."""
    return [path + suffix for suffix in INDEX_SUFFIXES]


def write_indexed_binary(path: str, samples: int, length: int, rng: np.random.Generator,
                         index_to: list[str] | None = None) -> FileLayout:
    """Write `samples` random samples of `length` bytes back to back into `path`, in pieces of
    about 16 MiB, then their offsets and sizes (int64) into the index files (`index_to`, by
    default beside `path`)."""
    per_piece = max(1, _PIECE_BYTES // length)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as f:
        done = 0
        while done < samples:
            n = min(per_piece, samples - done)
            f.write(rng.integers(0, 256, size=n * length, dtype=np.uint8).data)
            done += n
        size = f.tell()
    offsets = np.arange(samples, dtype=np.int64) * length
    sizes = np.full(samples, length, dtype=np.int64)
    for target, values in zip(index_to or index_paths(path), (offsets, sizes)):
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(values.astype("=i8").tobytes())
    return FileLayout(size, 0, length, length)


def read_index(path: str, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """The offsets and sizes of an indexed_binary file's samples, read from its index files as
    DLIO's reader reads them (one read of samples x 8 bytes each)."""
    out = []
    for p in index_paths(path):
        with open(p, "rb") as f:
            a = np.empty(samples, dtype=np.int64)
            if f.readinto(a) != a.nbytes:
                raise OSError(f"{p}: shorter than {samples} int64 entries (the dataset changed?)")
            out.append(a)
    return out[0], out[1]


def write_jpeg(path: str, samples: int, length: int, rng: np.random.Generator, side_paths: list[str]) -> FileLayout:
    """One JPEG image of random 8-bit gray pixels, jpeg_side(length) pixels a side (samples is 1)."""
    data = noise_jpeg(jpeg_side(length), rng)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return FileLayout(len(data), 0, len(data), len(data))


def _parquet_writer(spec: DatasetSpec) -> Writer:
    """The writer of this dataset's parquet files: its columns, a row group at a time."""
    columns = spec.parquet.columns_for(spec.record_length)
    row_group = spec.parquet.row_group_size
    compression = spec.parquet.compression
    row_bytes = sum(c.row_bytes for c in columns)

    def write(path: str, samples: int, length: int, rng: np.random.Generator, side_paths: list[str]) -> FileLayout:
        # the format's optional dependency (Format.requires), checked before generation starts
        import pyarrow as pa
        import pyarrow.parquet as pq

        fields = []
        for c in columns:
            value = pa.from_numpy_dtype(np.dtype(c.dtype))
            fields.append(pa.field(c.name, value if c.size == 1 else pa.list_(value, c.size), nullable=False))
        schema = pa.schema(fields)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as f:
            with pq.ParquetWriter(f, schema, compression=compression, use_dictionary=False) as writer:
                done = 0
                while done < samples:
                    n = min(row_group, samples - done)
                    arrays = []
                    for c in columns:
                        raw = rng.integers(0, 256, size=n * c.row_bytes, dtype=np.uint8).view(np.dtype(c.dtype))
                        flat = pa.array(raw)
                        arrays.append(flat if c.size == 1 else pa.FixedSizeListArray.from_arrays(flat, c.size))
                    writer.write_table(pa.Table.from_arrays(arrays, schema=schema), row_group_size=n)
                    done += n
            size = f.tell()
        return FileLayout(size, 0, row_bytes, row_bytes)
    return write


def read_parquet_ranges(path: str, read: list[bool]) -> list[list[tuple[int, int]]]:
    """Per row group of a parquet file, the (offset, bytes) of the column chunks marked in `read`,
    from the file's footer (pyarrow reads it)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    out = []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        ranges = []
        for j in range(rg.num_columns):
            if j < len(read) and not read[j]:
                continue
            col = rg.column(j)
            start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
            ranges.append((int(start), int(col.total_compressed_size)))
        out.append(ranges)
    return out


# -- the formats ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Format:
    """One dataset file format: everything the dataset, its generation and the reader need of it."""
    name: str
    write: Writer                        # (path, samples, length, rng, side paths) -> FileLayout
    side_suffixes: tuple[str, ...] = ()  # files beside each data file, named PATH + suffix
    streamed: bool = False               # written piecewise: a file's samples never all in memory
    indexed: bool = False                # the reader loads the side files (offsets, sizes) first
    requires: str | None = None          # the optional module that writes it (None: numpy alone)
    package: str | None = None           # the pip package of that module, when its name differs
    configured: Callable[[DatasetSpec], Writer] | None = None   # a writer made for the dataset's settings
    row_groups: bool = False             # the reader reads a sample's row group (parquet)

    def writer_for(self, spec: DatasetSpec) -> Writer:
        """The writer of this dataset's files (a format with settings of its own makes one)."""
        return self.configured(spec) if self.configured else self.write

    @property
    def extension(self) -> str:
        return self.name                 # DLIO names its files .FORMAT

    def side_paths(self, path: str) -> list[str]:
        """The files a data file at `path` comes with."""
        return [path + suffix for suffix in self.side_suffixes]

    def side_bytes(self, samples: int) -> int:
        """The size of each side file of a data file of `samples` samples (one int64 per sample)."""
        return INDEX_ENTRY_BYTES * samples

    def missing(self) -> str | None:
        """The optional module this format needs and this host lacks, or None."""
        if self.requires and importlib.util.find_spec(self.requires) is None:
            return self.requires
        return None


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("npz", _in_memory(_write_npz)),
    Format("npy", _in_memory(_write_npy)),
    Format("hdf5", _in_memory(_write_hdf5), requires="h5py"),
    Format("tfrecord", _in_memory(_write_tfrecord)),
    Format("indexed_binary", write_indexed_binary, side_suffixes=INDEX_SUFFIXES, streamed=True, indexed=True),
    Format("jpeg", write_jpeg, requires="PIL", package="Pillow"),
    Format("parquet", _parquet_writer(DatasetSpec(format="parquet")), streamed=True, requires="pyarrow",
           configured=_parquet_writer, row_groups=True),
)}


def _npz_member_offset(path: str, member: str) -> int:
    """File offset of the array data of an uncompressed npz member."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        return _npy_data_offset(path, info.header_offset + 30 + name_len + extra_len)


def _npy_data_offset(path: str, start: int) -> int:
    with open(path, "rb") as f:
        f.seek(start)
        magic = f.read(8)
        if magic[:6] != b"\x93NUMPY":
            raise ValueError(f"{path}: no npy header at {start}")
        if magic[6] == 1:
            (hlen,) = struct.unpack("<H", f.read(2))
            return start + 10 + hlen
        (hlen,) = struct.unpack("<I", f.read(4))
        return start + 12 + hlen
