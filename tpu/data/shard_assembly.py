"""Shard assembly of the shard writer: the packed chunks' groups into shards, and `metadata.json`.

A global ordinal numbers the examples: chunk c's example j is example
`k = j + (examples of chunks 0 .. c-1)`. Example k goes to shard `k mod N`, and each shard
holds its examples in increasing k: shard s takes, from chunk c in order, the group
`(s - offset_c) mod N` of its packed-chunk file. Shards differ by one example at most, so
none is empty unless the corpus makes fewer examples than shards, which is refused with
both counts named (`refusal`). Shards and metadata need only the chunks' indexes, never
the order in which chunks were packed.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable
from collections.abc import Iterator
from typing import TYPE_CHECKING
from typing import Any

from tpu.data.chunk_packing import encoder_of
from tpu.data.records import FORMAT
from tpu.data.records import METADATA_FILE
from tpu.data.records import vocab_checksum
from zoo.atomic_files import atomic_path
from zoo.atomic_files import write_atomically

if TYPE_CHECKING:
  from tpu.data.chunk_plan import Plan


def refusal(plan: Plan, chunks: Iterable[dict[str, Any]]) -> str | None:
  """Why the packed chunks cannot make the shards (no text, fewer examples than shards), or None."""
  return refusal_of_counts(plan, sum(chunk["examples"] for chunk in chunks),
                           sum(sum(chunk["tokens"]) for chunk in chunks))


def refusal_of_counts(plan: Plan, examples: int, tokens: int) -> str | None:
  """`refusal` from the corpus's examples and tokens in all."""
  if not tokens:
    return f"{plan.where()}: the corpus holds no text"
  if examples < plan.shards:
    plural = "s" * (examples != 1)
    return (f"{plan.where()}: the corpus makes {examples} example{plural} of {plan.seq_length} "
            f"ids, fewer than the {plan.shards} shards asked for, which would leave shards empty: use "
            f"--shards {examples} or fewer")
  return None


def _offsets(chunks):
  """The global ordinal of each chunk's first example."""
  offsets, total = [], 0
  for chunk in chunks:
    offsets.append(total)
    total += chunk["examples"]
  return offsets


def _records(path, start, count):
  """`count` records of a TFRecord file from byte `start`."""
  import tensorflow as tf
  with tf.io.gfile.GFile(path, "rb") as file:
    file.seek(start)
    for _ in range(count):
      length = struct.unpack("<Q", file.read(12)[:8])[0]
      yield file.read(length)
      file.read(4)


def chunk_offsets(counts: Iterable[tuple[int, int]]) -> dict[int, int]:
  """`{chunk: the global ordinal of its first example}` from `[(chunk, examples), ...]` in any order."""
  offsets, total = {}, 0
  for chunk, examples in sorted(counts):
    offsets[chunk] = total
    total += examples
  return offsets


def shard_pieces(plan: Plan, chunk: dict[str, Any], offset: int,
                 shards: Iterable[int] | None = None) -> Iterator[tuple[int, tuple[int, int, int]]]:
  """`(shard, (chunk, byte start, records))` of each shard's group in one packed chunk whose first example
  has the global ordinal `offset` (for the shards in `shards`, default every shard)."""
  for shard in range(plan.shards) if shards is None else shards:
    group = (shard - offset) % plan.shards
    if chunk["counts"][group]:
      yield shard, (chunk["chunk"], chunk["starts"][group], chunk["counts"][group])


def write_shard_pieces(plan: Plan, shard: int, pieces: Iterable[tuple[int, int, int]]) -> None:
  """Writes shard `shard` from its pieces `(chunk, byte start, records)` (any order: written in chunk
  order), through a temporary file beside it."""
  import tensorflow as tf
  path = plan.shard_path(shard)
  options = tf.io.TFRecordOptions(compression_type="GZIP" if plan.compress else None)
  with atomic_path(path) as temporary, tf.io.TFRecordWriter(temporary, options) as writer:
    for chunk, start, count in sorted(pieces):
      for record in _records(plan.chunk_path(chunk, "tfrecord"), start, count):
        writer.write(record)


def write_shard(plan: Plan, shard: int, chunks: Iterable[dict[str, Any]]) -> None:
  """Writes shard `shard` from the packed chunks' indexes (step 3)."""
  chunks = sorted(chunks, key=lambda chunk: chunk["chunk"])
  pieces = [piece for chunk, offset in zip(chunks, _offsets(chunks), strict=True)
            for _, piece in shard_pieces(plan, chunk, offset, [shard])]
  write_shard_pieces(plan, shard, pieces)


def metadata_of(plan: Plan, chunks: Iterable[dict[str, Any]]) -> dict[str, Any]:
  """`metadata.json`'s contents, from the packed chunks' indexes alone."""
  chunks = sorted(chunks, key=lambda chunk: chunk["chunk"])
  per_shard: list[dict[str, Any]] = [dict(file=name, examples=0, full_examples=0, tokens=0)
                                     for name in plan.names]
  for chunk, offset in zip(chunks, _offsets(chunks), strict=True):
    for shard, entry in enumerate(per_shard):
      group = (shard - offset) % plan.shards
      entry["examples"] += chunk["counts"][group]
      entry["full_examples"] += chunk["full_examples"][group]
      entry["tokens"] += chunk["tokens"][group]
  encoder = encoder_of(plan)
  metadata = dict(
      format=FORMAT, seq_length=plan.seq_length, lower_case=plan.lower_case, tokenizer=plan.tokenizer,
      vocab_size=len(plan.vocab), vocab_sha256=vocab_checksum(plan.vocab), special_ids=encoder.special_ids,
      compress=plan.compress, inputs=plan.inputs, files=plan.files,
      documents=sum(chunk["documents"] for chunk in chunks),
      examples=sum(entry["examples"] for entry in per_shard),
      full_examples=sum(entry["full_examples"] for entry in per_shard),
      tokens=sum(entry["tokens"] for entry in per_shard), chunk_bytes=plan.chunk_bytes,
      document_separator=plan.documents, chunks=len(chunks),
      shards=per_shard)
  if plan.tfds:
    metadata["tfds"] = plan.settings()["tfds"]
  return metadata


def finish(plan: Plan, chunks: Iterable[dict[str, Any]]) -> dict[str, Any]:
  """Writes `vocab.txt` and `metadata.json`, then removes the work folder; returns the metadata."""
  import tensorflow as tf

  metadata = metadata_of(plan, chunks)
  write_atomically(os.path.join(plan.out, "vocab.txt"), "".join(f"{token}\n" for token in plan.vocab))
  write_atomically(os.path.join(plan.out, METADATA_FILE), json.dumps(metadata, indent=2) + "\n")
  if tf.io.gfile.exists(plan.work):
    tf.io.gfile.rmtree(plan.work)
  return metadata
