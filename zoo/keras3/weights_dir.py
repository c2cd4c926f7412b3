"""A keras-hub task's weights as a directory the tf_keras edition reads back (`python -m zoo.convert keras3`).

`save_weights_dir(task, directory)` writes `config.json` (the encoder's constructor
arguments, the head's settings, the tokenizer's), `vocab.txt` and `model.safetensors`, every
weight under its name in both editions (`zoo.named_weights`; the head's under `masked_lm/`,
as the tf_keras pre-training model holds it): an `mlm` or `electra` run's.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from keras import ops

from zoo.atomic_files import atomic_path
from zoo.atomic_files import write_atomically
from zoo.keras3.hub import family_of
from zoo.keras3.models.electra import ZooElectra
from zoo.model_dir import DISCRIMINATOR_HEAD_ROOT
from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
from zoo.model_dir import GENERATOR_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.named_weights import named_arrays

WEIGHTS_DIR_FORMAT = "zoo-keras3-weights/1"


def save_weights_dir(task: Any, directory: str) -> str:
  """Writes a masked-LM or ELECTRA task (or a bare backbone) for the tf_keras edition
  (`python -m zoo.convert keras3`).

  `directory` gets `config.json`, `vocab.txt` (when the task has a preprocessor) and
  `model.safetensors` (float32 arrays under the names both editions give them), local or
  gs://, each through `zoo.model_dir`'s atomic writers; `config.json` last.
  """
  from safetensors.numpy import save_file
  backbone = getattr(task, "backbone", task)
  arrays = {key: np.asarray(value, np.float32) for key, value in named_arrays(backbone.encoder).items()}
  config = dict(format=WEIGHTS_DIR_FORMAT, family=family_of(backbone),
                encoder_config=backbone.encoder_config.to_dict(),
                heads={})
  head = getattr(task, "masked_lm_head", None)
  head_root = MASKED_LM_ROOT
  if isinstance(task, ZooElectra):   # the generator, its masked-LM head and the discriminator's head
    head_root = GENERATOR_MASKED_LM_ROOT
    config.update(generator_config=task.generator.encoder_config.to_dict(),
                  discriminator_weight=task.discriminator_weight)
    arrays.update({f"{GENERATOR_ROOT}/{key}": np.asarray(value, np.float32)
                   for key, value in named_arrays(task.generator.encoder).items()})
    config["heads"][DISCRIMINATOR_HEAD_ROOT] = dict(activation=task.activation)
    for part, layer in (("transform", task.discriminator_transform), ("logits", task.discriminator_logits)):
      for weight in ("kernel", "bias"):
        value = ops.convert_to_numpy(getattr(layer, weight))
        arrays[f"{DISCRIMINATOR_HEAD_ROOT}/{part}/{weight}"] = np.asarray(value, np.float32)
  if head is not None:
    config["heads"][head_root] = dict(activation=task.activation, mlm_transform=task.mlm_transform)
    arrays.update({f"{head_root}/{name}": np.asarray(ops.convert_to_numpy(variable), np.float32)
                   for name, variable in head.named_weights().items()})
  tokenizer = getattr(getattr(task, "preprocessor", None), "tokenizer", None)
  if tokenizer is not None:
    config["tokenizer"] = dict(lower_case=bool(tokenizer.lowercase),
                               special_tokens=dict(tokenizer.special_tokens_names))
    write_atomically(os.path.join(directory, "vocab.txt"),
                     "".join(f"{token}\n" for token in tokenizer.vocabulary))
  with atomic_path(os.path.join(directory, "model.safetensors")) as temporary:
    save_file(arrays, temporary)
  write_atomically(os.path.join(directory, "config.json"), json.dumps(config, indent=2) + "\n")
  return directory
