"""Files written atomically, their permissions and locks, and their hashes.

A file is written to a hidden temporary file `.<name>.<random>.part` beside the target and
renamed into place when complete, with the permissions the umask gives. A job holds a lock on
its temporary files while it writes them, so `remove_stale_temporaries` removes those of dead
jobs only (another run sharing the folders keeps its own).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no locks (stale temporary files are then left alone)
    fcntl = None


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_path(path: str | Path) -> str:
    """sha256 of a file, or of a directory's files (names and contents, sorted)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{item.relative_to(path).as_posix()}\0{sha256_file(item)}\n".encode())
    return digest.hexdigest()


def umask() -> int:
    """The process's umask (read without changing it where /proc allows)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a new file gets from open() under the current umask."""
    return 0o666 & ~umask()


def dir_mode() -> int:
    """The mode a new folder gets from mkdir() under the current umask."""
    return 0o777 & ~umask()


def try_lock(fd: int, exclusive: bool = True) -> bool | None:
    """Lock an open file or folder without waiting: True if locked, False if another process
    holds it, None if this file system (or platform) has no locks."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


TEMP_SUFFIX = ".part"


_NEW_SUFFIX = ".new"  # a temporary file in the instant before it is locked and named .part


def locked_temporary(parent: Path, prefix: str, directory: bool) -> tuple[Path, int]:
    """A new temporary file (or folder) in `parent`, locked by this process and named
    `<prefix><random>.part`; returns its path and the open descriptor holding the lock."""
    if directory:
        name = tempfile.mkdtemp(prefix=prefix, suffix=_NEW_SUFFIX, dir=parent)
        fd = os.open(name, os.O_RDONLY)
    else:
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=_NEW_SUFFIX, dir=parent)
    final = Path(name[: -len(_NEW_SUFFIX)] + TEMP_SUFFIX)
    try:
        try_lock(fd)
        os.rename(name, final)  # only a locked temporary file carries the .part name
        os.chmod(final, dir_mode() if directory else file_mode())  # mkstemp/mkdtemp: 0600/0700
    except BaseException:
        os.close(fd)
        for path in (Path(name), final):
            shutil.rmtree(path, ignore_errors=True) if directory else path.unlink(missing_ok=True)
        raise
    return final, fd


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path, fd = locked_temporary(path.parent, f".{path.name}.", directory=False)
    try:
        yield tmp_path
        os.chmod(tmp_path, file_mode())  # in case the writer replaced the file
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)
        os.close(fd)


@contextlib.contextmanager
def temporary_dir(parent: str | Path, prefix: str) -> Iterator[Path]:
    """A locked temporary folder `<parent>/<prefix><random>.part`, removed on exit unless the
    block renamed it into place."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = locked_temporary(parent, prefix, directory=True)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(fd)


STALE_PATTERNS = (f".*{TEMP_SUFFIX}", ".extract-*", ".download-*")


def _remove_if_dead(path: Path, patterns: tuple[str, ...]) -> bool:
    name = path.name
    if name.endswith(_NEW_SUFFIX) and name.startswith("."):
        with contextlib.suppress(OSError):  # killed in the instant between creation and lock
            if time.time() - path.lstat().st_mtime > 3600:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
                return True
        return False
    if not any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        if not try_lock(fd):  # a live job's (or no locks here: leave it)
            return False
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def remove_stale_temporaries(
    folders: Iterable[tuple[str | Path, int]], patterns: tuple[str, ...] = STALE_PATTERNS
) -> list[Path]:
    """Remove the temporary files and folders that dead jobs left in `folders` (each searched
    to the given depth); return what was removed. Those of live jobs are locked and kept."""
    removed = []
    for folder, depth in folders:
        pending = [(Path(folder), 0)]
        while pending:
            current, level = pending.pop()
            try:
                entries = list(os.scandir(current))
            except OSError:
                continue
            for entry in entries:
                path = Path(entry.path)
                if _remove_if_dead(path, patterns):
                    removed.append(path)
                elif level < depth and entry.is_dir(follow_symlinks=False):
                    pending.append((path, level + 1))
    return removed
