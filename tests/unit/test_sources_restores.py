"""How `ls --json` finds archived objects' restore states (`_sources/restores.py`): from the
listing where the service lists them (S3: no HEAD), a probe HEAD per page of archived objects
while it is not known, and a HEAD per archived object once the service is found to leave them out."""

from __future__ import annotations

import asyncio

from s3bulk._sources.restores import ListedRestores
from s3bulk._stores.archives import RestoreState
from s3bulk._stores.s3xml import ObjectInfo

READY = 'ongoing-request="false", expiry-date="Fri, 04 Dec 2026 00:00:00 GMT"'


class Heads:
    def __init__(self, restores: dict[str, str]) -> None:
        self.restores = restores
        self.asked: list[str] = []

    async def head(self, bucket: str, key: str) -> dict[str, str]:
        self.asked.append(key)
        return {"x-amz-restore": self.restores[key]} if key in self.restores else {}


def _page(keys: str, listed: dict[str, RestoreState] | None = None) -> list[ObjectInfo]:
    return [
        ObjectInfo(
            key, 1, "2026-11-29T00:00:00.000Z", "e", "GLACIER" if key[0] != "s" else "STANDARD"
        )._replace(restore=(listed or {}).get(key))
        for key in keys.split()
    ]


def _run(restores: ListedRestores, pages: list[list[ObjectInfo]]) -> list[dict[str, object]]:
    async def run() -> list[dict[str, object]]:
        return [info.to_json() for page in pages for info in await restores.filled(page)]

    return asyncio.run(run())


def test_a_service_that_lists_restores_is_asked_no_head() -> None:
    heads = Heads({"g1": READY})
    listed = {"g1": RestoreState(False, "2026-12-04T00:00:00.000Z")}
    shown = _run(ListedRestores(heads, "b"), [_page("g0 g1 s2", listed), _page("g3 g4")])
    assert heads.asked == []
    assert shown[1]["restore_ready_until"] == "2026-12-04T00:00:00.000Z"


def test_cold_archives_cost_one_probe_per_page_at_most() -> None:
    heads = Heads({})
    shown = _run(ListedRestores(heads, "b"), [_page("g0 g1 s2"), _page("s3 s4"), _page("g5 g6")])
    assert heads.asked == ["g0", "g5"]
    assert not any("restore_ongoing" in record for record in shown)


def test_a_service_that_leaves_restores_out_is_asked_for_each_archived_object() -> None:
    heads = Heads({"g0": READY, "g1": 'ongoing-request="true"', "g4": READY})
    restores = ListedRestores(heads, "b")
    shown = {record["key"]: record for record in _run(restores, [_page("g0 g1 s2 g3"), _page("g4 s5")])}
    assert sorted(heads.asked) == ["g0", "g1", "g3", "g4"] and restores.listed is False
    assert shown["g0"]["restore_ready_until"] == "2026-12-04T00:00:00.000Z"
    assert shown["g1"]["restore_ongoing"] is True
    assert "restore_ongoing" not in shown["g3"] and shown["g4"]["restore_ongoing"] is False
