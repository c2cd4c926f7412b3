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

Text pairs for embeddings (`docstring_pairs`): each function's or class's docstring of
two paragraphs or more, its summary paragraph as the query and the rest as the document
that answers it ("Return the number of items in a sequence." -> its explanation),
split the same way by module.

  python -m tpu.pydocs --out corpus/   # corpus/train.txt and corpus/validation.txt
  python -m tpu.pydocs --pairs pairs/  # pairs/train.jsonl and pairs/validation/, a BEIR folder

As a data source: the spec `pydocs` (splits "train" and "validation", data type "text";
"pairs" for `--task embed`).

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
from collections.abc import Sequence
from typing import Any

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


def _syntax_tree(path):
  """The `ast` tree of a source file, or None for one Python cannot read."""
  try:
    with open(path, encoding="utf-8") as file:
      return ast.parse(file.read(), filename=path)
  except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
    return None


def _module_docstrings(path):
  tree = _syntax_tree(path)
  if tree is None:
    return []
  nodes = [tree] + [node for node in ast.walk(tree)
                    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
  nodes.sort(key=lambda node: getattr(node, "lineno", 0))
  return [docstring for node in nodes if (docstring := ast.get_docstring(node))]


def _docstring_nodes(path):
  """`[(qualified name, docstring)]` of the functions and classes of a source file, in source order."""
  tree = _syntax_tree(path)
  if tree is None:
    return []
  found = []

  def visit(node, prefix):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        name = f"{prefix}{child.name}"
        docstring = ast.get_docstring(child)
        if docstring:
          found.append((child.lineno, name, docstring))
        visit(child, name + ".")
  visit(tree, "")
  return [(name, docstring) for _, name, docstring in sorted(found)]


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


def documents(split: str = "train") -> list[tuple[str, str]]:
  """`[(name, text)]` of a split; a text's paragraphs are its lines."""
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
  return [(name, text) for name, text in _all_documents() if _split_of(name) == split]


@functools.cache
def _all_pairs():
  pairs, seen = [], set()
  for name, path in _source_files():
    module = name[:-3].replace(os.sep, ".")
    for qualified, docstring in _docstring_nodes(path):
      paragraphs = list(_paragraphs(docstring))
      if len(paragraphs) < 2 or paragraphs[0] in seen or " ".join(paragraphs[1:]) in seen:
        continue
      seen.update((paragraphs[0], " ".join(paragraphs[1:])))
      pairs.append((f"{module}.{qualified}", paragraphs[0], " ".join(paragraphs[1:]), name))
  return tuple(pairs)


def docstring_pairs(split: str = "train") -> list[tuple[str, str, str]]:
  """`[(name, summary, rest)]` of a split: the standard library's docstrings of two paragraphs or more, each
  summary and document distinct; split by module as `documents` is."""
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
  return [(name, query, text) for name, query, text, module in _all_pairs() if _split_of(module) == split]


def write_pairs(folder: str) -> dict[str, int]:
  """Writes `train.jsonl` (query, positive) and `validation/` in the BEIR layout (corpus.jsonl, queries.jsonl,
  qrels/dev.tsv); returns `{file: lines}`."""
  import json

  from zoo.atomic_files import write_atomically

  def jsonl(records):
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)

  train = [dict(query=query, positive=text) for _, query, text in docstring_pairs("train")]
  held_out = docstring_pairs("validation")
  files = {
      "train.jsonl": jsonl(train),
      "validation/corpus.jsonl": jsonl(dict(_id=name, title="", text=text) for name, _, text in held_out),
      "validation/queries.jsonl": jsonl(dict(_id=name, text=query) for name, query, _ in held_out),
      "validation/qrels/dev.tsv": "query-id\tcorpus-id\tscore\n" + "".join(
          f"{name}\t{name}\t1\n" for name, _, _ in held_out),
  }
  for name, text in files.items():
    write_atomically(os.path.join(folder, name), text)
  return {name: text.count("\n") for name, text in files.items()}


def dataset(split: str = "train") -> Any:
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
  data_types = ("text", "pairs")
  splits = SPLITS

  def load(self, target: str, split: str, *, data_type: str | None) -> DataSource:
    if data_type not in (None, "text", "pairs"):
      raise ValueError(f"{self.scheme} holds pre-training text without labels, or docstring pairs for the "
                       f"embed task; data_type must be 'text' or 'pairs', got {data_type!r}")
    if data_type == "pairs":
      from tpu.data.text_pairs import pairs_source
      return pairs_source(self.scheme, [((f"{self.scheme}:{name}", None), query, text, None)
                                        for name, query, text in docstring_pairs(split)])
    return DataSource(dataset(split), "text", num_examples=len(documents(split)))


def write_corpus(folder: str) -> dict[str, tuple[int, int]]:
  """Writes `train.txt` and `validation.txt` in BERT's format; returns `{split: (documents, bytes)}`."""
  from zoo.atomic_files import write_atomically
  written = {}
  for split in SPLITS:
    text = "".join(f"{document}\n\n" for _, document in documents(split))
    write_atomically(os.path.join(folder, f"{split}.txt"), text)
    written[split] = (len(documents(split)), len(text.encode("utf-8")))
  return written


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m tpu.pydocs", description=__doc__.split("\n\n")[0])
  p.add_argument("--out", metavar="DIR", help="folder for train.txt and validation.txt")
  p.add_argument("--pairs", metavar="DIR",
                 help="folder for docstring pairs: train.jsonl and validation/ (BEIR)")
  args = p.parse_args(argv)
  if not args.out and not args.pairs:
    p.error("give --out, --pairs or both")
  from zoo.logs import quiet_tensorflow
  quiet_tensorflow()
  if args.pairs:
    for name, lines in write_pairs(args.pairs).items():
      print(f"{os.path.join(args.pairs, name)}: {lines} lines")
  if not args.out:
    return 0
  for split, (count, size) in write_corpus(args.out).items():
    print(f"{os.path.join(args.out, split + '.txt')}: {count} documents, {size / 1e6:.1f} MB")
  return 0


if __name__ == "__main__":
  sys.exit(main())
