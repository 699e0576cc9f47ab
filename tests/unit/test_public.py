"""The public surface without a server: the exported names, dir(), which modules are private, and what
importing s3bulk loads."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import s3bulk

API = {
    "AwsSettings",
    "Diagnosis",
    "ENGINES",
    "Failure",
    "ItemError",
    "JobInterrupted",
    "Listing",
    "ObjectInfo",
    "Attributes",
    "BucketInfo",
    "get",
    "get_async",
    "get_to_file",
    "get_to_file_async",
    "head",
    "head_async",
    "put",
    "put_async",
    "presign",
    "open",
    "list_buckets",
    "list_buckets_async",
    "make_bucket",
    "make_bucket_async",
    "remove_bucket",
    "remove_bucket_async",
    "remove_versions",
    "remove_versions_async",
    "versioning",
    "versioning_async",
    "copy_version",
    "copy_version_async",
    "Report",
    "S3BulkError",
    "S3Error",
    "UsageError",
    "list_jobs",
    "ls",
    "ls_async",
    "ls_table",
    "map",
    "map_async",
    "MapResults",
    *(
        name + twin
        for name in (
            "copy",
            "move",
            "sync",
            "check",
            "remove",
            "restore",
            "resume",
            "retry_failed",
            "put_vectors",
            "verify_vectors",
            "count_vectors",
            "export_vectors",
            "delete_vectors",
            "query_vectors",
            "sync_vectors",
            "copy_vectors",
            "gather",
            "gather_to_file",
            "doctor",
        )
        for twin in ("", "_async")
    ),
}


def test_the_exported_names_are_the_api_and_all_resolve() -> None:
    assert set(s3bulk.__all__) == API
    for name in s3bulk.__all__:
        assert getattr(s3bulk, name) is not None, name
    assert issubclass(s3bulk.S3Error, s3bulk.ItemError) and issubclass(s3bulk.ItemError, s3bulk.S3BulkError)


def test_dir_shows_the_api_and_no_private_module() -> None:
    import s3bulk._engine.driver

    shown = dir(s3bulk)
    assert set(shown) >= API
    assert [name for name in shown if name.startswith("_") and name != "__version__"] == []


def test_every_module_is_private_but_testing_fsspec_and_xarray() -> None:
    public = [
        module.name for module in pkgutil.iter_modules(s3bulk.__path__) if not module.name.startswith("_")
    ]
    assert public == ["fsspec", "testing", "xarray"]  # xarray: engine="s3bulk"


def test_importing_s3bulk_loads_nothing_heavy() -> None:
    """`import s3bulk` (and the CLI's start) must not load what only a job needs."""
    heavy = ("numpy", "aiohttp", "pyarrow", "h5py", "botocore", "ray")
    code = f"import sys, s3bulk, s3bulk._cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_what_the_readme_calls_async_is_a_coroutine_function_and_what_it_names_exists() -> None:
    """The README and the docs pages are read as the API's reference: a function they name
    exists, and one they call async must be awaited (the README said `verify_vectors` /
    `count_vectors` were, which block)."""
    import importlib.util
    import inspect
    import re
    from pathlib import Path

    root = Path(__file__).parents[2]
    readme = "\n".join(p.read_text() for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))])
    named = set(re.findall(r"`s3bulk\.([a-z_]+)[`(]", readme)) - {"__all__"}
    modules = {name for name in named if importlib.util.find_spec(f"s3bulk.{name}")}  # s3bulk.fsspec
    assert named and all(hasattr(s3bulk, name) for name in named - modules), named - set(dir(s3bulk))
    said_async = re.findall(r"((?:`s3bulk\.[a-z_]+`(?:, | / | and | or )?)+) (?:are|is) async", readme)
    for names in said_async:
        for name in re.findall(r"s3bulk\.([a-z_]+)", names):
            assert inspect.iscoroutinefunction(getattr(s3bulk, name)), f"the README calls s3bulk.{name} async"


def test_the_api_reference_shows_every_public_name() -> None:
    """docs/api.md (the site's Python API, rendered from the docstrings) names each of
    `s3bulk.__all__`, a blocking verb by its twin's heading: a new export shows up there too."""
    import re
    from pathlib import Path

    api = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    shown = set(re.findall(r"^::: s3bulk\.(\w+)$", api, re.M))
    shown |= {name for pair in re.findall(r'heading: "(\w+) / (\w+)"', api) for name in pair}
    assert set(s3bulk.__all__) - shown == set()
