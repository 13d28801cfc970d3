"""A tar archive's headers walked, bounded, before ``tarfile`` reads them.

``tarfile`` reads an extended header (PAX, GNU long name) whole into memory, whatever size the header
claims (a crafted bundle's 768 MiB PAX header took 2.4 GB before any check of ours). This walks the
gzip stream's 512-byte headers and skips each member's data a megabyte at a time, holding neither.
"""
from __future__ import annotations

import gzip
import tarfile
import zlib
from pathlib import Path

BLOCK = 512  # a tar block
EXTENDED_HEADERS = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)
MAX_HEADER_BYTES = 64 << 10  # a path and a few numbers; a bundle's are a few hundred bytes


class TarRefused(Exception):
    """What is wrong with the archive, said after its path."""


def check_headers(archive: Path, max_total: int) -> None:
    """TarRefused when a header claims more than ``MAX_HEADER_BYTES``, the members more than ``max_total``
    bytes, or the stream is no readable .tar.gz."""
    try:
        with gzip.open(archive, "rb") as raw:
            total = 0
            while len(block := raw.read(BLOCK)) == BLOCK and block != bytes(BLOCK):
                size = tarfile.nti(block[124:136])
                if block[156:157] in EXTENDED_HEADERS and size > MAX_HEADER_BYTES:
                    raise TarRefused(f"has a tar header of {size} bytes (a bundle's are at most "
                                     f"{MAX_HEADER_BYTES >> 10} KiB)")
                total += size
                if total > max_total:
                    raise TarRefused(f"holds more than {max_total >> 30} GiB")
                _skip(raw, (size + BLOCK - 1) // BLOCK * BLOCK)
    except (OSError, EOFError, zlib.error, tarfile.TarError) as err:
        raise TarRefused(f"is not a readable .tar.gz ({err})") from None


def _skip(raw, left: int) -> None:
    """Read past ``left`` bytes of the stream, a megabyte at a time."""
    while left > 0 and (got := len(raw.read(min(left, 1 << 20)))):
        left -= got
