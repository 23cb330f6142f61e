"""An append-only spool of accepted requests: what makes an acknowledgement durable.

A request is acknowledged once its canonical record (`canonical.canonicalize`) is written whole
to the active segment file. Records are length-delimited protobuf messages (a varint length,
then the body), which is ClickHouse's `Protobuf` input format: the writer stores a sealed
segment by having ClickHouse read it. The writer seals the active segment when it cuts a batch,
stores the batch in ClickHouse with the segment's name as deduplication token, then deletes
the file. After a crash, every segment left on disk is replayed with the same token, so
nothing acknowledged is lost and nothing is stored twice.

A write that fails or comes up short (disk full, I/O error) raises SpoolError after cutting
the partial record off again, so the segment stays a valid sequence of whole records and
later appends can go on once there is space. Writes survive the process being killed (they
are in the kernel's page cache); `fsync=True` also survives power loss, at a cost per request.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path

from agenttrail.collector.errors import SpoolError

log = logging.getLogger(__name__)

_SEGMENT_GLOB = "segment-*.spool"
_SEGMENT_NAME = re.compile(r"^segment-(\d{1,18})-([0-9a-z]+)\.spool$")


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


def encode_records(records: Iterable[bytes]) -> bytes:
    """Records in the spool's (and ClickHouse's `Protobuf`) length-delimited layout."""
    return b"".join(_varint(len(record)) + record for record in records)


def segment_seq(path: Path) -> int | None:
    """A segment file's sequence number, None for a name the spool did not write."""
    match = _SEGMENT_NAME.match(path.name)
    return int(match.group(1)) if match else None


class Spool:
    """Segment files in one directory. Not thread-safe: the ingest queue serialises calls."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self.fsync = fsync
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpoolError(
                f"cannot create the spool directory {directory}: {exc.strerror or exc}; give a writable "
                "--spool-dir or --store directory"
            ) from exc
        existing = self.segments()
        self._next_seq = (max(segment_seq(p) or 0 for p in existing) + 1) if existing else 1
        # Segment names are ClickHouse deduplication tokens: they must never repeat, not after
        # a restart, nor between collectors writing to one ClickHouse.
        self._writer_id = os.urandom(8).hex()
        self._fd: int | None = None
        self._active: Path | None = None
        self._size = 0  # bytes of whole records in the active segment
        self._torn = False  # a failed write could not be cut off: repair before the next append

    def segments(self) -> list[Path]:
        """Segment files on disk, oldest first; files of other names are left alone."""
        found = []
        for path in self.directory.glob(_SEGMENT_GLOB):
            seq = segment_seq(path)
            if seq is None:
                log.warning("ignoring %s in the spool directory: not a name the spool writes", path)
                continue
            found.append((seq, path.name, path))
        return [path for _, _, path in sorted(found)]

    @property
    def active(self) -> Path | None:
        return self._active

    def new_segment_path(self) -> Path:
        path = self.directory / f"segment-{self._next_seq:012d}-{self._writer_id}.spool"
        self._next_seq += 1
        return path

    def append(self, body: bytes) -> None:
        """Write one record whole to the active segment (opened on first use), or raise SpoolError
        having written nothing of it."""
        if self._fd is None:
            path = self.new_segment_path()
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            except OSError as exc:
                raise SpoolError(f"cannot create spool segment {path}: {exc.strerror or exc}") from exc
            self._active, self._size, self._torn = path, 0, False
        fd = self._fd
        if self._torn:
            self._cut(fd)
        data = memoryview(_varint(len(body)) + body)
        written = 0
        try:
            while written < len(data):
                count = os.write(fd, data[written:])
                if count <= 0:
                    raise OSError(errno.ENOSPC, "short write")
                written += count
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            self._torn = written > 0 or self.fsync
            if self._torn:
                with contextlib.suppress(SpoolError):
                    self._cut(fd)
            reason = exc.strerror or str(exc)
            raise SpoolError(
                f"cannot write to the spool {self.directory} ({reason}, {written} of {len(data)} bytes "
                "written and cut off again)"
            ) from exc
        self._size += len(data)

    def _cut(self, fd: int) -> None:
        """Cut a partial record off the active segment."""
        try:
            os.ftruncate(fd, self._size)
        except OSError as exc:
            raise SpoolError(f"cannot repair spool segment {self._active}: {exc.strerror or exc}") from exc
        self._torn = False

    def seal(self) -> Path | None:
        """Close the active segment and return it; the next append opens a new one."""
        if self._fd is None:
            return None
        if self._torn:
            with contextlib.suppress(SpoolError):  # `read` cuts a torn tail when the segment is stored
                self._cut(self._fd)
        try:
            os.close(self._fd)
        except OSError:
            log.warning("closing spool segment %s failed; its records were written before", self._active)
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
    def rewrite(path: Path, records: list[bytes]) -> None:
        """Replace a segment's content atomically (a reader sees the old or the new file)."""
        staged = path.with_name(path.name + ".tmp")
        staged.write_bytes(encode_records(records))
        os.replace(staged, path)

    @staticmethod
    def remove(path: Path) -> None:
        path.unlink(missing_ok=True)

    def close(self) -> None:
        self.seal()
