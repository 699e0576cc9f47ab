"""A metadata filter written as QueryVectors takes one (`{"genre": "drama", "year": {"$lt":
2020}}`), checked and evaluated here: no S3 Vectors operation deletes by filter, so `vectors
delete --filter` lists keys and metadata and tests each vector itself.

The operators are the service's ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $and,
$or; a bare value means $eq; an array in the metadata matches $eq and $in when any element
does). Where the service's documentation leaves a case open, the reading that deletes less is
taken: a vector without the key matches only `{"$exists": false}` (not $ne or $nin), and order
comparisons hold only between numbers.
"""

from __future__ import annotations

from typing import Any

import orjson

from s3bulk._errors import UsageError

NUMBER_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = ("$eq", "$ne", "$in", "$nin", "$exists", *NUMBER_OPERATORS)


def parse_filter(text: str) -> dict[str, Any]:
    """The filter `text` names, checked whole: a mistake is one line before anything is listed."""
    try:
        condition = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise UsageError(f'--filter {text!r}: not JSON ({error}); e.g. \'{{"genre": "drama"}}\'') from None
    if not isinstance(condition, dict) or not condition:
        raise UsageError(
            f'--filter {text!r}: give an object with at least one condition, e.g. \'{{"genre": "drama"}}\''
        )
    _check(condition, text)
    return condition


def _check(condition: Any, text: str) -> None:
    if not isinstance(condition, dict) or not condition:
        raise UsageError(f"--filter {text!r}: each condition is a non-empty object")
    for name, wanted in condition.items():
        if name in ("$and", "$or"):
            if not isinstance(wanted, list) or not wanted:
                raise UsageError(f"--filter {text!r}: {name} takes a non-empty array of conditions")
            for each in wanted:
                _check(each, text)
        elif name.startswith("$"):
            raise UsageError(f"--filter {text!r}: {name} is not a logical operator ($and, $or)")
        elif isinstance(wanted, dict):
            if not wanted:
                raise UsageError(f"--filter {text!r}: {name}: name an operator ({', '.join(OPERATORS)})")
            for operator, operand in wanted.items():
                _check_operand(name, operator, operand, text)
        else:
            _check_operand(name, "$eq", wanted, text)


def _check_operand(name: str, operator: str, operand: Any, text: str) -> None:
    problem = ""
    if operator not in OPERATORS:
        problem = f"unknown operator {operator} (use {', '.join(OPERATORS)})"
    elif operator == "$exists":
        problem = "" if isinstance(operand, bool) else "$exists takes true or false"
    elif operator in NUMBER_OPERATORS:
        problem = "" if _number(operand) else f"{operator} takes a number"
    elif operator in ("$in", "$nin"):
        ok = isinstance(operand, list) and operand and all(_primitive(each) for each in operand)
        problem = "" if ok else f"{operator} takes a non-empty array of strings, numbers or booleans"
    elif not _primitive(operand):
        problem = f"{operator} takes a string, number or boolean"
    if problem:
        raise UsageError(f"--filter {text!r}: {name}: {problem}")


def matches(condition: dict[str, Any], metadata: dict[str, Any] | None) -> bool:
    """Whether a vector's metadata satisfies the (checked) filter."""
    metadata = metadata or {}
    for name, wanted in condition.items():
        if name == "$and":
            if not all(matches(each, metadata) for each in wanted):
                return False
        elif name == "$or":
            if not any(matches(each, metadata) for each in wanted):
                return False
        else:
            tests = wanted if isinstance(wanted, dict) else {"$eq": wanted}
            present = name in metadata
            value = metadata.get(name)
            if not all(_holds(operator, operand, value, present) for operator, operand in tests.items()):
                return False
    return True


def _holds(operator: str, operand: Any, value: Any, present: bool) -> bool:
    if operator == "$exists":
        return present is operand
    if not present:
        return False
    values = value if isinstance(value, list) else [value]
    if operator == "$eq":
        return any(_equal(each, operand) for each in values)
    if operator == "$ne":
        return not any(_equal(each, operand) for each in values)
    if operator == "$in":
        return any(_equal(each, choice) for each in values for choice in operand)
    if operator == "$nin":
        return not any(_equal(each, choice) for each in values for choice in operand)
    if not _number(value):
        return False
    compared: dict[str, bool] = {
        "$gt": value > operand,
        "$gte": value >= operand,
        "$lt": value < operand,
        "$lte": value <= operand,
    }
    return compared[operator]


def _equal(value: Any, operand: Any) -> bool:
    """Equal as JSON values are: true is not 1, "1" is not 1, 1 is 1.0."""
    if isinstance(value, bool) or isinstance(operand, bool):
        return isinstance(value, bool) and isinstance(operand, bool) and value == operand
    if _number(value) and _number(operand):
        return bool(value == operand)
    return type(value) is type(operand) and bool(value == operand)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _primitive(value: Any) -> bool:
    return isinstance(value, str | bool) or _number(value)
