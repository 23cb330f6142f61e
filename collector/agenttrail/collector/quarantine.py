"""Spool records that cannot be stored, set aside with the reason so the rest can go on.

A record lands here when ClickHouse refuses it on both store paths even alone, or when it
cannot be read at all (a corrupt spool file). Each entry is two files in `<spool>/quarantine/`:
`<id>.spool`, the records in the spool's own segment layout, and `<id>.json`, why and when.
`agenttrail spool` lists, inspects and re-queues entries; a re-queued entry goes back into the
spool as a new segment (a new deduplication token) and is stored like any other.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrail.collector.spool import Spool, encode_records

log = logging.getLogger(__name__)

QUARANTINE_DIR = "quarantine"


@dataclass(frozen=True, slots=True)
class QuarantineEntry:
    id: str
    reason: str
    segment: str  # the spool segment it came from
    record: int | None  # its index in that segment; None for a whole segment
    records: int
    bytes: int
    quarantined_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "reason": self.reason,
            "segment": self.segment,
            "record": self.record,
            "records": self.records,
            "bytes": self.bytes,
            "quarantined_at": self.quarantined_at,
        }


class Quarantine:
    def __init__(self, spool_dir: Path) -> None:
        self.directory = spool_dir / QUARANTINE_DIR
        self.spool_dir = spool_dir

    def _write(self, entry_id: str, data: bytes, meta: dict[str, Any]) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        staged = self.directory / f"{entry_id}.spool.tmp"
        staged.write_bytes(data)
        (self.directory / f"{entry_id}.json").write_text(json.dumps(meta, indent=1))
        os.replace(staged, self.directory / f"{entry_id}.spool")
        return entry_id

    def add_record(self, record: bytes, *, segment: Path, index: int, reason: str) -> str:
        """Set one record of `segment` aside. Raises OSError if it cannot be written (the caller
        keeps the segment then)."""
        entry_id = f"{segment.stem}-r{index:05d}"
        meta = {"reason": reason, "segment": segment.name, "record": index, "records": 1, "at": time.time()}
        self._write(entry_id, encode_records([record]), meta)
        log.error(
            "quarantined record %d of spool segment %s (%d bytes): %s; see `agenttrail spool list`",
            index,
            segment.name,
            len(record),
            reason,
        )
        return entry_id

    def add_segment(self, segment: Path, reason: str) -> str:
        """Move a whole segment file aside (one that cannot even be read)."""
        entry_id = segment.stem
        self.directory.mkdir(parents=True, exist_ok=True)
        size = segment.stat().st_size
        meta = {"reason": reason, "segment": segment.name, "record": None, "records": None, "at": time.time()}
        (self.directory / f"{entry_id}.json").write_text(json.dumps(meta, indent=1))
        os.replace(segment, self.directory / f"{entry_id}.spool")
        log.error("quarantined spool segment %s (%d bytes): %s", segment.name, size, reason)
        return entry_id

    def entries(self) -> list[QuarantineEntry]:
        if not self.directory.is_dir():
            return []
        found = []
        for data_file in sorted(self.directory.glob("*.spool")):
            entry_id = data_file.name[: -len(".spool")]
            try:
                meta = json.loads((self.directory / f"{entry_id}.json").read_text())
            except (OSError, ValueError):
                meta = {}
            size = data_file.stat().st_size
            records = meta.get("records")
            found.append(
                QuarantineEntry(
                    id=entry_id,
                    reason=str(meta.get("reason", "unknown (no .json beside it)")),
                    segment=str(meta.get("segment", "")),
                    record=meta.get("record"),
                    records=records if isinstance(records, int) else -1,
                    bytes=size,
                    quarantined_at=float(meta.get("at", data_file.stat().st_mtime)),
                )
            )
        return sorted(found, key=lambda entry: entry.quarantined_at)

    def count(self) -> int:
        return sum(1 for _ in self.directory.glob("*.spool")) if self.directory.is_dir() else 0

    def path(self, entry_id: str) -> Path:
        path = self.directory / f"{entry_id}.spool"
        if "/" in entry_id or not path.is_file():
            known = ", ".join(entry.id for entry in self.entries()) or "none"
            raise KeyError(f"no quarantined entry {entry_id!r} in {self.directory} (entries: {known})")
        return path

    def requeue(self, entry_id: str) -> Path:
        """Put an entry back into the spool as a new segment; the running writer (or the next
        start) stores it. Returns the segment's path."""
        source = self.path(entry_id)
        target = Spool(self.spool_dir).new_segment_path()
        os.replace(source, target)
        (self.directory / f"{entry_id}.json").unlink(missing_ok=True)
        log.info("re-queued quarantined %s as %s", entry_id, target.name)
        return target
