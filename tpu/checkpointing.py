"""Checkpoints of the training job: resume or initialise, save on schedule, and stop on SIGTERM.

A run resumes from the latest checkpoint recorded in `MODEL_DIR/checkpoints/`; a new
run may initialise its encoder from `--init-checkpoint` (a pre-training run's model
dir, a `python -m zoo.convert` output, or a checkpoint prefix). SIGTERM (a preempted
VM) sets a flag the loop checks between executions: the job saves a checkpoint and
exits with `PREEMPTED_EXIT_CODE`; rerunning the command resumes.
"""

import logging
import signal
import threading

import tensorflow as tf

from zoo.model_dir import find_checkpoint

log = logging.getLogger("tpu.train")

PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM


class Preempted(RuntimeError):
  """SIGTERM arrived; a checkpoint was saved."""


def restore_encoder(encoder, path):
  """Restores an encoder from a pre-training run (`encoder`) or a converted checkpoint (`model`).

  Every variable of `encoder` must be in the checkpoint with the same shape.
  """
  prefix = find_checkpoint(path)
  names = [name for name, _ in tf.train.list_variables(prefix)]
  root = "encoder" if any(name.startswith("encoder/") for name in names) else "model"
  checkpoint = tf.train.Checkpoint(**{root: encoder})
  try:
    checkpoint.read(prefix).assert_existing_objects_matched().expect_partial()
  except (AssertionError, ValueError) as error:
    raise ValueError(f"--init-checkpoint {prefix} does not fit the encoder of this model "
                     f"(same preset, overrides and vocabulary needed): {error}") from None
  return prefix


class Checkpoints:
  """The run's `CheckpointManager`: restores or initialises the trainer, saves by step number."""

  def __init__(self, trainer, model_dir, config):
    self.trainer = trainer
    self.manager = model_dir.checkpoint_manager(trainer.checkpoint, max_to_keep=config.keep_checkpoints,
                                                step_counter=trainer.optimizer.iterations)
    self.every = config.checkpoint_every

  @property
  def latest(self):
    return self.manager.latest_checkpoint

  def restore_or_initialise(self, init_checkpoint=None):
    """Resumes from the latest checkpoint, else initialises the encoder from `init_checkpoint`."""
    if self.latest:
      self.trainer.checkpoint.restore(self.latest).assert_existing_objects_matched()
      log.info("resumed from %s (step %d)", self.latest, self.trainer.step)
    elif init_checkpoint:
      prefix = restore_encoder(self.trainer.encoder, init_checkpoint)
      log.info("encoder initialised from %s", prefix)

  def next_due(self, step):
    """The next step at which a checkpoint is due."""
    return (step // self.every + 1) * self.every

  def save(self, step):
    return self.manager.save(checkpoint_number=step)

  def save_final(self, step):
    """Saves `step` unless it is the latest checkpoint already."""
    if self.latest is None or not self.latest.endswith(f"-{step}"):
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

  def _handle(self, signum, frame):
    self.terminated = True

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
