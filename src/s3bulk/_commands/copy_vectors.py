"""`vectors copy`: every vector of one or more indexes into other indexes: in the same bucket,
another bucket, or another account or region (`--source-profile`, `--source-region`,
`--source-endpoint-url` say where the source is). `--create` makes a missing destination with the
source's dimension and, unless told otherwise, its metric and non-filterable keys: the way to
change what an index cannot change in place. The job (`s3bulk._vectors.copy`) is loaded when
one runs."""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from s3bulk._commands.base import Command, JobPlan, Spec, patterns
from s3bulk._commands.vectorspecs import VectorWrites, bucket_field, read_metric, segments_field
from s3bulk._commands.vectorwrites import WRITE_ENGINE, put_job, settle_rejects, write_notes
from s3bulk._config import AwsSettings
from s3bulk._engine.job import Job
from s3bulk._engine.spec import EngineSpec
from s3bulk._errors import UsageError, require_extra
from s3bulk._flags import option, verbatim
from s3bulk._report import Report
from s3bulk._stores.retry import Meter
from s3bulk._stores.vectors import VectorsClient
from s3bulk._vectors.indexes import IndexShape, find_index, index_shapes

ENGINE = WRITE_ENGINE  # a copy sends what a put sends


@dataclass(frozen=True, kw_only=True)
class CopyVectorsSpec(VectorWrites, Spec):
    command: ClassVar[str] = "vectors-copy"
    bucket: str = bucket_field()  # the source's vector bucket
    indexes: tuple[str, ...] = dataclasses.field(  # the source's indexes
        metadata=option("--index", help="The source index (repeat it for several).")
    )
    to_indexes: tuple[str, ...] = dataclasses.field(  # several: the vectors sharded over them by key
        metadata=option(
            "--to-index", help="The destination index; repeat it to shard the vectors over several by key."
        ),
    )
    to_bucket: str | None = dataclasses.field(
        default=None,
        metadata=option(
            "--to-bucket", help="The destination's vector bucket (default: the source's).", read=verbatim
        ),
    )
    create: bool = dataclasses.field(
        default=False,
        metadata=option(
            "--create",
            help="Create a missing destination index: the source's dimension, metric and "
            "non-filterable keys unless --metric or --non-filterable say otherwise.",
        ),
    )
    metric: str | None = dataclasses.field(
        default=None,
        metadata=option("--metric", help="With --create: cosine or euclidean.", read=read_metric),
    )
    non_filterable: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata=option("--non-filterable", help="With --create: a metadata key stored but not filterable."),
    )
    source_profile: str | None = dataclasses.field(
        default=None,
        metadata=option(
            "--source-profile",
            help="The source's AWS profile (another account).",
            read=verbatim,
            panel="account",
        ),
    )
    source_region: str | None = dataclasses.field(
        default=None,
        metadata=option("--source-region", help="The source's region.", read=verbatim, panel="account"),
    )
    source_endpoint_url: str | None = dataclasses.field(
        default=None,
        metadata=option(
            "--source-endpoint-url", help="The source's S3 Vectors endpoint.", read=verbatim, panel="account"
        ),
    )
    segments: int = segments_field()
    engine: EngineSpec = ENGINE

    def __post_init__(self) -> None:
        require_extra("vectors", "s3bulk vectors copy")
        object.__setattr__(self, "indexes", patterns(self.indexes, "index"))
        object.__setattr__(self, "to_indexes", patterns(self.to_indexes, "to_index"))
        object.__setattr__(self, "non_filterable", patterns(self.non_filterable, "non_filterable"))
        if not self.indexes or len(set(self.indexes)) != len(self.indexes):
            raise UsageError("--index: name each source index once")
        self.check_writes(self.to_indexes)
        if (
            self.destination_bucket == self.bucket
            and not self.source_side
            and set(self.indexes) & set(self.to_indexes)
        ):
            raise UsageError("vectors copy: copy into another index (--to-index), not into the source")
        if (self.metric or self.non_filterable) and not self.create:
            raise UsageError("--metric and --non-filterable shape the index --create makes")

    @property
    def destination_bucket(self) -> str:
        return self.to_bucket or self.bucket

    @property
    def source_side(self) -> bool:
        return bool(self.source_profile or self.source_region or self.source_endpoint_url)

    def places(self) -> tuple[str, str]:
        return (
            "/".join((self.bucket, *self.indexes)),
            "/".join((self.destination_bucket, *self.to_indexes)),
        )

    def needs_credentials(self) -> bool:
        return True

    def absolute(self) -> CopyVectorsSpec:
        return self.with_absolute_rejects()

    def source_settings(self, settings: AwsSettings) -> AwsSettings:
        """Where the source is read: the destination's settings, or those the source options
        name (another profile, region or endpoint)."""
        if not self.source_side:
            return settings
        source = AwsSettings.from_env(
            profile=self.source_profile,
            region=self.source_region,
            vectors_endpoint_url=self.source_endpoint_url,
            verify_ssl=settings.verify_ssl,
        )
        source.check_profile()
        return source


class CopyVectorsCommand(Command):
    name: ClassVar[str] = "vectors-copy"
    spec: ClassVar[type[Spec]] = CopyVectorsSpec

    settle = settle_rejects

    async def build(self, spec: Spec, settings: AwsSettings, plan: JobPlan) -> Job:
        """The job, after reading the source indexes' shapes and the destination's (made with
        --create): a dimension that differs, or a metric asked of an index that has another,
        stops here, before anything is listed or sent."""
        from s3bulk._vectors.copy import CopyOptions, CopyVectorsJob

        assert isinstance(spec, CopyVectorsSpec)
        requests: collections.Counter[str] = collections.Counter()
        source_settings = spec.source_settings(settings)
        sources = await index_shapes(source_settings, spec.bucket, spec.indexes, requests)
        dimensions = {shape.dimension for shape in sources.values()}
        if len(dimensions) > 1:
            raise UsageError(
                f"the source indexes hold vectors of {sorted(dimensions)} values: copy them one by one"
            )
        notes: list[str] = []
        shapes = await _destination_shapes(spec, settings, next(iter(sources.values())), requests, notes)
        put = put_job(spec, None, (spec.destination_bucket, spec.to_indexes), settings, shapes, plan)
        job = CopyVectorsJob(
            CopyOptions(spec.bucket, spec.indexes, spec.segments), source_settings, sources, put
        )
        job.preflight_requests = dict(requests)
        job.preflight_notes = notes
        return job

    def verb(self, job: Job) -> str:
        return "vectors copy"

    async def finish(self, spec: Spec, job: Job, report: Report, completed: bool) -> None:
        """What the copy's writes cost and, before it runs (--dry-run), how long they take."""
        from s3bulk._vectors.copy import CopyVectorsJob

        assert isinstance(spec, CopyVectorsSpec) and isinstance(job, CopyVectorsJob)
        write_notes(report, job.put, spec)


async def _destination_shapes(
    spec: CopyVectorsSpec,
    settings: AwsSettings,
    source: IndexShape,
    requests: collections.Counter[str],
    notes: list[str],
) -> dict[str, IndexShape]:
    """Each destination index's shape: found, or made by --create (said, not made, in a dry run)."""
    from s3bulk._vectors.digest import HASH_KEY

    wanted = IndexShape(
        source.dimension,
        spec.metric or source.metric,
        frozenset(spec.non_filterable) if spec.non_filterable else source.non_filterable,
    )
    client = VectorsClient(settings, max_connections=4, meter=Meter(requests))
    shapes: dict[str, IndexShape] = {}
    try:
        for index in spec.to_indexes:
            found = await find_index(client, spec.destination_bucket, index)
            where = f"{spec.destination_bucket}/{index}"
            if found is None and not spec.create:
                raise UsageError(
                    f"index {where} not found: pass --create to make it like the source "
                    f"({source.dimension} dimensions, {source.metric})"
                )
            if found is None:
                keys = frozenset({*wanted.non_filterable, HASH_KEY})
                if not spec.dry_run:
                    await client.create_index(
                        spec.destination_bucket, index, wanted.dimension, wanted.metric, tuple(sorted(keys))
                    )
                verb = "would create" if spec.dry_run else "created"
                notes.append(f"{verb} {where} ({wanted.dimension} dimensions, {wanted.metric})")
                shapes[index] = IndexShape(wanted.dimension, wanted.metric, keys)
                continue
            _check_existing(spec, where, found, wanted)
            shapes[index] = found
    finally:
        await client.close()
    return shapes


def _check_existing(spec: CopyVectorsSpec, where: str, found: IndexShape, wanted: IndexShape) -> None:
    """An index that exists takes the copy only as it is: the same dimension, and the metric
    and non-filterable keys --create was given, if any."""
    if found.dimension != wanted.dimension:
        raise UsageError(
            f"index {where} holds vectors of {found.dimension} values, the source {wanted.dimension}: "
            "a copy keeps vectors as they are (embed them again, then vectors put)"
        )
    if spec.metric and found.metric != spec.metric:
        raise UsageError(
            f"index {where} exists with metric {found.metric}: copy into a new index to change it"
        )
    if spec.non_filterable and not set(spec.non_filterable) <= found.non_filterable:
        raise UsageError(
            f"index {where} exists with other non-filterable keys: copy into a new index to change them"
        )


COMMANDS = (CopyVectorsCommand(),)  # found by the registry (s3bulk._commands)
