"""Selections (`':,1234'`, `'0:48,100:200'`, `'5,7'`) and the chunks they touch.

A selection is numpy's basic indexing written as text: per axis an integer (the axis is dropped,
as in numpy) or `start:stop[:step]` with a positive step; axes left out are taken whole. It is
resolved against each file's own shape, so files of different lengths each give their own part.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from s3bulk._errors import UsageError

Part = int | slice


def parse_selection(text: str) -> tuple[Part, ...]:
    """`':,1234'` -> (slice(None), 1234). Empty text or `':'` selects everything."""
    parts: list[Part] = []
    for raw in text.split(",") if text.strip() else []:
        piece = raw.strip()
        try:
            if ":" not in piece:
                parts.append(int(piece))
                continue
            fields = [int(field) if field.strip() else None for field in piece.split(":")]
        except ValueError:
            raise UsageError(
                f"bad selection {text!r}: {piece!r} is not an integer or start:stop[:step]; "
                "write e.g. ':,1234' or '0:24,100:200'"
            ) from None
        if len(fields) > 3:
            raise UsageError(f"bad selection {text!r}: {piece!r} has more than start:stop:step")
        step = fields[2] if len(fields) == 3 else None
        if step is not None and step <= 0:
            raise UsageError(f"bad selection {text!r}: step {step} must be positive")
        parts.append(slice(fields[0], fields[1], step))
    return tuple(parts)


def selection_text(parts: tuple[Part, ...]) -> str:
    def one(part: Part) -> str:
        if isinstance(part, int):
            return str(part)
        text = f"{'' if part.start is None else part.start}:{'' if part.stop is None else part.stop}"
        return text + (f":{part.step}" if part.step not in (None, 1) else "")

    return ",".join(one(part) for part in parts) or ":"


@dataclass(frozen=True)
class AxisPick:
    """What one axis keeps: indices start, start+step, ... (count of them)."""

    start: int
    step: int
    count: int
    dropped: bool  # an integer index: the axis is not in the result


def resolve(parts: tuple[Part, ...], shape: tuple[int, ...], where: str) -> tuple[AxisPick, ...]:
    if len(parts) > len(shape):
        raise UsageError(
            f"selection has {len(parts)} axes but {where} is {len(shape)}-D (shape {shape}): drop axes"
        )
    picks = []
    for axis, size in enumerate(shape):
        part = parts[axis] if axis < len(parts) else slice(None)
        if isinstance(part, int):
            index = part + size if part < 0 else part
            if not 0 <= index < size:
                raise UsageError(
                    f"index {part} is out of range for axis {axis} of size {size} in {where}: "
                    f"use 0..{size - 1}"
                )
            picks.append(AxisPick(index, 1, 1, True))
        else:
            start, stop, step = part.indices(size)
            picks.append(AxisPick(start, step, len(range(start, stop, step)), False))
    return tuple(picks)


def result_shape(picks: tuple[AxisPick, ...]) -> tuple[int, ...]:
    return tuple(pick.count for pick in picks if not pick.dropped)


@dataclass(frozen=True)
class ChunkPiece:
    """One chunk's part of the selection: where it is in the dataset, which elements of the
    decoded chunk to take, and where they go in the file's result."""

    coord: tuple[int, ...]  # the chunk's first element, per axis (HDF5's chunk offset)
    source: tuple[slice, ...]  # within the decoded chunk, one per dataset axis
    target: tuple[slice, ...]  # within the file's result, one per kept axis


def _axis_runs(pick: AxisPick, chunk: int) -> Iterator[tuple[int, slice, slice, int]]:
    """Per chunk along one axis: (chunk start, slice in the chunk, slice in the result, count)."""
    if pick.count == 0:
        return
    indices = pick.start + pick.step * np.arange(pick.count, dtype=np.int64)
    chunk_ids = indices // chunk
    edges = np.flatnonzero(np.diff(chunk_ids)) + 1
    for first, stop in zip(np.r_[0, edges], np.r_[edges, pick.count], strict=True):
        begin = int(chunk_ids[first]) * chunk
        inner = slice(int(indices[first]) - begin, int(indices[stop - 1]) - begin + 1, pick.step)
        yield begin, inner, slice(int(first), int(stop)), int(stop - first)


def chunk_pieces(picks: tuple[AxisPick, ...], chunks: tuple[int, ...]) -> Iterator[ChunkPiece]:
    """Every chunk the selection touches, in row-major chunk order."""
    per_axis = [list(_axis_runs(pick, size)) for pick, size in zip(picks, chunks, strict=True)]
    for combination in itertools.product(*per_axis):
        yield ChunkPiece(
            coord=tuple(run[0] for run in combination),
            source=tuple(run[1] for run in combination),
            target=tuple(run[2] for run, pick in zip(combination, picks, strict=True) if not pick.dropped),
        )
