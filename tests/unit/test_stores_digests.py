"""The MD5s that check downloads: the native `md5_many` gives hashlib's digest for every length
and mix of lengths (SIMD lanes of different lengths end at different blocks, and MD5's padding
spills into a second block from 56 bytes), and `Md5Lanes` hands each waiting download its own
body's digest, whether its batch was hashed by the loop or by a thread, full or not."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from s3bulk._stores import digests
from s3bulk._stores.digests import INLINE_MAX, LANES, Md5Lanes
from s3bulk_native import md5_file_parts, md5_many


def md5(data: bytes) -> bytes:
    return hashlib.md5(data, usedforsecurity=False).digest()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=700), max_size=40))
def test_md5_many_is_md5_of_each_buffer(buffers: list[bytes]) -> None:
    assert md5_many(buffers) == [md5(buffer) for buffer in buffers]


def test_md5_many_takes_any_buffer_at_every_padding_boundary() -> None:
    lengths = [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 4096, 65_537, 1024 * 1024 + 3]
    data = [os.urandom(length) for length in lengths]
    assert md5_many(data) == [md5(piece) for piece in data]
    whole = os.urandom(3000)
    assert md5_many([bytearray(whole), memoryview(whole)[7:2999]]) == [md5(whole), md5(whole[7:2999])]


def test_md5_file_parts_is_md5_of_each_part(tmp_path) -> None:
    """Parts in groups of 16 lanes, each read 256 KiB at a time (a group of fewer parts fills its
    spare lanes with copies): groups, rounds and last parts of every shape."""
    path = tmp_path / "f"
    for size, part_size in [
        (0, 5),  # an empty file: one digest, of nothing
        (1, 8 * 1024 * 1024),
        (40_000, 1000),  # 40 parts: three groups of lanes
        (33 * 1000 + 7, 1000),  # a short last part alone in its group
        (5 * 1024 * 1024 + 3, 2 * 1024 * 1024 + 512 * 1024),  # parts of 2.5 MiB: three reads each
        (3 * 1024 * 1024, 1024 * 1024),  # parts of exactly four reads, three lanes of 16
        (1024 * 1024 + 5, 512 * 1024),  # two equal parts and a short one
    ]:
        data = os.urandom(size)
        path.write_bytes(data)
        expected = [md5(data[start : start + part_size]) for start in range(0, size, part_size)] or [md5(b"")]
        assert md5_file_parts(str(path), part_size) == expected, (size, part_size)


def test_md5_file_parts_of_a_missing_file_is_an_oserror(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        md5_file_parts(str(tmp_path / "gone"), 1024)


async def download_like(lanes: Md5Lanes, body: bytes, pause: float) -> bytes:
    with lanes.coming() as lane:
        await asyncio.sleep(pause)  # the fetch: bodies arrive at different times
        return await lane.md5(body)


def test_each_waiting_body_gets_its_own_digest() -> None:
    sizes = [16 * 1024 * (1 + index % 5) for index in range(3 * LANES + 5)]  # batches of both kinds
    bodies = [os.urandom(size) for size in sizes]
    assert sum(sizes[:LANES]) > INLINE_MAX  # full batches go to a thread

    async def main() -> list[bytes]:
        lanes = Md5Lanes()
        pauses = [(index % 7) / 1000 for index in range(len(bodies))]
        downloads = [download_like(lanes, body, pause) for body, pause in zip(bodies, pauses, strict=True)]
        return await asyncio.gather(*downloads)

    assert asyncio.run(main()) == [md5(body) for body in bodies]


def test_a_lone_body_is_hashed_at_once_and_no_body_waits_for_a_hung_fetch() -> None:
    async def main() -> None:
        lanes = Md5Lanes()
        alone = await asyncio.wait_for(download_like(lanes, b"alone", 0), timeout=5)
        assert alone == md5(b"alone")
        stuck = asyncio.create_task(download_like(lanes, b"never", 3600))  # a fetch that hangs
        waiting = asyncio.create_task(download_like(lanes, b"waits", 0))
        assert await asyncio.wait_for(waiting, timeout=5) == md5(b"waits")  # not held by it
        stuck.cancel()
        cancelled = asyncio.create_task(download_like(lanes, b"gone", 0))
        kept = asyncio.create_task(download_like(lanes, b"kept", 0.001))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        cancelled.cancel()
        assert await asyncio.wait_for(kept, timeout=5) == md5(b"kept")

    asyncio.run(main())


def test_a_batch_does_not_wait_for_a_body_whose_fetch_has_just_begun(monkeypatch) -> None:
    """When fetches take long, a body sent for just now is not due: one that arrives meanwhile
    is hashed at once, however long the lanes may wait (at 20 ms RTT, waiting for bodies just
    sent for made every batch wait out the timer). Fetches are made to take two hours here, and
    the lanes to wait up to one, so that only the rule can let the body through."""
    monkeypatch.setattr(digests, "MAX_WAIT", 3600.0)

    async def main() -> None:
        lanes = Md5Lanes()
        lanes._fetch_seconds = 7200.0
        just_sent = asyncio.create_task(download_like(lanes, b"far", 3600))
        await asyncio.sleep(0)  # its fetch has begun
        assert await asyncio.wait_for(download_like(lanes, b"here", 0), timeout=30) == md5(b"here")
        assert not just_sent.done()
        just_sent.cancel()

    asyncio.run(main())


def test_a_batch_waits_for_a_body_that_is_due(monkeypatch) -> None:
    """Without any fetch timed yet every body on its way is due: the body that arrives first
    waits for the other, and both are hashed in one batch."""
    monkeypatch.setattr(digests, "MAX_WAIT", 3600.0)
    batches: list[int] = []

    def counting(bodies: list[bytes]) -> list[bytes]:
        batches.append(len(bodies))
        return md5_many(bodies)

    monkeypatch.setattr(digests, "md5_many", counting)

    async def main() -> list[bytes]:
        lanes = Md5Lanes()
        return await asyncio.gather(download_like(lanes, b"first", 0), download_like(lanes, b"second", 0.005))

    assert asyncio.run(main()) == [md5(b"first"), md5(b"second")]
    assert batches == [2]


def test_a_multipart_etag_s_likeliest_part_size_is_tried_first() -> None:
    """A 100 MiB object in 2 parts is s5cmd's 50 MiB layout before it is 64 MiB parts: each
    wrong guess hashes the whole downloaded file again."""
    from s3bulk._stores.etags import _part_sizes

    mib = 1024 * 1024
    assert list(_part_sizes(100 * mib, 2, 8 * mib)) == [50 * mib, 64 * mib]
    assert next(iter(_part_sizes(100 * mib, 13, 8 * mib))) == 8 * mib  # the job's own first
    assert next(iter(_part_sizes(100 * mib, 7, 8 * mib))) == 16 * mib  # 15 MiB cannot make 7
    assert next(iter(_part_sizes(1024 * mib, 21, 8 * mib))) == 50 * mib  # s5cmd's, before 49 MiB
