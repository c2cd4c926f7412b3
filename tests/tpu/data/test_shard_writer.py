"""The shard writer: chunks by their definition on hostile input, one process vs Beam, kill -9 and resume."""

import os
import pathlib
import random

import numpy as np
import pytest
import tensorflow as tf

from tests.tpu.data.shard_writer_corpus import T
from tests.tpu.data.shard_writer_corpus import make_corpus
from tests.tpu.data.shard_writer_corpus import prose as _prose
from tests.tpu.data.shard_writer_corpus import write_docs as _write_docs
from tests.tpu.data.source_checks import shard_word_ids
from tpu.data import corpus_reading
from tpu.data import shard_writer
from tpu.data.records import CorpusError
from tpu.data.records import shard_name
from zoo.text import TextEncoder
from zoo.text import build_vocab
from zoo.text import write_vocab

ROOT = str(pathlib.Path(__file__).resolve().parents[3])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """Real prose in several files, with hostile ones among them."""
  return make_corpus(tmp_path_factory.mktemp("corpus"))


def _files(folder):
  return sorted(str(path) for path in folder.glob("*.txt"))


def _cut(data, p, chunk_bytes, documents):
  """`cut(p)` of `tpu.data.corpus_reading`'s rule, from a file's bytes in memory."""
  n = len(data)
  if p <= 0 or p >= n:
    return min(max(p, 0), n)
  limit = min(chunk_bytes, corpus_reading.MAX_LINE_BYTES)
  starts = [q for q in range(p, min(p + chunk_bytes, n) + 1) if q == n or data[q - 1:q] == b"\n"]
  if starts:
    if documents == "line":
      return starts[0]
    for q in starts:   # the first blank line (or the file's end), else the first line start
      if q == n:
        return n
      newline = data.find(b"\n", q)
      end = n if newline < 0 else newline + 1
      if end - q <= limit and not data[q:end].decode("utf-8", errors="replace").strip():
        return q
    return starts[0]
  for q in range(p, min(p + min(4096, chunk_bytes // 2), n)):   # inside a line longer than S
    if data[q - 1:q] in (b" ", b"\t", b"\r"):
      return q
  while p < n and 0x80 <= data[p] < 0xC0:
    p += 1
  return p


def _segments(data, begin, stop, chunk_bytes, documents):
  """The stripped lines (segments of long lines) of `data[begin:stop]`, "" where a document ends."""
  limit = min(chunk_bytes, corpus_reading.MAX_LINE_BYTES)
  position, fresh = begin, True
  while position < stop:
    newline = data.find(b"\n", position, stop)
    line_end = stop if newline < 0 else newline + 1
    end = line_end
    if line_end - position > limit:   # a segment: after its last space in its second half, else a character
      window = data[position:position + limit]
      spaces = [i for i in range(limit // 2, limit) if window[i:i + 1] in (b" ", b"\t", b"\r")]
      end = position + spaces[-1] + 1 if spaces else position + limit
      while not spaces and 0x80 <= data[end] < 0xC0 and end > position + limit - 3:
        end -= 1
    raw = data[position:end]
    text = raw.decode("utf-8").strip()
    ends_line = raw.endswith(b"\n")
    if text:
      yield text
    elif fresh and ends_line and documents == "blank-line":
      yield ""
    if ends_line and documents == "line":
      yield ""
    position, fresh = end, ends_line


def _chunk_documents(files, chunk_bytes, documents="blank-line"):
  """{chunk: [document (its lines), ...]} by the rule, computed from the files' bytes in memory."""
  chunks, position = {}, 0
  for path in files:
    data = pathlib.Path(path).read_bytes()
    n = len(data)
    for index in range(position // chunk_bytes, -(-(position + n) // chunk_bytes)):
      start = max(index * chunk_bytes, position) - position
      end = min((index + 1) * chunk_bytes, position + n) - position
      if end <= start:
        continue
      docs, current = chunks.setdefault(index, []), None
      begin, stop = _cut(data, start, chunk_bytes, documents), _cut(data, end, chunk_bytes, documents)
      for line in _segments(data, begin, stop, chunk_bytes, documents) if begin < stop else ():
        if not line:
          current = None
        elif current is None:
          current = [line]
          docs.append(current)
        else:
          current.append(line)
    position += n
  return chunks


def _reference(files, chunk_bytes, encoder, shards, documents="blank-line"):
  """The examples of each shard by the definition, computed independently of the writer.

  Each chunk's documents (`_chunk_documents`) are tokenized line by line (in one call), joined with [SEP]
  (none at an example's start) and cut into bodies of T - 2; example k of the whole corpus goes
  to shard k mod N.
  """
  chunks = _chunk_documents(files, chunk_bytes, documents)
  lines = [line for owner in sorted(chunks) for document in chunks[owner] for line in document]
  ids = iter(encoder.tokenize(tf.constant(lines, tf.string)).to_list())   # one call: each line alone
  bodies = []
  for owner in sorted(chunks):
    stream = []
    for document in chunks[owner]:
      if stream and len(stream) % (T - 2):
        stream.append(encoder.sep_id)
      for _ in document:
        stream.extend(next(ids))
    bodies.extend(stream[start:start + T - 2] for start in range(0, len(stream), T - 2))
  documents = sum(len(docs) for docs in chunks.values())
  return [bodies[shard::shards] for shard in range(shards)], documents


def _random_layout(rng):
  """Bytes of a file of random lines: words, multibyte characters, blank and whitespace-only lines,
  lines longer than a chunk with and without spaces, CRLF ends."""
  words = ["alpha", "beta", "Café", "東京", "👩‍💻", "x" * 40, "\u3000", "\x07"]
  lines = []
  for _ in range(rng.integers(0, 40)):
    kind = rng.random()
    if kind < 0.2:
      lines.append("")
    elif kind < 0.25:
      lines.append(" \t \r")
    elif kind < 0.3:
      lines.append(" ".join(rng.choice(words, rng.integers(100, 900))))
    elif kind < 0.33:
      lines.append("".join(rng.choice(words, rng.integers(100, 900))))
    else:
      lines.append(" ".join(rng.choice(words, rng.integers(1, 12))) + "\r" * int(rng.random() < 0.2))
  return ("\n".join(lines) + "\n" * int(rng.random() < 0.5)).encode("utf-8")


def test_the_reader_follows_the_rule_on_random_layouts(tmp_path):
  """`corpus_reading`'s cuts and lines equal the rule computed here from the bytes in memory, on
  random files and chunk sizes, in both document modes."""
  rng = np.random.default_rng(7)
  for trial in range(120):
    data = _random_layout(rng)
    path = tmp_path / f"{trial}.txt"
    path.write_bytes(data)
    chunk_bytes = int(rng.choice([1000, 1500, 4000, 100000]))
    for documents in corpus_reading.DOCUMENTS:
      positions = range(0, len(data) + chunk_bytes, chunk_bytes)
      with open(path, "rb") as file:
        cuts = [corpus_reading.cut(file, p, len(data), documents, chunk_bytes) for p in positions]
      expected = [_cut(data, p, chunk_bytes, documents) for p in positions]
      assert cuts == expected, (trial, documents, chunk_bytes)
      for start in range(0, len(data), chunk_bytes):
        end = min(start + chunk_bytes, len(data))
        lines = list(corpus_reading.piece_lines(str(path), start, end, len(data), documents, chunk_bytes))
        begin, stop = _cut(data, start, chunk_bytes, documents), _cut(data, end, chunk_bytes, documents)
        assert lines == list(_segments(data, begin, stop, chunk_bytes, documents)), (trial, documents, start)
        if trial % 8 == 0:   # bytes outside the piece's span, replaced, change none of its lines
          low, high = corpus_reading.piece_span(start, end, len(data), chunk_bytes)
          filler = _random_layout(rng) + b"words\n\n"
          other = filler * (len(data) // len(filler) + 1)
          changed = tmp_path / f"{trial}-changed.txt"
          changed.write_bytes(other[:low] + data[low:high] + other[:len(data) - high])
          assert list(corpus_reading.piece_lines(str(changed), start, end, len(data), documents,
                                                 chunk_bytes)) == lines, (trial, documents, start)


@pytest.fixture(scope="module")
def layouts(corpus, tmp_path_factory):
  """Corpora laid out as users have them, with the prose vocabulary: one sentence per line (no blank
  lines), one line of 70 KB (no newline at all, a run without spaces and multibyte characters in it),
  and many small files."""
  folder = tmp_path_factory.mktemp("layouts")
  words = " ".join(" ".join(doc) for doc in _prose()).split()
  sentences = " ".join(words[:12000]).replace(". ", ".\n").encode("utf-8")
  (folder / "a_sentences.txt").write_bytes(sentences)
  line = " ".join(words[12000:21000]).encode("utf-8")
  run = ("Straße東京" * 400).encode("utf-8")
  (folder / "b_one_line.txt").write_bytes(line[:30000] + run + line[30000:])
  small = folder / "c_small"
  small.mkdir()
  for index in range(40):
    (small / f"{index:02d}.txt").write_text(f"{words[index * 7]} {words[index * 7 + 1]}\n" * (index % 3))
  return folder


def _check_definition(files, vocab, tmp_path, chunk_bytes, documents):
  metadata = shard_writer.write_pretraining_data(files, vocab, T, str(tmp_path), 3, progress=False,
                                                 chunk_mb=chunk_bytes / 1e6, documents=documents)
  encoder = TextEncoder(vocab, seq_length=T)
  expected, count = _reference(files, chunk_bytes, encoder, 3, documents)
  assert metadata["documents"] == count and metadata["chunk_bytes"] == chunk_bytes
  assert metadata["document_separator"] == documents
  total = sum(pathlib.Path(path).stat().st_size for path in files)
  assert metadata["chunks"] == -(-total // chunk_bytes)
  for shard, bodies in enumerate(expected):
    examples = shard_word_ids(tmp_path / shard_name(shard, 3, False), T)
    assert len(examples) == len(bodies) == metadata["shards"][shard]["examples"]
    for ids, body in zip(examples, bodies, strict=True):
      real = ids[ids != encoder.pad_id]
      assert ids[0] == encoder.cls_id and real[-1] == encoder.sep_id and len(ids) == T
      assert real[1:-1].tolist() == body
    assert metadata["shards"][shard]["tokens"] == sum(
        sum(token not in (encoder.sep_id,) for token in body) for body in bodies)
  assert sorted(os.listdir(tmp_path)) == ["metadata.json"] + [shard_name(s, 3, False) for s in range(3)] + [
      "vocab.txt"], "temporary files or the work folder stay"
  return metadata


@pytest.mark.parametrize("chunk_bytes,documents", [(25000, "blank-line"),
                                                   pytest.param(10**7, "blank-line", marks=pytest.mark.slow),
                                                   pytest.param(25000, "line", marks=pytest.mark.slow)])
def test_chunks_follow_the_definition_on_hostile_prose(corpus, tmp_path, chunk_bytes, documents):
  _check_definition(_files(corpus), str(corpus / "wordpiece.vocab"), tmp_path, chunk_bytes, documents)


@pytest.mark.parametrize("documents", ["blank-line", pytest.param("line", marks=pytest.mark.slow)])
def test_chunks_follow_the_definition_on_every_layout(corpus, layouts, tmp_path, documents):
  """One sentence per line, a line longer than a chunk, many small files: chunks hold their share."""
  files = _files(layouts) + sorted(str(path) for path in (layouts / "c_small").glob("*.txt"))
  metadata = _check_definition(files, str(corpus / "wordpiece.vocab"), tmp_path, 20000, documents)
  # No chunk is left empty by a document or a line longer than it (before, one chunk per file held all).
  by_chunk = _chunk_documents(files, 20000, documents)
  assert metadata["chunks"] >= 6
  assert [index for index in range(metadata["chunks"]) if not by_chunk.get(index)] == []


@pytest.mark.parametrize("documents", ["blank-line", pytest.param("line", marks=pytest.mark.slow)])
def test_the_text_source_and_the_shard_writer_make_the_same_examples(corpus, tmp_path, documents):
  """`text:` with `documents=` and the shard writer with `--documents` (one chunk) agree in every example."""
  from tpu import data
  from tpu.data import pipeline
  vocab = str(corpus / "wordpiece.vocab")
  shard_writer.write_pretraining_data([str(corpus / "*.txt")], vocab, T, str(tmp_path), 1, progress=False,
                                      chunk_mb=10, documents=documents)
  written = [ids.tolist() for ids in shard_word_ids(tmp_path / shard_name(0, 1, False), T)]
  source = data.load(f"text:{corpus}/*.txt", documents=documents if documents != "line" else None)
  encoder = TextEncoder(vocab, seq_length=T)
  read = [example["input_word_ids"].tolist()
          for example in pipeline.concatenated_text(source.dataset, encoder).as_numpy_iterator()]
  assert len(read) == len(written) > 10
  assert read == written


@pytest.mark.slow   # 9 s: in the full suite, to keep `make test-fast` within its 3 minutes
def test_shards_of_a_thousand_documents_are_balanced(tmp_path):
  """Mixed lengths: every paragraph of Python's docs a document, and a few whole docstring sets."""
  docs = _prose()
  paragraphs = [[line] for doc in docs for line in doc]
  mixed = paragraphs[:1100] + docs[:10]
  random.Random(0).shuffle(mixed)
  assert len(mixed) >= 1000
  _write_docs(tmp_path / "corpus.txt", mixed)
  write_vocab(build_vocab([str(tmp_path / "corpus.txt")], 800), str(tmp_path / "vocab.txt"))
  metadata = shard_writer.write_pretraining_data([str(tmp_path / "corpus.txt")], str(tmp_path / "vocab.txt"),
                                                 T, str(tmp_path / "out"), 7, progress=False, chunk_mb=0.04)
  counts = [shard["examples"] for shard in metadata["shards"]]
  sizes = [(tmp_path / "out" / shard["file"]).stat().st_size for shard in metadata["shards"]]
  assert metadata["chunks"] >= 3 and metadata["documents"] == len(mixed)
  assert max(counts) - min(counts) <= 1 and min(counts) > 0
  assert max(abs(size - np.mean(sizes)) for size in sizes) <= 0.05 * np.mean(sizes), sizes


def test_a_tiny_corpus_is_refused_naming_the_counts(corpus, tmp_path):
  (tmp_path / "tiny.txt").write_text("One short sentence.\n\nAnd another one.\n")
  vocab = str(corpus / "wordpiece.vocab")
  with pytest.raises(CorpusError, match=r"tiny.txt: the corpus makes 1 example of 64 ids, fewer than the 8 "
                                        r"shards asked for.*use --shards 1 or fewer"):
    shard_writer.write_pretraining_data([str(tmp_path / "tiny.txt")], vocab, T, str(tmp_path / "out"), 8,
                                        progress=False)
  assert os.listdir(tmp_path / "out") == [], "a refused run leaves nothing"
  metadata = shard_writer.write_pretraining_data([str(tmp_path / "tiny.txt")], vocab, T,
                                                 str(tmp_path / "out"), 1, progress=False)
  assert metadata["shards"][0]["examples"] == 1 and metadata["documents"] == 2
