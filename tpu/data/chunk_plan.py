"""Chunk planning and resume of the shard writer: the settings, the corpus files, the work folder.

`plan_run` checks the flags and the output folder and returns the `Plan` (picklable: Beam
ships it to workers) with the corpus cut into chunks (`tpu.data.corpus_reading`'s rule).
What makes the bytes of the output (`Plan.settings`: T, casing, tokenizer, vocabulary,
shards, compression, chunk size, documents, inputs) and the corpus files with their sizes
and modification times are recorded in the work folder's `plan.json` and in
`metadata.json`; a rerun with other settings is refused with the differences named
(`--overwrite` replaces the output), and so is a finished output whose corpus files
changed, were added or removed since. An interrupted run whose corpus files changed since
(its settings the same: a bad line fixed, say) is taken up (`keep_unchanged`): a packed
chunk is kept when its pieces are the same and, for each piece in a changed file, the
SHA-256 of the bytes its lines depend on (`corpus_reading.piece_fingerprint`, recorded in
its index) is too; the other chunks and every shard (made of all chunks) are removed, the
count said on stderr, and `plan.json` records the new files. The output is then that of a
fresh run on the corpus as it is. Temporary files of killed runs are removed when a run
starts. The driver is `tpu.data.shard_writer`.
"""

import dataclasses
import json
import os
import sys
from collections.abc import Collection
from collections.abc import Sequence
from typing import Any

from tpu.data import corpus_reading
from tpu.data import tfds_datasets
from tpu.data.records import METADATA_FILE
from tpu.data.records import RETRY_SECONDS
from tpu.data.records import SHARD_PREFIX
from tpu.data.records import CorpusError
from tpu.data.records import input_files
from tpu.data.records import load_encoder
from tpu.data.records import shard_name
from tpu.data.records import tokenizer_settings
from tpu.data.records import vocab_checksum
from zoo.atomic_files import is_temporary
from zoo.atomic_files import write_atomically

# Bytes of corpus text per chunk, the unit of parallel work and of resume (`--chunk-mb`).
CHUNK_MB = 16
WORK_FOLDER = ".pretraining-work"
PLAN_FILE = "plan.json"
# What `--flag` each setting of the output comes from, for the refusal of a changed one.
SETTING_NAMES = dict(seq_length="--seq-length", lower_case="--lower-case",
                     tokenizer="the tokenizer's special tokens and [CLS] type (--vocab)",
                     vocab_sha256="the vocabulary's SHA-256 (--vocab)", shards="--shards",
                     compress="--compress", chunk_bytes="--chunk-mb (bytes)", documents="--documents",
                     inputs="--input",
                     tfds="--text-key/--split")
# How a refusal of what the output folder holds ends.
AGAIN = "use --overwrite to replace it, or another --out"


@dataclasses.dataclass
class Plan:
  """What a run computes: settings, the vocabulary, the chunks. Picklable (Beam ships it to workers)."""

  out: str
  seq_length: int
  shards: int
  compress: bool
  chunk_bytes: int
  vocab: list
  lower_case: bool
  tokenizer: dict
  inputs: list
  files: list | None   # [[path, size, modified (ns)], ...] of a file corpus, None for TFDS
  chunks: list         # per chunk, its pieces [[path, start, end], ...] (a TFDS corpus: [[shard]])
  tfds: dict | None = None   # name, text_key, split, data_dir of a `tfds:` corpus
  documents: str = "blank-line"   # `corpus_reading.DOCUMENTS`
  retry_seconds: float = RETRY_SECONDS   # how long a step retries transient errors (`records.retrying`)

  @property
  def work(self) -> str:
    return os.path.join(self.out, WORK_FOLDER)

  @property
  def names(self) -> list[str]:
    return [shard_name(index, self.shards, self.compress) for index in range(self.shards)]

  def shard_path(self, index: int) -> str:
    return os.path.join(self.out, shard_name(index, self.shards, self.compress))

  @property
  def plan_path(self) -> str:
    return os.path.join(self.work, PLAN_FILE)

  def chunk_path(self, index: int, suffix: str) -> str:
    return os.path.join(self.work, f"chunk-{index:05d}.{suffix}")

  def settings(self) -> dict[str, Any]:
    """The settings that make the bytes of the output (compared on a rerun)."""
    settings = dict(seq_length=self.seq_length, lower_case=self.lower_case, tokenizer=self.tokenizer,
                    vocab_sha256=vocab_checksum(self.vocab), shards=self.shards, compress=self.compress,
                    chunk_bytes=self.chunk_bytes, documents=self.documents, inputs=self.inputs)
    if self.tfds:
      settings["tfds"] = dict(text_key=self.tfds["text_key"], split=self.tfds["split"])
    return settings

  def record(self) -> dict[str, Any]:
    """What `plan.json` records: the settings and the corpus files' states (compared on a rerun)."""
    return dict(self.settings(), files=self.files)

  def piece_bytes(self, index: int) -> int:
    """The bytes of corpus of chunk `index` (0 for a TFDS shard)."""
    return 0 if self.tfds else sum(end - start for _, start, end in self.chunks[index])

  def corpus_bytes(self) -> int | None:
    return sum(size for _, size, _ in self.files) if self.files is not None else None

  def chunk_where(self, index: int) -> str:
    """Where chunk `index` starts, briefly, for a message: its first piece, 'name[start:end]' (the file's
    name without its folder), and how many more files its pieces take, never all of them (a chunk of
    many small files has thousands); a TFDS chunk: its split's file shard."""
    if self.tfds:
      return f"{self.inputs[0]} {self.tfds['split']}[{self.chunks[index][0]}shard]"
    (path, start, end), *others = self.chunks[index]
    more = f" + {len(others)} more file(s)" if others else ""
    return f"{os.path.basename(path)}[{start}:{end}]{more}"

  def where(self) -> str:
    sources = [path for path, _, _ in self.files] if self.files is not None else self.inputs
    return ", ".join(sources[:5]) + (" …" if len(sources) > 5 else "")


def file_states(paths: Sequence[str]) -> list[list[Any]]:
  """`[[path, size, modified], ...]`: what a rerun compares of each corpus file. `modified` is
  the modification time in nanoseconds (on gs://, the object's update time, which every new
  generation of it changes). A file that is gone since it was listed, or a dangling symbolic link,
  is a `CorpusError` naming it."""
  import tensorflow as tf
  states = []
  for path in paths:
    try:
      stat = tf.io.gfile.stat(path)
    except tf.errors.OpError as error:
      raise corpus_reading.read_error(path, error) from None
    states.append([path, int(stat.length), int(stat.mtime_nsec)])
  return states


def changed_files(there: Sequence[Sequence[Any]], here: Sequence[Sequence[Any]]) -> str:
  """'added …; removed …; changed …' naming the files of `here` that differ from `there`
  (`file_states` lists), or '' when none does."""
  before = {path: (size, modified) for path, size, modified in there}
  after = {path: (size, modified) for path, size, modified in here}
  added = [path for path in after if path not in before]
  removed = [path for path in before if path not in after]
  changed = []
  for path in after:
    if path in before and after[path] != before[path]:
      (size_there, time_there), (size_here, time_here) = before[path], after[path]
      what = (f"{size_there:,} bytes there, {size_here:,} here" if size_there != size_here else
              f"the same size, modified since ({time_there} ns there, {time_here} ns here)")
      changed.append(f"{path} ({what})")
  parts = [(f"{len(names)} file(s) {label}: " + ", ".join(names[:5]) + (" …" if len(names) > 5 else ""))
           for label, names in (("added", added), ("removed", removed), ("changed", changed)) if names]
  return "; ".join(parts)


def metadata_settings(metadata: dict[str, Any]) -> dict[str, Any]:
  """A finished output's settings, as `Plan.settings` gives them."""
  settings = dict(seq_length=metadata.get("seq_length"), lower_case=metadata.get("lower_case"),
                  tokenizer=metadata.get("tokenizer"), vocab_sha256=metadata.get("vocab_sha256"),
                  shards=len(metadata.get("shards", [])), compress=metadata.get("compress"),
                  chunk_bytes=metadata.get("chunk_bytes"), documents=metadata.get("document_separator"),
                  inputs=metadata.get("inputs"))
  if "tfds" in metadata:
    settings["tfds"] = metadata["tfds"]
  return settings


def differences(there: dict[str, Any], here: dict[str, Any]) -> str:
  """'--seq-length: 128 there, 64 here; ...' for the settings that differ."""
  keys = [key for key in SETTING_NAMES if key in there or key in here]
  return "; ".join(f"{SETTING_NAMES[key]}: {json.dumps(there.get(key))} there, "
                   f"{json.dumps(here.get(key))} here" for key in keys if there.get(key) != here.get(key))


def corpus_changes(there: Sequence[Sequence[Any]] | None, here: Sequence[Sequence[Any]] | None,
                   what: str) -> str:
  """The differences of a recorded corpus (`there`: `file_states` or None) from this run's, or ''."""
  if here is None:   # a `tfds:` corpus: its name and split are among the settings
    return ""
  if there is None:
    return f"{what} records no corpus files (written before they were recorded), so they cannot be compared"
  return changed_files(there, here)


def discard_work(plan: Plan) -> None:
  """Removes the work folder (after a refusal: nothing of it can serve a rerun with other flags)."""
  import tensorflow as tf
  if tf.io.gfile.exists(plan.work):
    tf.io.gfile.rmtree(plan.work)


def report(message: str) -> None:
  print(f"tpu.pretraining_data: {message}", file=sys.stderr, flush=True)


def _remove_temporaries(folder):
  """Removes the temporary files that killed runs left in `folder`."""
  import tensorflow as tf
  if tf.io.gfile.isdir(folder):
    for name in tf.io.gfile.listdir(folder):
      if is_temporary(name):
        tf.io.gfile.remove(os.path.join(folder, name))


def plan_run(inputs: Sequence[str], vocab: str, seq_length: int, out: str, shards: int, *,
             lower_case: bool | None = None, compress: bool = False, text_key: str = "text",
             split: str = "train", data_dir: str | None = None, chunk_mb: float = CHUNK_MB,
             documents: str = "blank-line", overwrite: bool = False,
             retry_seconds: float = RETRY_SECONDS) -> tuple[Plan, dict[str, Any] | None]:
  """Checks the flags and the output folder; returns `(plan, metadata)`, metadata if it is complete already.

  Creates the output and work folders and `plan.json`; removes stale temporary files;
  refuses output made with other settings (`CorpusError` naming them) unless `overwrite`,
  which removes it. In steps: the flags checked (`_check_flags`), the corpus cut into chunks
  (`_new_plan`), the output folder made ready (`_clear_output`), then what an earlier run left
  told apart: a finished output (`_finished_output`) or an interrupted run to take up
  (`_interrupted_run`).
  """
  chunk_bytes = _check_flags(seq_length, shards, chunk_mb, documents)
  plan = _new_plan(inputs, vocab, seq_length, out, shards, chunk_bytes, lower_case=lower_case,
                   compress=compress, text_key=text_key, split=split, data_dir=data_dir, documents=documents,
                   retry_seconds=retry_seconds)
  shard_files = _clear_output(plan, overwrite)
  metadata = _finished_output(plan)
  if metadata is not None and all(name in shard_files for name in plan.names):
    discard_work(plan)
    report(f"{out} is complete already (metadata.json and {shards} shards made with these settings): "
            "nothing to do")
    return plan, metadata
  recorded, changes = _interrupted_run(plan, shard_files, finished=metadata is not None)
  if changes:
    keep_unchanged(plan, recorded["files"], changes, shard_files)
  if recorded is None or changes:
    write_atomically(plan.plan_path, json.dumps(plan.record(), indent=1) + "\n")
  return plan, None


def _check_flags(seq_length, shards, chunk_mb, documents):
  """Refuses flags out of their range (`CorpusError`); returns the chunk size in bytes."""
  if seq_length < 3:
    raise CorpusError(f"--seq-length must be at least 3 ([CLS] token [SEP]), got {seq_length}")
  if shards < 1:
    raise CorpusError(f"--shards must be at least 1, got {shards}")
  chunk_bytes = int(round(chunk_mb * 1e6))
  if chunk_bytes < corpus_reading.MIN_CHUNK_BYTES:
    raise CorpusError(f"--chunk-mb must be at least {corpus_reading.MIN_CHUNK_BYTES / 1e6:g} "
                      f"({corpus_reading.MIN_CHUNK_BYTES:,} bytes), got {chunk_mb}")
  corpus_reading.check_documents(documents)
  return chunk_bytes


def _new_plan(inputs, vocab, seq_length, out, shards, chunk_bytes, *, lower_case, compress, text_key, split,
              data_dir, documents, retry_seconds):
  """The `Plan` of these flags: the vocabulary loaded, the corpus (its files' states, or a TFDS split's
  shards) cut into chunks. Reads the corpus files' states; writes nothing."""
  encoder = load_encoder(vocab, lower_case)
  tfds_name = tfds_datasets.dataset_name(inputs[0]) if len(inputs) == 1 else None
  if tfds_name:
    files = None
    chunks = [[shard] for shard in range(corpus_reading.tfds_shards(tfds_name, split, data_dir))]
    tfds = dict(name=tfds_name, text_key=text_key, split=split, data_dir=data_dir)
  else:
    files = file_states(input_files(inputs))
    chunks, tfds = corpus_reading.chunk_pieces(files, chunk_bytes), None
  return Plan(out=out, seq_length=seq_length, shards=shards, compress=compress, chunk_bytes=chunk_bytes,
              vocab=encoder.vocab, lower_case=encoder.lower_case, tokenizer=tokenizer_settings(encoder),
              inputs=list(inputs), files=files, chunks=chunks, tfds=tfds, documents=documents,
              retry_seconds=retry_seconds)


def _clear_output(plan, overwrite):
  """Makes the output folder, removes what `overwrite` replaces (the shards, metadata.json and the work
  folder) and the temporary files of killed runs; returns the names of the shard files left."""
  import tensorflow as tf
  tf.io.gfile.makedirs(plan.out)
  shard_files = sorted(name for name in tf.io.gfile.listdir(plan.out)
                       if name.startswith(f"{SHARD_PREFIX}-") and ".tfrecord" in name)
  if overwrite:
    for name in shard_files + [METADATA_FILE]:
      if tf.io.gfile.exists(os.path.join(plan.out, name)):
        tf.io.gfile.remove(os.path.join(plan.out, name))
    discard_work(plan)
    shard_files = []
  _remove_temporaries(plan.out)
  _remove_temporaries(plan.work)
  return shard_files


def _finished_output(plan):
  """The output's metadata.json (None when there is none), refused (`CorpusError`) when unreadable, made
  with other settings or of a corpus that has changed since."""
  import tensorflow as tf

  from zoo.model_dir import read_json
  metadata_path = os.path.join(plan.out, METADATA_FILE)
  if not tf.io.gfile.exists(metadata_path):
    return None
  try:
    metadata = read_json(metadata_path)
  except ValueError as error:
    raise CorpusError(f"{metadata_path}: not readable ({error}): {AGAIN}") from None
  different = differences(metadata_settings(metadata), plan.settings())
  if different:
    raise CorpusError(f"{plan.out} holds pre-training data made with other settings ({different}): {AGAIN}")
  changes = corpus_changes(metadata.get("files"), plan.files, METADATA_FILE)
  if changes:
    raise CorpusError(f"{plan.out} holds pre-training data of a corpus that has changed since ({changes}): "
                      f"{AGAIN}")
  return metadata


def _interrupted_run(plan, shard_files, finished):
  """`(recorded, changes)`: the work folder's `plan.json` (None when there is none) and the corpus changes
  since it was written ('' for none), which an interrupted run of these settings is taken up after.

  Refuses (`CorpusError`) shards of other names, an interrupted run of other settings or of a changed corpus
  its plan.json does not list, and shards that neither a plan.json nor a metadata.json (`finished`) explain.
  """
  import tensorflow as tf

  from zoo.model_dir import read_json
  others = [name for name in shard_files if name not in plan.names]
  if others:
    raise CorpusError(f"{plan.out} holds shards of another --shards or --compress ({', '.join(others[:3])}"
                      f"{' …' if len(others) > 3 else ''}): {AGAIN}")
  if not tf.io.gfile.exists(plan.plan_path):
    if shard_files and not finished:
      raise CorpusError(f"{plan.out} holds shards ({shard_files[0]} …) without the metadata.json or the work "
                        f"folder of a run of this writer, so their settings are unknown: {AGAIN}")
    return None, ""
  recorded = read_json(plan.plan_path)
  different = differences(recorded, plan.record())
  if different:
    raise CorpusError(f"{plan.out} holds an interrupted run with other settings ({different}): {AGAIN}")
  changes = corpus_changes(recorded.get("files"), plan.files, PLAN_FILE)
  if changes and recorded.get("files") is None:
    raise CorpusError(f"{plan.out} holds an interrupted run of a corpus that has changed since ({changes}): "
                      f"{AGAIN}")
  return recorded, changes


def keep_unchanged(plan: Plan, recorded: Sequence[Sequence[Any]], changes: str,
                   shard_files: Collection[str]) -> None:
  """After the corpus changed since an interrupted run (`changes`, from its recorded files): keeps each
  packed chunk whose pieces are this plan's and whose changed files' pieces have the same fingerprint
  (`corpus_reading.piece_fingerprint`), removes the other chunks and every shard (made of all chunks), and
  says so on stderr."""
  import tensorflow as tf

  from tpu.data.records import retrying
  assert plan.files is not None, "the corpus of a changed run is files"
  before = {path: (size, modified) for path, size, modified in recorded}
  sizes = {path: size for path, size, _ in plan.files}
  changed = {path for path, size, modified in plan.files if before.get(path) != (size, modified)}
  work = listing(plan.work)
  packed = sorted(int(name[6:11]) for name in work
                  if name.startswith("chunk-") and name.endswith(".json") and name[6:11].isdigit())

  def read(index):
    with tf.io.gfile.GFile(plan.chunk_path(index, "json"), "r") as file:
      return json.loads(file.read())

  def unchanged(index):
    chunk = retrying(lambda: read(index), f"reading {plan.chunk_path(index, 'json')}", plan.retry_seconds)
    if index >= len(plan.chunks) or chunk.get("pieces") != plan.chunks[index]:
      return False
    recorded_prints = chunk.get("fingerprints") or []
    if len(recorded_prints) != len(plan.chunks[index]):
      return False
    for piece, fingerprint in zip(plan.chunks[index], recorded_prints, strict=True):
      if piece[0] in changed and retrying(lambda piece=piece: fingerprint_of(piece), f"reading {piece[0]}",
                                          plan.retry_seconds) != fingerprint:
        return False
    return True

  def fingerprint_of(piece):
    path, start, end = piece
    return corpus_reading.piece_fingerprint(path, start, end, sizes[path], plan.chunk_bytes)

  kept = 0
  for index in packed:
    if unchanged(index):
      kept += 1
      continue
    for suffix in ("json", "tfrecord"):   # the index first: the chunk no longer counts as packed
      if os.path.basename(plan.chunk_path(index, suffix)) in work:
        tf.io.gfile.remove(plan.chunk_path(index, suffix))
  for name in work:
    if name.endswith(".error"):
      tf.io.gfile.remove(os.path.join(plan.work, name))
  for name in shard_files:
    tf.io.gfile.remove(os.path.join(plan.out, name))
  report(f"the corpus changed since the interrupted run in {plan.out} ({changes}): keeping {kept} of "
         f"{len(packed)} packed chunks whose bytes did not change; repacking {len(plan.chunks) - kept} of "
         f"{len(plan.chunks)} chunks" + (f" and discarding {len(shard_files)} shards written from the old "
                                         "corpus" if shard_files else ""))


def listing(folder: str) -> set[str]:
  """The names in `folder` (one listing, not a request per file: on gs:// each is a round trip), or none."""
  import tensorflow as tf
  return set(tf.io.gfile.listdir(folder)) if tf.io.gfile.isdir(folder) else set()


def report_kept(plan: Plan) -> list[int]:
  """Says on stderr what an interrupted run left that this one keeps; returns the shards still to write."""
  work, out = listing(plan.work), listing(plan.out)
  packed = sum(os.path.basename(plan.chunk_path(index, "json")) in work for index in range(len(plan.chunks)))
  todo = [index for index in range(plan.shards) if plan.names[index] not in out]
  if packed or len(todo) < plan.shards:
    report(f"resuming in {plan.out}: keeping {packed} of {len(plan.chunks)} packed chunks and "
            f"{plan.shards - len(todo)} of {plan.shards} shards; packing {len(plan.chunks) - packed} chunks "
            f"and writing {len(todo)} shards")
  return todo
