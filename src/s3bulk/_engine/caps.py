"""--max-delete: a count every delete of a job takes from, whatever deletes (rm, mv, sync
--delete, vectors delete)."""

from __future__ import annotations

from collections.abc import Callable


class DeleteCap:
    """--max-delete: this run deletes at most `limit` objects. The delete that would pass it is
    not sent; the job stops there, once, with one line (`stop`), and what was not deleted is not
    journaled, so a resume with a higher cap does it. One worker holds the count (the runner
    runs such a job as one worker), so taking from it needs no lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    @property
    def message(self) -> str:
        return (
            f"--max-delete {self.limit} reached, so nothing more is deleted "
            "(a resume deletes up to --max-delete more)"
        )

    def take(self, wanted: int, stop: Callable[[str], None]) -> int:
        """How many of `wanted` deletes may go ahead; fewer stops the job."""
        granted = min(wanted, self.left)
        self.left -= granted
        if granted < wanted:
            stop(self.message)
        return granted

    def give_back(self, count: int) -> None:
        """Deletes taken but not made (mv's copy failed)."""
        self.left += count
