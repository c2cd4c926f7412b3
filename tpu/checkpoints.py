"""Finding and restoring checkpoints of training runs and converted models.

Light on imports, so the exporter can use it without the training job's data code.
"""

import os

import tensorflow as tf

from tpu.config import CHECKPOINT_DIR


def find_checkpoint(path):
  """A checkpoint prefix from a prefix, a directory of checkpoints, or a training run's model dir."""
  if tf.io.gfile.isdir(path):
    for folder in (os.path.join(path, CHECKPOINT_DIR), path):
      latest = tf.train.latest_checkpoint(folder)
      if latest:
        return latest
    raise FileNotFoundError(f"{path} holds no checkpoint (looked in {path} and "
                            f"{os.path.join(path, CHECKPOINT_DIR)})")
  if not tf.io.gfile.exists(path + ".index"):
    raise FileNotFoundError(f"checkpoint {path} does not exist (no {path}.index)")
  return path


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
