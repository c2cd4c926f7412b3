"""The pre-training tasks: the masked-LM and ELECTRA losses are exact over replicas (numpy); ELECTRA's
generator starts from a checkpoint's encoder and masked-LM head."""

import types

import numpy as np
import pytest
import tensorflow as tf

from tests.tpu.tasks.losses import shares
from tests.tpu.tasks.losses import softmax_cross_entropy
from tests.tpu.tasks.losses import tiny_config
from tpu import tasks
from zoo.model_dir import ENCODER_ROOT
from zoo.model_dir import GENERATOR_MASKED_LM_ROOT
from zoo.model_dir import GENERATOR_ROOT
from zoo.model_dir import MASKED_LM_ROOT


def test_mlm_and_electra_losses_are_exact_over_replicas(tmp_path):
  rng = np.random.default_rng(0)
  batch, length, predictions, vocab = 5, 6, 3, 7
  features = dict(masked_lm_ids=rng.integers(0, vocab, [batch, predictions]).astype(np.int32),
                  masked_lm_weights=(rng.random([batch, predictions]) < 0.6).astype(np.float32),
                  input_mask=(rng.random([batch, length]) < 0.7).astype(np.int32))
  features["masked_lm_weights"][0] = 1.0   # at least one masked token
  outputs = dict(mlm_logits=rng.normal(size=[batch, predictions, vocab]).astype(np.float32),
                 disc_logits=rng.normal(size=[batch, length]).astype(np.float32),
                 disc_labels=rng.integers(0, 2, [batch, length]).astype(np.int32))
  weights = features["masked_lm_weights"]
  token_losses = softmax_cross_entropy(features["masked_lm_ids"], outputs["mlm_logits"])
  mlm = (token_losses * weights).sum() / weights.sum()
  x, z, real = outputs["disc_logits"], outputs["disc_labels"], features["input_mask"]
  bce = np.maximum(x, 0) - x * z + np.log1p(np.exp(-abs(x)))
  disc = (bce * real).sum() / real.sum()
  config = tiny_config(tmp_path, task="mlm").validate()
  np.testing.assert_allclose(shares(tasks.get_task(config), features, outputs), mlm, rtol=1e-5)
  electra = tasks.get_task(config.replace(task="electra", discriminator_weight=50.0))
  np.testing.assert_allclose(shares(electra, features, outputs), mlm + 50 * disc, rtol=1e-5)


def _holding(value):
  module = tf.Module()
  module.value = tf.Variable(value)
  return module


def test_electra_starts_its_generator_from_a_checkpoints_encoder_and_masked_lm_head(tmp_path):
  saved = tf.train.Checkpoint(**{ENCODER_ROOT: _holding([1.0, 2.0]), MASKED_LM_ROOT: _holding([3.0])})
  prefix = saved.write(str(tmp_path / "ckpt-1"))
  generator, head = _holding([0.0, 0.0]), _holding([0.0])
  model = types.SimpleNamespace(checkpoint_items={GENERATOR_ROOT: generator, GENERATOR_MASKED_LM_ROOT: head})
  electra = tasks.get_task(tiny_config(tmp_path, task="electra", generator_checkpoint=prefix).validate())
  assert electra.initialise(model) == prefix
  assert generator.value.numpy().tolist() == [1.0, 2.0] and head.value.numpy().tolist() == [3.0]
  narrower = types.SimpleNamespace(checkpoint_items={GENERATOR_ROOT: _holding([0.0]),
                                                     GENERATOR_MASKED_LM_ROOT: head})
  with pytest.raises(ValueError, match="generator_checkpoint .* does not fit this run's generator"):
    electra.initialise(narrower)
