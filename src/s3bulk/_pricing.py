"""What a job's requests would cost at list prices: the one price table in the code.

S3: prices are US East (N. Virginia), S3 Standard, per 1,000 requests, as published by AWS in
2025. Other regions and storage classes differ by a few tens of percent; data transfer out of
AWS and storage are not requests and are not counted here. DELETE (and the multi-object
DeleteObjects POST, which AWS bills as deletes) is free; a multipart upload's initiate/complete
calls and every part are PUT-class; HEAD is GET-class.

S3 Vectors bills by the data, not the request: PutVectors $0.20 per GB of logical data written
(the vectors' float32 values, keys and metadata), storage $0.06 per GB-month, QueryVectors $2.50
per million requests plus the data each query processes (tiered by the index's size, not priced
here), as the S3 pricing page's worked examples give them (us-east-1, read 2026-09-20). What
they do not give (GetVectors, ListVectors, DeleteVectors) is not priced here: a vectors job's
requests are left out of the S3 request cost, not priced as GETs.
"""

from __future__ import annotations

PRICE_PER_1000 = {
    "PUT": 0.005,
    "COPY": 0.005,
    "POST": 0.005,
    "LIST": 0.005,
    "GET": 0.0004,
    "HEAD": 0.0004,
    "DELETE": 0.0,
    "RESTORE": 0.0,  # a RestoreObject's fee is its tier's retrieval request fee: `retrieval_cost`
}
PRICE_SOURCE = "S3 Standard list prices, us-east-1"

VECTORS_PUT_PER_GB = 0.20
VECTORS_STORAGE_PER_GB_MONTH = 0.06
VECTORS_QUERIES_PER_MILLION = 2.50
VECTORS_PRICE_SOURCE = "S3 Vectors prices, us-east-1, read 2026-09-20"
VECTORS_OPERATIONS = frozenset(
    {"PutVectors", "GetVectors", "ListVectors", "DeleteVectors", "QueryVectors", "GetIndex", "CreateIndex"}
)
GB = 1024**3


def request_cost(requests: dict[str, int]) -> float:
    """Dollars for these S3 requests; an unknown kind is priced like GET rather than ignored, and
    S3 Vectors operations are left to `vectors_costs` (they are billed by the data)."""
    return sum(
        count * PRICE_PER_1000.get(kind, PRICE_PER_1000["GET"]) / 1000
        for kind, count in requests.items()
        if kind not in VECTORS_OPERATIONS
    )


def vectors_costs(logical_bytes: int = 0, queries: int = 0) -> str:
    """What writing `logical_bytes` of vectors, and `queries` QueryVectors, cost, in words."""
    gigabytes = logical_bytes / GB
    parts = []
    if logical_bytes or not queries:
        parts.append(
            f"{gigabytes:,.2f} GB of vector data: PutVectors ${gigabytes * VECTORS_PUT_PER_GB:,.2f}, "
            f"storage ${gigabytes * VECTORS_STORAGE_PER_GB_MONTH:,.2f}/month"
        )
    if queries:
        dollars = queries * VECTORS_QUERIES_PER_MILLION / 1e6
        parts.append(f"{queries:,} queries ${dollars:,.2f} and the data they process")
    return "; ".join(parts) + f" ({VECTORS_PRICE_SOURCE})"


# Retrieving from an archive tier, per storage class and tier: (dollars per GB retrieved, dollars
# per 1,000 RestoreObject requests), us-east-1 list prices (Deep Archive has no Expedited tier).
# Checked on 2026-11-29 (issue 66) against what could be read here, AWS's price page itself
# (https://aws.amazon.com/s3/pricing/) not among it (a capture of it dated 2026-09-20 holds its
# price cells as unrendered templates):
# - Flexible Retrieval Standard $0.01/GB + $0.05 per 1,000, Expedited $10 per 1,000: AWS's
#   Knowledge Center, https://repost.aws/knowledge-center/s3-manage-data-retrieval (undated), in
#   its worked example of 15,000,000 objects; Bulk from Flexible Retrieval is free: "Bulk
#   retrievals are free for objects that are stored in S3 Glacier Flexible Retrieval",
#   https://docs.aws.amazon.com/AmazonS3/latest/userguide/restoring-objects-retrieval-options.html
# - Expedited's $0.03/GB and Deep Archive's Standard ($0.02/GB + $0.10 per 1,000) and Bulk
#   ($0.0025/GB + $0.025 per 1,000) are confirmed by no AWS page read here, only by third
#   parties (a gist of 2023-03-24, gist.github.com/casouri/56e1e634e50d1ae023f3bb8ea4d053de):
#   kept as they were, to be checked against the price page where it can be read.
RETRIEVAL = {
    ("GLACIER", "Expedited"): (0.03, 10.00),
    ("GLACIER", "Standard"): (0.01, 0.05),
    ("GLACIER", "Bulk"): (0.0, 0.0),
    ("DEEP_ARCHIVE", "Standard"): (0.02, 0.10),
    ("DEEP_ARCHIVE", "Bulk"): (0.0025, 0.025),
}
RETRIEVAL_SOURCE = "S3 Glacier retrieval list prices, us-east-1"


def retrieval_cost(storage_class: str, tier: str, objects: int, size: int) -> float:
    """Dollars for restoring `objects` of `storage_class` holding `size` bytes at `tier`."""
    per_gb, per_1000 = RETRIEVAL.get((storage_class, tier), (0.0, 0.0))
    return size / GB * per_gb + objects * per_1000 / 1000
