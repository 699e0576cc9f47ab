"""Real local servers (MinIO, moto) for tests, the demo and benchmarks: no mocked S3 anywhere."""

from s3bulk.testing.inventory import write_inventory
from s3bulk.testing.servers import GarageServer, MinioServer, MotoServer, Server, VersityServer, free_port

__all__ = [
    "GarageServer",
    "MinioServer",
    "MotoServer",
    "Server",
    "VersityServer",
    "free_port",
    "write_inventory",
]
