"""An append-only spool of accepted request bodies: what makes an acknowledgement durable.

A request is acknowledged once its body is written to the active segment file. Records are
length-delimited protobuf messages (a varint length, then the body), which is ClickHouse's
`Protobuf` input format: the writer stores a sealed segment by having ClickHouse read it. The writer
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
from pathlib import Path

log = logging.getLogger(__name__)

_SEGMENT_GLOB = "segment-*.spool"


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, offset: int) -> tuple[int, int] | None:
    """(value, offset after it), or None when the data ends inside the varint."""
    value = shift = 0
    while offset < len(data):
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
    return None


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

    def append(self, body: bytes) -> None:
        """Write one record to the active segment (opened on first use)."""
        if self._fd is None:
            self._active = self.directory / f"segment-{self._next_seq:012d}-{self._writer_id}.spool"
            self._next_seq += 1
            self._fd = os.open(self._active, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self._fd, _varint(len(body)) + body)
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
    def read(path: Path) -> list[bytes]:
        """A segment's records. A torn last record (a crash mid-write, so never acknowledged) is
        cut off the file, so that ClickHouse can read the segment whole."""
        data = path.read_bytes()
        records: list[bytes] = []
        offset = 0
        while offset < len(data):
            header = _read_varint(data, offset)
            if header is None or header[1] + header[0] > len(data):
                log.warning("spool segment %s ends with a torn record; it was never acknowledged", path)
                os.truncate(path, offset)
                break
            length, start = header
            records.append(data[start : start + length])
            offset = start + length
        return records

    @staticmethod
    def remove(path: Path) -> None:
        path.unlink(missing_ok=True)

    def close(self) -> None:
        self.seal()
