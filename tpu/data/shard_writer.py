"""The shard writer: a corpus into packed examples in TFRecord shards, one definition for two engines.

`write_pretraining_data` runs it in this process (`LocalEngine`); `tpu.data.beam_writer`
runs the same steps as an Apache Beam pipeline (DirectRunner's worker processes,
Dataflow, Flink, Spark). Both go through `run`, the one sequence of steps; for the same
inputs and flags they write byte-identical shards and `metadata.json`, whatever the
number of workers, because every step is a function of the inputs and flags alone. The
steps, one module each:

1. **Chunks** (`tpu.data.corpus_reading`, which states the rule; planned and resumed by
   `tpu.data.chunk_plan`): the corpus cut into chunks of about `--chunk-mb` of its
   files' bytes at document or line boundaries, with documents separated by blank lines
   or one per line (`--documents`); a `tfds:` corpus one chunk per file shard.
2. **Packing** (`tpu.data.chunk_packing`): each chunk's documents packed on their own by the
   one packing rule (`tpu.data.documents.concatenate`) into examples of T ids, kept in a
   packed-chunk file grouped by example number modulo N, with an index beside it.
3. **Shards** (`tpu.data.shard_assembly`): example k of the whole corpus goes to shard
   k mod N, in order; shards differ by one example at most; `metadata.json` from the
   indexes alone.

Resume: the packed chunks and their indexes live in the hidden folder
`.pretraining-work/` of the output with `plan.json` (the settings and the corpus files
with their sizes and modification times) until the run ends; `metadata.json` keeps the
files too. A chunk counts as packed once its index exists (written after its records), a
shard once its file exists (renamed into place complete), so a rerun of an interrupted
run with the same command keeps both, reports on stderr what it kept, and does the rest.
Output made with other settings, or a finished output of a corpus whose files changed
since (a file added, removed, or of another size or modification time; on gs:// the
modification time is the object's update time, new with every generation), is refused
with the differences named (`tpu.data.chunk_plan`); `--overwrite` replaces it. An
interrupted run of a corpus changed since (a bad line fixed) keeps the packed chunks
whose bytes did not change (each records a fingerprint of them), repacks the others and
rewrites every shard, to the bytes of a fresh run. Temporary files of killed runs are
removed when a run starts, and a finished run leaves none, nor the work folder. Every
file is written through `zoo.model_dir`'s atomic writers.

Errors by kind: a fault of the corpus (not UTF-8, a file that cannot be read: a dangling
symbolic link, a file removed since the corpus was listed) is a `CorpusError` naming the
file and line, and keeps the chunks packed before it;
transient storage errors (`records.is_transient`) are retried by every step, in this
process and in Beam's workers alike (`records.retrying`: doubling waits from 1 s, at most
60 s each, for `--retry-seconds`, 300 by default), then end the run as one
`StorageUnavailable` naming the step (a chunk by its number and first piece) and the file
that failed, with the work done kept for a rerun.
On Beam a step that gives up (either error) leaves its message in the work folder
(`*.error`) instead of failing the pipeline; the launcher raises it once the pipeline
has run, so every other chunk and shard is finished and kept.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Iterable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol

from tpu.data.chunk_packing import pack_chunk
from tpu.data.chunk_packing import packed_chunk
from tpu.data.chunk_plan import CHUNK_MB
from tpu.data.chunk_plan import discard_work
from tpu.data.chunk_plan import listing
from tpu.data.chunk_plan import plan_run
from tpu.data.chunk_plan import report_kept
from tpu.data.records import RETRY_SECONDS
from tpu.data.records import CorpusError
from tpu.data.records import retrying
from tpu.data.shard_assembly import finish
from tpu.data.shard_assembly import refusal
from tpu.data.shard_assembly import write_shard

if TYPE_CHECKING:
  from tpu.data.chunk_plan import Plan


class Engine(Protocol):
  """What runs a plan's steps: `LocalEngine` (this process) or `tpu.data.beam_writer.BeamEngine`."""

  name: str

  def pack_and_write(self, plan: Plan, todo: list[int]) -> list[dict[str, Any]]:
    """Every chunk's index (packing those not packed yet), after writing the shards `todo`."""
    ...


class _Progress:
  """Bytes read (or documents), tokens per second and the ETA on stderr."""

  def __init__(self, total, unit):
    from tqdm import tqdm
    self.bar = tqdm(total=total, unit=unit, unit_scale=True, file=sys.stderr, dynamic_ncols=True,
                    mininterval=0.5 if sys.stderr.isatty() else 10.0, desc="tokenizing")
    self.started = time.monotonic()
    self.tokens = 0

  def update(self, amount: int, tokens: int) -> None:
    self.tokens += tokens
    rate = self.tokens / max(time.monotonic() - self.started, 1e-9)
    self.bar.set_postfix_str(f"{self.tokens:,} tokens, {rate:,.0f} tokens/s", refresh=False)
    self.bar.update(amount)

  def close(self) -> None:
    self.bar.close()


def write_pretraining_data(inputs: Sequence[str], vocab: str, seq_length: int, out: str, shards: int, *,
                           lower_case: bool | None = None, compress: bool = False, text_key: str = "text",
                           split: str = "train", data_dir: str | None = None, progress: bool = True,
                           chunk_mb: float = CHUNK_MB, documents: str = "blank-line", overwrite: bool = False,
                           retry_seconds: float = RETRY_SECONDS) -> dict[str, Any]:
  """Writes the shards, `vocab.txt` and `metadata.json` in this process (see the module docstring).

  Args:
    inputs: file globs, or one TFDS spec ("tfds:NAME[/CONFIG]").
    vocab: the vocabulary file, or a model directory (its vocabulary, casing and tokenizer settings).
    seq_length: T, at least 3.
    out: the output directory (local or gs://).
    shards: N, at least 1.
    lower_case: uncased tokenization (as the vocabulary was built); None: the model directory's, else True.
    compress: GZIP the shards (`.tfrecord.gz`).
    text_key, split, data_dir: for a TFDS input.
    progress: show a progress bar on stderr.
    chunk_mb: MB of corpus per chunk (the unit of packing and resume; part of the output's definition).
    documents: "blank-line" (a blank line between documents) or "line" (one document per line).
    overwrite: replace output made with other settings instead of refusing it.
    retry_seconds: how long a step retries transient storage errors (`records.retrying`).

  Returns:
    The metadata.

  Raises:
    CorpusError: naming the file (and line) at fault, or the settings an existing output differs in;
      the chunks packed before it are kept.
    StorageUnavailable: a step kept meeting transient storage errors (`retrying`); the work is kept.
  """
  plan, metadata = plan_run(inputs, vocab, seq_length, out, shards, lower_case=lower_case, compress=compress,
                            text_key=text_key, split=split, data_dir=data_dir, chunk_mb=chunk_mb,
                            documents=documents, overwrite=overwrite, retry_seconds=retry_seconds)
  if metadata is not None:
    return metadata
  return run(plan, LocalEngine(progress))


def run(plan: Plan, engine: Engine) -> dict[str, Any]:
  """The steps of a planned run on `engine`, one sequence for both engines: what an interrupted run
  left is reported and kept (`report_kept`); the engine packs the chunks not packed yet and writes
  the shards not written yet, unless the chunks cannot fill them; then a refusal discards the work,
  and otherwise `vocab.txt` and `metadata.json` complete the output. Returns the metadata."""
  todo = report_kept(plan)
  chunks = engine.pack_and_write(plan, todo)
  problem = refusal(plan, chunks)
  if problem:
    discard_work(plan)
    raise CorpusError(problem)
  written = listing(plan.out)
  missing = [name for name in plan.names if name not in written]
  if missing:
    raise RuntimeError(f"{engine.name} ended without writing {', '.join(missing)}")
  return finish(plan, chunks)


class LocalEngine:
  """The steps in this process, in order: each retried after transient storage errors (`retrying`);
  a corpus error keeps the chunks packed before it."""

  name = "this process"

  def __init__(self, progress: bool = True) -> None:
    self.progress = progress

  def pack_and_write(self, plan: Plan, todo: Iterable[int]) -> list[dict[str, Any]]:
    """Every chunk's index (packing those not packed yet); then the shards `todo`, if the chunks fill them."""
    bar = _Progress(plan.corpus_bytes(), "doc" if plan.tfds else "B") if self.progress else None
    chunks: list[dict[str, Any]] = []
    try:
      for index in range(len(plan.chunks)):
        chunk = retrying(functools.partial(packed_chunk, plan, index),
                         f"reading {plan.chunk_path(index, 'json')}", plan.retry_seconds)
        if chunk is not None and bar is not None:
          bar.update(plan.piece_bytes(index), sum(chunk["tokens"]))
        chunks.append(chunk or retrying(functools.partial(pack_chunk, plan, index, bar),
                                        f"packing chunk {index} ({plan.chunk_where(index)})",
                                        plan.retry_seconds))
    except CorpusError as error:   # a fault of the corpus: the chunks packed before it stay
      kept = (f"({len(chunks)} chunk(s) packed before it are kept in {plan.work}; fix it and rerun the same "
              "command: those whose bytes the fix leaves alone are kept)")
      raise CorpusError(f"{error} {kept}") from None
    finally:
      if bar is not None:
        bar.close()
    if refusal(plan, chunks) is None:
      for shard in todo:
        retrying(functools.partial(write_shard, plan, shard, chunks), f"writing {plan.shard_path(shard)}",
                 plan.retry_seconds)
    return chunks
