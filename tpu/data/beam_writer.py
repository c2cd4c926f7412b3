"""The shard writer as an Apache Beam pipeline: the steps of `tpu.data.shard_writer`, run by workers.

  python -m tpu.pretraining_data --input 'corpus/*.txt' --vocab vocab.txt --seq-length 128 \\
      --out shards/pretrain --shards 8 --runner DirectRunner \\
      --direct_num_workers 2 --direct_running_mode multi_processing

The pipeline (`BeamEngine`) maps the plan's chunks to `tpu.data.packing` (packing each
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

import os
import sys

from tpu.data import chunk_plan
from tpu.data import packing
from tpu.data import shard_assembly
from tpu.data import shard_writer
from tpu.data.records import CorpusError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Chunk indexes the launcher reads at once once the pipeline has run (small files: on gs:// the
# round trips, not the bytes, take the time).
READERS = 32


def _pack(index, plan):
  """A worker's step 2: the chunk's index, or None when the corpus is at fault (the message is kept)."""
  from zoo.model_dir import write_atomically
  try:
    chunk = packing.packed_chunk(plan, index)
    if chunk is None:
      chunk = packing.pack_chunk(plan, index)
      print(f"tpu.pretraining_data: packed chunk {index + 1} of {len(plan.chunks)} ({chunk['examples']:,} "
            f"examples, {sum(chunk['tokens']):,} tokens)", file=sys.stderr, flush=True)
    return chunk
  except CorpusError as error:   # reported by the launcher: Beam would wrap it in a worker's traceback
    write_atomically(plan.chunk_path(index, "error"), str(error))
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
  """A worker's step 3: one shard from its pieces (a few numbers per chunk)."""
  shard, pieces = shard_and_pieces
  shard_assembly.write_shard_pieces(plan, shard, list(pieces))
  print(f"tpu.pretraining_data: wrote {plan.names[shard]}", file=sys.stderr, flush=True)


def _project_on_pythonpath():
  """Lets local worker processes (DirectRunner's) import the project."""
  paths = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
  if ROOT not in paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])


class BeamEngine:
  """The steps as one Beam pipeline on `runner` with Beam's `pipeline_args` (see the module docstring)."""

  def __init__(self, runner, pipeline_args=()):
    self.runner = runner
    self.name = f"the pipeline on {runner}"
    self.pipeline_args = list(pipeline_args)

  def pack_and_write(self, plan, todo):
    """Packs the chunks not packed yet and writes the shards `todo` on the workers; returns every chunk's
    index, read back from the work folder (a corpus error found by a worker is raised here)."""
    import apache_beam as beam
    import tensorflow as tf
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
    work = chunk_plan.listing(plan.work)   # one listing, then the indexes read in parallel
    for index in range(len(plan.chunks)):
      error = plan.chunk_path(index, "error")
      if os.path.basename(error) in work:
        with tf.io.gfile.GFile(error, "r") as file:
          message = file.read()
        tf.io.gfile.remove(error)   # the chunks packed are kept for a rerun
        raise CorpusError(message)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(READERS) as pool:
      return list(pool.map(lambda index: packing.packed_chunk(plan, index), range(len(plan.chunks))))


def write_with_beam(inputs, vocab, seq_length, out, shards, *, runner, pipeline_args=(), lower_case=None,
                    compress=False, text_key="text", split="train", data_dir=None,
                    chunk_mb=chunk_plan.CHUNK_MB, documents="blank-line", overwrite=False):
  """`shard_writer.write_pretraining_data` as a Beam pipeline on `runner` with Beam's `pipeline_args`.

  A `tfds:` corpus is packed one file shard per worker step: its `data_dir` must be where
  every worker reads (gs:// on Dataflow). Returns the metadata; raises `CorpusError` as the
  single process does.
  """
  plan, metadata = chunk_plan.plan_run(inputs, vocab, seq_length, out, shards, lower_case=lower_case,
                                       compress=compress, text_key=text_key, split=split, data_dir=data_dir,
                                       chunk_mb=chunk_mb, documents=documents, overwrite=overwrite)
  if metadata is not None:
    return metadata
  return shard_writer.run(plan, BeamEngine(runner, pipeline_args))
