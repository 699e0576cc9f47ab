"""Text shown to people. Keys and file names can hold anything, and a terminal obeys what it is
sent: a key holding `ESC]0;title BEL` or `ESC[2J` would retitle or clear the user's terminal, and
a right-to-left override would make one name read as another. Every line printed for humans goes
through `printable`; JSON output keeps the exact key (its encoder escapes control characters).
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, the bidirectional overrides and isolates, and lone surrogates (bytes
# of a local file name that are not UTF-8, as os.fsdecode keeps them)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # one undecodable byte of a file name
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every character a terminal would act on written as a visible escape."""
    return _UNSAFE.sub(_escape, text)


def printable_all(texts: list[str]) -> list[str]:
    """`printable` of each, with one search of them all when none needs escaping (a listing's
    page of 1,000 keys: one regular-expression pass instead of 1,000)."""
    if not _UNSAFE.search("".join(texts)):
        return texts
    return [printable(text) for text in texts]


# Why a file whose name is not UTF-8 is not uploaded: it cannot be a key, nor be journaled.
NOT_UTF8 = "its name is not valid UTF-8, and S3 keys must be: rename it (e.g. convmv -f latin1 -t utf8)"


def is_utf8(name: str) -> bool:
    """Whether a local name (as os.fsdecode gives it) is valid UTF-8, as every S3 key must be."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
