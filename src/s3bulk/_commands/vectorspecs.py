"""What the vectors commands' specs share, each option declared once, on its field (as
`TransferSpec` does for cp, mv and sync): the command line makes every option from these
(`_cli/options.spec_options`), and the Python API names each field. `EmbeddingSource` is where a
put, a sync or a verify reads its rows and which parts of a row are what; `VectorWrites` how a
put, a sync or a copy writes them; the rest are single fields several specs take."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Self

from s3bulk._commands.base import absolute, location, locations, patterns
from s3bulk._errors import UsageError
from s3bulk._flags import argument, count, option, verbatim
from s3bulk._stores.vectors import MAX_SEGMENTS
from s3bulk._vectors.limits import MAX_VECTORS_PER_REQUEST, REQUESTS_PER_SECOND, VECTORS_PER_SECOND

if TYPE_CHECKING:
    from s3bulk._config import AwsSettings
    from s3bulk._sources.embeddings import EmbeddingSpec

FORMATS = ("parquet", "npy", "jsonl")


def _format(text: str, flag: str) -> str:
    if text not in FORMATS:
        raise UsageError(f"{flag} {text!r}: use parquet, npy or jsonl")
    return text


def _columns(text: str, flag: str) -> tuple[str, ...]:
    """Comma-separated column names ("genre,year")."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _segments(text: str, flag: str) -> int:
    segments = count(text, flag)
    if not 1 <= segments <= MAX_SEGMENTS:
        raise UsageError(f"{flag} {text}: ListVectors lists an index in 1 to {MAX_SEGMENTS} segments")
    return segments


METRICS = ("cosine", "euclidean")


def read_metric(text: str, flag: str) -> str:
    if text not in METRICS:
        raise UsageError(f"{flag} {text!r}: use cosine or euclidean")
    return text


def _on_error(text: str, flag: str) -> str:
    if text not in ("abort", "skip"):
        raise UsageError(f"{flag} {text!r}: use abort or skip")
    return text


BUCKET = option("--bucket", help="The vector bucket.", read=verbatim)
INDEXES = option("--index", help="The index; repeat it for several (keys sharded over them by a hash).")
KEY_COLUMN = option(
    "--key-column", help="Column (field) holding each vector's key (default: key, else id).", read=verbatim
)
VECTOR_COLUMN = option(
    "--vector-column",
    help="Column (field) holding the vector (default: vector, else the one list-of-numbers column).",
    read=verbatim,
)
KEEP_HASH = option(
    "--content-hash",
    help="Keep s3bulk's content hash (s3bulk_hash) in the metadata handed back (default: left out).",
)


def bucket_field() -> Any:
    """A spec's vector bucket, with its option (required: no default)."""
    return dataclasses.field(metadata=BUCKET)


def indexes_field(default: tuple[str, ...] | None = None) -> Any:
    """A spec's indexes (several: keys sharded over them), with its option; required unless a
    `default` is given (a put may name each file's index after the file instead)."""
    if default is None:
        return dataclasses.field(metadata=INDEXES)
    return dataclasses.field(default=default, metadata=INDEXES)


def segments_field() -> Any:
    """A spec's count of ListVectors segments listed side by side, with its option."""
    flag = option(
        "--segments", help="ListVectors segments listed side by side, per index (1-16).", read=_segments
    )
    return dataclasses.field(default=MAX_SEGMENTS, metadata=flag)


def rate_field(flag: str, help: str, default: float, *, zero: str = "") -> Any:
    """A spec's rate (things a second), with its option: positive, or 0 where `zero` says what
    0 means ("as fast as the service answers")."""

    def read(text: str, given: str) -> float:
        try:
            rate = float(text)
        except ValueError:
            rate = -1.0
        if rate < 0 or (rate == 0 and not zero):
            raise UsageError(f"{given} {text}: give a {'rate' if zero else 'positive rate'}")
        return rate

    shown = f"{help} (0: {zero})." if zero else help
    made = option(flag, help=shown, read=read, shown=lambda value: f"{value:g}", panel="speed")
    return dataclasses.field(default=default, metadata=made)


def vectors_per_second_field() -> Any:
    """A spec's per-index vectors/s, shared by its puts and deletes."""
    help = "Per index, shared with puts and deletes: the service's write limit."
    return rate_field("--vectors-per-second", help, VECTORS_PER_SECOND)


def requests_per_second_field() -> Any:
    """A spec's per-index PutVectors+DeleteVectors requests/s."""
    return rate_field(
        "--requests-per-second", "Per index: PutVectors and DeleteVectors together.", REQUESTS_PER_SECOND
    )


def check_targets(
    indexes: tuple[str, ...] | None, vectors_per_second: float, requests_per_second: float
) -> None:
    """Each index named once (several shard the keys by a hash; None: found later, each file's
    own), and rates that are rates."""
    if indexes is not None and not indexes:
        raise UsageError("--index: name the index (repeat it for several: keys sharded by a hash of the key)")
    if indexes is not None and len(set(indexes)) != len(indexes):
        raise UsageError("--index: name each index once (several shard the keys by a hash of the key)")
    for flag, rate in (
        ("--vectors-per-second", vectors_per_second),
        ("--requests-per-second", requests_per_second),
    ):
        if not rate > 0:
            raise UsageError(f"{flag} must be positive")


@dataclass(frozen=True, kw_only=True)
class EmbeddingSource:
    """Where the rows are and which parts of a row are what (put, sync, verify). Left out
    (None), a sync's or a verify's reading is the last put's into the indexes
    (`_vectors/columns.py`), not the defaults: a metadata column left out would strip it."""

    sources: tuple[str, ...] = dataclasses.field(
        metadata=argument(
            "Parquet, .npy or .jsonl files, directories of them, or s3:// objects or prefixes/."
        )
    )
    bucket: str = bucket_field()
    indexes: tuple[str, ...] = indexes_field()
    format: str | None = dataclasses.field(
        default=None,
        metadata=option("--format", help="parquet, npy or jsonl (default: by file suffix).", read=_format),
    )
    key_column: str | None = dataclasses.field(default=None, metadata=KEY_COLUMN)
    vector_column: str | None = dataclasses.field(default=None, metadata=VECTOR_COLUMN)
    metadata_columns: tuple[str, ...] | None = dataclasses.field(
        default=None,
        metadata=option(
            "--metadata-columns",
            help="Comma-separated columns stored as each vector's metadata (sync, verify: default "
            "as the last put into the index read them).",
            read=_columns,
        ),
    )
    keys_file: str | None = dataclasses.field(
        default=None,
        metadata=option("--keys-file", help=".npy: a text file with one key per row.", read=verbatim),
    )
    key_template: str | None = dataclasses.field(
        default=None,
        metadata=option(
            "--key-template",
            help="Generate keys, e.g. '{file}:{row}' (a re-run overwrites the same keys).",
            read=verbatim,
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", locations(self.sources, "sources"))
        object.__setattr__(self, "indexes", patterns(self.indexes, "index"))
        if self.metadata_columns is not None:
            object.__setattr__(self, "metadata_columns", patterns(self.metadata_columns, "metadata_columns"))
        if self.keys_file is not None:
            object.__setattr__(self, "keys_file", location(self.keys_file, "keys_file"))
        if self.format is not None:
            _format(self.format, "--format")

    def places(self) -> tuple[str, str]:
        return " ".join(self.sources), "/".join((self.bucket, *self.indexes))

    def s3_locations(self) -> tuple[str, ...]:
        return tuple(each for each in self.sources if each.startswith("s3://"))

    def needs_credentials(self) -> bool:
        return True  # S3 Vectors, whatever the sources

    def absolute(self) -> Self:
        return replace(
            self,
            sources=tuple(absolute(each) for each in self.sources),
            keys_file=absolute(self.keys_file) if self.keys_file else None,
        )

    def reading(self) -> dict[str, Any]:
        """How the user named the source's parts (None: left out), by `columns.OPTIONS`' names."""
        return {
            "format": self.format,
            "key_column": self.key_column,
            "vector_column": self.vector_column,
            "metadata_columns": self.metadata_columns,
            "keys_file": self.keys_file,
            "key_template": self.key_template,
        }

    def embedding_spec(self, settings: AwsSettings, reading: dict[str, Any] | None = None) -> EmbeddingSpec:
        """The source as `_sources.embeddings` reads it (`reading`: this spec's, or that with what
        was left out filled in), its unnamed columns still to be found (`resolve_columns`)."""
        from s3bulk._sources.embeddings import EmbeddingSpec

        read = self.reading() if reading is None else reading
        return EmbeddingSpec(
            self.sources,
            format=read["format"],
            key_column=read["key_column"] or "",
            vector_column=read["vector_column"] or "",
            metadata_columns=tuple(read["metadata_columns"] or ()),
            keys_file=read["keys_file"],
            key_template=read["key_template"],
            settings=settings,
        )


@dataclass(frozen=True, kw_only=True)
class VectorWrites:
    """How a put, a sync or a copy writes: each index's limits, what to do with rows the index
    would refuse and where they are listed, and whether every row carries its content hash."""

    vectors_per_second: float = vectors_per_second_field()
    requests_per_second: float = requests_per_second_field()
    on_error: str = dataclasses.field(
        default="abort",
        metadata=option(
            "--on-error",
            help="abort: stop at the first row the index would refuse; skip: write the rest and "
            "list those in the rejects file.",
            read=_on_error,
        ),
    )
    rejects: str | None = dataclasses.field(
        default=None,
        metadata=option(
            "--rejects",
            help="Where refused rows are listed, as JSON lines (default: beside the job's journal).",
            read=verbatim,
        ),
    )
    content_hash: bool = dataclasses.field(
        default=False,
        metadata=option(
            "--content-hash",
            help="Add each vector's content hash (s3bulk_hash) to its metadata even where the index "
            "does not declare it non-filterable, so vectors sync compares from a listing alone "
            "(default: only where it does, as vectors create-index makes them).",
        ),
    )

    def check_writes(self, indexes: tuple[str, ...] | None) -> None:
        """The writes' options, into `indexes` (None: found later, each file's own)."""
        if self.rejects is not None:
            object.__setattr__(self, "rejects", location(self.rejects, "rejects"))  # a Path, too
        _on_error(self.on_error, "--on-error")
        check_targets(indexes, self.vectors_per_second, self.requests_per_second)

    def with_absolute_rejects(self) -> Self:
        return replace(self, rejects=absolute(self.rejects) if self.rejects else None)


def batch_size_field() -> Any:
    flag = option("--batch-size", help="Vectors per PutVectors (at most 500).", read=count, panel="speed")
    return dataclasses.field(default=MAX_VECTORS_PER_REQUEST, metadata=flag)


def check_batch_size(size: int) -> None:
    if not 1 <= size <= MAX_VECTORS_PER_REQUEST:
        raise UsageError(f"--batch-size {size}: PutVectors takes 1 to {MAX_VECTORS_PER_REQUEST} vectors")


@dataclass(frozen=True, kw_only=True)
class VerifyVectorsSpec(EmbeddingSource):
    """`vectors verify`: a sample of the source's rows fetched back and compared (no job: a
    few GetVectors, answered at once)."""

    sample: int | None = dataclasses.field(  # None: every row, as --all
        default=1000, metadata=option("--sample", help="Rows to check, chosen at random.", read=count)
    )
    every_row: bool = dataclasses.field(
        default=False, metadata=option("--all", help="Check every row instead of a sample.")
    )
    seed: int = dataclasses.field(
        default=0,
        metadata=option(
            "--seed", help="Seed for the sample (the same seed checks the same rows).", read=count
        ),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.indexes:
            raise UsageError("--index: name the index (repeat it for several)")
        if self.sample is not None and self.sample <= 0:
            raise UsageError("--sample must be at least 1 (or --all)")

    @property
    def rows(self) -> int | None:
        """How many rows to check (None: every one)."""
        return None if self.every_row else self.sample


@dataclass(frozen=True, kw_only=True)
class CountVectorsSpec:
    """`vectors count`: the vectors in each index, by ListVectors in parallel segments."""

    bucket: str = bucket_field()
    indexes: tuple[str, ...] = indexes_field()
    segments: int = segments_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "indexes", patterns(self.indexes, "index"))
        if not self.indexes:
            raise UsageError("--index: name the index (repeat it for several)")
        if not 1 <= self.segments <= MAX_SEGMENTS:
            raise UsageError(f"--segments {self.segments}: ListVectors takes 1 to {MAX_SEGMENTS} segments")


@dataclass(frozen=True, kw_only=True)
class CreateIndexSpec:
    """`vectors create-index`: a float32 index in a vector bucket. Its non-filterable keys
    include the content hash's (`s3bulk_hash`), so every put keeps it there at no cost to the
    user's 2 KB of filterable metadata."""

    bucket: str = bucket_field()
    index: str = dataclasses.field(metadata=option("--index", help="Name of the new index.", read=verbatim))
    dimension: int = dataclasses.field(
        metadata=option("--dimension", help="Values per vector (1-4096).", read=count)
    )
    metric: str = dataclasses.field(
        default="cosine", metadata=option("--metric", help="cosine or euclidean.", read=read_metric)
    )
    non_filterable: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata=option(
            "--non-filterable",
            help="Metadata keys stored but not filterable (repeatable; lifts the 2 KB cap).",
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "non_filterable", patterns(self.non_filterable, "non_filterable"))
        read_metric(self.metric, "--metric")
        if not 1 <= self.dimension <= 4096:
            raise UsageError(
                f"--dimension {self.dimension}: S3 Vectors indexes hold 1 to 4096 values per vector"
            )
