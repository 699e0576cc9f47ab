"""What docs/vectors.md's examples load, a few rows of 1,024 dimensions each: embeddings.parquet
(id, embedding, genre, year), vectors.npy with keys.txt, part-1.jsonl, by-year/films-2024.parquet,
gone.txt (keys to delete) and questions.parquet (query vectors)."""

from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

DIMENSION = 1024
rng = np.random.default_rng(7)


def rows(count: int) -> np.ndarray:
    return rng.standard_normal((count, DIMENSION)).astype(np.float32)


def vector_column(vectors: np.ndarray) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSION)


embeddings = rows(20)
pq.write_table(
    pa.table(
        {
            "id": [f"doc-{n}" for n in range(20)],
            "embedding": vector_column(embeddings),
            "genre": ["drama" if n % 2 else "comedy" for n in range(20)],
            "year": [2000 + n for n in range(20)],
        }
    ),
    "embeddings.parquet",
)
np.save("vectors.npy", rows(5))
Path("keys.txt").write_text("".join(f"npy-{n}\n" for n in range(5)))
Path("part-1.jsonl").write_bytes(
    b"".join(orjson.dumps({"key": f"json-{n}", "vector": v.tolist()}) + b"\n" for n, v in enumerate(rows(5)))
)
Path("by-year").mkdir()
pq.write_table(
    pa.table({"key": [f"film-{n}" for n in range(5)], "vector": vector_column(rows(5))}),
    "by-year/films-2024.parquet",
)
Path("gone.txt").write_text("doc-1\ndoc-2\n")
pq.write_table(pa.table({"key": ["q0", "q1"], "vector": vector_column(embeddings[:2])}), "questions.parquet")
