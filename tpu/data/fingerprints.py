"""Fingerprints of input files: what a resumed run compares to notice that its data changed.

A file's fingerprint is `{"path", "size", "modified", "sha256"}`: its size in bytes, its
modification time in nanoseconds (on gs://, the object's update time, which every new
generation changes) and, for a file of at most `HASH_BYTES` (the cheap case: tables,
SQuAD files, small corpora), the SHA-256 of its bytes (None above that). Two
fingerprints of a path are the same file when the sizes are equal and, where both have
a hash, the hashes (a copy or a `touch` that changes no byte is the same file), else
the modification times.

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
from concurrent.futures import ThreadPoolExecutor

# Files up to this size are hashed (read whole); larger ones are compared by size and modification time.
HASH_BYTES = 8 << 20
# Files stat-ed (and hashed) at once: on gs:// each is a round trip.
READERS = 16


def of_file(path):
  """The fingerprint of one local or gs:// file."""
  import tensorflow as tf
  if "://" in path:
    stat = tf.io.gfile.stat(path)
    size, modified = int(stat.length), int(stat.mtime_nsec)
  else:   # TensorFlow's local stat has whole seconds only
    stat = os.stat(path)
    size, modified = stat.st_size, stat.st_mtime_ns
  digest = None
  if size <= HASH_BYTES:
    with tf.io.gfile.GFile(path, "rb") as file:
      digest = hashlib.sha256(file.read()).hexdigest()
  return dict(path=path, size=size, modified=modified, sha256=digest)


def of_files(paths):
  """The fingerprints of `paths`, in their order."""
  paths = list(paths)
  if len(paths) <= 1:
    return [of_file(path) for path in paths]
  with ThreadPoolExecutor(min(READERS, len(paths))) as pool:
    return list(pool.map(of_file, paths))


def same_file(before, after):
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


def changes(before, after):
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
