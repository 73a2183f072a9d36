"""Writing so that a failure leaves nothing half-written: the one atomic writer of files and folders.

A file is written under a hidden temporary name beside its target and renamed over it
(``os.replace``, atomic within one file system), so a reader sees the old file or the new one,
never a part. A folder (a split, a project) is built in a hidden temporary folder beside its
target and moved into place only when it is complete; a previous folder of the same kind is
replaced, anything else is refused by the caller's check before and again just before the move.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

FILE_MODE = 0o644  # what a plain write would give (mkstemp makes 0600)


def write_with(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(temporary)`` to write the file, then rename it to ``path``. The temporary file
    is removed on any failure, and the exception propagates."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        write(Path(temporary))
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically."""
    if isinstance(data, str):
        write_with(path, lambda temporary: temporary.write_text(data, encoding="utf-8"))
    else:
        write_with(path, lambda temporary: temporary.write_bytes(data))


@contextmanager
def new_folder(out_dir: Path, check: Callable[[Path], None] = lambda _: None) -> Iterator[Path]:
    """Build a folder that replaces ``out_dir`` when complete: ``check(out_dir)`` runs before (it
    raises for a path that must not be replaced), the caller fills the yielded temporary folder,
    then ``check`` runs again, a previous ``out_dir`` is removed and the new one renamed into
    place. On any failure the temporary folder is removed and ``out_dir`` is left as it was."""
    out_dir = Path(out_dir)
    check(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        yield tmp
        check(out_dir)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
