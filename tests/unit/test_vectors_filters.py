"""`vectors delete --filter`: the service's filter language, evaluated locally on listed metadata
(no S3 Vectors operation deletes by filter). What it matches is what gets deleted."""

from __future__ import annotations

import pytest

from s3bulk._errors import UsageError
from s3bulk._vectors.filters import matches, parse_filter

FILMS = {
    "a": {"genre": "drama", "year": 2019, "tags": ["old", "restored"], "public": True},
    "b": {"genre": "news", "year": 2021, "public": False},
    "c": {"genre": ["drama", "news"], "year": 2021.0},
    "d": {"year": "2019"},  # a string, not a number
    "e": None,  # no metadata at all
}


def chosen(text: str) -> set[str]:
    condition = parse_filter(text)
    return {name for name, metadata in FILMS.items() if matches(condition, metadata)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"genre": "drama"}', {"a", "c"}),  # an array matches when any element does
        ('{"genre": {"$eq": "news"}}', {"b", "c"}),
        ('{"genre": {"$ne": "drama"}}', {"b"}),  # no genre: not matched (deletes less)
        ('{"genre": {"$in": ["news", "x"]}}', {"b", "c"}),
        ('{"genre": {"$nin": ["news"]}}', {"a"}),
        ('{"year": {"$gte": 2021}}', {"b", "c"}),  # 2021.0 is 2021; "2019" is no number
        ('{"year": {"$lt": 2020}}', {"a"}),
        ('{"year": 2019}', {"a"}),
        ('{"year": {"$gt": 2018, "$lt": 2021}}', {"a"}),
        ('{"public": true}', {"a"}),  # true is not 1
        ('{"public": 1}', set()),
        ('{"public": {"$exists": false}}', {"c", "d", "e"}),
        ('{"tags": {"$exists": true}}', {"a"}),
        ('{"$and": [{"genre": "drama"}, {"year": 2021}]}', {"c"}),
        ('{"$or": [{"public": false}, {"year": "2019"}]}', {"b", "d"}),
    ],
)
def test_a_filter_matches_what_the_service_would(text: str, expected: set[str]) -> None:
    assert chosen(text) == expected


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"genre": "drama"', "not JSON"),
        ("{}", "at least one condition"),
        ('["genre"]', "at least one condition"),
        ('{"genre": {"$regex": "d.*"}}', "genre: unknown operator $regex"),
        ('{"year": {"$gt": "2019"}}', "year: $gt takes a number"),
        ('{"year": {"$gt": true}}', "year: $gt takes a number"),
        ('{"genre": {"$in": "drama"}}', "genre: $in takes a non-empty array"),
        ('{"genre": {"$in": []}}', "genre: $in takes a non-empty array"),
        ('{"genre": {"$exists": 1}}', "$exists takes true or false"),
        ('{"genre": null}', "genre: $eq takes a string, number or boolean"),
        ('{"genre": {}}', "genre: name an operator"),
        ('{"$or": []}', "$or takes a non-empty array"),
        ('{"$not": {"genre": "x"}}', "$not is not a logical operator"),
    ],
)
def test_a_filter_the_service_would_refuse_is_one_line_before_anything_is_listed(
    text: str, said: str
) -> None:
    with pytest.raises(UsageError) as refused:
        parse_filter(text)
    assert said in str(refused.value) and "\n" not in str(refused.value)
