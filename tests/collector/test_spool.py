"""The spool on its own: records round-trip, torn tails are cut, segment names never repeat.

The expected file bytes come from protobuf's own varint encoder (the format ClickHouse reads as
`Protobuf` length-delimited input), not from the spool's encoder.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.internal.encoder import _VarintBytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.collector.spool import Spool

# Bodies from empty to past the 1-, 2- and 3-byte varint lengths (127, 16383 bytes).
BODY = st.one_of(
    st.binary(max_size=300),
    st.integers(min_value=16_000, max_value=17_000).map(lambda n: os.urandom(n)),
)
RECORDS = st.lists(BODY, max_size=12)
NAME = re.compile(r"^segment-(\d{12})-([0-9a-f]{16})\.spool$")
PROPERTY = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def length_delimited(records: list[bytes]) -> bytes:
    return b"".join(_VarintBytes(len(record)) + record for record in records)


def fresh_dir(tmp_path: Path) -> Path:
    """A new directory per hypothesis example (the tmp_path fixture is shared by all of them)."""
    return tmp_path / os.urandom(6).hex()


@PROPERTY
@given(records=RECORDS)
def test_records_round_trip_in_protobuf_length_delimited_form(tmp_path: Path, records: list[bytes]) -> None:
    """What is appended is read back in order, and the file is exactly protobuf's length-delimited form."""
    spool = Spool(fresh_dir(tmp_path))
    for record in records:
        spool.append(record)
    sealed = spool.seal()
    if not records:
        assert sealed is None
        assert spool.segments() == []
        return
    assert sealed is not None
    assert sealed.read_bytes() == length_delimited(records)
    assert Spool.read(sealed) == records
    assert spool.segments() == [sealed]


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152])
def test_lengths_at_varint_boundaries_round_trip(tmp_path: Path, size: int) -> None:
    """Lengths either side of each varint byte boundary are written as protobuf writes them."""
    spool = Spool(tmp_path / "spool")
    records = [os.urandom(size), b"after"]
    for record in records:
        spool.append(record)
    sealed = spool.seal()
    assert sealed is not None
    assert sealed.read_bytes() == length_delimited(records)
    assert Spool.read(sealed) == records


@PROPERTY
@given(head=st.lists(BODY, max_size=7), last=BODY.filter(bool), data=st.data())
def test_a_torn_tail_is_cut_and_the_whole_records_kept(
    tmp_path: Path, head: list[bytes], last: bytes, data: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A segment cut anywhere inside its last record reads as the records before it, and the file
    is truncated to them so that ClickHouse can read it whole."""
    records = [*head, last]
    spool = Spool(fresh_dir(tmp_path))
    for record in records:
        spool.append(record)
    sealed = spool.seal()
    assert sealed is not None
    whole = length_delimited(records[:-1])
    cut = data.draw(st.integers(min_value=len(whole) + 1, max_value=len(length_delimited(records)) - 1))
    os.truncate(sealed, cut)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agenttrail.collector.spool"):
        assert Spool.read(sealed) == records[:-1]
    assert [record.getMessage() for record in caplog.records] == [
        f"spool segment {sealed} ends with a torn record; it was never acknowledged"
    ]
    assert sealed.read_bytes() == whole
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agenttrail.collector.spool"):
        assert Spool.read(sealed) == records[:-1]  # now whole: read again, nothing more is cut
    assert "torn record" not in caplog.text


@PROPERTY
@given(batches=st.lists(st.lists(st.binary(max_size=40), min_size=1, max_size=4), min_size=1, max_size=14))
def test_each_seal_closes_one_segment_and_segments_list_oldest_first(
    tmp_path: Path, batches: list[list[bytes]]
) -> None:
    """Appends between two seals land in one segment; segments() lists them in sealing order
    (numerically, past nine), each holding its own batch; a seal with nothing appended is None."""
    spool = Spool(fresh_dir(tmp_path))
    sealed = []
    for batch in batches:
        for record in batch:
            spool.append(record)
        segment = spool.seal()
        assert segment is not None
        sealed.append(segment)
        assert spool.seal() is None
    assert spool.segments() == sealed
    assert [Spool.read(segment) for segment in sealed] == batches
    numbers = [int(NAME.match(segment.name).group(1)) for segment in sealed]  # type: ignore[union-attr]
    assert numbers == list(range(1, len(batches) + 1))


def test_names_never_repeat_across_restarts(tmp_path: Path) -> None:
    """A spool reopened on a directory with segments numbers after them, under a new writer id:
    names are ClickHouse deduplication tokens, so a repeat would silently drop a batch."""
    directory = tmp_path / "data" / "spool"  # parents are created too
    first = Spool(directory)
    names = []
    for index in range(3):
        first.append(b"x%d" % index)
        segment = first.seal()
        assert segment is not None
        names.append(segment.name)
    second = Spool(directory)
    second.append(b"after restart")
    segment = second.seal()
    assert segment is not None
    names.append(segment.name)
    parts = [NAME.match(name).groups() for name in names]  # type: ignore[union-attr]
    assert [int(number) for number, _ in parts] == [1, 2, 3, 4]
    assert parts[0][1] == parts[1][1] == parts[2][1] != parts[3][1]
    assert len({writer for _, writer in parts}) == 2
    assert [path.name for path in second.segments()] == names


def test_an_unsealed_segment_is_on_disk_and_close_seals_it(tmp_path: Path) -> None:
    """An append is in the file before seal (that is what makes it acknowledged); close() seals,
    so the next append after reopening starts a new segment."""
    spool = Spool(tmp_path / "spool")
    spool.append(b"acknowledged")
    [active] = spool.segments()
    assert Spool.read(active) == [b"acknowledged"]
    assert stat.S_IMODE(active.stat().st_mode) == 0o600  # request bodies: readable by the sidecar only
    spool.close()
    assert spool.seal() is None
    spool.append(b"next")
    assert spool.seal() != active
    assert Spool.read(active) == [b"acknowledged"]


def test_remove_deletes_and_tolerates_a_missing_segment(tmp_path: Path) -> None:
    """remove() deletes a stored segment; removing it again (a replay after a crash) is no error."""
    spool = Spool(tmp_path / "spool")
    spool.append(b"x")
    segment = spool.seal()
    assert segment is not None
    Spool.remove(segment)
    assert not segment.exists()
    Spool.remove(segment)
    assert spool.segments() == []


def test_fsync_is_called_per_append_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fsync=True syncs the segment after every append; the default leaves it to the page cache."""
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    lazy = Spool(tmp_path / "lazy")
    lazy.append(b"a")
    lazy.append(b"b")
    assert synced == []
    durable = Spool(tmp_path / "durable", fsync=True)
    durable.append(b"a")
    durable.append(b"b")
    assert len(synced) == 2
    segment = durable.seal()
    assert segment is not None
    assert Spool.read(segment) == [b"a", b"b"]
