"""The spool on its own: records round-trip, torn tails are cut, segment names never repeat,
rewrites are atomic, and a failed write or repair leaves whole records and a clear error.

The expected file bytes come from protobuf's own varint encoder (the format ClickHouse reads as
`Protobuf` length-delimited input), not from the spool's encoder. Failing disks are os.write,
os.ftruncate and os.close replaced for one call (no chDB here: .ci/mutation.py runs this file
once per mutant).
"""

from __future__ import annotations

import errno
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

from agenttrail.collector import spool as spool_module
from agenttrail.collector.errors import SpoolError
from agenttrail.collector.spool import Spool, encode_records

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
    assert encode_records(records) == length_delimited(records)
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


def segment_with(directory: Path, records: list[bytes]) -> Path:
    spool = Spool(directory)
    for record in records:
        spool.append(record)
    segment = spool.seal()
    assert segment is not None
    return segment


@PROPERTY
@given(before=RECORDS, after=RECORDS)
def test_rewrite_replaces_a_segment_with_exactly_the_new_records(
    tmp_path: Path, before: list[bytes], after: list[bytes]
) -> None:
    """The replay keeps a segment's storable records by rewriting it: afterwards the file is the
    new records in the length-delimited form, and the directory holds that segment alone."""
    directory = fresh_dir(tmp_path)
    segment = segment_with(directory, [*before, b"dropped on replay"])
    Spool.rewrite(segment, after)
    assert segment.read_bytes() == length_delimited(after)
    assert Spool.read(segment) == after
    assert sorted(directory.iterdir()) == [segment]


def test_a_rewrite_that_fails_before_the_rename_leaves_the_segment_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash (here: the rename failing) mid-rewrite leaves the old segment whole, never a
    half-written one, and the staged file is not taken for a segment."""
    directory = tmp_path / "spool"
    segment = segment_with(directory, [b"one", b"two"])

    def failing_replace(src: Any, dst: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(spool_module.os, "replace", failing_replace)
    with pytest.raises(OSError, match="Input/output error"):
        Spool.rewrite(segment, [b"two"])
    assert Spool.read(segment) == [b"one", b"two"]
    assert Spool(directory).segments() == [segment]


def fail_writes(monkeypatch: pytest.MonkeyPatch, *, first_writes: int | None, error: int | None) -> None:
    """os.write writes `first_writes` bytes of the first call (all of it when None), then raises
    `error` (returns 0 when None) on every call after."""
    real_write = os.write
    calls = {"n": 0}

    def failing_write(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1 and first_writes != 0:
            return real_write(fd, bytes(data[:first_writes]))
        if error is None:
            return 0
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(spool_module.os, "write", failing_write)


def fail_ftruncate(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_ftruncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(spool_module.os, "ftruncate", failing_ftruncate)


@pytest.mark.parametrize("first_writes", [1, 13])
def test_a_short_write_is_refused_cut_off_and_the_next_append_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_writes: int
) -> None:
    """Part of a record written (its first byte, or all but its last), then ENOSPC: SpoolError
    saying so, the part is cut off again (the file holds the acknowledged records only), and the
    next append after space is freed lands after them in the same segment, with no further repair.
    A new segment needs no repair either."""
    spool = Spool(tmp_path / "spool")
    with monkeypatch.context() as patched:
        fail_ftruncate(patched)
        spool.append(b"first")
    spool.append(b"2nd")
    with monkeypatch.context() as patched:
        fail_writes(patched, first_writes=first_writes, error=errno.ENOSPC)
        with pytest.raises(SpoolError) as caught:
            spool.append(b"second record")
    assert str(caught.value) == (
        f"cannot write to the spool {tmp_path / 'spool'} (No space left on device, {first_writes} of 14 "
        "bytes written and cut off again)"
    )
    active = spool.active
    assert active is not None
    assert active.read_bytes() == length_delimited([b"first", b"2nd"])
    with monkeypatch.context() as patched:
        fail_ftruncate(patched)  # repaired already: the next append does not depend on a cut
        spool.append(b"third")
    assert spool.seal() == active
    assert active.read_bytes() == length_delimited([b"first", b"2nd", b"third"])


def test_partial_writes_are_continued_until_the_record_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.write may write less than asked without an error: the spool writes the rest."""
    real_write = os.write
    sizes: list[int] = []

    def slow_write(fd: int, data: Any) -> int:
        assert len(sizes) < 100, "the spool keeps writing past its record"
        sizes.append(real_write(fd, bytes(data[:5])))
        return sizes[-1]

    spool = Spool(tmp_path / "spool")
    records = [b"a record longer than five bytes", b"", b"another one"]
    with monkeypatch.context() as patched:
        patched.setattr(spool_module.os, "write", slow_write)
        for record in records:
            spool.append(record)
    assert len(sizes) > len(records)
    segment = spool.seal()
    assert segment is not None
    assert segment.read_bytes() == length_delimited(records)


def test_a_write_that_writes_nothing_is_refused_and_the_file_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write returning 0 bytes (a full disk that does not say so) is an error, not a loop; a
    write error before any byte needs no repair: the file is never truncated."""
    spool = Spool(tmp_path / "spool")
    spool.append(b"first")
    truncated: list[int] = []
    real_ftruncate = os.ftruncate

    def watched_ftruncate(fd: int, length: int) -> None:
        truncated.append(length)
        real_ftruncate(fd, length)

    monkeypatch.setattr(spool_module.os, "ftruncate", watched_ftruncate)
    with monkeypatch.context() as patched:
        fail_writes(patched, first_writes=0, error=None)
        with pytest.raises(SpoolError) as caught:
            spool.append(b"second")
    assert str(caught.value) == (
        f"cannot write to the spool {tmp_path / 'spool'} (short write, 0 of 7 bytes written and cut off "
        "again)"
    )
    with monkeypatch.context() as patched:
        fail_writes(patched, first_writes=0, error=errno.EIO)
        with pytest.raises(SpoolError, match=r"\(Input/output error, 0 of 6 bytes"):
            spool.append(b"third")
    spool.append(b"fourth")
    assert truncated == []
    segment = spool.seal()
    assert segment is not None
    assert segment.read_bytes() == length_delimited([b"first", b"fourth"])


def test_a_torn_tail_that_cannot_be_cut_is_cut_before_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When cutting a partial record off fails too, the spool remembers: the next append first
    repairs the segment, refusing with the repair's error until it can, and only then writes."""
    spool = Spool(tmp_path / "spool")
    spool.append(b"first")
    active = spool.active
    assert active is not None
    with monkeypatch.context() as patched:
        fail_ftruncate(patched)
        with patched.context() as writes:
            fail_writes(writes, first_writes=2, error=errno.ENOSPC)
            with pytest.raises(SpoolError, match="No space left on device, 2 of 6 bytes"):
                spool.append(b"torn!")
        assert active.stat().st_size == len(length_delimited([b"first"])) + 2  # torn: the cut failed
        with pytest.raises(SpoolError) as caught:
            spool.append(b"refused while the repair fails")
    assert str(caught.value) == f"cannot repair spool segment {active}: Input/output error"
    assert active.stat().st_size == len(length_delimited([b"first"])) + 2  # nothing written after a torn tail
    spool.append(b"second")
    assert spool.seal() == active
    assert active.read_bytes() == length_delimited([b"first", b"second"])


def test_seal_cuts_a_torn_tail_left_by_a_failed_repair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A torn segment sealed after its repair failed is cut whole at the seal."""
    spool = Spool(tmp_path / "spool")
    spool.append(b"first")
    with monkeypatch.context() as patched:
        fail_writes(patched, first_writes=4, error=errno.ENOSPC)
        fail_ftruncate(patched)
        with pytest.raises(SpoolError):
            spool.append(b"torn record")
    segment = spool.seal()
    assert segment is not None
    assert segment.read_bytes() == length_delimited([b"first"])


def test_a_torn_segment_whose_cut_fails_is_still_sealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sealing does not fail on a tail it cannot cut: the segment is sealed, and reading it to
    store it cuts the tail then (the records before it are acknowledged and must be stored)."""
    spool = Spool(tmp_path / "spool")
    spool.append(b"first")
    with monkeypatch.context() as patched:
        fail_ftruncate(patched)
        with patched.context() as writes:
            fail_writes(writes, first_writes=4, error=errno.ENOSPC)
            with pytest.raises(SpoolError):
                spool.append(b"torn record")
        segment = spool.seal()
    assert segment is not None
    assert spool.active is None
    assert segment.stat().st_size == len(length_delimited([b"first"])) + 4
    assert Spool.read(segment) == [b"first"]
    assert segment.read_bytes() == length_delimited([b"first"])


def test_an_unwritable_spool_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A spool directory that cannot be created says which, why, and which setting to change."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(SpoolError) as caught:
        Spool(blocker / "spool")
    assert str(caught.value) == (
        f"cannot create the spool directory {blocker / 'spool'}: Not a directory; give a writable "
        "--spool-dir or --store directory"
    )


def test_a_segment_that_cannot_be_created_is_a_clear_error(tmp_path: Path) -> None:
    """The spool directory gone after start-up: the append names the segment and the reason."""
    directory = tmp_path / "spool"
    spool = Spool(directory)
    directory.rmdir()
    with pytest.raises(SpoolError) as caught:
        spool.append(b"x")
    message = str(caught.value)
    assert re.fullmatch(
        rf"cannot create spool segment {re.escape(str(directory))}/segment-000000000001-[0-9a-f]{{16}}"
        r"\.spool: No such file or directory",
        message,
    ), message
    assert spool.active is None


def test_files_the_spool_did_not_write_are_left_alone_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file in the spool directory that looks like a segment but is not one of its names is
    not replayed (nor numbered after), and the operator is told which; other files pass quietly."""
    directory = tmp_path / "spool"
    directory.mkdir()
    foreign = directory / "segment-copy.spool"
    foreign.write_bytes(b"not records")
    (directory / "notes.txt").write_text("kept")
    with caplog.at_level(logging.WARNING, logger="agenttrail.collector.spool"):
        spool = Spool(directory)
        assert spool.segments() == []
    assert [record.getMessage() for record in caplog.records] == [
        f"ignoring {foreign} in the spool directory: not a name the spool writes"
    ] * 2
    assert foreign.read_bytes() == b"not records"
    spool.append(b"x")
    [segment] = spool.segments()
    assert segment.name.startswith("segment-000000000001-")


def test_a_failed_close_still_seals_the_segment_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """close() failing after the records were written: seal still returns the segment (its
    records are acknowledged), warns, and the next append opens a new one."""
    spool = Spool(tmp_path / "spool")
    spool.append(b"written")
    active = spool.active
    real_close = os.close
    closed: list[int] = []

    def failing_close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with (
        monkeypatch.context() as patched,
        caplog.at_level(logging.WARNING, logger="agenttrail.collector.spool"),
    ):
        patched.setattr(spool_module.os, "close", failing_close)
        assert spool.seal() == active
    assert len(closed) == 1
    assert [record.getMessage() for record in caplog.records] == [
        f"closing spool segment {active} failed; its records were written before"
    ]
    assert spool.active is None
    spool.append(b"next")
    assert spool.active not in (None, active)
    assert Spool.read(active) == [b"written"]  # type: ignore[arg-type]


def test_foreign_files_anywhere_in_the_directory_hide_no_segment(tmp_path: Path) -> None:
    """Every segment is listed, in order, whatever the directory order of the files of other
    names among them (a listing that stopped at the first foreign file would lose segments
    enumerated after it: with five foreign files among twelve segments, almost surely)."""
    directory = tmp_path / "spool"
    spool = Spool(directory)
    sealed = []
    for index in range(12):
        spool.append(b"record %d" % index)
        sealed.append(spool.seal())
    for index in range(5):
        (directory / f"segment-copy-{index}.spool").write_bytes(b"not records")
    assert spool.segments() == sealed
