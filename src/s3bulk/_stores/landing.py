"""Where a finished download takes its place: atomically, and never over a file that something
else created while the download ran.

A download is written to a temporary file beside its target and renamed once complete, so the
target is either absent, the old file, or the whole new object. If the target did not exist when
the download began, it lands with link() + unlink(), which fails instead of replacing: a file
that appeared meanwhile (another program, a second job) is someone else's and is left alone, and
the item fails with a line that says so. A target that existed when the download began is
replaced, as `cp` promises.

Every step names files in the directory opened for the download (`folders.py`), never by a path
looked up again. A process killed outright (kill -9 of the whole job, a crash, a power cut)
cannot remove its temporary files; the first download into a directory sweeps those whose
process is gone, and a walk never takes one for a file of the tree (`is_temporary`): a later
upload or sync of the directory neither uploads nor deletes anything for it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat

from s3bulk._errors import ItemError, JobAborted

# link() is refused by filesystems without hard links (FAT, some FUSE and SMB mounts)
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV}
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
PART_SUFFIX = ".s3bulk-part"  # a download in progress: renamed to its target once complete
# `.NAME.PID-N.s3bulk-part`: what `temporary_name` makes, and nothing a user would name a file
_TEMPORARY = re.compile(r"\..*\.(\d+)-\d+" + re.escape(PART_SUFFIX), re.DOTALL)


def temporary_name(target: str, number: int) -> str:
    """The name of a download's file while it is written, beside its target (same filesystem, so
    the rename is atomic), hidden, and naming the process that writes it:
    `.NAME.PID-N.s3bulk-part`."""
    name = os.path.basename(target)[:200]
    return f".{name}.{os.getpid()}-{number}{PART_SUFFIX}"


def is_temporary(name: str) -> bool:
    """Whether `name` is a download's file while it is written (s3bulk's own, never the user's)."""
    return name.endswith(PART_SUFFIX) and _TEMPORARY.fullmatch(name) is not None


def sweep_stale_parts(directory: str | int) -> int:
    """Remove the temporary files in `directory` (a path, or an open directory's descriptor)
    whose writing process no longer exists."""
    removed = 0
    try:
        names = [entry.name for entry in os.scandir(directory) if entry.name.endswith(PART_SUFFIX)]
    except OSError:
        return 0
    folder = directory if isinstance(directory, int) else None
    base = "" if isinstance(directory, int) else directory
    for name in names:
        removed += remove_if_stale(os.path.join(base, name), folder)
    return removed


def remove_if_stale(path: str, folder: int | None = None) -> bool:
    """Remove `path` (in the open directory `folder`, if given) if it is a temporary download
    file whose writing process is gone."""
    found = _TEMPORARY.fullmatch(os.path.basename(path))
    if found is None or _alive(int(found.group(1))):
        return False
    try:
        os.unlink(path, dir_fd=folder)
    except OSError:
        return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


CLASH = "a file and a directory cannot share a name locally (keys '{name}' and '{name}/...')"


def directory_clash(target: str) -> ItemError:
    """The target is a directory: other keys (`x/...`) made it, so the object `x` cannot land."""
    return ItemError(
        f"{target} is a directory holding other keys below it: "
        + CLASH.format(name=os.path.basename(target)),
        retryable=False,
    )


def file_in_the_way(parent: str) -> ItemError | None:
    """The ancestor of `parent` that is a file (the object `x` landed, so `x/y` cannot), if any."""
    path = parent
    while path and path not in (".", os.sep):
        if os.path.isfile(path):
            return ItemError(
                f"{path} is a file, so nothing can go below it: " + CLASH.format(name=os.path.basename(path)),
                retryable=False,
            )
        path = os.path.dirname(path)
    return None


def kind(name: str, folder: int | None = None) -> str | None:
    """ "directory" (or a link to one), "other", or None when nothing is at `name` (in the open
    directory `folder`, if given): one lstat when nothing is there, as for most downloads."""
    try:
        mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            mode = os.stat(name, dir_fd=folder).st_mode
    return "directory" if stat.S_ISDIR(mode) else "other"


def land(temporary: str, target: str, *, existed: bool, folder: int | None = None, shown: str = "") -> None:
    """Move a complete temporary file to `target` (see the module's docstring); both names are
    in the open directory `folder`, if given, and `shown` is the target's path as users know it."""
    shown = shown or target
    at = {"src_dir_fd": folder, "dst_dir_fd": folder}
    if existed:
        try:
            os.replace(temporary, target, **at)
        except IsADirectoryError:  # became a directory while the object was fetched
            raise directory_clash(shown) from None
        return
    try:
        os.link(temporary, target, **at, follow_symlinks=False)
    except FileExistsError:
        if kind(target, folder) == "directory":
            raise directory_clash(shown) from None
        raise ItemError(
            f"{shown} appeared while it was being downloaded and was left as it is; "
            "delete it and rerun (--retry-failed) to replace it",
            retryable=False,
        ) from None
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        if kind(target, folder) is not None:  # the best such filesystems allow: a narrow race remains
            raise ItemError(
                f"{shown} appeared while it was being downloaded; left as it is", retryable=False
            ) from None
        os.replace(temporary, target, **at)
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=folder)


def refused_write(exc: OSError, directory: str) -> ItemError | None:
    """A destination that refuses to be written, said once: a read-only filesystem refuses every
    file (the job stops); a directory this user may not write refuses those in it (the job
    stops if nothing landed before it, `Mover._refused_destination`)."""
    if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
        return None
    error = ItemError(f"cannot write in {directory}: {exc.strerror}", retryable=False)
    error.job_wide = exc.errno == errno.EROFS
    error.denied = True
    return error


def disk_full(exc: OSError, directory: str) -> JobAborted | None:
    """A full disk stops the job rather than failing every remaining item one by one: nothing new
    starts, what is done stays journaled, and a resume after freeing space finishes the rest."""
    if exc.errno not in _DISK_FULL:
        return None
    return JobAborted(f"no space left on the device holding {directory}: free space, then resume the job")
