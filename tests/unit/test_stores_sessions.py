"""Directory buckets' sessions (`_stores/sessions.py`): asked for once per bucket however many
requests wait, renewed before they expire, dropped when the service says one expired."""

from __future__ import annotations

import asyncio

import pytest

from s3bulk._config import AwsSettings
from s3bulk._errors import ItemError
from s3bulk._stores.sessions import Session, SessionKeys, Sessions, parse_session, takes_session

ANSWER = (
    b'<?xml version="1.0" encoding="UTF-8"?><CreateSessionResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Credentials><SessionToken>TOKEN</SessionToken><SecretAccessKey>SECRET</SecretAccessKey>"
    b"<AccessKeyId>KEY</AccessKeyId><Expiration>2026-11-28T22:05:00Z</Expiration></Credentials>"
    b"</CreateSessionResult>"
)


def test_an_answer_is_a_session_renewed_a_minute_before_it_expires() -> None:
    expires = 1795903500.0  # 2026-11-28T22:05:00Z
    session = parse_session(ANSWER, expires - 300, "create a session")
    assert session.credentials == SessionKeys("KEY", "SECRET") and session.credentials.token is None
    assert session.header == {"x-amz-s3session-token": "TOKEN"}
    assert (session.expires, session.renew_at) == (expires, expires - 60)
    short = parse_session(ANSWER, expires - 10, "create a session")  # a fifth of its life ahead
    assert short.renew_at == expires - 2
    with pytest.raises(ItemError, match="holds no session's credentials"):
        parse_session(b"<CreateSessionResult/>", 0.0, "create a session")


def test_one_creation_per_bucket_a_new_one_when_due_or_dropped() -> None:
    now = [1000.0]
    made: list[str] = []

    async def create(bucket: str) -> Session:
        made.append(bucket)
        await asyncio.sleep(0)
        return Session(SessionKeys("k", "s"), f"t{len(made)}", now[0] + 300, now[0] + 240)

    async def scenario() -> list[str]:
        sessions = Sessions(create, clock=lambda: now[0])
        first = await asyncio.gather(*(sessions.of("b--use1-az4--x-s3") for _ in range(50)))
        tokens = {session.token for session in first}
        now[0] += 239
        tokens.add((await sessions.of("b--use1-az4--x-s3")).token)  # still t1
        now[0] += 1
        renewed = await sessions.of("b--use1-az4--x-s3")  # due: t2
        sessions.drop("b--use1-az4--x-s3", first[0])  # an old one refused: t2 stays
        assert (await sessions.of("b--use1-az4--x-s3")) == renewed
        sessions.drop("b--use1-az4--x-s3", renewed)
        return [*sorted(tokens), renewed.token, (await sessions.of("b--use1-az4--x-s3")).token]

    assert asyncio.run(scenario()) == ["t1", "t2", "t3"]
    assert len(made) == 3


def test_only_directory_buckets_objects_and_listings_take_a_session() -> None:
    settings = AwsSettings(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    directory = "photos--use1-az4--x-s3"
    assert takes_session(settings, directory, "k", "GET") and takes_session(settings, directory, "", "GET")
    assert takes_session(settings, directory, "", "POST")  # DeleteObjects
    assert not takes_session(settings, directory, "", "PUT")  # CreateBucket: regional, the caller's own
    assert not takes_session(settings, "photos", "k", "GET")
