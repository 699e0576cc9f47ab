"""`gather` against MinIO: every result must equal h5py's own read of the same selection."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pyarrow.csv
import pyarrow.parquet
import pytest
from conftest import Endpoint, new_bucket, run_cli

import s3bulk
from s3bulk.testing.wtk import WtkSpec, windspeed, write_file

DATASET = "windspeed_100m"
SELECTIONS = [":,7", ":,3:17", "10:40", "5,7", "::3,::4", "-1,:", "20:21,40:50:3", "2:3"]


def upload(endpoint: Endpoint, bucket: str, prefix: str, paths: list[Path]) -> None:
    client = endpoint.client()
    for path in paths:
        client.upload_file(str(path), bucket, f"{prefix}{path.name}")


def expected(paths: list[Path], dataset: str, selection: str, combine: str = "concat") -> np.ndarray:
    """What h5py reads for the same selection, joined like gather joins it."""
    key = tuple(
        int(part) if ":" not in part else slice(*[int(x) if x else None for x in part.split(":")])
        for part in selection.split(",")
    )
    parts = []
    for path in paths:
        with h5py.File(path) as handle:
            parts.append(handle[dataset][key])
    if combine == "stack" or np.ndim(parts[0]) == 0:
        return np.stack(parts)
    return np.concatenate(parts)


@pytest.fixture(scope="module")
def wtk_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three WTK-like years of different lengths (the last chunk row of two is partial)."""
    directory = tmp_path_factory.mktemp("wtk")
    return [
        write_file(
            directory / f"wtk_{2007 + number}.h5", WtkSpec(times=times, locations=50, chunks=(16, 10)), number
        )
        for number, times in enumerate((96, 150, 77))
    ]


@pytest.fixture(scope="module")
def wtk_bucket(minio: Endpoint, wtk_files: list[Path]) -> str:
    bucket = new_bucket(minio, "wtk")
    upload(minio, bucket, "wtk/", wtk_files)
    return bucket


@pytest.mark.parametrize("selection", SELECTIONS)
def test_gather_equals_h5py_across_files_of_different_lengths(
    aws_env: dict[str, str], wtk_bucket: str, wtk_files: list[Path], selection: str
) -> None:
    result = s3bulk.gather(f"s3://{wtk_bucket}/wtk/*.h5", DATASET, selection)
    want = expected(wtk_files, DATASET, selection)
    assert result.dtype == want.dtype
    assert result.shape == want.shape
    assert np.array_equal(result, want)


def test_stack_scale_and_engines(aws_env: dict[str, str], wtk_bucket: str, wtk_files: list[Path]) -> None:
    url = f"s3://{wtk_bucket}/wtk/*.h5"
    stacked = s3bulk.gather(url, DATASET, "0:50,3", combine="stack")
    assert np.array_equal(stacked, expected(wtk_files, DATASET, "0:50,3", combine="stack"))
    with pytest.raises(s3bulk.UsageError, match="cannot be stacked; use concat"):
        s3bulk.gather(url, DATASET, ":,3", combine="stack")
    scaled = s3bulk.gather(url, DATASET, ":,3:5", scale=True)
    assert scaled.dtype == np.float32
    assert np.array_equal(scaled, expected(wtk_files, DATASET, ":,3:5") / np.float32(100.0))
    for engine, workers in (("hybrid", 2), ("threads", 3), ("serial", None)):
        result = s3bulk.gather(url, DATASET, ":,12:31", engine=engine, workers=workers, cache=False)
        assert np.array_equal(result, expected(wtk_files, DATASET, ":,12:31")), engine
    along_columns = s3bulk.gather(url, DATASET, "0:40,2:4", axis=1)
    assert along_columns.shape == (40, 6)
    assert np.array_equal(along_columns[:, 2:4], expected(wtk_files[1:2], DATASET, "0:40,2:4"))


def _variants(directory: Path) -> dict[str, Path]:
    """Files with other types, chunk shapes, filters and layouts; each has dataset 'data'."""
    rng = np.random.default_rng(7)
    made = {}

    def make(name: str, data: np.ndarray, **options: object) -> None:
        path = directory / f"{name}.h5"
        with h5py.File(path, "w") as handle:
            handle.create_dataset("group/data", data=data, **options)
        made[name] = path

    smooth = np.cumsum(rng.normal(size=(120, 33)), axis=0)
    make("float32-be-fletcher", smooth.astype(">f4"), chunks=(25, 8), compression="gzip", fletcher32=True)
    make("int64-plain", rng.integers(-(2**40), 2**40, size=(120, 33)), chunks=(7, 33))
    make("float64-shuffle", smooth, chunks=(120, 1), shuffle=True)
    make("int8-3d", rng.integers(-100, 100, size=(120, 33, 4), dtype="i1"), chunks=(10, 5, 3), compression=9)
    make("lzf", smooth.astype("f4"), chunks=(25, 8), compression="lzf")
    make("contiguous", smooth.astype("f4"))
    path = directory / "latest.h5"  # newest file format: chunk indexes other than the v1 B-tree
    with h5py.File(path, "w", libver="latest") as handle:
        handle.create_dataset("group/data", data=smooth, chunks=(9, 4), maxshape=(None, 33), compression=1)
    made["latest"] = path
    path = directory / "sparse.h5"  # chunks never written read as the fill value
    with h5py.File(path, "w") as handle:
        sparse = handle.create_dataset(
            "group/data", shape=(120, 33), dtype="i2", chunks=(10, 10), fillvalue=-7
        )
        sparse[30:45, 12:20] = 5
    made["sparse"] = path
    return made


def test_types_chunk_shapes_filters_and_layouts(
    aws_env: dict[str, str], minio: Endpoint, tmp_path: Path
) -> None:
    bucket = new_bucket(minio, "variants")
    variants = _variants(tmp_path)
    upload(minio, bucket, "v/", list(variants.values()))
    for name, path in variants.items():
        selections = ["7:100:5,3", ":,10:30", "60", "119,32"] + (["5:9,1:3,2"] if name == "int8-3d" else [])
        for selection in selections:
            result = s3bulk.gather(f"s3://{bucket}/v/{path.name}", "group/data", selection)
            want = expected([path], "group/data", selection)
            assert result.shape == want.shape and np.array_equal(result, want), (name, selection)
    report = s3bulk.gather_to_file(
        [f"s3://{bucket}/v/lzf.h5", f"s3://{bucket}/v/contiguous.h5"],
        "group/data",
        ":,4",
        str(tmp_path / "o.npy"),
    )
    notes = "\n".join(report.notes)
    assert "lzf.h5: read through h5py" not in notes
    assert "contiguous.h5: read through h5py (contiguous layout)" in notes
    assert np.array_equal(
        np.load(tmp_path / "o.npy"), expected([variants["lzf"], variants["contiguous"]], "group/data", ":,4")
    )


FILTERS: dict[str, dict[str, object]] = {
    "gzip-shuffle": {"compression": "gzip", "shuffle": True},
    "lzf": {"compression": "lzf"},
    "lzf-fletcher32": {"compression": "lzf", "fletcher32": True},
    "szip-nn": {"compression": "szip", "compression_opts": ("nn", 16)},
    "szip-ec": {"compression": "szip", "compression_opts": ("ec", 8)},
    "blosc-zstd": dict(hdf5plugin.Blosc(cname="zstd", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE)),
    "blosc-lz4-bitshuffle": dict(hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.BITSHUFFLE)),
    "blosc2-zstd": dict(hdf5plugin.Blosc2(cname="zstd", clevel=5)),
    "blosc2-lz4": dict(hdf5plugin.Blosc2(cname="lz4", filters=hdf5plugin.Blosc2.BITSHUFFLE)),
    "zstd": dict(hdf5plugin.Zstd(clevel=3)),
    "lz4": dict(hdf5plugin.LZ4()),
    "bitshuffle": dict(hdf5plugin.Bitshuffle(cname="none")),
    "bitshuffle-lz4": dict(hdf5plugin.Bitshuffle(cname="lz4")),
    "bitshuffle-zstd": dict(hdf5plugin.Bitshuffle(cname="zstd")),
    "bzip2": dict(hdf5plugin.BZip2()),
}
NO_DECODER: dict[str, dict[str, object]] = {"scaleoffset": {"scaleoffset": 2}, "nbit": {"dcpl": "nbit"}}


def _options(options: dict[str, object]) -> dict[str, object]:
    """h5py names no n-bit option: it is a filter set on the creation property list."""
    if options.get("dcpl") != "nbit":
        return options
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    plist.set_filter(h5py.h5z.FILTER_NBIT, 0)
    return {"dcpl": plist}


@pytest.mark.parametrize("dtype", ["<u2", ">f4", "<f8", "<i1"])
def test_every_common_filter_is_decoded_by_gather(
    aws_env: dict[str, str], minio: Endpoint, tmp_path: Path, dtype: str
) -> None:
    """Files h5py + hdf5plugin write with each filter (chunks of odd sizes, so Bitshuffle's and
    LZ4's last blocks are partial) are decoded by gather itself: equal to h5py's read, none read
    through h5py. Filters no decoder reads (scale-offset, n-bit) are read through h5py, and said."""
    rng = np.random.default_rng(3)
    smooth = np.cumsum(rng.normal(size=(157, 41)), axis=0) * (3 if dtype[1] in "ui" else 0.37)
    values = np.clip(smooth, -100, 100).astype(dtype) if dtype[1] == "i" else np.abs(smooth).astype(dtype)
    paths = []
    for name, options in {**FILTERS, **NO_DECODER}.items():
        path = tmp_path / f"{name}.h5"
        with h5py.File(path, "w") as handle:
            handle.create_dataset("data", data=values, chunks=(37, 13), **_options(options))
        paths.append(path)
    bucket = new_bucket(minio, "filters")
    upload(minio, bucket, "f/", paths)
    for path in paths:
        report = s3bulk.gather_to_file(
            f"s3://{bucket}/f/{path.name}", "data", "3:150,2:40:3", str(tmp_path / "o.npy")
        )
        got, want = np.load(tmp_path / "o.npy"), expected([path], "data", "3:150,2:40:3")
        assert got.dtype == want.dtype and np.array_equal(got, want), path.name
        notes = "\n".join(report.notes)
        if path.stem in NO_DECODER:
            assert f"{path.name}: read through h5py (HDF5 filter" in notes, notes
        else:
            assert "read through h5py" not in notes and report.requests.get("GET (h5py)", 0) == 0, path.name


def test_glob_matches_the_start_of_a_file_name(
    aws_env: dict[str, str], minio: Endpoint, wtk_files: list[Path], tmp_path: Path
) -> None:
    """`d/lzf*.h5` and `d/lzf?.h5` name files by how their names start: the listing is asked for
    keys starting `d/lzf` and the glob matched on each key (a store's list took `d/lzf` for a
    directory and found nothing)."""
    bucket = new_bucket(minio, "globs")
    client = minio.client()
    for name, path in (("lzf1.h5", wtk_files[0]), ("lzf2.h5", wtk_files[1]), ("gzip1.h5", wtk_files[2])):
        client.upload_file(str(path), bucket, f"d/{name}")
    client.upload_file(str(wtk_files[2]), bucket, "d/lzf/inner.h5")  # `*` crosses "/", as fnmatch's does
    want = expected(wtk_files[:2], DATASET, ":,3")
    assert np.array_equal(s3bulk.gather(f"s3://{bucket}/d/lzf?.h5", DATASET, ":,3"), want)
    report = s3bulk.gather_to_file(f"s3://{bucket}/d/lzf*.h5", DATASET, ":,3", str(tmp_path / "o.npy"))
    assert np.array_equal(
        np.load(tmp_path / "o.npy"), expected([wtk_files[2], *wtk_files[:2]], DATASET, ":,3")
    )
    assert report.requests["LIST"] == 1
    with pytest.raises(s3bulk.UsageError, match=r"lzf\?\.hdf matches no files"):
        s3bulk.gather(f"s3://{bucket}/d/lzf?.hdf", DATASET, ":,3")


def test_cached_index_makes_no_metadata_requests(
    minio: Endpoint, wtk_bucket: str, wtk_files: list[Path], tmp_path: Path
) -> None:
    url = f"s3://{wtk_bucket}/wtk/*.h5"

    def gather_json(selection: str, out: Path, *extra: str) -> dict[str, object]:
        done = run_cli(
            minio.env, "gather", url, "-d", DATASET, "-s", selection, "-o", str(out), "--json", *extra
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])["summary"]

    first = gather_json(":,21", tmp_path / "a.npy")
    assert first["requests"]["GET (HDF5 metadata)"] >= 3  # at least one per file
    second = gather_json(":,21", tmp_path / "b.npy")
    assert second["requests"]["GET (HDF5 metadata)"] == 0
    assert "3 of 3 file(s) from the cache" in " ".join(second["notes"])
    assert np.array_equal(np.load(tmp_path / "b.npy"), expected(wtk_files, DATASET, ":,21"))
    # chunks the cache has not seen yet are looked up, and only those files' indexes are read
    third = gather_json(":,45", tmp_path / "c.npy")
    assert third["requests"]["GET (HDF5 metadata)"] > 0
    assert gather_json(":,45:47", tmp_path / "d.npy")["requests"]["GET (HDF5 metadata)"] == 0
    # a changed object has a new ETag, so its index is read again
    minio.client().upload_file(str(wtk_files[1]), wtk_bucket, "wtk/wtk_2007.h5")
    changed = gather_json(":,21", tmp_path / "e.npy")
    assert "2 of 3 file(s) from the cache, 1 read" in " ".join(changed["notes"])
    swapped = [wtk_files[1], wtk_files[1], wtk_files[2]]
    assert np.array_equal(np.load(tmp_path / "e.npy"), expected(swapped, DATASET, ":,21"))
    minio.client().upload_file(str(wtk_files[0]), wtk_bucket, "wtk/wtk_2007.h5")
    uncached = gather_json(":,21", tmp_path / "f.npy", "--no-cache")
    assert uncached["requests"]["GET (HDF5 metadata)"] >= 3


def test_cli_writes_csv_and_parquet_scaled(
    minio: Endpoint, wtk_bucket: str, wtk_files: list[Path], tmp_path: Path
) -> None:
    url = f"s3://{wtk_bucket}/wtk/"
    want = expected(wtk_files, DATASET, ":,4:7") / np.float32(100.0)
    for suffix in ("csv", "parquet"):
        out = tmp_path / f"out.{suffix}"
        done = run_cli(minio.env, "gather", url, "-d", DATASET, "-s", ":,4:7", "--scale", "-o", str(out))
        assert done.returncode == 0, done.stderr
        assert f"wrote {out}: shape (323, 3), float32" in done.stdout
        table = pyarrow.csv.read_csv(out) if suffix == "csv" else pyarrow.parquet.read_table(out)
        assert table.column_names == ["4", "5", "6"]
        got = np.column_stack([table.column(name).to_numpy() for name in table.column_names]).astype(
            np.float32
        )
        assert np.array_equal(got, want)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.csv", "out.parquet"]


def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    minio: Endpoint, wtk_bucket: str, tmp_path: Path
) -> None:
    url = f"s3://{wtk_bucket}/wtk/*.h5"
    out = tmp_path / "out.npy"
    cases = [
        ((url, "-d", "nope", "-s", ":,1"), "dataset 'nope' does not exist in"),
        ((url, "-d", DATASET, "-s", ":,x"), "bad selection ':,x': 'x' is not an integer"),
        ((url, "-d", DATASET, "-s", ":,50"), "index 50 is out of range for axis 1 of size 50"),
        ((url, "-d", DATASET, "-s", ":,:,1"), "selection has 3 axes but"),
        ((url, "-d", DATASET, "-s", "5,7", "--combine", "zip"), "unknown combine 'zip'"),
        ((f"s3://{wtk_bucket}/wtk/*.hdf", "-d", DATASET), "matches no files"),
        ((f"s3://{wtk_bucket}/wtk/none.h5", "-d", DATASET), "does not exist: check the URL"),
        ((url, "-d", "time_index", "--scale"), "has no scale_factor attribute: drop --scale"),
    ]
    for args, message in cases:
        done = run_cli(minio.env, "gather", *args, *([] if "-o" in args else ["-o", str(out)]))
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (args, lines)
    done = run_cli(minio.env, "gather", url, "-d", DATASET, "-o", str(tmp_path / "out.txt"))
    assert done.returncode == 2 and "name the output .npy, .csv or .parquet" in done.stderr
    no_keys = {k: v for k, v in minio.env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    no_keys |= {"HOME": str(tmp_path / "home"), "AWS_EC2_METADATA_DISABLED": "true"}
    done = run_cli(no_keys, "gather", url, "-d", DATASET, "-o", str(out))
    assert done.returncode == 2 and done.stderr.startswith("error: no AWS credentials found")
    done = run_cli(minio.env, "gather", "s3://no-such-bucket-here/wtk/*.h5", "-d", DATASET, "-o", str(out))
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "NoSuchBucket" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_corrupt_chunk_fails_and_leaves_no_output(minio: Endpoint, tmp_path: Path) -> None:
    path = tmp_path / "checked.h5"
    with h5py.File(path, "w") as handle:
        handle.create_dataset(
            "data", data=np.arange(4000.0).reshape(200, 20), chunks=(50, 20), fletcher32=True
        )
        offset = handle["data"].id.get_chunk_info_by_coord((100, 0)).byte_offset
    data = bytearray(path.read_bytes())
    data[offset + 10] ^= 0xFF
    bucket = new_bucket(minio, "corrupt")
    minio.client().put_object(Bucket=bucket, Key="checked.h5", Body=bytes(data))
    out = tmp_path / "out" / "values.npy"
    out.parent.mkdir()
    done = run_cli(
        minio.env, "gather", f"s3://{bucket}/checked.h5", "-d", "data", "-s", ":,3", "-o", str(out)
    )
    assert done.returncode == 1
    assert "gather failed: 1 range read(s) failed" in done.stderr
    assert "chunk at (100, 0) does not decode" in done.stderr and "nothing was written" in done.stderr
    assert list(out.parent.iterdir()) == []


def _layout_files(directory: Path) -> dict[str, Path]:
    """The newest format's chunk indexes (`libver="latest"`), each dataset 'x', and a file whose
    metadata lies in pages (paged aggregation)."""
    rng = np.random.default_rng(11)
    made = {}
    layouts: dict[str, tuple[tuple[int, ...], tuple[int, ...] | None, dict[str, object]]] = {
        "single-chunk": ((120, 33), (120, 33), {"compression": "gzip"}),
        "implicit": ((120, 33), (10, 7), {"dcpl": "early"}),
        "fixed-array": ((120, 33), (9, 4), {"compression": "gzip", "shuffle": True}),
        "fixed-array-paged": ((600, 40), (5, 2), {"compression": "lzf"}),
        "extensible-array": ((120, 33), (9, 4), {"maxshape": (None, 33), "compression": 1}),
        "extensible-array-axis-1": ((120, 400), (9, 4), {"maxshape": (120, None), "compression": "gzip"}),
        "btree-2": ((120, 33), (9, 4), {"maxshape": (None, None), **dict(hdf5plugin.Zstd())}),
    }
    for name, (shape, chunks, options) in layouts.items():
        values = np.round(np.cumsum(rng.normal(size=shape), axis=0) * 10).astype("f4")
        path = directory / f"{name}.h5"
        if options.get("dcpl") == "early":  # implicit: no filter, fixed shape, space allocated at creation
            plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            plist.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
            options = {"dcpl": plist}
        with h5py.File(path, "w", libver="latest") as handle:
            handle.create_dataset("group/x", data=values, chunks=chunks, **options)
        made[name] = path
    path = directory / "paged-aggregation.h5"
    with h5py.File(path, "w", libver="latest", fs_strategy="page", fs_page_size=4096) as handle:
        for number in range(20):  # metadata spread over pages among the chunks
            handle.create_dataset(
                f"group/y{number}", data=rng.normal(size=(50, 9)), chunks=(5, 3), compression=1
            )
        handle.create_dataset("group/x", data=rng.normal(size=(120, 33)), chunks=(9, 4), compression="gzip")
    made["paged-aggregation"] = path
    return made


def test_newest_format_chunk_indexes_gather_as_h5py_reads(
    aws_env: dict[str, str], minio: Endpoint, tmp_path: Path
) -> None:
    """Every chunk index of `libver="latest"` gathers what h5py reads, without h5py's lookups: a
    fixed array (paged too), extensible arrays (the unlimited axis first or not: for the latter,
    h5py's own `get_chunk_info_by_coord` answers wrongly), a version-2 B-tree, single-chunk and
    implicit indexes, and a paged-aggregation file."""
    bucket = new_bucket(minio, "layouts")
    files = _layout_files(tmp_path)
    upload(minio, bucket, "l/", list(files.values()))
    for name, path in files.items():
        for selection in ["7:100:5,3", ":,10:30", "60", "119,32", ":"]:
            report = s3bulk.gather_to_file(
                f"s3://{bucket}/l/{path.name}", "group/x", selection, str(tmp_path / "o.npy"), cache=False
            )
            got, want = np.load(tmp_path / "o.npy"), expected([path], "group/x", selection)
            assert got.shape == want.shape and np.array_equal(got, want), (name, selection)
            assert "read through h5py" not in " ".join(report.notes), (name, report.notes)


def test_newest_format_gathers_with_the_requests_of_the_oldest(
    aws_env: dict[str, str], minio: Endpoint, tmp_path: Path
) -> None:
    """The same data as a version-1 B-tree (h5py's default) and in each newest-format index (a
    fixed array; an extensible array and a version-2 B-tree, which grow as chunks are written, so
    their blocks lie among the chunks): a cold gather of one location over all times reads the
    newer indexes with no more requests (+10%; a version-2 B-tree, a leaf more a file at most) than
    the B-tree's walk, all in waves; none is left to h5py's lookups, one request after another."""
    bucket = new_bucket(minio, "libver")
    spec = WtkSpec(times=1000, locations=2000, chunks=(50, 100))
    kinds = {"v1": ("earliest", None), "fa": ("latest", None), "ea": ("latest", (None, 2000))}
    kinds["bt2"] = ("latest", (None, None))
    paths = []
    for name, (libver, maxshape) in kinds.items():
        for number in range(2):
            path = tmp_path / f"{name}-{number}.h5"
            with h5py.File(path, "w", libver=libver) as handle:
                data = handle.create_dataset(
                    DATASET,
                    shape=(1000, 2000),
                    dtype="u2",
                    chunks=(50, 100),
                    maxshape=maxshape,
                    compression="gzip",
                )
                for first in range(0, 1000, 50):
                    for column in range(0, 2000, 100):
                        block = slice(first, first + 50), slice(column, column + 100)
                        data[block] = (windspeed(spec, number, *block) * 100).astype("u2")
            paths.append(path)
    upload(minio, bucket, "w/", paths)
    requests = {}
    for name in kinds:
        out = tmp_path / f"{name}.npy"
        report = s3bulk.gather_to_file(
            f"s3://{bucket}/w/{name}-*.h5", DATASET, ":,1234", str(out), cache=False
        )
        assert np.array_equal(np.load(out), expected(paths[:2], DATASET, ":,1234")), name
        requests[name] = report.requests["GET (HDF5 metadata)"]
        assert "h5py's lookups" not in " ".join(report.notes), (name, report.notes)
    assert requests["fa"] <= 1.1 * requests["v1"] and requests["ea"] <= 1.1 * requests["v1"], requests
    # a version-2 B-tree's 2 KiB leaves hold ~67 records where a version-1 node holds 64 entries;
    # one location over all times needs a leaf per few time rows in both: at most one more a file
    assert requests["bt2"] <= requests["v1"] + len(paths) // len(kinds), requests
