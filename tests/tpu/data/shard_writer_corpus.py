"""The shard writer tests' corpus (real prose, hostile files) and their way of running the writer."""

import pathlib

from tpu.data import pydocs
from tpu.data import shard_writer
from zoo.text import build_vocab
from zoo.text import write_vocab

T = 64


def prose(split="validation"):
  """Documents of real prose (Python's docstrings), as lists of lines."""
  return [text.split("\n") for _, text in pydocs.documents(split)]


def write_docs(path, docs, newline="\n", end="\n"):
  text = (newline * 2).join(newline.join(doc) for doc in docs) + end
  path.write_bytes(text.encode("utf-8"))


def make_corpus(folder):
  """Real prose in several files, with hostile ones among them, and its vocabulary, in `folder`."""
  docs = prose()
  write_docs(folder / "a.txt", docs[:12])
  (folder / "b_empty.txt").write_bytes(b"")
  # Unicode, CRLF line ends, runs of blank and whitespace-only lines, leading blank lines, a control
  # character alone on a line (no token), and no newline at the end of the file.
  hostile = ("\n\n  \nCafé naïve façade — Straße ΣΊΣΥΦΟΣ 東京の空 👩‍💻 e\u0301\r\nsecond line of it\r\n"
             "\r\n \u3000\t\r\n\r\n\x07\n\nпривет мир, שלום עולם\n\n\n\nlast words without newline")
  (folder / "c_hostile.txt").write_bytes(hostile.encode("utf-8"))
  write_docs(folder / "d.txt", docs[12:30], end="")
  words = " ".join(" ".join(doc) for doc in docs).split()
  write_docs(folder / "e_long.txt", [[" ".join(words[i % len(words)] for i in range(3000))]] + docs[30:36])
  vocab = build_vocab([str(folder / "a.txt")], 1500)
  write_vocab(vocab, str(folder / "wordpiece.vocab"))
  return folder


def write_shards(corpus, out, shards=3, inputs=("*.txt",), **kwargs):
  kwargs.setdefault("progress", False)
  return shard_writer.write_pretraining_data([str(corpus / name) for name in inputs],
                                             str(corpus / "wordpiece.vocab"), T, str(out), shards, **kwargs)


def contents(folder):
  return {path.name: path.read_bytes() for path in sorted(pathlib.Path(folder).iterdir())}
