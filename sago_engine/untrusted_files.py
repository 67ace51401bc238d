"""Files of a folder someone else wrote: confined to the folder, read once, CSV records with their lines.

A cloned repository, a colleague's dataset folder or a downloaded results folder is untrusted:

- **No path leaves the folder.** ``confined`` resolves a path (every symlink on the way, ``..``)
  and refuses one whose real path is outside the folder's real path, naming the path as given —
  a link to ``~/.ssh/id_rsa`` or to another project's private results is never read.
- **One read.** ``read_once`` opens the confined real path without following a link in its last
  step, checks it is a regular file within a size bound and returns its bytes and their sha256:
  what is hashed is what is parsed, even when the file changes on disk meanwhile (a ``git pull``).
- **Lines named.** ``csv_records`` parses CSV text strictly and gives each record with the line it
  starts on, so every format error can say ``file:line``; a record with the wrong number of cells
  and a cell that holds a whole row of the file (an unbalanced quote swallowing the rows after it,
  pandas #22661) are errors, never a silently merged row.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

#: Largest file ``read_once`` reads (bytes) unless told otherwise.
MAX_FILE_BYTES = 1 << 30
#: Largest CSV cell (characters); Python's ``csv`` default.
MAX_CELL_CHARS = 131_072


class UntrustedFileError(ValueError):
    """A file of an untrusted folder that is refused: it leads out of the folder, is not a regular
    file, is too large, or is not well-formed. The message names the file (and line)."""


def confined(path: str | os.PathLike, root: str | os.PathLike, shown: str | None = None) -> Path:
    """The real path of ``path``, which must lie inside the real path of ``root``.

    Args:
        path: a path inside ``root`` as found (it may be or pass through symlinks).
        root: the untrusted folder.
        shown: how the message names ``path`` (default: ``path`` as given).
    Returns:
        ``Path``: the resolved path (every symlink and ``..`` followed).
    Raises:
        UntrustedFileError: "<shown>: a link (or ..) that leads outside <root> (to <target>)".
    """
    real_root = Path(root).resolve()
    real = Path(path).resolve()
    if real != real_root and real_root not in real.parents:
        raise UntrustedFileError(f"{shown or path}: a link (or ..) that leads outside {Path(root)} (to {real}); "
                                 "refused: only files inside the folder are read")
    return real


def read_once(path: str | os.PathLike, root: str | os.PathLike, shown: str | None = None,
              max_bytes: int = MAX_FILE_BYTES) -> tuple[bytes, str]:
    """The bytes of a file inside ``root`` and their sha256, from one read of one open file.

    Returns:
        (data, sha256 hex digest of ``data``).
    Raises:
        UntrustedFileError: outside ``root`` (``confined``), not a regular file, or over ``max_bytes``.
        OSError: the file cannot be opened or read.
    """
    name = shown or str(path)
    real = confined(path, root, name)
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedFileError(f"{name}: not a regular file")
        if st.st_size > max_bytes:
            raise UntrustedFileError(f"{name}: {st.st_size:,} bytes, over the {max_bytes:,}-byte limit")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UntrustedFileError(f"{name}: over the {max_bytes:,}-byte limit (it grew while read)")
    return data, hashlib.sha256(data).hexdigest()


def decode_utf8(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text (a leading byte-order mark dropped).

    Raises:
        UntrustedFileError: "<name>:<line>: not valid UTF-8 (…)" with the line of the first bad byte.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise UntrustedFileError(f"{name}:{line}: not valid UTF-8 ({e.reason}; the file must be UTF-8 text)") from None


def swallows_rows(cell: str, n_cols: int, first_cells: set[str], delimiter: str = ",") -> bool:
    """Whether a line inside a multi-line cell is a record of this file (an unbalanced quote that
    swallowed the rows after it): ``n_cols`` or more cells split on ``delimiter``, the first of which
    is a first cell the file's records have (a reply that merely lists things with commas does not
    start with one)."""
    for part in cell.split("\n")[1:]:
        if part.count(delimiter) + 1 < n_cols:
            continue
        try:
            cells = next(csv.reader([part], delimiter=delimiter), [])
        except csv.Error:
            continue
        if len(cells) >= n_cols and cells[0] in first_cells:
            return True
    return False


def csv_error(e: csv.Error) -> str:
    """The reason a strict ``csv.reader`` gives, in words: "end of data" inside a cell is a quote
    never closed."""
    return "a quote is never closed (the file ends inside a cell)" if "end of data" in str(e) else str(e)


def csv_records(text: str, name: str) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """The header and the records of CSV ``text`` (RFC 4180 quoting; CRLF or LF; blank lines skipped).

    Args:
        text: the file's text; name: how messages name the file.
    Returns:
        (header cells, iterator of (line the record starts on, 1-based; its cells)).
    Raises (while iterating, each "<name>:<line>: …"):
        UntrustedFileError: a quote never closed, a malformed quote, a cell over ``MAX_CELL_CHARS``,
        a record whose number of cells differs from the header's, a multi-line cell one of whose
        lines is a whole record (an unbalanced quote that swallowed the rows after it); an empty
        file or header (line 1).
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise UntrustedFileError(f"{name}:1: empty file (no header)") from None
    except csv.Error as e:
        raise UntrustedFileError(f"{name}:1: malformed header ({e})") from None
    if not header or not any(h.strip() for h in header):
        raise UntrustedFileError(f"{name}:1: empty header")

    def records() -> Iterator[tuple[int, list[str]]]:
        n, end, firsts = len(header), reader.line_num, set()
        while True:
            start = end + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise UntrustedFileError(f"{name}:{start}: {csv_error(e)}") from None
            end = reader.line_num
            if not row:  # a blank line
                continue
            if len(row) != n:
                raise UntrustedFileError(f"{name}:{start}: {len(row)} cells, the header has {n}")
            firsts.add(row[0])
            for col, cell in zip(header, row):
                if "\n" in cell and swallows_rows(cell, n, firsts):
                    raise UntrustedFileError(
                        f"{name}:{start}: cell {col!r} runs over lines {start}-{end} and holds a whole row: "
                        "an unbalanced quote (\") swallows the rows after it")
            yield start, row

    return header, records()
