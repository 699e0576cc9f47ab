"""Engines run a job's work items; they own concurrency, backpressure and retries."""

from s3bulk.engine.driver import Engine
from s3bulk.engine.job import Job, WorkerContext
from s3bulk.engine.strategies import ENGINES, Strategy, choose

__all__ = ["ENGINES", "Engine", "Job", "Strategy", "WorkerContext", "choose"]
