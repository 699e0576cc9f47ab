"""Engines run a job's work items; they own concurrency, backpressure and retries."""

from s3bulk.engine.hybrid import HybridEngine
from s3bulk.engine.job import Job, WorkerContext

__all__ = ["HybridEngine", "Job", "WorkerContext"]
