"""The embedded store's lock file: which `agenttrail serve` holds a store directory, and where
it listens. Kept apart from the sidecar so read commands can find serve without loading it."""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrail.collector.errors import StoreLocked


def lock_file(directory: Path, database: str) -> Path:
    """One lock per database: chDB itself already refuses a second process on the directory."""
    return directory / f"agenttrail.{database}.lock"


@dataclass(frozen=True, slots=True)
class LockHolder:
    pid: int
    http: str
    grpc: str
    starting: bool = False  # addresses are not bound yet (migrating, replaying the spool)

    def describe(self) -> str:
        return f"agenttrail serve (pid {self.pid}, http {self.http}, grpc {self.grpc})"


class StoreLock:
    """An flock on `<store>/agenttrail.<database>.lock`; released by the kernel if the process dies."""

    def __init__(self, directory: Path, database: str) -> None:
        self.path = lock_file(directory, database)
        self._fd: int | None = None

    def acquire(self, info: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = _read_holder(self.path)
            who = holder.describe() if holder else "another process"
            raise StoreLocked(
                f"the embedded store {self.path.parent} is in use by {who}; stop it, or give this "
                "command another --store directory"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), **info}).encode())
        self._fd = fd

    def update(self, info: dict[str, Any]) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps({"pid": os.getpid(), **info}).encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def read_lock_holder(directory: Path, database: str) -> LockHolder | None:
    """The live sidecar holding this store directory: the one serving `database` if any,
    else any other (chDB admits one process per directory, whatever its database)."""
    holder = _read_holder(lock_file(directory, database))
    if holder is not None:
        return holder
    for path in sorted(directory.glob("agenttrail.*.lock")):
        holder = _read_holder(path)
        if holder is not None:
            return holder
    return None


def _read_holder(path: Path) -> LockHolder | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            data = os.read(fd, 4096)
            try:
                info = json.loads(data)
                return LockHolder(
                    int(info["pid"]),
                    str(info.get("http", "")),
                    str(info.get("grpc", "")),
                    bool(info.get("starting")),
                )
            except (ValueError, KeyError):
                return LockHolder(0, "", "")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
