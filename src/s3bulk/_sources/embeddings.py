"""Embeddings to load: Parquet, NumPy `.npy` and JSON Lines files, local or on S3, read in slices.

The driver only opens each file's metadata (a Parquet footer, a `.npy` header) and hands out
`Slice`s: a row group, or a run of rows. A worker reads its slice in chunks, so memory holds a few
chunks of rows, never a file. Rows keep their number within the file from end to end: item ids in
the journal, generated keys and the rejects file all name rows the same way, and a re-run reads
the same rows into the same batches.

Keys come from a column, from a keys file (one per line, for `.npy`), or from a template over the
file's name and the row number, so a re-run overwrites the same keys instead of adding copies.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import IO, Any, cast

import numpy as np
import orjson

from s3bulk._config import AwsSettings
from s3bulk._errors import UsageError
from s3bulk._urls import S3Location, parse_s3

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".npy": "npy", ".jsonl": "jsonl", ".ndjson": "jsonl"}
SLICE_ROWS = 50_000  # rows per slice of a `.npy` file: 100 requests of 500, a few seconds of work
DEFAULT_KEY_TEMPLATE = "{file}:{row}"
# Parquet is read page by page through a buffer of this size. pyarrow's default reads a row
# group's whole column at once: 4 GB for a million 1024-float vectors, its usual group size.
PARQUET_READ_BYTES = 1024**2
EXPORTED_METADATA = b"s3bulk.metadata_json"  # a footer key of `vectors export`'s files


@dataclass(frozen=True)
class EmbeddingSpec:
    """Where the embeddings are and which parts of a row are what."""

    paths: tuple[str, ...]
    format: str | None = None  # parquet, npy or jsonl; None: by each file's suffix
    key_column: str = "key"  # "": not named, found by `resolve_columns`
    vector_column: str = "vector"  # "": not named, found by `resolve_columns`
    metadata_columns: tuple[str, ...] = ()
    # Parquet: a column of JSON objects, each a row's whole metadata (what `vectors export`
    # writes, and says so in the file's footer, where `resolve_columns` finds it)
    metadata_json_column: str | None = None
    keys_file: str | None = None  # .npy: one key per line, the files' rows in order
    key_template: str | None = None  # set: generate keys ("{file}:{row}"); the key column is unused
    settings: AwsSettings = field(default_factory=AwsSettings)

    def generated_keys(self, format: str) -> bool:
        return self.key_template is not None or (format == "npy" and self.keys_file is None)


@dataclass(frozen=True)
class Slice:
    """A run of rows of one file: what a worker reads as one unit of work."""

    path: str  # absolute local path or s3:// URL
    name: str  # the file's name under the source argument, for generated keys
    format: str
    start: int  # number of the first row in the file
    stop: int | None  # one past the last row; None: to the end (JSON Lines)
    row_group: int | None = None  # Parquet
    keys_offset: int | None = None  # byte offset of row `start`'s key in the keys file

    def __str__(self) -> str:
        end = "end" if self.stop is None else self.stop - 1
        return f"{self.path} rows {self.start}-{end}"


@dataclass
class RowChunk:
    """Consecutive rows of one file. `problems` are rows that could not be read as a vector
    (their `vectors` row is zeros and their key may be empty); they are rejected, never sent."""

    first_row: int
    keys: list[str]
    vectors: np.ndarray  # (rows, dimension) float32
    metadata: list[dict[str, Any] | None] | None
    problems: dict[int, str] = field(default_factory=dict)
    numbers: list[int] | None = None  # each row's number in its file, when not consecutive

    def number(self, position: int) -> int:
        """The row's number in its file."""
        return self.numbers[position] if self.numbers is not None else self.first_row + position


# ---- files, local or on S3 -------------------------------------------------------------------
def open_file(path: str, settings: AwsSettings) -> IO[bytes]:
    """A seekable binary file: local, or an S3 object read in ranges by the signed client (it
    follows no redirect: obstore's reader, used before, took the session token to another host)."""
    if not path.startswith("s3://"):
        try:
            return open(path, "rb")
        except OSError as exc:  # a file left unread is rows left out: a sync would delete their keys
            fix = ": fix its permissions or leave it out" if exc.errno in (errno.EACCES, errno.EPERM) else ""
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}{fix}") from None
    from s3bulk._stores.storage import Storage

    location = parse_s3(path)
    reader = Storage(settings, connections=8).open_reader(
        location.bucket, location.key, buffer_size=8 * 1024**2
    )
    try:
        reader.peek(1)  # its HEAD: a missing object is said now, in one line
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist: check the source path") from None
    return cast(IO[bytes], reader)


def find_files(spec: EmbeddingSpec) -> Iterator[tuple[str, str, str]]:
    """(path, name, format) of every file the source arguments name: files as given, directories
    and S3 prefixes (ending in '/') walked for known suffixes, in name order."""
    for argument in spec.paths:
        if argument.startswith("s3://"):
            yield from _s3_files(parse_s3(argument), spec)
            continue
        path = os.path.abspath(os.path.expanduser(argument))
        if os.path.isdir(path):
            walked = os.walk(path, onerror=_unreadable)  # a directory left out is rows left out
            found = sorted(os.path.join(root, name) for root, _, names in walked for name in names)
            matched = [(each, os.path.relpath(each, path)) for each in found if _format_of(each, spec, False)]
            if not matched:
                raise UsageError(f"{argument}: no .parquet, .npy or .jsonl files in this directory")
            for each, name in matched:
                yield each, name, _format_of(each, spec)
        elif os.path.isfile(path):
            yield path, os.path.basename(path), _format_of(path, spec)
        else:
            raise UsageError(f"{argument} does not exist: check the source path")


def _unreadable(error: OSError) -> None:
    """A directory the walk cannot read stops it: a sync would take its files' keys as gone."""
    raise UsageError(f"{error.filename}: cannot read this directory ({error.strerror}): fix its permissions")


def _s3_files(location: S3Location, spec: EmbeddingSpec) -> Iterator[tuple[str, str, str]]:
    if not location.is_prefix:
        yield location.url, PurePosixPath(location.key).name, _format_of(location.key, spec)
        return
    from s3bulk._sources.listing import list_sequential
    from s3bulk._stores.reader import BACKGROUND
    from s3bulk._stores.storage import Storage

    async def listed() -> list[str]:
        """The keys under the prefix, by s3bulk's listing (its checks; no redirect followed)."""
        storage = Storage(spec.settings, connections=2)
        try:
            pages = list_sequential(storage, location.bucket, location.key)
            return [info.key async for page in pages for info in page.objects]
        finally:
            await storage.close()

    keys = sorted(key for key in BACKGROUND.run(listed()) if _format_of(key, spec, False))
    if not keys:
        raise UsageError(f"{location.url}: no .parquet, .npy or .jsonl objects under this prefix")
    for key in keys:
        yield f"s3://{location.bucket}/{key}", key[len(location.key) :], _format_of(key, spec)


def _format_of(path: str, spec: EmbeddingSpec, strict: bool = True) -> str:
    if spec.format:
        return spec.format
    found = FORMATS.get(PurePosixPath(path).suffix.lower(), "")
    if not found and strict:
        raise UsageError(f"{path}: unknown file type: name it .parquet, .npy or .jsonl, or pass --format")
    return found


# ---- the driver's side: slices ---------------------------------------------------------------
def plan_slices(spec: EmbeddingSpec) -> Iterator[Slice]:
    """Every file's slices, in order. Blocking (reads footers and headers): run it in a thread."""
    keys = _KeysFile(spec) if spec.keys_file else None
    for path, name, format in find_files(spec):
        if format == "parquet":
            slices = _parquet_slices(path, name, spec)
        elif format == "npy":
            slices = _npy_slices(path, name, spec)
        else:
            slices = iter([Slice(path, name, format, 0, None)])
        for each in slices:
            yield each if keys is None else keys.place(each)
    if keys is not None:
        keys.check_exhausted()


KEY_NAMES = ("key", "id")  # a key column found without being named (in this order)


def resolve_columns(spec: EmbeddingSpec) -> tuple[EmbeddingSpec, str]:
    """Name the key and vector columns the user left unnamed (""), from the first Parquet file's
    schema: the vector column is `vector`, else the one column of lists of numbers; the key
    column is `key`, else `id`. Returns the spec and a note saying what was chosen ("" when
    nothing needed choosing). More than one candidate, or none, is a usage error that says how
    to name it. A file `vectors export` wrote says which column holds each row's metadata as
    JSON: it is read as such, unless metadata columns are named. Blocking (reads a footer): run it
    in a thread."""
    schema = _first_parquet_schema(spec)
    if schema is None:  # JSON Lines fields and .npy files use the plain names
        key, vector = spec.key_column or "key", spec.vector_column or "vector"
        return replace(spec, key_column=key, vector_column=vector), ""
    chosen = []
    exported = (schema.metadata or {}).get(EXPORTED_METADATA)
    if exported and not spec.metadata_columns and spec.metadata_json_column is None:
        spec = replace(spec, metadata_json_column=exported.decode())
        chosen.append(f"metadata as JSON from column {exported.decode()!r} (as vectors export wrote it)")
    if spec.key_column and spec.vector_column and not chosen:
        return spec, ""
    vector = spec.vector_column or _vector_column(schema)
    if not spec.vector_column and vector != "vector":
        chosen.append(f"vectors from column {vector!r}")
    key = spec.key_column
    if not key:
        key = next((name for name in KEY_NAMES if name in schema.names), "")
        if not key and not spec.generated_keys("parquet"):
            raise UsageError(
                f"no 'key' or 'id' column (the columns are {', '.join(schema.names)}): name the keys' "
                "column with --key-column, or generate keys with --key-template '{file}:{row}'"
            )
        if key and key != "key" and not spec.generated_keys("parquet"):
            chosen.append(f"keys from column {key!r}")
    note = f"columns: {', '.join(chosen)} (name others with --key-column/--vector-column)" if chosen else ""
    return replace(spec, key_column=key or "key", vector_column=vector), note


def _first_parquet_schema(spec: EmbeddingSpec) -> Any:
    for path, _, format in find_files(spec):
        if format != "parquet":
            return None
        with open_file(path, spec.settings) as handle:
            return _parquet_file(handle, path).metadata.schema.to_arrow_schema()
    return None


def _vector_column(schema: Any) -> str:
    import pyarrow as pa

    if "vector" in schema.names:
        return "vector"
    lists = (pa.types.is_list, pa.types.is_fixed_size_list, pa.types.is_large_list)
    numbers = (pa.types.is_floating, pa.types.is_integer)
    candidates = [
        field.name
        for field in schema
        if any(is_list(field.type) for is_list in lists)
        and any(is_number(field.type.value_type) for is_number in numbers)
    ]
    if len(candidates) == 1:
        return str(candidates[0])
    if not candidates:
        raise UsageError(
            f"no column holds lists of numbers (the columns are {', '.join(schema.names)}): "
            "name the vectors' column with --vector-column"
        )
    raise UsageError(
        f"several columns could hold the vectors ({', '.join(candidates)}): name one with --vector-column"
    )


def _parquet_slices(path: str, name: str, spec: EmbeddingSpec) -> Iterator[Slice]:
    with open_file(path, spec.settings) as handle:
        metadata = _parquet_file(handle, path).metadata
        schema = metadata.schema.to_arrow_schema()
    wanted = [spec.vector_column, *spec.metadata_columns]
    if not spec.generated_keys("parquet"):
        wanted.insert(0, spec.key_column)
    missing = [column for column in wanted if column not in schema.names]
    if missing:
        raise UsageError(
            f"{path} has no column {missing[0]!r} (it has {', '.join(schema.names)}): "
            "name the columns with --key-column, --vector-column and --metadata-columns"
        )
    start = 0
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        if rows:
            yield Slice(path, name, "parquet", start, start + rows, row_group=group)
        start += rows


def _batches(parquet: Any, piece: Slice, chunk_rows: int, columns: list[str]) -> Iterator[Any]:
    """The slice's row group in batches; pages pyarrow cannot decode (a file corrupt past its
    footer) are one line naming the file, as a footer it cannot read is (`_parquet_file`)."""
    import pyarrow as pa

    batches = parquet.iter_batches(batch_size=chunk_rows, row_groups=[piece.row_group], columns=columns)
    while True:
        try:
            batch = next(batches, None)
        except (OSError, pa.ArrowException) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"{piece.path} is not a readable Parquet file ({reason})") from None
        if batch is None:
            return
        yield batch


def _parquet_file(handle: IO[bytes], path: str) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(handle, buffer_size=PARQUET_READ_BYTES, pre_buffer=False)
    except Exception as exc:  # pyarrow raises ArrowInvalid for a file that is not Parquet
        raise UsageError(f"{path} is not a readable Parquet file ({exc})") from None


@dataclass(frozen=True)
class NpyLayout:
    rows: int
    dimension: int
    dtype: np.dtype[Any]
    data_offset: int

    @property
    def row_bytes(self) -> int:
        return self.dimension * self.dtype.itemsize


def npy_layout(handle: IO[bytes], path: str) -> NpyLayout:
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(handle)
        read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
        shape, fortran, dtype = read_header(handle)
    except ValueError as exc:
        raise UsageError(f"{path} is not a .npy file ({exc})") from None
    if len(shape) != 2 or fortran or dtype.kind != "f":
        raise UsageError(
            f"{path} holds a {'x'.join(map(str, shape))} {dtype} array"
            f"{' in Fortran order' if fortran else ''}: s3bulk needs a 2-D float array, one row per vector "
            "(numpy.save(path, numpy.ascontiguousarray(vectors, dtype=numpy.float32)))"
        )
    return NpyLayout(shape[0], shape[1], dtype, handle.tell())


def _npy_slices(path: str, name: str, spec: EmbeddingSpec) -> Iterator[Slice]:
    with open_file(path, spec.settings) as handle:
        layout = npy_layout(handle, path)
    for start in range(0, layout.rows, SLICE_ROWS):
        yield Slice(path, name, "npy", start, min(layout.rows, start + SLICE_ROWS))


class _KeysFile:
    """The driver's pass over a keys file: where each slice's first key starts, and a check that
    there is exactly one key per row."""

    def __init__(self, spec: EmbeddingSpec) -> None:
        assert spec.keys_file is not None
        self.path = spec.keys_file
        self._handle = open_file(spec.keys_file, spec.settings)
        self._offset = 0
        self._rows = 0  # keys passed so far, over all files

    def place(self, piece: Slice) -> Slice:
        if piece.stop is None:
            raise UsageError(f"--keys-file works with .npy files only ({piece.path} has its own keys)")
        offset = self._offset
        for _ in range(piece.stop - piece.start):
            line = self._handle.readline()
            if not line:
                raise UsageError(
                    f"{self.path} ends after {self._rows:,} keys but the .npy files have more rows: "
                    "give one key per row"
                )
            self._offset += len(line)
            self._rows += 1
        return Slice(piece.path, piece.name, piece.format, piece.start, piece.stop, keys_offset=offset)

    def check_exhausted(self) -> None:
        extra = self._handle.readline()
        self._handle.close()
        if extra:
            raise UsageError(
                f"{self.path} has more keys than the .npy files have rows ({self._rows:,}): "
                "give one key per row"
            )


# ---- the worker's side: rows ------------------------------------------------------------------
def read_slice(piece: Slice, spec: EmbeddingSpec, chunk_rows: int) -> Iterator[RowChunk]:
    """The slice's rows in chunks of `chunk_rows` (the last may be shorter). Blocking."""
    readers = {"parquet": _parquet_rows, "npy": _npy_rows, "jsonl": _jsonl_rows}
    with contextlib.ExitStack() as stack:
        handle = stack.enter_context(open_file(piece.path, spec.settings))
        keys = (
            stack.enter_context(open_file(spec.keys_file, spec.settings))
            if piece.keys_offset is not None and spec.keys_file is not None
            else None
        )
        if keys is not None:
            keys.seek(piece.keys_offset or 0)
        for chunk in readers[piece.format](handle, piece, spec, chunk_rows):
            if keys is not None:
                chunk.keys = [keys.readline().decode().rstrip("\r\n") for _ in chunk.keys]
            elif spec.generated_keys(piece.format):
                template = spec.key_template or DEFAULT_KEY_TEMPLATE
                stem = str(PurePosixPath(piece.name).with_suffix(""))
                chunk.keys = [
                    template.format(file=stem, row=chunk.first_row + n) for n in range(len(chunk.keys))
                ]
            yield chunk


def _parquet_rows(
    handle: IO[bytes], piece: Slice, spec: EmbeddingSpec, chunk_rows: int
) -> Iterator[RowChunk]:
    columns = [spec.vector_column, *spec.metadata_columns]
    if spec.metadata_json_column:
        columns.append(spec.metadata_json_column)
    keyed = not spec.generated_keys("parquet")
    if keyed:
        columns.insert(0, spec.key_column)
    parquet = _parquet_file(handle, piece.path)
    row = piece.start
    for batch in _batches(parquet, piece, chunk_rows, columns):
        count = batch.num_rows
        vectors, problems = _arrow_vectors(batch.column(spec.vector_column))
        keys = (
            [str(key) if key is not None else "" for key in batch.column(spec.key_column).to_pylist()]
            if keyed
            else [""] * count
        )
        if keyed:
            for position, key in enumerate(keys):
                if not key:
                    problems.setdefault(position, f"key column {spec.key_column!r} is empty")
        if spec.metadata_json_column:
            texts = batch.column(spec.metadata_json_column).to_pylist()
            metadata: list[dict[str, Any] | None] | None = [
                orjson.loads(text) if text else None for text in texts
            ]
        else:
            metadata = _metadata_rows(
                {name: batch.column(name).to_pylist() for name in spec.metadata_columns}, count
            )
        yield RowChunk(row, keys, vectors, metadata, problems)
        row += count


def _arrow_vectors(column: Any) -> tuple[np.ndarray, dict[int, str]]:
    """A list or fixed-size-list column as an (rows, dimension) float32 array, without copying
    per row. Rows that are missing or of another length than the first are problems."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = len(column)
    if not (
        pa.types.is_list(column.type)
        or pa.types.is_fixed_size_list(column.type)
        or pa.types.is_large_list(column.type)
    ):
        raise UsageError(
            f"the vector column holds {column.type}, not lists of floats: name it with --vector-column"
        )
    lengths = pc.fill_null(pc.list_value_length(column), -1).to_numpy(zero_copy_only=False)
    valid = lengths[lengths >= 0]
    dimension = int(np.bincount(valid).argmax()) if len(valid) else 0
    problems: dict[int, str] = {}
    if (lengths == dimension).all():
        values = column.flatten().to_numpy(zero_copy_only=False)
        return np.asarray(values, dtype=np.float32).reshape(rows, dimension), problems
    vectors = np.zeros((rows, dimension), dtype=np.float32)
    for position in range(rows):
        if lengths[position] < 0:
            problems[position] = "vector is missing (null)"
        elif lengths[position] != dimension:
            problems[position] = f"vector has {lengths[position]} values, other rows have {dimension}"
        else:
            vectors[position] = np.asarray(
                column[position].values.to_numpy(zero_copy_only=False), dtype=np.float32
            )
    return vectors, problems


def _metadata_rows(columns: dict[str, list[Any]], count: int) -> list[dict[str, Any] | None] | None:
    if not columns:
        return None
    rows: list[dict[str, Any] | None] = []
    for position in range(count):
        entry = {name: values[position] for name, values in columns.items() if values[position] is not None}
        rows.append(entry or None)
    return rows


def _npy_rows(handle: IO[bytes], piece: Slice, spec: EmbeddingSpec, chunk_rows: int) -> Iterator[RowChunk]:
    layout = npy_layout(handle, piece.path)
    assert piece.stop is not None
    handle.seek(layout.data_offset + piece.start * layout.row_bytes)
    for row in range(piece.start, piece.stop, chunk_rows):
        count = min(chunk_rows, piece.stop - row)
        data = handle.read(count * layout.row_bytes)
        if len(data) != count * layout.row_bytes:
            raise UsageError(f"{piece.path} is shorter than its header says: the file is truncated")
        raw = np.frombuffer(data, dtype=layout.dtype).reshape(count, layout.dimension)
        with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf: rejected
            vectors = raw.astype(np.float32, copy=False)
        yield RowChunk(row, [""] * count, vectors, None)


def _jsonl_rows(handle: IO[bytes], piece: Slice, spec: EmbeddingSpec, chunk_rows: int) -> Iterator[RowChunk]:
    keyed = not spec.generated_keys("jsonl")
    row = 0
    pending: list[bytes] = []
    for line in handle:
        pending.append(line)
        if len(pending) == chunk_rows:
            yield _json_chunk(pending, row, spec, keyed, orjson.loads)
            row += len(pending)
            pending = []
    if pending:
        yield _json_chunk(pending, row, spec, keyed, orjson.loads)


def _json_chunk(lines: list[bytes], first_row: int, spec: EmbeddingSpec, keyed: bool, loads: Any) -> RowChunk:
    keys: list[str] = []
    vectors: list[Any] = []
    metadata: list[dict[str, Any] | None] = []
    problems: dict[int, str] = {}
    for position, line in enumerate(lines):
        key, vector, entry = "", None, None
        try:
            record = loads(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
            key = str(record.get(spec.key_column) or "") if keyed else ""
            vector = record.get(spec.vector_column)
            entry = {name: record[name] for name in spec.metadata_columns if record.get(name) is not None}
            if keyed and not key:
                problems[position] = f"no {spec.key_column!r} field"
            elif not isinstance(vector, list) or not vector:
                problems[position] = f"no {spec.vector_column!r} list of numbers"
                vector = None
        except ValueError as exc:
            problems[position] = f"not valid JSON ({exc})"
        keys.append(key)
        vectors.append(vector)
        metadata.append(entry or None)
    lengths = [len(vector) for vector in vectors if vector is not None]
    dimension = max(set(lengths), key=lengths.count) if lengths else 0
    array = np.zeros((len(lines), dimension), dtype=np.float32)
    for position, vector in enumerate(vectors):
        if vector is None:
            continue
        if len(vector) != dimension:
            problems[position] = f"vector has {len(vector)} values, other rows have {dimension}"
            continue
        try:
            with np.errstate(over="ignore"):  # beyond float32's range becomes inf: rejected
                array[position] = np.asarray(vector, dtype=np.float64)
        except (TypeError, ValueError):
            problems[position] = f"{spec.vector_column!r} holds something other than numbers"
    return RowChunk(first_row, keys, array, metadata if spec.metadata_columns else None, problems)
