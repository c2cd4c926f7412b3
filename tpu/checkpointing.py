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
(`tpu.trainer.TrainInput`) under `checkpoints/input/worker-I-of-N/`, and the workers
meet (`tpu.cluster.sync`) before the chief records the checkpoint: a recorded
checkpoint has every worker's position. A resumed run restores the position of its
step and continues the data stream; where there is none (a run saved before positions
were kept, another number of workers, a TPU) the pipeline starts a new shuffle with the
seed `seed + step` and says so.
"""

import logging
import shutil
import signal
import tempfile
import threading

import tensorflow as tf

from tpu import cluster
from tpu.strategy import Worker
from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
from zoo.model_dir import GENERATOR_ROOT
from zoo.model_dir import HEAD_ROOTS
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import checkpoint_roots
from zoo.model_dir import encoder_root
from zoo.model_dir import find_checkpoint

log = logging.getLogger("tpu.train")

PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM


class Preempted(RuntimeError):
  """SIGTERM arrived; a checkpoint was saved."""


def restore_encoder(encoder, path):
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


def restore_heads(model, path):
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


def restore_generator(model, path):
  """Restores an ELECTRA model's generator (its encoder and masked-LM head) from the encoder and
  the masked-LM head of a checkpoint (a masked-LM run or a converted masked-LM model of the
  generator's size); returns the checkpoint prefix."""
  items = dict(model.checkpoint_items)
  prefix = find_checkpoint(path)
  roots = checkpoint_roots(prefix)
  objects = {encoder_root(prefix): items[GENERATOR_ROOT]}
  if MASKED_LM_ROOT in roots:
    objects[MASKED_LM_ROOT] = items[GENERATOR_MASKED_LM_ROOT]
  try:
    tf.train.Checkpoint(**objects).read(prefix).assert_existing_objects_matched().expect_partial()
  except (AssertionError, ValueError) as error:
    raise ValueError(f"generator_checkpoint {prefix} does not fit this run's generator (its size comes "
                     f"from generator_overrides): {error}") from None
  return prefix


class Checkpoints:
  """The run's `CheckpointManager`: restores or initialises the trainer, saves by step number."""

  def __init__(self, trainer, model_dir, config, worker=None):
    self.trainer = trainer
    self.model_dir = model_dir
    self.manager = model_dir.checkpoint_manager(trainer.checkpoint, max_to_keep=config.keep_checkpoints,
                                                step_counter=trainer.optimizer.iterations)
    self.every = config.checkpoint_every
    self.keep = config.keep_checkpoints
    self.worker = worker or Worker()
    self.is_chief = self.worker.is_chief
    self.saved_step = None   # the same on every worker, unlike the files they see
    self.train_input = None   # a `tpu.trainer.TrainInput` whose position is saved too
    self._syncs = 0

  @property
  def latest(self):
    return self.manager.latest_checkpoint

  def restore_or_initialise(self, init_checkpoint=None):
    """Resumes from the latest checkpoint, else initialises the encoder from `init_checkpoint`."""
    if self.latest:
      self.trainer.checkpoint.restore(self.latest).assert_existing_objects_matched()
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

  def input_state(self, step):
    """The prefix of this worker's saved input position at `step`, or None; removes positions
    saved after `step` (by an interrupted run, whose checkpoint was never recorded)."""
    index, count = self.worker.index, self.worker.count
    for later in self.model_dir.input_state_steps(index, count):
      if later > step:
        self.model_dir.remove_input_state(index, count, later)
    prefix = self.model_dir.input_state_prefix(index, count, step)
    return prefix if tf.io.gfile.exists(prefix + ".index") else None

  def next_due(self, step):
    """The next step at which a checkpoint is due."""
    return (step // self.every + 1) * self.every

  def save(self, step):
    """Saves the checkpoint of `step`: the chief into the model directory, other workers into a
    temporary folder they remove."""
    self.saved_step = step
    index, count = self.worker.index, self.worker.count
    keeps_input = self.train_input is not None and self.train_input.checkpoint is not None
    if keeps_input:
      keeps_input = self.train_input.save(self.model_dir.input_state_prefix(index, count, step))
    self._syncs += 1   # every worker's position is written before the checkpoint is recorded
    cluster.sync(self.worker, f"checkpoint-{self._syncs}-step-{step}", False)
    if self.is_chief:
      saved = self.manager.save(checkpoint_number=step)
    else:
      folder = tempfile.mkdtemp(prefix=f"tpu-train-worker{index}-")
      try:
        manager = tf.train.CheckpointManager(self.trainer.checkpoint, folder, max_to_keep=1)
        manager.save(checkpoint_number=step)
      finally:
        shutil.rmtree(folder, ignore_errors=True)
      saved = None
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

  def save_final(self, step):
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

  def arm(self):
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
