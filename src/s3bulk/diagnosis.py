"""Where a job's time went, in the seed articles' terms: is the client or the service the limit?

Stage seconds are summed over items (many are in flight at once, so the sum can exceed the wall
time); per item they read like the seeds' tables:
- list:    waiting for the source (listing pages, a directory walk)
- plan:    turning listings into work (key mapping, filters, the sync diff)
- build:   building and signing requests before they are sent (CPU under the GIL)
- wait:    an item ready but held back (queue full, byte budget, in-flight limit)
- rate:    held back by a rate limit's token bucket (vectors: the per-index write limits)
- request: in flight at the service, response handling included
The seed's signal: if build time per item stays flat while request time per item rises, adding
load only queues at the service, which is then the limit; if the CPU is busy all the time, the
client is.
"""

from __future__ import annotations

from s3bulk.engine.strategies import cores
from s3bulk.report import Report

STAGES = ("list", "plan", "build", "wait", "rate", "request")
CLIENT_BOUND_CPU_SHARE = 0.8


def stage_seconds(report: Report) -> dict[str, float]:
    """Seconds per stage; request time here excludes the building and rate waits it contains.
    Stages a job never uses (rate, for objects) are left out."""
    raw = report.stage_seconds
    seconds = {stage: raw.get(stage, 0.0) for stage in STAGES if stage != "rate" or stage in raw}
    seconds["request"] = max(0.0, seconds["request"] - seconds["build"] - seconds.get("rate", 0.0))
    return seconds


def per_item_ms(report: Report) -> dict[str, float]:
    items = max(1, report.objects_done + report.objects_failed)
    return {stage: 1000 * value / items for stage, value in stage_seconds(report).items()}


def cpu_share(report: Report, available: int | None = None) -> float:
    """The share of the machine's cores the job kept busy."""
    available = available or cores()
    return report.cpu_seconds / (report.wall_seconds * available) if report.wall_seconds else 0.0


def verdict(report: Report, available: int | None = None) -> str:
    """One sentence a user can act on."""
    available = available or cores()
    share = cpu_share(report, available)
    ms = per_item_ms(report)
    if report.throttles:
        return (
            f"service-bound: it asked us to slow down {report.throttles:,} times; "
            "each time the requests in flight were halved, then grown back while it allowed"
        )
    if ms.get("rate", 0.0) >= 0.5 * ms["request"] and ms.get("rate", 0.0) > 0:
        return (
            f"rate-limited, as asked: each batch waited {ms['rate']:.1f} ms for the per-index write limit "
            f"against {ms['request']:.1f} ms in flight; the client has room to spare. To go faster, shard "
            "over more indexes (--index, repeated), or raise --vectors-per-second if your quota allows"
        )
    if share >= CLIENT_BOUND_CPU_SHARE:
        return (
            f"client-bound: the job kept {share:.0%} of {available} core(s) busy; "
            "more cores (or fewer interpreters sharing them) would speed it up"
        )
    if ms["wait"] >= 0.5 * (ms["request"] + ms["build"]) and report.engine != "auto":
        fix = (
            "--engine hybrid or auto keep many in flight per worker"
            if report.concurrency_peak <= report.workers
            else "raise --concurrency or --max-in-flight (or use --engine auto)"
        )
        return (
            f"limited by s3bulk's own caps ({report.concurrency_peak:,} requests, --max-in-flight bytes "
            f"per worker): items waited {ms['wait']:.1f} ms for a slot against {ms['request']:.1f} ms "
            f"in flight; {fix}"
        )
    return (
        f"service-bound: requests took {ms['request']:.1f} ms each with up to {report.concurrency_peak:,} "
        f"in flight while the CPU was {share:.0%} busy; more in flight helps only a far-away service"
    )


def describe_cpu(report: Report) -> str:
    driver = report.driver_cpu
    own = driver.get("total", 0.0)
    parts = [
        f"{label} {driver[key]:.2f}"
        for key, label in (
            ("source", "listing/planning/loop"),
            ("merge", "merging results"),
            ("journal", "journal"),
            ("display", "display"),
        )
        if driver.get(key, 0.0) >= 0.005
    ]
    inside = f": {', '.join(parts)}" if parts else ""
    return f"CPU {report.cpu_seconds:.2f}s, of which the driver {own:.2f}s{inside}"
