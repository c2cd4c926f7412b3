"""Files written at once: readers see the old file or the new one, never a part (local or gs://).

The low-level writer every layer of the zoo publishes files through (`zoo.text`'s
vocabularies, `zoo.model_dir`'s configs and checkpoints' companions, the training job's
records and logs): write a temporary file beside the target, then rename it onto the
target. A killed writer leaves at most a temporary file, which `is_temporary` recognises.
Depends on TensorFlow's file system only (`tf.io.gfile`), no other module of the zoo.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

from zoo.lazy import lazy_module

if TYPE_CHECKING:   # the type checker reads TensorFlow's names; annotations are not evaluated
  import tensorflow as tf
else:
  tf = lazy_module("tensorflow")   # imported on first use: command-line `--help` stays light

# In the names of files being written (`temporary_path`).
TEMPORARY_MARK = ".tmp-"


def temporary_path(path: str) -> str:
  """A fresh name beside `path` for writing it: `.<name>.tmp-<random>` (see `is_temporary`)."""
  folder, name = os.path.split(path)
  return os.path.join(folder, f".{name}{TEMPORARY_MARK}{uuid.uuid4().hex[:12]}")


def is_temporary(name: str) -> bool:
  """Whether the file name `name` is one `temporary_path` made (a write a killed process left)."""
  return name.startswith(".") and TEMPORARY_MARK in name




@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
  """Yields a temporary path beside `path` to write (a file, or a folder with its files); on success it
  is renamed onto `path`.

  The one place files are published by a rename: whatever writes through a path of its
  own (`tf.io.TFRecordWriter`, `np.save`, ...) writes the yielded path. When the block
  raises (or is interrupted), the temporary file is removed and `path` is left as it was.
  Local paths and `gs://` paths alike: the temporary file sits beside the target, so the
  rename stays within one file system (or bucket). The parent folder is created.

  Example:
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a", "records")
    >>> with atomic_path(path) as temporary:
    ...   with tf.io.TFRecordWriter(temporary) as writer:
    ...     writer.write(b"one")
    >>> [record.numpy() for record in tf.data.TFRecordDataset(path)]
    [b'one']
  """
  folder = os.path.dirname(path)
  if folder:
    tf.io.gfile.makedirs(folder)
  temporary = temporary_path(path)
  try:
    yield temporary
    tf.io.gfile.rename(temporary, path, overwrite=True)
  except BaseException:
    if tf.io.gfile.isdir(temporary):
      tf.io.gfile.rmtree(temporary)
    elif tf.io.gfile.exists(temporary):
      tf.io.gfile.remove(temporary)
    raise


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w") -> Iterator[tf.io.gfile.GFile]:
  """Yields a file object (`tf.io.gfile.GFile`, `mode` "w" or "wb") whose contents replace `path`
  at once when the block ends without error; see `atomic_path`.

  Example:
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with atomic_file(path) as file:
    ...   for word in ("one", "two"):
    ...     _ = file.write(word + "\\n")
    >>> open(path).read().split()
    ['one', 'two']
  """
  if mode not in ("w", "wb"):
    raise ValueError(f"mode must be 'w' or 'wb', not {mode!r}")
  with atomic_path(path) as temporary, tf.io.gfile.GFile(temporary, mode) as file:
    yield file


def write_atomically(path: str, content: str | bytes) -> None:
  """Writes `content` (str or bytes) to `path` at once: readers see the old file or the new one."""
  with atomic_file(path, "wb" if isinstance(content, bytes) else "w") as file:
    file.write(content)
