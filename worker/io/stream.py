"""A file's bytes, plain or gzip, read forward in bounded pieces: what every reader of `run` reads through.

Nothing here ever holds more than a few CHUNK_BYTES of a file, whatever the file: a gzip
member inflating to gigabytes comes out CHUNK_BYTES at a time (zlib's ``max_length``),
lines are cut at a limit (`iter_lines`), and the readers above it (JSONL, WARC, ARC)
bound what they keep of a record. A .gz file may hold many members (one a record, as
crawlers write WARC files): `Stream` knows where each member starts in the file, so a
WARC record can be read "within its member" and its offset given as the member's, the
offset tools seek to.

`inflate` does the same for one in-memory body (HTTP ``Content-Encoding`` gzip,
deflate and br): it stops at a limit and says so, rather than filling memory.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterator
from functools import partial
from typing import IO, Protocol, cast


class _Inflater(Protocol):
    """What Stream uses of a decompressor: zlib's, or ISA-L's with the same attributes."""

    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    @property
    def unconsumed_tail(self) -> bytes: ...

    def decompress(self, data: bytes, /, max_length: int = 0) -> bytes: ...


try:  # ISA-L's inflate: zlib's stream API, twice as fast on gzip files (docs/parallel.md)
    from isal import isal_zlib

    _gzip_inflater: Callable[[], _Inflater] = partial(isal_zlib.decompressobj, wbits=31)
    # Its stub calls `error` an instance; it is the class IsalError.
    _INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, cast(type[Exception], isal_zlib.error))
except ImportError:  # a platform without its wheel: the standard library's
    _gzip_inflater = partial(zlib.decompressobj, wbits=31)
    _INFLATE_ERRORS = (zlib.error,)

CHUNK_BYTES = 1 << 20  # what one read inflates or reads at most
GZIP_MAGIC = b"\x1f\x8b"


class StreamError(Exception):
    """The compressed data is corrupt or ends early (the file breaks off)."""


class Stream:
    """The uncompressed bytes of `raw` (gzip when `gz`), read forward.

    pos: uncompressed bytes consumed so far.
    member_offset: the file offset of the gzip member the next byte comes from (gzip only).
    """

    def __init__(self, raw: IO[bytes], gz: bool) -> None:
        self.raw = raw
        self.gz = gz
        self.pos = 0
        self._buf = b""
        self._at = 0
        self._eof = False
        self._raw_pos = 0  # compressed bytes read from the file
        self._pending = b""  # compressed bytes read but not yet fed to the decompressor
        self._d: _Inflater | None = None
        self.member_offset = 0
        self._member_out = 0  # uncompressed position where the current member's output starts
        self._member_done = False  # the current member has ended (its output may still be buffered)

    # -- filling -----------------------------------------------------------------------

    def _read_raw(self) -> bytes:
        data = self.raw.read(CHUNK_BYTES)
        self._raw_pos += len(data)
        return data

    def _fill(self, *, in_member: bool = False) -> bool:
        """Refill the buffer with the next piece; False at the end (of the file, or of the member when `in_member`)."""
        if self._eof:
            return False
        if not self.gz:
            data = self._read_raw()
            if not data:
                self._eof = True
                return False
            self._set(data)
            return True
        while True:
            if self._d is None or self._member_done:
                if in_member and self._member_done:
                    return False
                if not self._pending:
                    self._pending = self._read_raw()
                if not self._pending:
                    self._eof = True
                    return False
                if not self._pending.startswith(GZIP_MAGIC[: len(self._pending)]):
                    raise StreamError(f"not a gzip member at file offset {self._raw_pos - len(self._pending):,}")
                self.member_offset = self._raw_pos - len(self._pending)
                self._member_out = self.pos
                self._d = _gzip_inflater()
                self._member_done = False
            feed = self._pending
            if not feed:
                feed = self._read_raw()
                if not feed:
                    raise StreamError(
                        f"the gzip member at file offset {self.member_offset:,} breaks off (the file was cut)"
                    )
            try:
                out = self._d.decompress(feed, CHUNK_BYTES)
            except _INFLATE_ERRORS as exc:
                at = self.member_offset
                raise StreamError(f"corrupt gzip data in the member at file offset {at:,}: {exc}") from exc
            if self._d.eof:
                self._pending = self._d.unused_data
                self._member_done = True
            else:
                self._pending = self._d.unconsumed_tail
            if out:
                self._set(out)
                return True

    def _set(self, data: bytes) -> None:
        self._buf = data
        self._at = 0

    def _available(self, *, in_member: bool = False) -> int:
        if self._at >= len(self._buf) and not self._fill(in_member=in_member):
            return 0
        return len(self._buf) - self._at

    # -- reading -----------------------------------------------------------------------

    def at_end(self) -> bool:
        return self._available() == 0

    def record_offset(self) -> int:
        """Where the next byte's record starts: its gzip member's file offset when it starts one, else `pos`."""
        self._available()
        if self.gz and self.pos == self._member_out:
            return self.member_offset
        return self.pos

    def read(self, n: int, *, in_member: bool = False) -> bytes:
        """Up to `n` bytes (fewer at the end of the file, or of the current gzip member when `in_member`)."""
        parts = []
        while n > 0:
            have = self._available(in_member=in_member)
            if not have:
                break
            take = min(have, n)
            parts.append(self._buf[self._at : self._at + take])
            self._at += take
            self.pos += take
            n -= take
        return b"".join(parts)

    def skip(self, n: int, *, in_member: bool = False) -> int:
        """Discard up to `n` bytes, as `read` would return them; how many were there."""
        done = 0
        while n > done:
            have = self._available(in_member=in_member)
            if not have:
                break
            take = min(have, n - done)
            self._at += take
            self.pos += take
            done += take
        return done

    def peek(self, n: int) -> bytes:
        """Up to `n` next bytes, not consumed (at most what one piece holds)."""
        have = self._available()
        if have < n and have and self._at:
            # Move the rest to the front and append the next piece (at most one more piece, and
            # never one of the next gzip member: a member's bytes start a buffer of their own).
            rest = self._buf[self._at :]
            if self._fill(in_member=True):
                self._buf = rest + self._buf
            else:
                self._set(rest)
        return self._buf[self._at : self._at + n]

    def readline(self, limit: int) -> bytes:
        """The next line with its newline, or `limit` bytes of it when it is longer (or the rest at the end)."""
        parts = []
        got = 0
        while got < limit:
            have = self._available()
            if not have:
                break
            end = self._buf.find(b"\n", self._at, self._at + min(have, limit - got))
            stop = end + 1 if end >= 0 else self._at + min(have, limit - got)
            piece = self._buf[self._at : stop]
            parts.append(piece)
            got += len(piece)
            self.pos += len(piece)
            self._at = stop
            if end >= 0:
                break
        return b"".join(parts)

    def chunks(self) -> Iterator[bytes]:
        """The rest of the stream, piece by piece."""
        while self._available():
            piece = self._buf[self._at :]
            self.pos += len(piece)
            self._at = len(self._buf)
            yield piece

    def find(self, pattern: re.Pattern[bytes], limit: int) -> bool:
        """Skip forward to the next match of `pattern` (within about `limit` bytes); whether one was found.

        A match that straddles two pieces is found too (up to 256 bytes long).
        """
        scanned = 0
        tail = b""
        while scanned < limit:
            if not self._available():
                return False
            if self.gz and self.pos == self._member_out:
                tail = b""  # a gzip member starts a record: "^" matches at its start
            piece = self._buf[self._at :]
            window = tail + piece
            m = pattern.search(window)
            if m is not None:
                back = len(tail) - m.start()  # how far the match begins before this piece
                if back <= 0:
                    self._at -= back
                    self.pos -= back
                else:
                    self._set(window[m.start() :])
                    self.pos -= back
                return True
            tail = window[-256:]
            self.pos += len(piece)
            scanned += len(piece)
            self._at = len(self._buf)
        return False

    def recover(self) -> bool:
        """After a StreamError in a gzip file: go on at the next gzip member after the broken one
        (the next record, in a file of a member a record); False when there is none."""
        if not self.gz:
            return False
        magic = GZIP_MAGIC + b"\x08"
        try:
            if self.raw.seekable():
                self.raw.seek(self.member_offset + 1)
                self._raw_pos = self.member_offset + 1
                data = b""
            else:
                data = self._pending
        except OSError:
            return False
        while True:
            at = data.find(magic)
            if at >= 0:
                self._pending = data[at:]
                break
            tail = data[-2:]
            more = self._read_raw()
            if not more:
                self._eof = True
                return False
            data = tail + more
        self._d = None
        self._member_done = False
        self._set(b"")
        return True

    def seek(self, pos: int) -> bool:
        """Go back (or forward) to uncompressed position `pos`; False when the input cannot seek (a pipe)."""
        try:
            if not self.raw.seekable():
                return False
            if not self.gz:
                self.raw.seek(pos)
                self._raw_pos = pos
                self._set(b"")
                self.pos = pos
                self._eof = False
                return True
            self.raw.seek(0)
        except OSError:
            return False
        self.__init__(self.raw, True)  # type: ignore[misc]  # start over: gzip cannot seek back
        self.skip(pos)
        return True


def iter_lines(chunks: Iterator[bytes], max_line: int) -> Iterator[tuple[int, bytes | int]]:
    """(line number, line) for each line that is not blank; (line number, its length) for a
    line over `max_line` bytes, which is skipped unread. Blank lines are passed over a piece
    at a time (a file of gigabytes of newlines costs what reading it costs)."""
    line_no = 1  # the number of the line the next byte belongs to
    parts: list[bytes] = []  # the start of the current line, carried across pieces
    carried = 0
    skipping = -1  # >= 0: the length so far of an over-long line being skipped
    nonblank = _NONBLANK
    for data in chunks:
        pos = 0
        if skipping >= 0:
            end = data.find(b"\n")
            if end < 0:
                skipping += len(data)
                continue
            yield line_no, skipping + end
            line_no += 1
            skipping = -1
            pos = end + 1
        elif parts:
            end = data.find(b"\n")
            if end < 0:
                if carried + len(data) > max_line:
                    skipping = carried + len(data)
                    parts = []
                    carried = 0
                else:
                    parts.append(data)
                    carried += len(data)
                continue
            if carried + end > max_line:
                yield line_no, carried + end
                parts = []
            else:
                parts.append(data[:end])
                line = b"".join(parts)
                parts = []  # not held beside the line while it is decoded
                yield line_no, line
                del line
            carried = 0
            line_no += 1
            pos = end + 1
        if pos == 0 and data.isspace():
            line_no += data.count(b"\n")  # a piece of blank lines: 10x faster than the search below
            continue
        while True:
            m = nonblank.search(data, pos)
            if m is None:
                line_no += data.count(b"\n", pos)
                break
            nl = data.rfind(b"\n", pos, m.start())
            start = nl + 1 if nl >= 0 else pos
            if start > pos:
                line_no += data.count(b"\n", pos, start)
            end = data.find(b"\n", m.start())
            if end < 0:
                rest = len(data) - start
                if rest > max_line:
                    skipping = rest
                else:
                    parts = [data[start:]]
                    carried = rest
                break
            if end - start > max_line:
                yield line_no, end - start
            else:
                yield line_no, data[start:end]
            line_no += 1
            pos = end + 1
    if skipping >= 0:
        yield line_no, skipping
    elif parts:
        yield line_no, b"".join(parts)


_NONBLANK = re.compile(rb"\S")


class TooLarge(Exception):
    """A body inflates past its limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"over {limit:,} bytes")
        self.limit = limit


def inflate(data: bytes, encoding: str, limit: int) -> bytes:
    """`data` decoded from one HTTP content coding (gzip, x-gzip, deflate, br), at most `limit` bytes.

    Raises TooLarge past `limit` (having inflated no more than limit + CHUNK_BYTES), ValueError
    when the data is not in that coding.
    """
    if encoding in ("gzip", "x-gzip"):
        return _zlib(zlib.decompressobj(wbits=47), data, limit)  # 47: gzip or zlib header, auto-detected
    if encoding == "deflate":
        # "deflate" is zlib-wrapped by the standard, raw deflate by many servers: try both.
        try:
            return _zlib(zlib.decompressobj(), data, limit)
        except ValueError:
            return _zlib(zlib.decompressobj(wbits=-15), data, limit)
    if encoding == "br":
        import brotli  # type: ignore[import-untyped]  # brotli ships no type stubs

        d = brotli.Decompressor()
        parts = []
        got = 0
        try:
            out = d.process(data, output_buffer_limit=CHUNK_BYTES)
            while True:
                parts.append(out)
                got += len(out)
                if got > limit:
                    raise TooLarge(limit)
                if d.is_finished() or (d.can_accept_more_data() and not out):
                    break
                out = d.process(b"", output_buffer_limit=CHUNK_BYTES)
        except brotli.error as exc:
            raise ValueError(f"not brotli data: {exc}") from exc
        return b"".join(parts)
    raise ValueError(f"unknown content coding {encoding!r}")


def _zlib(d: zlib._Decompress, data: bytes, limit: int) -> bytes:
    parts = []
    got = 0
    try:
        out = d.decompress(data, CHUNK_BYTES)
        while True:
            parts.append(out)
            got += len(out)
            if got > limit:
                raise TooLarge(limit)
            if d.eof or not d.unconsumed_tail:
                break
            out = d.decompress(d.unconsumed_tail, CHUNK_BYTES)
    except zlib.error as exc:
        raise ValueError(f"not compressed as it says: {exc}") from exc
    return b"".join(parts)
