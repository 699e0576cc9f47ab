"""The site's view of the repository (mkdocs.yml's hook): bench/RESULTS.md (with its charts) and
RELIABILITY.md are pages too, where the repository keeps them, and a link written as the
repository has it (docs/map.md to ../bench/RESULTS.md, bench/RESULTS.md to ../docs/map.md) leads
to the same page on the site, so one text serves GitHub and the site."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE_DOCS = [
    "bench/RESULTS.md",
    "RELIABILITY.md",
    *(f"bench/{p.name}" for p in sorted((ROOT / "bench").glob("*.png"))),
]


def on_files(files: Files, config: Any) -> Files:
    for path in OUTSIDE_DOCS:
        files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Links as the repository writes them, made the site's: docs/ is the site's root."""
    src = page.file.src_uri
    if src in OUTSIDE_DOCS:
        depth = src.count("/")
        # from bench/RESULTS.md: ../docs/x.md is x.md, one level up on the site as in the repository
        up = re.escape("../" * depth)
        return re.sub(rf"\]\(({up})docs/", r"](\1", markdown)
    # from docs/x.md: ../bench/RESULTS.md and ../RELIABILITY.md are at the site's root
    return re.sub(r"\]\(\.\./(bench/|RELIABILITY\.md)", r"](\1", markdown)
