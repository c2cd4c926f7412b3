"""Model directories as `python -m tpu.train` writes them, made without training (for the tests)."""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tpu.tasks import build_model
from zoo.model_dir import MODEL_ROOT
from zoo.model_dir import ModelDir


def write_run(path, config, vocab, seed=0, eval_results=None):
  """Writes the run of the validated `config` into `path`; returns its Keras model.

  `config.json` as the job writes it (with the recorded settings), `vocab.txt`, and one
  `CheckpointManager` checkpoint with the trainer's roots (the task model and its
  checkpoint items) of the model with every weight perturbed (seeded), so that outputs
  differ from example to example and class to class; `eval_results.json` when given.
  """
  directory = ModelDir(str(path))
  directory.write_config(config.recorded().to_dict())
  directory.write_vocab(vocab)
  keras.utils.set_random_seed(seed)
  model = build_model(config)
  rng = np.random.default_rng(seed)
  for variable in model.variables:
    variable.assign(variable + rng.normal(0.0, 0.2, variable.shape).astype(np.float32))
  items = dict(getattr(model, "checkpoint_items", {}))
  directory.checkpoint_manager(tf.train.Checkpoint(**{MODEL_ROOT: model}, **items), max_to_keep=3).save()
  if eval_results is not None:
    directory.write_eval_results(eval_results)
  return model
