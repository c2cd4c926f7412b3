"""The shard writer as an Apache Beam pipeline: the steps of `tpu.data.shard_writer`, run by workers.

  python -m tpu.pretraining_data --input 'corpus/*.txt' --vocab vocab.txt --seq-length 128 \\
      --out shards/pretrain --shards 8 --runner DirectRunner \\
      --direct_num_workers 2 --direct_running_mode multi_processing

The pipeline (`BeamEngine`) maps the plan's chunks to `tpu.data.chunk_packing` (packing each
chunk not packed yet, one chunk in memory at a time: `--chunk-mb` bounds a worker's
memory); the chunks' example counts (three numbers a chunk, combined on one worker) give
each chunk's offset, which a join by chunk brings to its packed chunk (no side input);
each packed chunk then emits, keyed by shard, where its group for that shard lies in its
packed-chunk file (`shard_assembly.shard_pieces`: three numbers), and a shuffle by shard
gives each shard's writer its own pieces only, which it copies in chunk order
(`shard_assembly.write_shard_pieces`, as the single process does). The launching process
then checks the output and writes `metadata.json` (`tpu.data.shard_writer.run`, the
driver both engines share). Each step is a function of the inputs and flags alone, so the
output is byte-identical to the single process's, whatever the runner and number of
workers, and a rerun keeps what a killed pipeline finished (packed chunks, complete
shards).

Errors: each step retries transient storage errors itself (`records.retrying`, for
`--retry-seconds`), on every runner: DirectRunner retries no bundle, and Dataflow's four
attempts of a bundle last less than an outage of minutes. A step that gives up
(`StorageUnavailable`) or meets a fault of the corpus (`CorpusError`) does not fail the
pipeline: it leaves its message as a `*.error` file in the work folder, no shard is
written from a failed chunk, and the other steps finish. The launcher then raises the
first message (`raise_failures`) as the single process would, one line naming the file;
what the workers finished is kept for a rerun.

Runners and their options are Beam's own (`--runner` plus any of Beam's pipeline
options, passed through): DirectRunner locally (worker processes with
`--direct_running_mode multi_processing --direct_num_workers N`); Dataflow, Flink or
Spark with their options. The corpus, the output and Beam's temporary location must be
where every worker can read and write (`gs://` on Dataflow), and the workers need this
project's code (`--setup_file`, `--extra_package` or a custom container; see
`tpu/README.md`). A DirectRunner's workers are processes of this interpreter started
with the project's root on their `PYTHONPATH`. A `tfds:` corpus is one chunk per file
shard of its split, its `--data-dir` read by every worker.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Iterable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

from tpu.data import chunk_packing
from tpu.data import chunk_plan
from tpu.data import shard_assembly
from tpu.data import shard_writer
from tpu.data.records import RETRY_SECONDS
from tpu.data.records import CorpusError
from tpu.data.records import StorageUnavailable
from tpu.data.records import retrying

if TYPE_CHECKING:
  from tpu.data.chunk_plan import Plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Chunk indexes the launcher reads at once once the pipeline has run (small files: on gs:// the
# round trips, not the bytes, take the time).
READERS = 32


def _failed(plan, name, error):
  """Leaves a step's `CorpusError` or `StorageUnavailable` in the work folder as `name` (`*.error`), for the
  launcher to raise once the pipeline has run: Beam would wrap it in a worker's traceback."""
  from zoo.atomic_files import write_atomically
  text = json.dumps(dict(kind=type(error).__name__, message=str(error))) + "\n"
  retrying(lambda: write_atomically(os.path.join(plan.work, name), text), f"writing {plan.work}/{name}",
           plan.retry_seconds)


def _pack(index, plan):
  """A worker's step 2: the chunk's index, or None when it cannot be packed (the corpus is at fault, or
  storage stayed unavailable through the retries: the message is left for the launcher)."""
  try:
    chunk = retrying(lambda: chunk_packing.packed_chunk(plan, index),
                     f"reading {plan.chunk_path(index, 'json')}", plan.retry_seconds)
    if chunk is None:
      chunk = retrying(lambda: chunk_packing.pack_chunk(plan, index),
                       f"packing chunk {index} ({plan.chunk_where(index)})", plan.retry_seconds)
      print(f"tpu.pretraining_data: packed chunk {index + 1} of {len(plan.chunks)} ({chunk['examples']:,} "
            f"examples, {sum(chunk['tokens']):,} tokens)", file=sys.stderr, flush=True)
    return chunk
  except (CorpusError, StorageUnavailable) as error:
    _failed(plan, os.path.basename(plan.chunk_path(index, "error")), error)
    return None


def _summary(chunk):
  """A chunk's `(chunk, examples, tokens)`, or None for a chunk whose corpus was at fault."""
  return None if chunk is None else (chunk["chunk"], chunk["examples"], sum(chunk["tokens"]))


def _offsets(summaries, plan):
  """`(chunk, offset)` of every chunk; none when a chunk failed or the chunks cannot fill the shards
  (the launcher then says why and writes nothing)."""
  if any(summary is None for summary in summaries):
    return
  if shard_assembly.refusal_of_counts(plan, sum(summary[1] for summary in summaries),
                                      sum(summary[2] for summary in summaries)):
    return
  yield from shard_assembly.chunk_offsets([(chunk, examples) for chunk, examples, _ in summaries]).items()


def _by_chunk(chunk):
  """A packed chunk keyed by its number (none for a chunk whose corpus was at fault)."""
  if chunk is not None:
    yield chunk["chunk"], chunk


def _pieces(joined, plan, todo):
  """The pieces of the shards still to write that a packed chunk holds, keyed by shard, once its offset
  has joined it (`(chunk number, {"chunk": [index], "offset": [offset]})`)."""
  _, values = joined
  chunks, offsets = list(values["chunk"]), list(values["offset"])
  if chunks and offsets:
    yield from shard_assembly.shard_pieces(plan, chunks[0], offsets[0], todo)


def _write(shard_and_pieces, plan):
  """A worker's step 3: one shard from its pieces (a few numbers per chunk); when storage stays unavailable
  through the retries, the message is left for the launcher and the other shards are still written."""
  shard, pieces = shard_and_pieces
  pieces = list(pieces)
  try:
    retrying(lambda: shard_assembly.write_shard_pieces(plan, shard, pieces),
             f"writing {plan.shard_path(shard)}", plan.retry_seconds)
  except (CorpusError, StorageUnavailable) as error:
    _failed(plan, f"shard-{shard:05d}.error", error)
    return
  print(f"tpu.pretraining_data: wrote {plan.names[shard]}", file=sys.stderr, flush=True)


def raise_failures(plan: Plan) -> None:
  """Raises the first error a worker's step left in the work folder (chunks first, in order), naming how many
  more there were; removes them all (the work finished is kept for a rerun)."""
  import tensorflow as tf
  work = chunk_plan.listing(plan.work)
  names = sorted(name for name in work if name.endswith(".error"))
  if not names:
    return
  packed = sum(os.path.basename(plan.chunk_path(index, "json")) in work for index in range(len(plan.chunks)))
  failures = []
  for name in names:
    path = os.path.join(plan.work, name)

    def read(path=path):
      with tf.io.gfile.GFile(path, "r") as file:
        return file.read()
    text = retrying(read, f"reading {path}", plan.retry_seconds)
    try:
      failures.append(json.loads(text))
    except ValueError:   # a plain message
      failures.append(dict(kind="CorpusError", message=text))
    retrying(functools.partial(tf.io.gfile.remove, path), f"removing {path}", plan.retry_seconds)
  first = failures[0]
  more = f" ({len(failures) - 1} other step(s) failed too)" if len(failures) > 1 else ""
  if first["kind"] == "StorageUnavailable":
    raise StorageUnavailable(first["message"] + more)
  raise CorpusError(f"{first['message']}{more} ({packed} of {len(plan.chunks)} chunks packed are kept in "
                    f"{plan.work}; fix it and rerun the same command: those whose bytes the fix leaves alone "
                    "are kept)")


def _project_on_pythonpath():
  """Lets local worker processes (DirectRunner's) import the project."""
  paths = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
  if ROOT not in paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])


class BeamEngine:
  """The steps as one Beam pipeline on `runner` with Beam's `pipeline_args` (see the module docstring)."""

  def __init__(self, runner: str, pipeline_args: Iterable[str] = ()) -> None:
    self.runner = runner
    self.name = f"the pipeline on {runner}"
    self.pipeline_args = list(pipeline_args)

  def pack_and_write(self, plan: Plan, todo: list[int]) -> list[dict[str, Any]]:
    """Packs the chunks not packed yet and writes the shards `todo` on the workers; returns every chunk's
    index, read back from the work folder (an error a worker's step gave up with is raised here)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    _project_on_pythonpath()
    pipeline_args = list(self.pipeline_args)
    if not any(arg.startswith("--default_sdk_harness_log_level") for arg in pipeline_args):
      pipeline_args.append("--default_sdk_harness_log_level=WARNING")   # workers' progress lines, not Beam's
    options = PipelineOptions(pipeline_args, runner=self.runner)
    print(f"tpu.pretraining_data: {len(plan.chunks)} chunks, {len(todo)} shards to write on {self.runner}",
          file=sys.stderr, flush=True)
    with beam.Pipeline(options=options) as pipeline:
      chunks = (pipeline
                | "Chunks" >> beam.Create(range(len(plan.chunks)))
                | "Spread chunks" >> beam.Reshuffle()
                | "Pack" >> beam.Map(_pack, plan))
      offsets = (chunks
                 | "Count" >> beam.Map(_summary)
                 | "Counts" >> beam.combiners.ToList()
                 | "Offsets" >> beam.FlatMap(_offsets, plan))
      _ = (dict(chunk=chunks | "Key chunks" >> beam.FlatMap(_by_chunk), offset=offsets)
           | "Join offsets" >> beam.CoGroupByKey()
           | "Pieces" >> beam.FlatMap(_pieces, plan, todo)
           | "By shard" >> beam.GroupByKey()
           | "Write" >> beam.Map(_write, plan))
    raise_failures(plan)
    from concurrent.futures import ThreadPoolExecutor

    def read(index):
      return retrying(lambda: chunk_packing.packed_chunk(plan, index),
                      f"reading {plan.chunk_path(index, 'json')}", plan.retry_seconds)
    with ThreadPoolExecutor(READERS) as pool:   # small files: on gs:// the round trips take the time
      return list(pool.map(read, range(len(plan.chunks))))


def write_with_beam(inputs: Sequence[str], vocab: str, seq_length: int, out: str, shards: int, *, runner: str,
                    pipeline_args: Iterable[str] = (), lower_case: bool | None = None, compress: bool = False,
                    text_key: str = "text", split: str = "train", data_dir: str | None = None,
                    chunk_mb: float = chunk_plan.CHUNK_MB, documents: str = "blank-line",
                    overwrite: bool = False, retry_seconds: float = RETRY_SECONDS) -> dict[str, Any]:
  """`shard_writer.write_pretraining_data` as a Beam pipeline on `runner` with Beam's `pipeline_args`.

  A `tfds:` corpus is packed one file shard per worker step: its `data_dir` must be where
  every worker reads (gs:// on Dataflow). Returns the metadata; raises `CorpusError` and
  `StorageUnavailable` as the single process does (`raise_failures`), the work finished kept.
  """
  plan, metadata = chunk_plan.plan_run(inputs, vocab, seq_length, out, shards, lower_case=lower_case,
                                       compress=compress, text_key=text_key, split=split, data_dir=data_dir,
                                       chunk_mb=chunk_mb, documents=documents, overwrite=overwrite,
                                       retry_seconds=retry_seconds)
  if metadata is not None:
    return metadata
  return shard_writer.run(plan, BeamEngine(runner, pipeline_args))
