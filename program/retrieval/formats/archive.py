"""Office files are zip archives: their limits, checked from the zip's directory before a member is inflated.

A 308 KB ``.docx`` can hold a ``word/document.xml`` that inflates to 300 MB (a zip bomb): the file
passes the size cap of one file (``CRAG_MAX_FILE_BYTES``) and a converter then inflates and parses
it for minutes. :func:`check_archive` reads only the zip's end record and central directory, where
each member's compressed and inflated sizes are declared, and refuses, in this order:

* more than ``CRAG_MAX_ARCHIVE_MEMBERS`` members (10,000), counted from the end record before the
  directory is parsed, whose size is bounded too (``DIRECTORY_BYTES_PER_MEMBER`` a member):
  zipfile builds an object per entry, and a million entries take it 37 s and 350 MB;
* a member compressed with anything but deflate or nothing (stored): the Open Packaging
  Conventions (ECMA-376 Part 2) allow no other, and zipfile inflates a bzip2 or LZMA member with
  no bound on its output (178 bytes of bzip2 are 200 MB of zeros);
* a member that inflates to over ``CRAG_MAX_INFLATED_BYTES`` (100 MiB);
* a member of ``RATIO_FLOOR_BYTES`` (1 MiB) or more inflated that inflates more than
  ``CRAG_MAX_INFLATE_RATIO`` (100) times its compressed size; a smaller one is bounded by the
  count and total caps, and its ratio says little (an OWASP ``numbering.xml`` of 177 KB deflates 20-fold);
* members that inflate to over ``CRAG_MAX_INFLATED_TOTAL_BYTES`` (500 MiB) in all.

The real Office files of the OWASP releases (``eval_sets/owasp/kb``: 6 ``.docx``, 1 ``.pptx``,
3 ``.xlsx``) hold at most 136 members, 1.2 MB in one member and 2.2 MB in all, and deflate at most
20-fold (9.8-fold for a member of 1 MiB or more).

A directory that lies: a converter reads a member through zipfile, which stops at the size the
directory declares (and then checks the CRC: data that runs on fails with "Bad CRC-32", unless the
CRC is the prefix's, and then the converter reads a cut-off part). Before cutting, though, one
``read()`` inflates up to ``ZipExtFile.MAX_N`` (1 GiB): :func:`bound_zip_reads` lowers that to
``READ_CHUNK`` in the process that converts (``formats.worker``), so reading a member never
inflates more than its declared size and one chunk.

Errors: :class:`DocumentError`, one line naming the file, the member and the limit (and the
variable that raises it); :class:`CorpusError` for a limit variable that is not a whole number.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from program.env import env_number
from program.retrieval.errors import CorpusError
from program.retrieval.formats.base import DocumentError, size_text

ARCHIVE_EXTS = {".docx", ".pptx", ".xlsx"}
DEFAULT_MAX_INFLATED_BYTES = 100 * 2**20
DEFAULT_MAX_INFLATED_TOTAL_BYTES = 500 * 2**20
DEFAULT_MAX_INFLATE_RATIO = 100
DEFAULT_MAX_ARCHIVE_MEMBERS = 10_000
RATIO_FLOOR_BYTES = 2**20
# an entry of the directory is 46 bytes and its name (an Office part's is under 100 characters)
DIRECTORY_BYTES_PER_MEMBER = 1024
READ_CHUNK = 8 * 2**20
_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
_METHOD_NAMES = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "LZMA", 9: "Deflate64"}


@dataclass(frozen=True)
class ArchiveLimits:
    """What one Office file may hold, from the environment (:meth:`from_env`).

    Attributes:
        member_bytes: one member's inflated size, bytes (``CRAG_MAX_INFLATED_BYTES``).
        total_bytes: all members' inflated size, bytes (``CRAG_MAX_INFLATED_TOTAL_BYTES``).
        ratio: inflated over compressed size of a member of ``RATIO_FLOOR_BYTES`` or more (``CRAG_MAX_INFLATE_RATIO``).
        members: members in the archive (``CRAG_MAX_ARCHIVE_MEMBERS``).
    """

    member_bytes: int = DEFAULT_MAX_INFLATED_BYTES
    total_bytes: int = DEFAULT_MAX_INFLATED_TOTAL_BYTES
    ratio: int = DEFAULT_MAX_INFLATE_RATIO
    members: int = DEFAULT_MAX_ARCHIVE_MEMBERS

    @classmethod
    def from_env(cls) -> "ArchiveLimits":
        """The limits, each variable that is set overriding its default.

        Raises:
            CorpusError: a variable is set but not a whole number of 1 or more.
        """
        return cls(_env_whole("CRAG_MAX_INFLATED_BYTES", DEFAULT_MAX_INFLATED_BYTES),
                   _env_whole("CRAG_MAX_INFLATED_TOTAL_BYTES", DEFAULT_MAX_INFLATED_TOTAL_BYTES),
                   _env_whole("CRAG_MAX_INFLATE_RATIO", DEFAULT_MAX_INFLATE_RATIO),
                   _env_whole("CRAG_MAX_ARCHIVE_MEMBERS", DEFAULT_MAX_ARCHIVE_MEMBERS))


def _env_whole(name: str, default: int) -> int:
    try:
        return env_number(name, default, 1)
    except ValueError as exc:
        raise CorpusError(str(exc)) from None


def check_archive(path: Path, limits: ArchiveLimits | None = None) -> None:
    """Refuse the Office file at ``path`` when its zip directory declares more than ``limits``
    allow (see the module docstring); nothing is inflated.

    Raises:
        DocumentError: a limit is passed, or ``path`` is not a zip archive.
        CorpusError: ``limits`` is None and a limit variable is not a whole number.
    """
    limits = limits or ArchiveLimits.from_env()
    count, directory = _read(path, _end_record)
    if count > limits.members:
        raise _too_many(path, count, limits)
    if directory > limits.members * DIRECTORY_BYTES_PER_MEMBER:  # zipfile parses it whole: an object per entry
        raise DocumentError(f"{path}: its zip directory takes {size_text(directory)}, more than "
                            f"{limits.members:,} members need, the cap for an Office file "
                            "(raise CRAG_MAX_ARCHIVE_MEMBERS if it is meant)")
    members = _read(path, lambda fh: zipfile.ZipFile(fh).infolist())
    if len(members) > limits.members:  # the end record's count was not the directory's
        raise _too_many(path, len(members), limits)
    total = 0
    for m in members:
        if m.compress_type not in _METHODS:
            method = _METHOD_NAMES.get(m.compress_type, f"method {m.compress_type}")
            raise DocumentError(f"{path}: {m.filename} is compressed with {method}; an Office file is "
                                "deflated or stored, nothing else (its reader would inflate it without a bound)")
        if m.file_size > limits.member_bytes:
            raise DocumentError(f"{path}: {m.filename} inflates to {size_text(m.file_size)}, over the "
                                f"{size_text(limits.member_bytes)} cap for one member of an Office file "
                                "(raise CRAG_MAX_INFLATED_BYTES if it is meant)")
        if m.file_size >= RATIO_FLOOR_BYTES and m.file_size > limits.ratio * m.compress_size:
            ratio = f"{m.file_size / m.compress_size:,.0f} times" if m.compress_size else "from nothing"
            raise DocumentError(f"{path}: {m.filename} inflates {ratio} ({size_text(m.compress_size)} to "
                                f"{size_text(m.file_size)}), over the {limits.ratio:,}-fold cap for a member of "
                                "an Office file (raise CRAG_MAX_INFLATE_RATIO if it is meant)")
        total += m.file_size
    if total > limits.total_bytes:
        raise DocumentError(f"{path} inflates to {size_text(total)} in all, over the {size_text(limits.total_bytes)} "
                            "cap for an Office file (raise CRAG_MAX_INFLATED_TOTAL_BYTES if it is meant)")


def _end_record(fh) -> tuple[int, int]:
    """``(members, directory bytes)`` as the zip's end record declares them."""
    # zipfile's own reading of the end record (zip64 included): the count and size it then parses
    end = zipfile._EndRecData(fh)
    if end is None:
        raise zipfile.BadZipFile("File is not a zip file")
    return end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]


def _read(path: Path, reader):
    """``reader(open file)``; an unreadable file or one that is not a zip is a :class:`DocumentError`."""
    try:
        with open(path, "rb") as fh:
            return reader(fh)
    except OSError as exc:
        raise DocumentError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:  # not a zip, or a cut-off one
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        kind = path.suffix.lower()
        raise DocumentError(f"{path} is not a readable {kind} file (not a zip archive: {reason})") from None


def _too_many(path: Path, count: int, limits: ArchiveLimits) -> DocumentError:
    return DocumentError(f"{path} holds {count:,} members, over the {limits.members:,} cap for an Office file "
                         "(raise CRAG_MAX_ARCHIVE_MEMBERS if it is meant)")


def bound_zip_reads() -> None:
    """Make every zipfile member read in this process inflate at most ``READ_CHUNK`` bytes a step
    (from 1 GiB), so that a member whose data runs past its declared size is cut at that size plus
    one chunk. For the conversion process: it changes zipfile for the whole process."""
    zipfile.ZipExtFile.MAX_N = min(zipfile.ZipExtFile.MAX_N, READ_CHUNK)
