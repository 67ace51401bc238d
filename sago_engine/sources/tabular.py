"""Prompt records from a JSONL, CSV/TSV or Parquet file, each with its line or row number."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from sago_engine.datasets import decoded_lines, jsonl_records
from sago_engine.untrusted_files import csv_error, swallows_rows

#: File suffix → format name.
SUFFIXES: dict[str, str] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet"}


def csv_records(path: Path) -> tuple[list[tuple[int, dict]], list[tuple[str, str]], list[str]]:
    """The rows of a CSV (``,``) or TSV (``.tsv``: tab) file with a header line.

    Returns:
        ((line number where the row starts, {column: text}) pairs, problems, the header's columns).
        Problems: lines that are not UTF-8 (then no row is read: a CSV row may span lines), a row
        with more cells than the header, a missing or repeated header name, and the quoting rule of
        ``sago_engine.untrusted_files`` (strict RFC 4180 quotes): a quote never closed or malformed,
        or a multi-line cell holding a whole row (an unbalanced quote swallowed the rows after it;
        then no row is read, as a quote error leaves the rest of the file unreliable).
    """
    lines, problems = decoded_lines(path)
    if problems:
        return [], problems, []
    text = "\n".join(line for _, line in lines)
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter, strict=True)
    rows: list[tuple[int, dict]] = []
    header: list[str] = []
    start = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            return [], problems + [(str(start), csv_error(e))], header
        if not header:
            header = [c.strip() for c in cells]
            dup = sorted({c for c in header if header.count(c) > 1})
            problems += [("1", f"header: column {c!r} appears more than once") for c in dup]
            problems += [("1", "header: a column without a name") for c in header if not c][:1]
            start = reader.line_num + 1
            continue
        if cells and any(c.strip() for c in cells):
            if len(cells) > len(header):
                problems.append((str(start), f"{len(cells)} cells but the header has {len(header)} columns"))
            else:
                rows.append((start, {h: c for h, c in zip(header, cells)}))
        start = reader.line_num + 1
    firsts = {str(next(iter(r.values()), "")) for _, r in rows}
    for line, row in rows:
        for col, cell in row.items():
            if "\n" in cell and swallows_rows(cell, len(header), firsts, delimiter):
                return [], problems + [(str(line), f"cell {col!r} holds a whole row: an unbalanced quote (\") "
                                                   "swallows the rows after it")], header
    return rows, problems, header


def parquet_records(path: Path) -> tuple[list[tuple[int, dict]], list[tuple[str, str]], list[str]]:
    """The rows of a Parquet file (pyarrow) by row index, from 0 as in pandas; (rows, problems, columns).
    A file pyarrow cannot read is one problem at row 0."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError for a file that is not Parquet
        return [], [("0", f"not a readable Parquet file ({type(e).__name__}: {e})")], []
    return list(enumerate(table.to_pylist())), [], list(table.column_names)


def file_records(path: Path, fmt: str) -> tuple[list[tuple[int, Any]], list[tuple[str, str]], list[str] | None]:
    """(records, problems, columns or None when the format has no fixed columns) of a file in ``fmt``
    (``jsonl``, ``csv`` or ``parquet``)."""
    if fmt == "jsonl":
        recs, problems = jsonl_records(path)
        return recs, problems, None
    if fmt == "csv":
        return csv_records(path)
    if fmt == "parquet":
        return parquet_records(path)
    raise ValueError(f"unknown file format {fmt!r}; valid: {sorted(set(SUFFIXES.values()))}")
