"""S3 Vectors' documented limits, in a module with no imports: the spec (commands/put_vectors.py)
checks against them without loading numpy."""

MAX_VECTORS_PER_REQUEST = 500  # vectors in one PutVectors
MAX_REQUEST_BYTES = 20 * 1024**2  # one PutVectors body
VECTORS_PER_SECOND = 2500.0  # one index's write limit
REQUESTS_PER_SECOND = 1000.0  # one index's request limit
