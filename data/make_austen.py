"""Rebuild data/austen.txt.xz from Debian's r-cran-janeaustenr (needs `pip install rdata`).

apt-get download r-cran-janeaustenr && dpkg -x r-cran-janeaustenr_*.deb deb
python data/make_austen.py deb/usr/lib/R/site-library/janeaustenr/data data/austen.txt.xz
"""

from __future__ import annotations

import gzip
import lzma
import sys
import zlib
from pathlib import Path

import rdata

NOVELS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey",
          "persuasion"]  # fmt: skip


def read_lazyload(folder: Path) -> dict:
    """The objects of an R lazy-load database (Rdata.rdx index + Rdata.rdb zlib blobs)."""
    index = rdata.conversion.convert(
        rdata.parser.parse_data(gzip.decompress((folder / "Rdata.rdx").read_bytes()))
    )
    blobs = (folder / "Rdata.rdb").read_bytes()
    objects = {}
    for name, (offset, length) in index["variables"].items():
        blob = blobs[int(offset) : int(offset) + int(length)]
        data = zlib.decompress(blob[4:])  # 4-byte length header, then a zlib stream
        objects[str(name)] = rdata.conversion.convert(rdata.parser.parse_data(data))
    return objects


def main(folder: str, target: str) -> None:
    books = read_lazyload(Path(folder))
    text = "".join("\n".join(map(str, books[name])).strip() + "\n\n\n" for name in NOVELS)
    with lzma.open(target, "wt", encoding="utf-8", preset=9) as handle:
        handle.write(text)


if __name__ == "__main__":
    main(*sys.argv[1:3])
