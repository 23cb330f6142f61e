"""An append-only spool of accepted request bodies: what makes an acknowledgement durable.

A request is acknowledged once its body is written to the active segment file. The writer
seals the active segment when it cuts a batch, stores the batch in ClickHouse with the
segment's name as deduplication token, then deletes the file. After a crash, every segment
left on disk is replayed with the same token, so nothing acknowledged is lost and nothing is
stored twice.

Writes survive the process being killed (they are in the kernel's page cache); `fsync=True`
also survives power loss, at a cost per request.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<IB")  # body length, body format
FORMAT_PROTOBUF = 0
FORMAT_JSON = 1
_SEGMENT_GLOB = "segment-*.spool"


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    body_format: int
    body: bytes


class Spool:
    """Segment files in one directory. Not thread-safe: the ingest queue serialises calls."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self.fsync = fsync
        directory.mkdir(parents=True, exist_ok=True)
        existing = self.segments()
        self._next_seq = (self._seq(existing[-1]) + 1) if existing else 1
        # Segment names are ClickHouse deduplication tokens: they must never repeat, not after
        # a restart, nor between collectors writing to one ClickHouse.
        self._writer_id = os.urandom(8).hex()
        self._fd: int | None = None
        self._active: Path | None = None

    @staticmethod
    def _seq(path: Path) -> int:
        return int(path.stem.split("-")[1])

    def segments(self) -> list[Path]:
        """Segment files on disk, oldest first."""
        return sorted(self.directory.glob(_SEGMENT_GLOB), key=self._seq)

    def append(self, body_format: int, body: bytes) -> None:
        """Write one record to the active segment (opened on first use)."""
        if self._fd is None:
            self._active = self.directory / f"segment-{self._next_seq:012d}-{self._writer_id}.spool"
            self._next_seq += 1
            self._fd = os.open(self._active, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self._fd, _HEADER.pack(len(body), body_format) + body)
        if self.fsync:
            os.fsync(self._fd)

    def seal(self) -> Path | None:
        """Close the active segment and return it; the next append opens a new one."""
        if self._fd is None:
            return None
        os.close(self._fd)
        sealed, self._fd, self._active = self._active, None, None
        return sealed

    @staticmethod
    def read(path: Path) -> Iterator[SpoolRecord]:
        """Records of a segment; a torn last record (crash mid-write, never acknowledged) ends it."""
        data = path.read_bytes()
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, body_format = _HEADER.unpack_from(data, offset)
            start = offset + _HEADER.size
            if start + length > len(data):
                log.warning("spool segment %s ends with a torn record; it was never acknowledged", path)
                return
            yield SpoolRecord(body_format, data[start : start + length])
            offset = start + length

    @staticmethod
    def remove(path: Path) -> None:
        path.unlink(missing_ok=True)

    def close(self) -> None:
        self.seal()
