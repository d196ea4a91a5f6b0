"""Writing output files so that a reader never sees half of one.

One helper for every output turnkit writes whole (the replay's ``--json``
and ``--html``, the CLI's other result files): the text is encoded first,
written to a temporary file beside the target, flushed to disk and renamed
over it, with the mode a plain ``open(path, "w")`` would have given.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8; text that is not valid Unicode is replaced,
    never refused) to a temporary file beside ``path``, then rename it over
    ``path``: a reader sees the old file or the whole new one, never half.
    Raises ``OSError`` (the temporary file removed) when it cannot."""
    data = text.encode("utf-8", errors="replace")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, new_file_mode(path))  # mkstemp makes it 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def new_file_mode(path: Path) -> int:
    """The mode ``open(path, "w")`` would give: the existing file's, else
    0666 less the umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
