"""Real local servers (MinIO, moto) for tests, the demo and benchmarks: no mocked S3 anywhere."""

from s3bulk.testing.servers import MinioServer, MotoServer, Server, VersityServer, free_port

__all__ = ["MinioServer", "MotoServer", "Server", "VersityServer", "free_port"]
