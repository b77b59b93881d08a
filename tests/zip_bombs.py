"""Zip bombs built in a test, small on disk and quick: a megabyte of one byte deflated once and its
compressed form repeated (a full flush makes each copy stand alone), so nothing of hundreds of
megabytes is ever compressed or held; and a minimal zip writer that declares whatever sizes it is told."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

BLOCK = 2**20
CONTENT_TYPES = (b'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
                 b'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
                 b'relationships+xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.'
                 b'openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
RELS = (b'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        b'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        b'relationships/officeDocument" Target="word/document.xml"/></Relationships>')


def repeated_deflate(byte: bytes, blocks: int) -> tuple[bytes, int]:
    """``(raw deflate stream, crc32)`` of ``byte`` repeated ``blocks`` MiB."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    unit = packer.compress(byte * BLOCK) + packer.flush(zlib.Z_FULL_FLUSH)  # refers to nothing before it
    crc = 0
    for _ in range(blocks):
        crc = zlib.crc32(byte * BLOCK, crc)
    return unit * blocks + packer.flush(zlib.Z_FINISH), crc


def write_zip(path: Path, members: list[tuple[str, bytes, int, int]]) -> Path:
    """A zip at ``path`` of deflated members ``(name, raw deflate stream, crc32, declared inflated size)``."""
    out, directory = bytearray(), bytearray()
    for name, data, crc, size in members:
        encoded = name.encode()
        directory += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, crc, len(data), size,
                                 len(encoded), 0, 0, 0, 0, 0, len(out)) + encoded
        out += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(data), size, len(encoded), 0)
        out += encoded + data
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), len(out), 0)
    path.write_bytes(bytes(out + directory + end))
    return path


def _deflated(data: bytes) -> tuple[bytes, int, int]:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush(), zlib.crc32(data), len(data)


def docx_bomb(path: Path, megabytes: int = 300, declared: int | None = None) -> Path:
    """A minimal ``.docx`` whose ``word/document.xml`` inflates to ``megabytes`` MiB of ``a``, its
    directory declaring that size, or ``declared`` bytes (a lie; the CRC then is that prefix's)."""
    stream, crc = repeated_deflate(b"a", megabytes)
    size = megabytes * BLOCK
    if declared is not None:
        size, crc = declared, zlib.crc32(b"a" * declared)
    return write_zip(path, [("[Content_Types].xml", *_deflated(CONTENT_TYPES)), ("_rels/.rels", *_deflated(RELS)),
                            ("word/document.xml", stream, crc, size)])
