"""What a download or an upload holds of the byte budget, and the ranges a large download asks
for (`_stores/routes.py`), without a server."""

from __future__ import annotations


def test_a_streamed_download_counts_its_buffers_not_its_body() -> None:
    """A download the native part streams into its file (16 KiB to 8 MiB, single-part ETag or
    none) counts what a GET in flight holds, so a 16 MiB budget admits 32 GETs of 4 MiB, not 4;
    one fetched whole counts its size; one from 8 MiB what its GET (or its ranges in flight, above
    the threshold) holds, streamed."""
    from s3bulk._stores.routes import STREAMED_HELD, Parts, bytes_held

    parts = Parts(size=8 * 1024**2, in_flight=4, threshold=64 * 1024**2)
    single, multipart = '"' + "ab" * 16 + '"', '"' + "ab" * 16 + '-3"'
    assert bytes_held("k", 4 * 1024**2, single, parts) == STREAMED_HELD < 4 * 1024**2
    assert bytes_held("k", 4 * 1024**2, "", parts) == STREAMED_HELD
    assert bytes_held("k", 1024**2, single, parts) == STREAMED_HELD
    assert bytes_held("k", 10_000, single, parts) == 10_000  # written at once, under 16 KiB
    assert bytes_held("k", 4 * 1024**2, multipart, parts) == 4 * 1024**2  # the signed client, whole
    assert bytes_held("k", 100 * 1024**2, single, parts) == 4 * STREAMED_HELD  # ranges, streamed
    assert bytes_held("a/../k", 100 * 1024**2, single, parts) == 100 * 1024**2  # whole, signed in Python
    assert bytes_held("k", 20 * 1024**2, multipart, parts) == STREAMED_HELD  # one GET, streamed
    assert bytes_held("k", 9 * 1024**2, "", parts) == STREAMED_HELD
    low = Parts(size=5 * 1024**2, in_flight=4, threshold=8 * 1024**2)
    assert bytes_held("k", 9 * 1024**2, "", low) == 2 * STREAMED_HELD  # 2 ranges


def test_a_large_download_asks_for_the_ranges_of_its_parts_side_by_side() -> None:
    """Ranges smaller than the object's parts are asked for the first of each part, then the
    second of each, ... so that its parts come, and are hashed, side by side in SIMD lanes
    (native/src/parthash.rs); ranges no smaller go in order; under the threshold, one GET one
    byte past the size. Every byte is asked for once."""
    from s3bulk._stores.routes import Parts, spans

    MiB = 1024**2
    parts = Parts(size=8 * MiB, in_flight=4, threshold=64 * MiB)
    size = 100 * MiB
    side_by_side = list(spans(size, parts, 50 * MiB))
    assert side_by_side[:4] == [(0, 8 * MiB), (50 * MiB, 58 * MiB), (8 * MiB, 16 * MiB), (58 * MiB, 66 * MiB)]
    assert side_by_side[-2:] == [(48 * MiB, 50 * MiB), (98 * MiB, 100 * MiB)]
    for asked in (
        side_by_side,
        list(spans(size, parts, 8 * MiB)),
        list(spans(size, parts, 5 * MiB)),
        list(spans(size, parts, None)),
    ):
        ordered = sorted(asked)  # each starts where the one before ended, up to the size
        assert [start for start, _ in ordered] == [0] + [end for _, end in ordered[:-1]]
        assert ordered[-1][1] == size
    assert list(spans(size, parts, 8 * MiB)) == sorted(spans(size, parts, 8 * MiB))
    assert list(spans(20 * MiB, parts, 8 * MiB)) == [(0, 20 * MiB + 1)]


def test_a_large_upload_counts_its_parts_read_as_they_are_sent() -> None:
    """A file above the threshold is sent in parts read from it as they go (native/src/
    filebody.rs), each counted at what it holds, not its size; a small file is read whole; a
    key with a dot segment (signed in Python, by botocore's signer) has its parts read whole."""
    from s3bulk._stores.routes import STREAMED_HELD, Parts, upload_held

    parts = Parts(size=8 * 1024**2, in_flight=4, threshold=64 * 1024**2)
    assert upload_held("k", 100 * 1024**2, parts) == 4 * STREAMED_HELD
    assert upload_held("k", 10 * 1024**2, parts) == 10 * 1024**2
    assert upload_held("a b/%2e/k", 100 * 1024**2, parts) == 4 * STREAMED_HELD  # "%2e" is a name
    assert upload_held("a/./k", 100 * 1024**2, parts) == 32 * 1024**2  # parts read whole
