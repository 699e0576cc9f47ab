"""What a job's requests would cost at S3 Standard list prices: the one price table in the code.

Prices are US East (N. Virginia), S3 Standard, per 1,000 requests, as published by AWS in 2025.
Other regions and storage classes differ by a few tens of percent; data transfer out of AWS and
storage are not requests and are not counted here. DELETE (and the multi-object DeleteObjects
POST, which AWS bills as deletes) is free; a multipart upload's initiate/complete calls and every
part are PUT-class; HEAD is GET-class.
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
}
PRICE_SOURCE = "S3 Standard list prices, us-east-1"


def request_cost(requests: dict[str, int]) -> float:
    """Dollars for these requests; an unknown kind is priced like GET rather than ignored."""
    return sum(
        count * PRICE_PER_1000.get(kind, PRICE_PER_1000["GET"]) / 1000 for kind, count in requests.items()
    )
