"""Manifests without a server: sorted names merged from runs, memory bounded."""

from __future__ import annotations

from pathlib import Path


def test_sorted_names_merges_runs_with_bounded_memory(tmp_path: Path, monkeypatch) -> None:
    from s3bulk._sources import manifest as module

    monkeypatch.setattr(module, "SORT_RUN", 7)  # many runs on disk, merged
    names = [f"k{(n * 7919) % 100:03d}" for n in range(100)] + ["k005", "# a comment", ""]
    path = tmp_path / "names.txt"
    path.write_text("\n".join(names) + "\n")
    assert list(module.sorted_names(str(path))) == sorted(
        {name for name in names if name and not name.startswith("#")}
    )
