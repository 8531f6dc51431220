"""Where a workload's dataset and checkpoints live when their folder is an s3://BUCKET/PREFIX URL:
`ObjectPlace`, the object side of the training suite's storage seam. The dataset
(dataset.py), the readers (training.py) and the checkpoints (checkpoint.py) ask `place_of` for
the place of a folder: None for a local path (their file code runs as before), an ObjectPlace
for a URL, whose put / get / list / remove they call instead of open / pread / listdir / unlink.

Requests go through the engine's S3 client (storlab._core.ObjectStore: SigV4, 503 retries,
multipart above the part size, the GIL released), one store per endpoint, requests dealt
round-robin over them. Its errors become storlab's: a store that cannot be set up (URL,
endpoint, credentials) a TargetError (exit 2), a failed request a RunIOError (exit 1), each one
line naming the object, never the secret key.
"""
from __future__ import annotations

import itertools
import threading
from typing import Any

from ... import _core
from ...errors import from_core
from ...jobs.workload import StorageSpec, is_object_url

__all__ = ["ObjectPlace", "place_of", "is_object_url"]

CONNECTIONS = 16      # connections kept alive per endpoint: a reader thread or generator worker each


class ObjectPlace:
    """The objects under one s3:// URL; keys are relative to its prefix (`train/img_0_of_8.npz`)."""

    def __init__(self, url: str, storage: StorageSpec) -> None:
        self.url = url.rstrip("/")
        self.storage = storage
        endpoints = [e.strip() for e in storage.endpoint.split(",") if e.strip()] or [None]
        try:
            self.stores = [_core.ObjectStore(self.url, endpoint=e, insecure=storage.insecure,
                                             virtual_host=storage.virtual_host, connections=CONNECTIONS)
                           for e in endpoints]
        except _core.CoreError as e:
            raise from_core(*e.args) from None
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def _store(self):
        """The next endpoint's store (round-robin; one endpoint: always it)."""
        if len(self.stores) == 1:
            return self.stores[0]
        with self._lock:
            return self.stores[next(self._turn) % len(self.stores)]

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._store(), method)(*args, **kwargs)
        except _core.CoreError as e:
            raise from_core(*e.args) from None

    @property
    def bucket(self) -> str:
        return self.stores[0].bucket

    @property
    def prefix(self) -> str:
        return self.stores[0].prefix

    @property
    def part_size(self) -> int:
        return self.stores[0].part_size

    def put(self, key: str, data: bytes) -> None:
        """PUT `data` as `key` (multipart above the part size)."""
        self._call("put", key, data)

    def get(self, key: str, offset: int = 0, length: int | None = None, whole: bool = False) -> bytes:
        """`length` bytes of `key` from `offset` (a ranged GET; `whole`: length is the object's size,
        one GET without a Range); without `length` the object to its end (its size LISTed first)."""
        return self._call("get", key, offset, length, whole)

    def list(self, prefix: str = "") -> dict[str, int]:
        """{key: size} of the objects whose key starts with `prefix`."""
        return dict(self._call("list", prefix))

    def remove(self, keys: list[str]) -> None:
        """DELETE `keys` (DeleteObjects, a thousand a request)."""
        if keys:
            self._call("delete_many", list(keys))

    def record(self) -> dict[str, Any]:
        """The storage as a result records it: type, endpoints, bucket and prefix (no credentials)."""
        return {"type": "s3", "url": self.url, "endpoint": ",".join(s.endpoint for s in self.stores),
                "bucket": self.bucket, "prefix": self.prefix, "library": self.storage.library or None}


_PLACES: dict[tuple[Any, ...], ObjectPlace] = {}
_PLACES_LOCK = threading.Lock()


def place_of(folder: str, storage: StorageSpec | None = None) -> ObjectPlace | None:
    """The object place of an s3:// folder (one per URL and storage settings, shared by the
    threads of a run), None for a local path."""
    if not is_object_url(folder):
        return None
    storage = storage or StorageSpec()
    key = (folder.rstrip("/"), storage.endpoint, storage.insecure, storage.virtual_host, storage.library)
    with _PLACES_LOCK:
        place = _PLACES.get(key)
        if place is None:
            place = _PLACES[key] = ObjectPlace(folder, storage)
        return place
