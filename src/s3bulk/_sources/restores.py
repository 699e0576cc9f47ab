"""Each archived object's restore state beside its listing (`ls --json`), as `head` shows it.

S3 lists it when asked (`x-amz-optional-object-attributes: RestoreStatus`, at no cost): an entry
under restore, or restored, carries <RestoreStatus>; one never restored (or whose copy expired)
carries none. moto, MinIO, versitygw and Garage ignore the header (checked 2026-11: moto 5.2.5
and its main branch have no RestoreStatus), so an archived object listed without one may be
cold, or on a service that would not say. A probe tells them apart: the first archived entry of
a page that lists no RestoreStatus is asked with a HEAD (`x-amz-restore`), until either a
listing shows a RestoreStatus (the service answers the header: no more HEADs) or a HEAD shows
a restore the listing left out (the service ignores it: every archived entry from then on is
asked with a HEAD, in parallel). On S3 that is one HEAD per page of cold archived objects at
most; on a service that ignores the header, a restore on a page before the first one found may
go unshown (`ls --attributes` asks each object).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from s3bulk._errors import S3Error
from s3bulk._stores.archives import ARCHIVED, RestoreState, restore_state
from s3bulk._stores.attributes import iso_time
from s3bulk._stores.s3xml import ObjectInfo


class Header(Protocol):
    async def head(self, bucket: str, key: str) -> dict[str, str]: ...


class ListedRestores:
    """The restore states of a listing's archived objects, from the listing or, where the
    service is found to leave them out, from a HEAD each (see the module's docstring)."""

    def __init__(self, storage: Header, bucket: str, *, concurrency: int = 16) -> None:
        self.storage = storage
        self.bucket = bucket
        self.listed: bool | None = None  # whether the service lists restores (None: not known yet)
        self._limit = asyncio.Semaphore(concurrency)

    async def filled(self, objects: list[ObjectInfo]) -> list[ObjectInfo]:
        """The page's objects, each archived one with its restore state where there is one."""
        if self.listed or not any(info.storage_class in ARCHIVED for info in objects):
            return objects
        if any(info.restore is not None for info in objects):
            self.listed = True
            return objects
        cold = [index for index, info in enumerate(objects) if info.storage_class in ARCHIVED]
        objects = list(objects)
        if self.listed is None:
            probe = await self._state(objects[cold[0]])
            if probe is None:  # cold as listed: nothing learned of the service
                return objects
            self.listed = False
            objects[cold[0]] = objects[cold[0]]._replace(restore=probe)
            cold = cold[1:]
        found = await asyncio.gather(*(self._state(objects[index]) for index in cold))
        for index, state in zip(cold, found, strict=True):
            if state is not None:
                objects[index] = objects[index]._replace(restore=state)
        return objects

    async def _state(self, info: ObjectInfo) -> RestoreState | None:
        async with self._limit:
            try:
                headers = await self.storage.head(self.bucket, info.key)
            except S3Error as error:
                if error.status == 404:  # deleted since it was listed: it has no restore now
                    return None
                raise
        state = restore_state(headers.get("x-amz-restore", ""))
        if state is None or not state.ready_until:
            return state
        return state._replace(ready_until=iso_time(state.ready_until))
