"""Fingerprints of input files: what a resumed run compares to notice that its data changed.

A file's fingerprint is `{"path", "size", "modified", "sha256"}`: its size in bytes, its
modification time in nanoseconds (on gs://, the object's update time, which every new
generation changes) and, for a file of at most `HASH_BYTES` (the cheap case: tables,
SQuAD files, small corpora; `HASH_TOTAL_BYTES` of them at most), the SHA-256 of its
bytes (else None). Two
fingerprints of a path are the same file when the sizes are equal and, where both have
a hash, the hashes (a copy or a `touch` that changes no byte is the same file), else
the modification times. A file that cannot be fingerprinted (a dangling symbolic link, a
file removed since it was listed, one without read permission) is a `DataError` naming it.

Example:
  >>> before = [dict(path="a.txt", size=3, modified=1, sha256="x"), dict(path="b.txt", size=9, modified=5,
  ...           sha256=None)]
  >>> after = [dict(path="a.txt", size=3, modified=2, sha256="x"), dict(path="c.txt", size=1, modified=1,
  ...          sha256="y")]
  >>> changes(before, after)
  '1 file(s) added: c.txt; 1 file(s) removed: b.txt'
"""

import hashlib
import os
from collections.abc import Iterable
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Files up to this size are hashed (read whole), up to `HASH_TOTAL_BYTES` in all; the others are
# compared by size and modification time.
HASH_BYTES = 8 << 20
HASH_TOTAL_BYTES = 64 << 20
# Files stat-ed (and hashed) at once: on gs:// each is a round trip.
READERS = 16


def _unreadable(path, error):
  """The `DataError` of a file that cannot be fingerprinted: gone (a dangling symbolic link, or removed
  since it was listed), or unreadable."""
  import tensorflow as tf

  from tpu.data.source_registry import DataError
  from tpu.data.source_registry import missing_file
  if isinstance(error, (FileNotFoundError, tf.errors.NotFoundError)):
    return DataError(path, None, missing_file(path, listed=True))
  return DataError(path, None, f"cannot be read: {getattr(error, 'message', None) or error}")


def _stat(path):
  """`(size, modified)` of a local or gs:// file."""
  import tensorflow as tf
  try:
    if "://" in path:
      stat = tf.io.gfile.stat(path)
      return int(stat.length), int(stat.mtime_nsec)
    stat = os.stat(path)   # TensorFlow's local stat has whole seconds only
  except (OSError, tf.errors.OpError) as error:
    raise _unreadable(path, error) from None
  return stat.st_size, stat.st_mtime_ns


def _sha256(path):
  import tensorflow as tf
  digest = hashlib.sha256()
  try:
    with tf.io.gfile.GFile(path, "rb") as file:
      for block in iter(lambda: file.read(1 << 20), b""):
        digest.update(block)
  except tf.errors.OpError as error:
    raise _unreadable(path, error) from None
  return digest.hexdigest()


def of_file(path: str, hash_it: bool | None = None) -> dict[str, Any]:
  """The fingerprint of one local or gs:// file (hashed if `hash_it`, else if at most `HASH_BYTES`)."""
  size, modified = _stat(path)
  hash_it = size <= HASH_BYTES if hash_it is None else hash_it
  return dict(path=path, size=size, modified=modified, sha256=_sha256(path) if hash_it else None)


def of_files(paths: Iterable[str]) -> list[dict[str, Any]]:
  """The fingerprints of `paths`, in their order: files of at most `HASH_BYTES` are hashed, in order,
  while the bytes hashed stay within `HASH_TOTAL_BYTES` (a corpus of many small files is
  compared by size and time beyond that)."""
  paths = list(paths)
  with ThreadPoolExecutor(max(1, min(READERS, len(paths)))) as pool:
    stats = list(pool.map(_stat, paths))
    hashed, budget = [], HASH_TOTAL_BYTES
    for size, _ in stats:
      hashed.append(size <= HASH_BYTES and size <= budget)
      budget -= size if hashed[-1] else 0
    jobs = zip(paths, hashed, strict=True)
    digests = list(pool.map(lambda job: _sha256(job[0]) if job[1] else None, jobs))
  return [dict(path=path, size=size, modified=modified, sha256=digest)
          for path, (size, modified), digest in zip(paths, stats, digests, strict=True)]


def same_file(before: dict[str, Any], after: dict[str, Any]) -> bool:
  """Whether two fingerprints of a path are the same contents (see the module docstring)."""
  if before["size"] != after["size"]:
    return False
  if before.get("sha256") and after.get("sha256"):
    return before["sha256"] == after["sha256"]
  return before["modified"] == after["modified"]


def _changed(before, after):
  if before["size"] != after["size"]:
    return f"{after['path']} ({before['size']:,} bytes then, {after['size']:,} now)"
  if before.get("sha256") and after.get("sha256"):
    return f"{after['path']} (the same size, other contents)"
  return f"{after['path']} (the same size, modified since)"


def changes(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> str:
  """'1 file(s) added: …; … removed: …; … changed: …' between two lists of fingerprints, or ''."""
  then = {item["path"]: item for item in before}
  now = {item["path"]: item for item in after}
  added = [path for path in now if path not in then]
  removed = [path for path in then if path not in now]
  changed = [_changed(then[path], now[path]) for path in now if path in then and not same_file(then[path],
                                                                                                now[path])]
  parts = [f"{len(names)} file(s) {label}: " + ", ".join(names[:5]) + (" …" if len(names) > 5 else "")
           for label, names in (("added", added), ("removed", removed), ("changed", changed)) if names]
  return "; ".join(parts)
