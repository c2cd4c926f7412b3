"""Real English prose that ships with Python: its documentation topics and standard-library docstrings.

Assembled at run time from the interpreter's own files, so nothing is downloaded:

- `pydoc_data.topics`: the language reference's topics that `help()` shows;
- the docstrings of the standard library's modules, classes and functions, read with
  `ast` from the source files (no module is imported; test suites, IDLE and
  demo folders are left out).

One document per topic and per module (its docstrings in source order), each
paragraph on one line (re-flowed), as BERT's pre-training format wants. Split:
"validation" holds every document whose name hashes to 0 mod 10, "train" the rest;
the split is the same on every machine with the same Python version.

  python -m tpu.pydocs --out corpus/   # corpus/train.txt and corpus/validation.txt

As a data source: the spec `pydocs` (splits "train" and "validation", data type "text").

Example:
  >>> docs = documents("validation")
  >>> len(docs) > 20 and all(text.strip() for _, text in docs)
  True
"""

import argparse
import ast
import functools
import hashlib
import os
import re
import sys
import sysconfig

from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import register

SPLITS = ("train", "validation")
# Folders of the standard library that are not documentation prose.
SKIPPED = {"test", "tests", "idlelib", "turtledemo", "lib2to3", "site-packages", "dist-packages", "ensurepip",
           "__pycache__", "pydoc_data", "tkinter"}
# Paragraphs shorter than this many words (headings, signatures) are left out.
MIN_WORDS = 4


def _paragraphs(text):
  """Re-flowed paragraphs of a docstring or topic; code-like and very short ones are dropped."""
  for block in re.split(r"\n\s*\n", text):
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    if not lines or any(line.startswith((">>>", "...", "$ ")) for line in lines):
      continue
    paragraph = " ".join(lines)
    if len(paragraph.split()) >= MIN_WORDS and sum(char.isalpha() for char in paragraph) > len(paragraph) / 2:
      yield paragraph


def _module_docstrings(path):
  try:
    with open(path, encoding="utf-8") as file:
      tree = ast.parse(file.read(), filename=path)
  except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
    return []
  nodes = [tree] + [node for node in ast.walk(tree)
                    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
  nodes.sort(key=lambda node: getattr(node, "lineno", 0))
  return [docstring for node in nodes if (docstring := ast.get_docstring(node))]


def _source_files():
  root = sysconfig.get_paths()["stdlib"]
  for folder, subfolders, files in os.walk(root):
    subfolders[:] = sorted(name for name in subfolders if name not in SKIPPED and not name.startswith("."))
    for name in sorted(files):
      if name.endswith(".py") and not name.startswith(("test_", "_test")):
        path = os.path.join(folder, name)
        yield os.path.relpath(path, root), path


def _split_of(name):
  return "validation" if int(hashlib.sha1(name.encode()).hexdigest(), 16) % 10 == 0 else "train"


@functools.cache
def _all_documents():
  documents = []
  try:
    from pydoc_data import topics
    for name in sorted(topics.topics):
      paragraphs = list(_paragraphs(topics.topics[name]))
      if paragraphs:
        documents.append((f"topic:{name}", "\n".join(paragraphs)))
  except ImportError:   # a Python built without its documentation topics
    pass
  for name, path in _source_files():
    paragraphs = [paragraph for docstring in _module_docstrings(path) for paragraph in _paragraphs(docstring)]
    if paragraphs:
      documents.append((name, "\n".join(paragraphs)))
  return tuple(documents)


def documents(split="train"):
  """`[(name, text)]` of a split; a text's paragraphs are its lines."""
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
  return [(name, text) for name, text in _all_documents() if _split_of(name) == split]


def dataset(split="train"):
  """A `tf.data.Dataset` of `{"text_a": document}`."""
  import tensorflow as tf
  texts = [text for _, text in documents(split)]
  return tf.data.Dataset.from_tensor_slices({"text_a": tf.constant(texts, tf.string)})


@register
class PydocsSource(Source):
  scheme = "pydocs"
  usage = "pydocs"
  description = "real English prose that ships with Python: its documentation and docstrings"
  target = "none"
  options = frozenset({"data_type"})
  data_types = ("text",)
  splits = SPLITS

  def load(self, target, split, *, data_type):
    if data_type not in (None, "text"):
      raise ValueError(f"{self.scheme} holds pre-training text without labels; data_type must be 'text', "
                       f"got {data_type!r}")
    return DataSource(dataset(split), "text", num_examples=len(documents(split)))


def write_corpus(folder):
  """Writes `train.txt` and `validation.txt` in BERT's format; returns `{split: (documents, bytes)}`."""
  from zoo.atomic_files import write_atomically
  written = {}
  for split in SPLITS:
    text = "".join(f"{document}\n\n" for _, document in documents(split))
    write_atomically(os.path.join(folder, f"{split}.txt"), text)
    written[split] = (len(documents(split)), len(text.encode("utf-8")))
  return written


def main(argv=None):
  p = argparse.ArgumentParser(prog="python -m tpu.pydocs", description=__doc__.split("\n\n")[0])
  p.add_argument("--out", required=True, metavar="DIR", help="folder for train.txt and validation.txt")
  args = p.parse_args(argv)
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow()
  for split, (count, size) in write_corpus(args.out).items():
    print(f"{os.path.join(args.out, split + '.txt')}: {count} documents, {size / 1e6:.1f} MB")
  return 0


if __name__ == "__main__":
  sys.exit(main())
