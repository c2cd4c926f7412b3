"""Checkpoints of the training job: resume or initialise, save on schedule, and stop on SIGTERM.

A run resumes from the latest checkpoint recorded in `MODEL_DIR/checkpoints/`; a new
run may initialise its encoder from `--init-checkpoint` (a pre-training run's model
dir, a `python -m zoo.convert` output, or a checkpoint prefix). SIGTERM (a preempted
VM) sets a flag the loop checks between executions: the job saves a checkpoint and
exits with `PREEMPTED_EXIT_CODE`; rerunning the command resumes.

On several workers, TensorFlow's multi-worker pattern: every worker saves (a save may
read distributed variables collectively), the chief into the model directory and the
others into temporary folders they remove at once, so the model directory holds one
set of checkpoints. Every worker restores from the model directory's.

With each checkpoint, every worker saves its input pipeline's position
(`tpu.trainer.TrainInput`) under `checkpoints/input/worker-I-of-N/`, with a record of
what fixes its data stream beside it (`input_stream`: data and the files it reads, by
their fingerprints, documents mode, batch size, workers and local replicas, seed,
shuffle buffer, sequence length, vocabulary, task; the evaluation data's files), and
the workers meet (`tpu.cluster.sync`) before the chief records the checkpoint: a
recorded checkpoint has every worker's position. After the save they meet again, so a
worker never waits for the chief's write (minutes for a large model on `gs://`) inside
a collective with a timeout: the meeting is bounded by the peers' health only.

A resumed run compares the record of its step with its own before it writes anything,
and continues the data stream (`resume_input`). A record of another stream is refused,
naming each difference (`InputStreamChanged`), unless the run is told to start a new
stream (`--reset-input`). A rerun of a run that has trained all its steps (to evaluate or
export it again) compares the record of its last step the same way (`check_finished_input`):
it trains nothing, so with `--reset-input` the differences are only warned of. A pipeline
whose position TensorFlow cannot save (fed by Python code) continues by replay: rebuilt
with the stream's seed (the record's `since`), it skips the batches of the steps before.
Where neither is possible (a TPU, whose distributed iterators TensorFlow cannot save; a
run saved before positions were kept) the pipeline starts a new shuffle with the seed
`seed + step` and says so.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

import tensorflow as tf

from tpu import cluster
from tpu import data
from tpu import tasks
from tpu.data import fingerprints
from tpu.data import text_files
from tpu.data.records import vocab_checksum
from tpu.strategy import Worker
from zoo.atomic_files import is_temporary
from zoo.atomic_files import write_atomically
from zoo.logs import error_reason
from zoo.model_dir import HEAD_ROOTS
from zoo.model_dir import checkpoint_roots
from zoo.model_dir import encoder_root
from zoo.model_dir import find_checkpoint
from zoo.model_dir import read_json
from zoo.model_dir import tokenizer_as_written
from zoo.text.packing import DEFAULT_TRUNCATOR

if TYPE_CHECKING:
  from tpu.config import TrainConfig
  from zoo.model_dir import ModelDir

log = logging.getLogger("tpu.train")

PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM
# A checkpoint write longer than this is logged at INFO (at DEBUG otherwise, --verbose).
SLOW_SAVE_SECONDS = 30


# The settings of `TrainConfig` that fix the training input stream (`input_stream`), besides
# the task's own input settings (`tpu.tasks.Setting.input`) and the data source's options.
STREAM_FIELDS = ("task", "data", "text_columns", "label_column", "data_dir", "batch_size", "seed",
                 "shuffle_buffer", "seq_length", "lower_case", "tokenizer")
# The key of a stream record that says where the stream began (the step of its first batch and its
# seed), which a replay needs: not a setting, so not compared.
SINCE = "since"
# The key of the evaluation data's spec and files in a stream record: compared, and a change warned of.
EVALUATION = "evaluation"


class Preempted(RuntimeError):
  """SIGTERM arrived; a checkpoint was saved."""


class InputStreamChanged(ValueError):
  """The saved input position belongs to another data stream than this run's settings make."""


def input_stream(config: TrainConfig, vocab: Sequence[str], workers: int, local_replicas: int,
                 files: list[dict[str, Any]] | None = None,
                 evaluation: dict[str, Any] | None = None) -> dict[str, Any]:
  """What fixes the training input stream that an input position belongs to: the config's
  `STREAM_FIELDS`, the data source's options (its `documents` mode, resolved), the task's input
  settings, the number of workers and of local replicas, the vocabulary's SHA-256, and the
  fingerprints of the training data's files (`files`, from `tpu.data.fingerprints`; None for
  data that is not files). Saved with every checkpoint; a resume compares it with its own.

  `evaluation`: the evaluation data's spec and files (`{"spec", "files"}`), which fix no
  training example: a resume names their changes in a warning (`EVALUATION`)."""
  values = {name: getattr(config, name) for name in STREAM_FIELDS}
  # With the truncator of text pairs it trims with (a record saved before it was has none: "round_robin").
  values["tokenizer"] = {"truncator": DEFAULT_TRUNCATOR, **(config.tokenizer or {})}
  if "documents" in data.source_of(config.data).options:
    values["documents"] = config.documents or text_files.DEFAULT_DOCUMENTS
  values.update({name: getattr(config, name) for name, setting in tasks.settings_of(config.task).items()
                 if setting.input})
  values.update(workers=workers, local_replicas=local_replicas, vocabulary=vocab_checksum(vocab))
  if config.length_buckets not in (None, "off", []):   # only when set: streams saved before have no such key
    values.update(length_buckets=config.length_buckets,
                  padding_dependent_buckets=config.padding_dependent_buckets)
  if files is not None:
    values["files"] = files
  if evaluation is not None:
    values[EVALUATION] = evaluation
  return json.loads(json.dumps(values))   # lists, not tuples: as read back


def data_files(spec: str, data_dir: str | None = None) -> list[dict[str, Any]] | None:
  """The fingerprints of the files of a data spec (`tpu.data.fingerprints`), or None for data that
  is not files of the user's (generated data)."""
  paths = data.input_files(spec, data_dir=data_dir)
  return None if paths is None else fingerprints.of_files(paths)


def restore_encoder(encoder: Any, path: str) -> str:
  """Restores an encoder from a training run or a converted checkpoint; returns the checkpoint prefix.

  Both hold it under the root `encoder`; converted directories written before the
  converters did so hold it under `model` (`zoo.model_dir.encoder_root` tells, the
  fallback for those old directories only). Every variable of `encoder` must be in the
  checkpoint with the same shape.
  """
  prefix = find_checkpoint(path)
  checkpoint = tf.train.Checkpoint(**{encoder_root(prefix): encoder})
  try:
    checkpoint.read(prefix).assert_existing_objects_matched().expect_partial()
  except (AssertionError, ValueError) as error:
    raise ValueError(f"--init-checkpoint {prefix} does not fit the encoder of this model "
                     f"(same preset, overrides and vocabulary needed): {error}") from None
  return prefix


def restore_heads(model: Any, path: str) -> list[str]:
  """Restores the heads of `model` that the checkpoint `path` holds (`zoo.model_dir.HEAD_ROOTS`:
  the masked-LM head, ELECTRA's discriminator head); returns their roots.

  A converted BERT checkpoint with its pre-training head, a converted Funnel masked-LM or
  discriminator checkpoint, or a pre-training run holds one; then a pre-training run
  starts from the head as well as from the encoder.
  """
  items = dict(getattr(model, "checkpoint_items", {}))
  prefix = find_checkpoint(path)
  roots = [root for root in HEAD_ROOTS if root in items and root in checkpoint_roots(prefix)]
  for root in roots:
    try:
      restored = tf.train.Checkpoint(**{root: items[root]}).read(prefix)
      restored.assert_existing_objects_matched().expect_partial()
    except (AssertionError, ValueError) as error:
      raise ValueError(f"--init-checkpoint {prefix}: its {root} does not fit this model's (the head's "
                       f"settings, mlm_transform and head_activation, come from its config.json): "
                       f"{error}") from None
  return roots


def stream_path(prefix: str) -> str:
  """The file beside the input position `prefix` that records its `input_stream`."""
  return prefix + ".stream.json"


def _saved_stream(prefix):
  """The stream record beside the input position `prefix`; {} for one saved without it."""
  path = stream_path(prefix)
  return read_json(path) if tf.io.gfile.exists(path) else {}


def _differences(saved, stream):
  """'name: X saved, Y now' for each setting of the record `saved` that `stream` differs in (a record
  names what it has: an older one may hold fewer settings), the files described by their changes."""
  differences = []
  for name, value in sorted(saved.items()):
    if name in (SINCE, EVALUATION):
      continue
    if name == "files":
      changed = fingerprints.changes(value, stream.get("files") or [])
      if changed:
        differences.append(f"the training data's files: {changed}")
    elif name == "tokenizer" and tokenizer_as_written(saved) != stream.get(name):
      differences.append(f"{name}: {json.dumps(tokenizer_as_written(saved))} saved, "
                         f"{json.dumps(stream.get(name))} now")
    elif name != "tokenizer" and value != stream.get(name):
      differences.append(f"{name}: {json.dumps(value)} saved, {json.dumps(stream.get(name))} now")
  return differences


def _warn_of_evaluation_changes(saved, now, step):
  """Logs how the evaluation data differs from the one of the run saved at `step` (its metrics from
  here on measure other data), if it does."""
  if saved is None or now is None:
    return
  if saved.get("spec") != now.get("spec"):
    change = f"{saved.get('spec')} then, {now.get('spec')} now"
  else:
    change = fingerprints.changes(saved.get("files") or [], now.get("files") or [])
  if change:
    log.warning("the evaluation data differs from the run's until step %d (%s): its metrics from here on "
                "measure other examples", step, change)


@dataclasses.dataclass(frozen=True)
class Resume:
  """Where a run's input stream starts or continues at `step`.

  Attributes:
    seed: the seed the input pipeline is built with.
    origin: the step at which this stream began (0 for a new run's), None when not known.
    prefix: the saved position to restore, or None.
    skip: batches to replay before the first step (the steps `origin` to `step` of a stream whose
      position cannot be saved), or 0.
  """

  seed: int
  origin: int | None = 0
  prefix: str | None = None
  skip: int = 0

  def since(self) -> dict[str, int] | None:
    """The record of where the stream began (`SINCE`), or None where that is not known."""
    return None if self.origin is None else dict(step=self.origin, seed=self.seed)


def _saved_records(model_dir, step):
  """The prefixes of the input positions or stream records any worker saved at `step`."""
  pattern = model_dir.input_state_prefix("*", "*", step)
  found = tf.io.gfile.glob(pattern + ".index") + tf.io.gfile.glob(stream_path(pattern))
  return sorted({path[:-len(".index")] if path.endswith(".index") else path[:-len(".stream.json")]
                 for path in found})


def _saved_stream_at(model_dir, worker, step):
  """`(saved, other)`: the stream record of this worker's input position at `step` ({} for none), or, where
  only other workers' are there, the first of theirs (`other`, its prefix) with its number of workers."""
  prefix = model_dir.input_state_prefix(worker.index, worker.count, step)
  records = _saved_records(model_dir, step)
  if prefix in records:
    return _saved_stream(prefix), None
  if records:   # saved by another number of workers?
    other = records[0]
    saved = _saved_stream(other)
    saved["workers"] = int(re.search(r"worker-\d+-of-(\d+)", other).group(1))
    return saved, other
  return {}, None


def check_finished_input(model_dir: ModelDir, worker: Worker, step: int, stream: dict[str, Any],
                         reset_input: bool = False) -> None:
  """Compares the stream record of a run that has trained all its steps (its latest checkpoint is of
  `step`, at or past this run's `--steps`) with `stream`, as `resume_input` does a resume's: another
  stream is refused with `InputStreamChanged` naming each difference, so that a rerun that only
  evaluates or exports it again never passes for a run of other input settings. With `reset_input`
  the differences are warned of instead (nothing is trained, so this run's input settings are not
  used); changes of the evaluation data are warned of."""
  saved, _ = _saved_stream_at(model_dir, worker, step)
  differences = _differences(saved, stream)
  if differences:
    listed = "; ".join(differences)
    if not reset_input:
      raise InputStreamChanged(
          f"{model_dir.path}: the checkpoint of step {step} was saved with another input stream than this "
          f"run's settings make: {listed}. The run has trained all its steps: rerun with the saved settings "
          f"to evaluate or export it again, or with more --steps to train it further, adding --reset-input "
          f"to continue the model from step {step} with this run's input (a new shuffle)")
    log.warning("--reset-input: the checkpoint of step %d was saved with another input stream (%s), but the "
                "run has trained all its steps, so this run trains nothing with its input settings; raise "
                "--steps to continue the model with them", step, listed)
  _warn_of_evaluation_changes(saved.get(EVALUATION), stream.get(EVALUATION), step)


def resume_input(model_dir: ModelDir, worker: Worker, step: int, stream: dict[str, Any], seed: int,
                 reset_input: bool = False, replayable: bool = True) -> Resume:
  """How this worker's input stream continues at `step` (a `Resume`).

  The stream record saved at `step` is compared with `stream` (this run's `input_stream`):
  another stream is refused with `InputStreamChanged` naming each difference, unless
  `reset_input` (a new stream, seeded `seed + step`). The same stream continues from its
  saved position, or, where the pipeline could not save one, by replaying its batches from
  the stream's start (`replayable`: not on a TPU); else a new stream starts, which is logged.
  """
  prefix = model_dir.input_state_prefix(worker.index, worker.count, step)
  new = Resume(seed + step, origin=step)
  saved, other = _saved_stream_at(model_dir, worker, step)
  differences = _differences(saved, stream)
  if differences:
    listed = "; ".join(differences)
    if reset_input:
      log.warning("--reset-input: the input position saved at step %d belongs to another input stream (%s). "
                  "The model continues from its checkpoint of step %d with this run's input, a new shuffle "
                  "(seed %d): its examples from here on differ from those the saved run would have seen",
                  step, listed, step, seed + step)
      return new
    raise InputStreamChanged(
        f"{model_dir.path}: the checkpoint of step {step} was saved with another input stream than this "
        f"run's settings make: {listed}. Rerun with the saved settings to continue its data stream exactly, "
        f"or add --reset-input to continue the model from step {step} with this run's input (a new shuffle)")
  _warn_of_evaluation_changes(saved.get(EVALUATION), stream.get(EVALUATION), step)
  since = saved.get(SINCE)
  if other is not None:   # the other workers' positions of this stream, but not this worker's
    log.warning("no input position saved at step %d for %s, though %s holds another worker's of the "
                "same stream: this worker's input pipeline starts a new shuffle (seed %d), so its examples "
                "after the resume differ from an uninterrupted run's", step, worker.name, other, seed + step)
    return new
  if tf.io.gfile.exists(prefix + ".index"):
    return Resume(since["seed"] if since else seed, since["step"] if since else None, prefix=prefix)
  if replayable and since:
    return Resume(since["seed"], since["step"], skip=step - since["step"])
  log.warning("no input position saved at step %d for %s: the input pipeline starts a new shuffle (seed %d), "
              "so this run's examples after the resume differ from an uninterrupted run's", step, worker.name,
              seed + step)
  return new


class Checkpoints:
  """The run's `CheckpointManager`: restores or initialises the trainer, saves by step number, and
  saves and checks the input position of the trainer's `train_input` (a `tpu.trainer.TrainInput`,
  or None)."""

  def __init__(self, trainer: Any, model_dir: ModelDir, config: TrainConfig, worker: Worker | None = None,
               stream: dict[str, Any] | None = None) -> None:
    self.trainer = trainer
    self.model_dir = model_dir
    self.manager = model_dir.checkpoint_manager(trainer.checkpoint, max_to_keep=config.keep_checkpoints,
                                                step_counter=trainer.optimizer.iterations)
    self.every = config.checkpoint_every
    self.keep = config.keep_checkpoints
    self.worker = worker or Worker()
    self.is_chief = self.worker.is_chief
    self.saved_step: int | None = None   # the same on every worker, unlike the files they see
    self.stream = stream   # `input_stream` of this run, saved beside each position
    self._syncs = 0

  @property
  def latest(self) -> str | None:
    return self.manager.latest_checkpoint

  def restore_or_initialise(self, init_checkpoint: str | None = None) -> None:
    """Resumes from the latest checkpoint, else initialises the encoder from `init_checkpoint`."""
    if self.latest:
      try:
        self.trainer.checkpoint.restore(self.latest).assert_existing_objects_matched()
      except (AssertionError, ValueError, tf.errors.OpError) as error:
        reason = error_reason(error)
        raise ValueError(f"{self.latest} cannot be restored into this run's model and optimizer "
                         f"({type(error).__name__}: {reason}); resume it with the settings it was saved "
                         "with, or use another --model-dir") from None
      log.info("resumed from %s (step %d)", self.latest, self.trainer.step)
      self.saved_step = self.trainer.step
    elif init_checkpoint:
      prefix = restore_encoder(self.trainer.encoder, init_checkpoint)
      log.info("encoder initialised from %s", prefix)
      for root in restore_heads(self.trainer.model, prefix):
        log.info("%s initialised from %s", root, prefix)
    if not self.latest:
      generator = self.trainer.task.initialise(self.trainer.model)
      if generator:
        log.info("generator initialised from %s", generator)

  def remove_leftovers(self) -> None:
    """Removes what killed writers left in the model directory (the chief's; `ModelDir.remove_leftovers`):
    `ckpt-N_temp/` folders of interrupted checkpoint saves and temporary files of atomic writes."""
    if self.is_chief:
      for path in self.model_dir.remove_leftovers():
        log.info("removed %s, left by an interrupted %s", path,
                 "write" if is_temporary(os.path.basename(path)) else "checkpoint save")

  def next_due(self, step: int) -> int:
    """The next step at which a checkpoint is due."""
    return (step // self.every + 1) * self.every

  def save(self, step: int) -> str | None:
    """Saves the checkpoint of `step`: the chief into the model directory, other workers into a
    temporary folder they remove. Every worker returns once the chief has recorded it."""
    self.saved_step = step
    index, count = self.worker.index, self.worker.count
    train_input = self.trainer.train_input
    prefix = self.model_dir.input_state_prefix(index, count, step)
    if train_input is not None and train_input.checkpoint is not None:
      train_input.save(prefix)
    # The record of the stream, with or without a position (a replay, a TPU's new shuffle, needs it too).
    keeps_input = train_input is not None and self.stream is not None
    if keeps_input:
      write_atomically(stream_path(prefix), json.dumps(self.stream, indent=1, sort_keys=True) + "\n")
    self._syncs += 1   # every worker's position is written before the checkpoint is recorded
    cluster.sync(self.worker, f"checkpoint-{self._syncs}-step-{step}", False)
    if self.is_chief:
      started = time.monotonic()
      saved = self.manager.save(checkpoint_number=step)
      seconds = time.monotonic() - started
      # A chief that loses a peer stays until its write ends (tpu/README.md, faults): say how long that is.
      slow = seconds > SLOW_SAVE_SECONDS
      log.log(logging.INFO if slow else logging.DEBUG, "saved checkpoint %s in %.1f s%s", saved, seconds,
              " (a lost peer is noticed only after a write ends: keep writes short)"
              if slow and self.worker.multi_worker else "")
    else:
      folder = tempfile.mkdtemp(prefix=f"tpu-train-worker{index}-")
      try:
        manager = tf.train.CheckpointManager(self.trainer.checkpoint, folder, max_to_keep=1)
        manager.save(checkpoint_number=step)
      finally:
        shutil.rmtree(folder, ignore_errors=True)
      saved = None
    # The others wait here, health-checked, until the chief's write is done: a write of minutes
    # (a large model with its optimizer slots to gs://) must not meet them in the next step's
    # collectives, whose timeout is meant for steps.
    cluster.sync(self.worker, f"checkpoint-{self._syncs}-step-{step}-recorded", False)
    if keeps_input:
      self._remove_old_input_states(step)
    return saved

  def _remove_old_input_states(self, step):
    """Removes this worker's positions older than the oldest checkpoint the chief keeps once it
    has recorded `step` (which another worker may not see yet)."""
    state = tf.train.get_checkpoint_state(self.manager.directory)
    paths = list(state.all_model_checkpoint_paths) if state else []
    steps = {int(path.rsplit("-", 1)[1]) for path in paths if path.rsplit("-", 1)[1].isdigit()}
    oldest = min(sorted(steps | {step})[-self.keep:])   # the manager keeps the last `keep`
    for old in self.model_dir.input_state_steps(self.worker.index, self.worker.count):
      if old < oldest:
        self.model_dir.remove_input_state(self.worker.index, self.worker.count, old)

  def save_final(self, step: int) -> None:
    """Saves `step` unless it was the last checkpoint saved or restored."""
    if self.saved_step != step:
      self.save(step)


class SigtermFlag:
  """Turns SIGTERM into a flag the loop checks between executions (main thread only)."""

  def __init__(self):
    self.terminated = False
    self._previous = None

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    return self

  def arm(self) -> None:
    """Installs the handler again: TensorFlow's multi-worker runtime installs its own SIGTERM
    handler when it starts (the coordination service's preemption notifier), which would
    otherwise take the signal."""
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._handle)

  def _handle(self, signum, frame):
    self.terminated = True

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
