"""Failures a user can fix, and checked readers of the files they supply.

Every `UserError` message names the file or config key at fault and says what to do, in one or
two lines; the command line and the workflow's start-up print it alone (no traceback unless
asked for: `sinkscope --debug ...`, `SINKSCOPE_DEBUG=1 snakemake ...`).
"""

from __future__ import annotations

import codecs
import json
import lzma
from pathlib import Path
from typing import Any


class UserError(Exception):
    """A failure caused by an input, a config value or a cache, not by the code."""


class BadInput(UserError, ValueError):
    """A file that cannot be read as what it should be (missing, truncated, not UTF-8, empty)."""


def _named(key: str | None) -> str:
    return f" (config key '{key}')" if key else ""


def read_text(path: str | Path, key: str | None = None, chunk: int = 1 << 22) -> str:
    """The text of a UTF-8 file, plain or xz-compressed (`.xz`); `key` is the config key that
    names it. Raises BadInput naming the file for a missing, unreadable, truncated, non-UTF-8
    or empty file."""
    path = Path(path)
    where = f"{path}{_named(key)}"
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "does not exist"
        raise BadInput(f"{where} {what}: point it at a UTF-8 text file (plain or .xz)")
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts, offset = [], 0
    try:
        opener = lzma.open if path.suffix == ".xz" else open
        with opener(path, "rb") as handle:
            while block := handle.read(chunk):
                parts.append(decoder.decode(block))
                offset += len(block)
            parts.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError as error:
        at = offset + error.start
        raise BadInput(
            f"{where} is not UTF-8 text (byte {error.object[error.start]:#04x} at offset {at}): "
            "convert it to UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or use another file"
        ) from None
    except (lzma.LZMAError, EOFError) as error:
        raise BadInput(
            f"{where} is a truncated or corrupted xz file ({error}): "
            "copy or compress it again (`xz -t` tests it)"
        ) from None
    except OSError as error:
        raise BadInput(f"{where} cannot be read ({error.strerror or error})") from None
    text = "".join(parts)
    if not text.strip():
        raise BadInput(f"{where} holds no text: point it at a non-empty UTF-8 text file")
    return text


def read_json(path: str | Path, what: str = "JSON") -> Any:
    """The value of a JSON file; BadInput naming the file if it is missing or not JSON."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path} does not exist: rerun snakemake to make it") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise BadInput(
            f"{path} is not a readable {what} file ({first_line(error)}): it is truncated or was "
            "changed; delete it and rerun snakemake to rebuild it"
        ) from None


def first_line(error: BaseException) -> str:
    """The first line of an exception's message, for wrapping a library's error in ours."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
