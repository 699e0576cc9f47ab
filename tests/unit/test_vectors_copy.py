"""`vectors copy`'s journal names: what --retry-failed lists again comes from them."""

from __future__ import annotations

from s3bulk._config import AwsSettings
from s3bulk._vectors.copy import CopyOptions, CopyVectorsJob
from s3bulk._vectors.export import Segment
from s3bulk._vectors.indexes import IndexShape
from s3bulk._vectors.job import PutOptions, PutVectorsJob


def test_a_failed_batch_names_the_source_segment_listed_again() -> None:
    settings = AwsSettings()
    shapes = {"copy": IndexShape(8, "cosine", frozenset())}
    put = PutVectorsJob(None, PutOptions(bucket="mine", indexes=("copy",)), settings, shapes)
    job = CopyVectorsJob(CopyOptions("theirs", ("docs", "s.v2")), settings, {}, put)
    failed = [[("theirs/docs/s03:00112233aabbccdd@copy", 0), ("theirs/s.v2/s15:0a@copy", 0)]]

    again = list(job.retry_partitions(iter(failed)))

    assert again == [Segment("docs", 3, 16), Segment("s.v2", 15, 16)]
