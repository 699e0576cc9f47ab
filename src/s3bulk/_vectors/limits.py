"""S3 Vectors' documented limits, in a module with no imports: the spec (commands/put_vectors.py)
checks against them without loading numpy."""

MAX_VECTORS_PER_REQUEST = 500  # vectors in one PutVectors
MAX_REQUEST_BYTES = 20 * 1024**2  # one PutVectors body
VECTORS_PER_SECOND = 2500.0  # one index's write limit
REQUESTS_PER_SECOND = 1000.0  # one index's request limit


def time_at_limits(
    vectors: int, requests: int, indexes: int, vectors_per_second: float, requests_per_second: float
) -> str:
    """The least time `vectors` in `requests` take when each of `indexes` takes at most so many a
    second (the keys spread evenly over them, as the key hash spreads them)."""
    seconds = max(vectors / (vectors_per_second * indexes), requests / (requests_per_second * indexes))
    spread = f"across {indexes} indexes" if indexes > 1 else "into 1 index"
    counted = f"{vectors:,} vector{'s' * (vectors != 1)} in {requests:,} request{'s' * (requests != 1)}"
    return (
        f"{counted} {spread}: at least {_duration(seconds)} at "
        f"{vectors_per_second:,.0f} vectors/s and {requests_per_second:,.0f} requests/s per index"
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
