"""What one sample of MLPerf Storage v3.0's image and columnar formats is on disk and to a reader:
the JPEG that DLIO's image of a record length encodes to, and a parquet row's read columns with
the read call a row group's column chunk makes. The dataset writer (suites/training/formats.py)
writes with these, and the model (model/training_load.py) sizes its reads with them, so both
describe the same bytes."""
from __future__ import annotations

import io

import numpy as np

from .workload import PARQUET_DTYPES, DatasetSpec

__all__ = ["jpeg_side", "noise_jpeg", "jpeg_file_bytes", "parquet_read_row_bytes", "parquet_rows_per_read",
           "parquet_call_bytes"]

JPEG_SEED = 10          # DLIO's generator seed (np.random.seed(10) before its images)


def jpeg_side(length: int) -> int:
    """The side in pixels of the square grayscale image of a sample of `length` bytes (DLIO's
    dimension: int(sqrt(record_length)))."""
    return max(1, int(length ** 0.5))


def noise_jpeg(side: int, rng: np.random.Generator) -> bytes:
    """A side x side image of random 8-bit gray pixels (0..254, as DLIO draws them), encoded by
    Pillow as JPEG at its default quality, as DLIO saves it."""
    # optional (the workload extra); the callers check it is there
    from PIL import Image

    buf = io.BytesIO()
    pixels = rng.integers(0, 255, size=(side, side), dtype=np.uint8)
    Image.fromarray(pixels).save(buf, format="JPEG")    # uint8, 2-D: mode L (8-bit gray)
    return buf.getvalue()


def jpeg_file_bytes(length: int) -> int | None:
    """The bytes of the JPEG file a record of `length` bytes becomes (one image encoded; noise
    encodes to nearly the same size whatever its seed), or None when Pillow is not installed."""
    try:
        return len(noise_jpeg(jpeg_side(length), np.random.default_rng(JPEG_SEED)))
    except ImportError:
        return None


def parquet_read_row_bytes(d: DatasetSpec) -> int:
    """Bytes of a row's columns the reader reads (all of them when none is marked)."""
    columns = d.parquet.columns_for(d.record_length)
    read = [c for c in columns if c.read] or columns
    return sum(c.size * PARQUET_DTYPES[c.dtype] for c in read)


def parquet_rows_per_read(d: DatasetSpec) -> int:
    """Rows one read of a column covers: a row group (read_mode row_group) or the whole file."""
    if d.parquet.read_mode == "row_group":
        return min(d.parquet.row_group_size, d.samples_per_file)
    return d.samples_per_file


def parquet_call_bytes(d: DatasetSpec) -> int:
    """Mean bytes of one read call: a read column's chunk of the rows one read covers."""
    columns = d.parquet.columns_for(d.record_length)
    read = [c for c in columns if c.read] or columns
    return max(1, round(parquet_rows_per_read(d) * parquet_read_row_bytes(d) / len(read)))
