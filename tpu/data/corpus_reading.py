"""Reading a corpus as documents, a chunk at a time: the chunk rule, stated once.

The shard writer (`tpu.data.shard_writer`, in one process or on Beam workers) cuts a
corpus into chunks and packs each on its own. This module says which documents a chunk
holds and reads them; every reader of it, on any worker, reads a bounded stretch of
bytes (about two chunks) and holds a bounded amount in memory, whatever the layout.

**Documents** (`--documents`, `DOCUMENTS`): "blank-line" (BERT's pre-training format:
one sentence or paragraph per line, a blank or whitespace-only line between documents)
or "line" (one document per line, as the `text:` source reads its files). A file's end
ends a document either way.

**Chunks.** The corpus files, sorted, are read as one stream of bytes (their
concatenation) cut every S bytes (`chunk_bytes`, `--chunk-mb`): chunk c is the byte
range `[c·S, (c+1)·S)` of that stream, one or more pieces of files. A piece `[a, b)` of
a file of n bytes holds the text between two cuts, `[cut(a), cut(b))`, with `cut(0) = 0`,
`cut(n) = n` and, for `0 < p < n`, `cut(p)` the first of these that exists:

1. the first **separator** that starts at or after p and at or before `p + S`: the start
   of a blank line ("blank-line"), the start of a line ("line"), or the file's end;
2. the start of the first line at or after p, at or before `p + S` ("blank-line": a
   document that goes on past that look-ahead is cut there, as if a blank line were);
3. inside a line longer than S: the first position at or after p that follows an ASCII
   space, tab or carriage return, before `p + min(4096, S / 2)`, else the first UTF-8
   character that starts at or after p.

`cut` only looks forward, about S bytes, so the reader of a piece needs no look-back
and reads at most about S bytes past its end; and `p ≤ cut(p) ≤ p + S`, so the cuts of
consecutive pieces never cross and every byte belongs to exactly one piece. A piece's end ends the
document in progress.

**Bounds.** The lines of a piece `[a, b)` of a file of n bytes depend on its bytes in
`piece_span`: from `a - 1` to `reach(b) = min(n, b + S + segment_bytes(S) + 1)` (the file's
end, and n itself, when `b = n`); the reader never reads outside it (a read past it is a
bug, raised), so a piece whose span's bytes did not change gives the same lines, which is
what `piece_fingerprint` records for a rerun on a corpus changed elsewhere. Reads go in
blocks of `block_bytes(S)` (S/16, from 4 KiB to 1 MiB), so the bytes read per chunk scale
with the chunk.

**Lines.** A line longer than `segment_bytes(S)` (`min(S, MAX_LINE_BYTES)`) is read in
segments of at most that many bytes, each cut after its last ASCII space, tab or
carriage return in its second half, else before the UTF-8 character that would cross
the bound; a segment is tokenized on its own (WordPiece splits at whitespace first, so
a cut at a space changes no token). A blank line is one of at most that many bytes that
is whitespace once decoded; a line is stripped of surrounding whitespace before it is
tokenized.

A `tfds:` corpus is read through the TFDS API one file shard per chunk (its split's
`NAME[k shard]`), one document per example.

Errors: text that is not UTF-8 and a file that cannot be read (a dangling symbolic link, a
file removed since the corpus was listed) are `CorpusError`s naming the file and line;
transient storage errors (`records.is_transient`) are raised as they are, their messages
led by the file's name, for the caller (`records.retrying`) to retry.
"""

import math
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

from tpu.data import tfds_datasets
from tpu.data.records import CorpusError
from tpu.data.records import is_transient
from tpu.data.source_registry import missing_file

DOCUMENTS = ("blank-line", "line")
# The longest line read in one piece: longer lines are read in segments (see the module docstring).
MAX_LINE_BYTES = 1 << 20
# How far a cut inside a long line looks for a space (rule 3), at most.
SPACE_SEARCH_BYTES = 4096
# The smallest chunk the rule allows (`cut(p) < p + S` needs a few bytes of room).
MIN_CHUNK_BYTES = 1000
# Bytes read from storage at a time, at most: a chunk's reads take `block_bytes(S)`, which scales with it.
BLOCK_BYTES = 1 << 20
MIN_BLOCK_BYTES = 4096
_SPACES = b" \t\r"


def check_documents(documents: str) -> str:
  if documents not in DOCUMENTS:
    raise CorpusError(f"--documents must be one of {', '.join(DOCUMENTS)}, got {documents!r}")
  return documents


def segment_bytes(chunk_bytes: int) -> int:
  """The longest line, in bytes, read as one piece with chunks of `chunk_bytes`."""
  return min(chunk_bytes, MAX_LINE_BYTES)


def chunk_pieces(files: Sequence[Sequence[Any]], chunk_bytes: int) -> list[list[list[Any]]]:
  """The chunks of files `[[path, size, ...], ...]` read as one stream: per chunk, `[[path, start, end],
  ...]`."""
  total = sum(file[1] for file in files)
  chunks: list[list[list[Any]]] = [[] for _ in range(max(1, math.ceil(total / chunk_bytes)))]
  position = 0
  for path, size, *_ in files:
    for index in range(position // chunk_bytes, math.ceil((position + size) / chunk_bytes)):
      start = max(index * chunk_bytes, position) - position
      end = min((index + 1) * chunk_bytes, position + size) - position
      if end > start:
        chunks[index].append([path, start, end])
    position += size
  return chunks


def block_bytes(chunk_bytes: int) -> int:
  """The bytes read at a time for chunks of `chunk_bytes`: a 16th of a chunk, from 4 KiB to 1 MiB."""
  return max(MIN_BLOCK_BYTES, min(BLOCK_BYTES, chunk_bytes // 16))


def reach(position: int, size: int, chunk_bytes: int) -> int:
  """The end (exclusive) of what `cut(position)` may read: `position + S + segment_bytes(S) + 1`, at most
  the file's end. The rule looks for a line start up to `p + S`, then at the line that starts there: at
  most `segment_bytes(S) + 1` bytes to tell a blank line from a longer one."""
  return min(size, position + chunk_bytes + segment_bytes(chunk_bytes) + 1)


def piece_span(start: int, end: int, size: int, chunk_bytes: int) -> tuple[int, int]:
  """`(low, high)`: the byte range of a file of `size` bytes that decides the lines of its piece
  `[start, end)`: `cut(start)` reads from `start - 1`, the piece's lines end by `cut(end) + 3`, and
  `cut(end)` reads up to `reach(end)` (the file's end when `end` is). Nothing outside it is read, so
  a file whose bytes in it are the same (and whose size is, when `high` is the file's end) gives the
  piece the same lines."""
  low = max(start - 1, 0)
  high = size if end >= size else reach(end, size, chunk_bytes)
  return low, high


def piece_fingerprint(path: str, start: int, end: int, size: int, chunk_bytes: int) -> str:
  """The SHA-256 (hex) of `piece_span`'s bytes of `path` (with the span, and the size when the span
  reaches the file's end): what the piece `[start, end)`'s lines depend on."""
  import hashlib

  import tensorflow as tf
  low, high = piece_span(start, end, size, chunk_bytes)
  digest = hashlib.sha256(f"{low} {high} {size if high >= size else ''}\n".encode())
  block = BLOCK_BYTES   # one sequential pass: large reads, few requests
  try:
    with tf.io.gfile.GFile(path, "rb") as file:
      file.seek(low)
      left = high - low
      while left > 0:
        data = file.read(min(block, left))
        if not data:
          break   # shorter than it was: the digest differs
        digest.update(data)
        left -= len(data)
  except tf.errors.OpError as error:
    raise read_error(path, error) from None
  return digest.hexdigest()


class _Bytes:
  """The bytes of an open file of `size` bytes from a position on, read in blocks of `block`, never at or
  past `bound`; holds what is looked at only."""

  def __init__(self, file, position, size, bound, block):
    file.seek(position)
    self.file, self.position, self.size, self.block = file, position, size, block
    self.bound = min(bound, size)
    self.read_to = position
    self.data = bytearray()

  @property
  def ended(self) -> bool:
    """Whether the file's end is read."""
    return self.read_to >= self.size

  def _more(self, wanted=0):
    if self.ended:
      return
    if self.read_to >= self.bound:
      raise RuntimeError(f"the chunk rule read past its bound {self.bound} (a bug of corpus_reading)")
    block = self.file.read(min(max(self.block, wanted), self.bound - self.read_to))
    if block:
      self.data += block
      self.read_to += len(block)
    else:   # shorter than its size (changed while read): its end is here
      self.size = self.read_to

  def peek(self, count: int) -> bytes:
    """Up to `count` bytes from the position (fewer at the file's end), not taken."""
    while len(self.data) < count and not self.ended:
      self._more(count - len(self.data))
    return bytes(self.data[:count])

  def line_length(self, limit: int) -> tuple[int, bool]:
    """`(n, whole)`: the bytes to the end of the line at the position (its newline included), at most
    `limit`; `whole` when the line ends within them (a newline, or the file's end)."""
    searched = 0
    while True:
      index = self.data.find(b"\n", searched, limit)
      if index >= 0:
        return index + 1, True
      if len(self.data) >= limit:
        # The line may end right at the limit: it does when the file ends there.
        return limit, len(self.data) == limit and self.ended
      if self.ended:
        return len(self.data), True
      searched = len(self.data)
      self._more()

  def take(self, count: int) -> bytes:
    """The next `count` bytes (fewer at the file's end), taken."""
    self.peek(count)
    taken = bytes(self.data[:count])
    del self.data[:count]
    self.position += len(taken)
    return taken


def _is_blank(raw):
  return not raw.decode("utf-8", errors="replace").strip()


def _space_cut(raw, low):
  """The index after the last ASCII space, tab or carriage return of `raw[low:]`, or None."""
  index = max(raw.rfind(space, low) for space in _SPACES)
  return index + 1 if index >= 0 else None


def _character_start(raw, index):
  """The first index at or after `index` where a UTF-8 character starts (not a continuation byte)."""
  while index < len(raw) and 0x80 <= raw[index] < 0xC0:
    index += 1
  return index


def _character_start_before(raw, index):
  """The last index at or before `index` where a UTF-8 character starts, not more than 3 back."""
  back = index
  while back > index - 3 and back < len(raw) and 0x80 <= raw[back] < 0xC0:
    back -= 1
  return back if back > 0 else index


def cut(file: Any, position: int, size: int, documents: str, chunk_bytes: int) -> int:
  """`cut(position)` of the module docstring's rule, for an open file of `size` bytes."""
  if position <= 0:
    return 0
  if position >= size:
    return size
  horizon = position + chunk_bytes   # rules 1 and 2 look before it
  data = _Bytes(file, position - 1, size, reach(position, size, chunk_bytes), block_bytes(chunk_bytes))
  line_start = position
  if data.take(1) != b"\n":   # inside a line: its end is the first line start
    length, whole = data.line_length(min(horizon, size) - position)
    if not whole:   # rule 3: no line starts up to the horizon
      return _split_point(file, position, size, chunk_bytes)
    data.take(length)
    line_start = position + length
  if documents == "line" or line_start >= size:
    return line_start
  # "blank-line": the first blank line before the horizon, else the line start found.
  limit = segment_bytes(chunk_bytes)
  start = line_start
  while start <= horizon:
    if start >= size:
      return size
    length, whole = data.line_length(limit + 1)
    if whole and length <= limit and _is_blank(data.peek(length)):
      return start
    data.take(length)
    start += length
    while not whole and start <= horizon:   # the rest of a long line, up to just past the horizon
      length, whole = data.line_length(min(block_bytes(chunk_bytes), horizon + 1 - start))
      data.take(length)
      start += length
  return line_start


def _split_point(file, position, size, chunk_bytes):
  """Rule 3: a cut inside a line longer than S."""
  search = min(SPACE_SEARCH_BYTES, chunk_bytes // 2)
  file.seek(position - 1)
  raw = file.read(min(search + 4, size - position + 1))
  index = next((i for i in range(min(search, len(raw) - 1)) if raw[i:i + 1] in (b" ", b"\t", b"\r")), None)
  if index is not None:
    return position + index
  return min(position - 1 + _character_start(raw, 1), size)


def piece_lines(path: str, start: int, end: int, size: int, documents: str,
                chunk_bytes: int) -> Iterator[str]:
  """The stripped lines (or segments of long lines) of the documents of the piece `[start, end)` of
  `path` (`size` bytes); "" ends a document (a piece's end ends one too).

  Errors name the file and line.
  """
  import tensorflow as tf
  try:
    with tf.io.gfile.GFile(path, "rb") as file:
      begin = cut(file, start, size, documents, chunk_bytes)
      stop = cut(file, end, size, documents, chunk_bytes)
      if begin >= stop:
        return
      limit = segment_bytes(chunk_bytes)
      data = _Bytes(file, begin, size, stop + 3, block_bytes(chunk_bytes))
      position, line_start, fresh = begin, begin, True   # fresh: the position starts a line
      while position < stop:
        room = min(limit, stop - position)
        length, whole = data.line_length(room)
        if not whole and length == room and position + length < stop:   # a long line goes on
          raw = data.peek(length + 3)
          length = _space_cut(raw[:length], length // 2) or _character_start_before(raw, length)
        raw = data.take(length)
        ends_line = raw.endswith(b"\n")
        try:
          text = raw.decode("utf-8").strip()
        except UnicodeDecodeError as error:
          line = _line_number(path, line_start)
          raise CorpusError(f"{path}:{line}: not UTF-8 (byte {error.start} of the line: "
                            f"{raw[error.start:error.start + 4]!r})") from None
        if text:
          yield text
        elif fresh and ends_line and documents == "blank-line":
          yield ""   # a blank line
        if ends_line and documents == "line":
          yield ""
        position += length
        fresh = ends_line
        if ends_line:
          line_start = position
  except tf.errors.OpError as error:
    raise read_error(path, error) from None


def read_error(path: str, error: Any) -> Exception:
  """What a failed read of the corpus file `path` (a TensorFlow `OpError`) raises: a transient storage
  error as it is, for the caller to retry (`records.retrying`), its message led by the file's name; else
  a `CorpusError` naming the file and why it cannot be read (a dangling symbolic link, a file removed
  since the corpus was listed, no permission)."""
  import tensorflow as tf
  if is_transient(error):
    if error.message.startswith(path):
      return error
    return type(error)(error.node_def, error.op, f"{path}: {error.message}")
  if isinstance(error, tf.errors.NotFoundError):
    return CorpusError(f"{path}: cannot be read: {missing_file(path, listed=True)}")
  return CorpusError(f"{path}: cannot be read: {error.message}")


def _line_number(path, offset):
  """The line of `path` that holds byte `offset` (counted only for an error message)."""
  import tensorflow as tf
  count = 1
  with tf.io.gfile.GFile(path, "rb") as file:
    while offset > 0:
      block = file.read(min(offset, 1 << 22))
      if not block:
        break
      count += block.count(b"\n")
      offset -= len(block)
  return count


def numbered_lines(pieces: Iterable[Iterable[str]]) -> Iterator[tuple[int, str]]:
  """`(document number, line)` of pieces' lines, numbering the documents from 0."""
  document, open_document = 0, False
  for lines in pieces:
    for line in lines:
      if line:
        open_document = True
        yield document, line
      elif open_document:
        document, open_document = document + 1, False
    if open_document:   # a piece's end ends a document
      document, open_document = document + 1, False


def tfds_shards(name: str, split: str, data_dir: str | None) -> int:
  """The number of file shards of a TFDS split (its chunks); 1 when the split is a slice or unknown."""
  import tensorflow_datasets as tfds
  if "[" in split or "+" in split:
    return 1
  try:
    info = tfds.builder(name, data_dir=data_dir).info
    return max(1, int(info.splits[split].num_shards))
  except Exception:   # not prepared yet, or no such split: reading the whole split says what is wrong
    return 1


def tfds_lines(name: str, text_key: str, split: str, data_dir: str | None,
               shard: int | None = None) -> Iterator[str]:
  """The stripped lines of a TFDS split (or of its file shard `shard`), one document per example, "" after
  each, read with the TFDS API."""
  import tensorflow_datasets as tfds
  part = split if shard is None else f"{split}[{shard}shard]"
  try:
    dataset = tfds.load(name, split=part, data_dir=data_dir, shuffle_files=False)
  except Exception as error:   # TFDS raises many kinds: not found, not prepared, bad config
    raise CorpusError(f"{tfds_datasets.spec_of(name)}: cannot be loaded: {error}") from None
  if text_key not in dataset.element_spec:
    raise CorpusError(f"{tfds_datasets.spec_of(name)}: no feature {text_key!r}; features: "
                      f"{sorted(dataset.element_spec)} (choose one with --text-key)")
  for example in dataset.as_numpy_iterator():
    for line in example[text_key].decode("utf-8", errors="replace").splitlines():
      if line.strip():
        yield line.strip()
    yield ""
