"""Files: the landing directory of a files source (where files are dropped for Spark to pick
up), and the small helpers every file the engine writes goes through."""
from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from urllib.parse import quote, unquote


def landing_folder(root: Path, stream: str) -> Path:
    """Where files for `stream` go: a subfolder named by the percent-encoded stream IRI (files
    directly in the root belong to the source's own stream)."""
    return root / quote(stream, safe="")


def stream_of_landing_file(root: Path, path: Path, default: str) -> str:
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        return default
    return unquote(relative.parts[0]) if len(relative.parts) > 1 else default


def drop_file(root: Path, stream: str, data: bytes, suffix: str) -> Path:
    """Write `data` for `stream` durably and atomically: a hidden temporary file (Spark ignores
    names starting with '.'), fsync, then rename into place."""
    folder = landing_folder(root, stream)
    folder.mkdir(parents=True, exist_ok=True)
    name = uuid.uuid4().hex + suffix
    tmp = folder / ("." + name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    final = folder / name
    os.replace(tmp, final)
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return final


def replace_text(path: Path, text: str) -> None:
    """Replace a small bookkeeping file whole: readers see the old content or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def file_safe(text: str) -> str:
    """`text` as a file name: other characters than letters, digits, '-', '_' and '.' become
    '_'; a long name is cut and keeps a digest of the whole, so names stay distinct."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
    if len(safe) <= 100:
        return safe
    return safe[:80] + "-" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
