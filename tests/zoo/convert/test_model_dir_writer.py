"""The converters' model directory: the encoder under its own checkpoint root, and old directories still load.

Converted directories hold the encoder under `encoder` (`zoo.model_dir.ENCODER_ROOT`);
directories written before held it under `model`, the root that means the whole task
model in a training run. Both initialise a training run's encoder (and masked-LM head).
"""

import types

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tpu.checkpointing import restore_encoder
from tpu.checkpointing import restore_heads
from zoo import presets
from zoo.convert import describe
from zoo.convert import write_model_dir
from zoo.model_dir import ENCODER_ROOT
from zoo.model_dir import LEGACY_CONVERTED_ENCODER_ROOT
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import ModelDir
from zoo.model_dir import checkpoint_roots
from zoo.model_dir import encoder_root
from zoo.models import MaskedLMHead

LENGTH = 8
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"word{i}" for i in range(27)]
TINY = dict(hidden_size=16, num_heads=2, intermediate_size=32, num_layers=1, seq_length=LENGTH,
            vocab_size=len(VOCAB))
IDS = tf.constant([[2, 5, 6, 7, 3, 0, 0, 0]], tf.int32)
FEATURES = dict(input_word_ids=IDS, input_mask=tf.cast(IDS > 0, tf.int32), input_type_ids=0 * IDS)
POSITIONS = tf.constant([[1, 2]])


def encoder_and_head(seed):
  """A tiny BERT encoder and its tied masked-LM head, built, with weights drawn from `seed`."""
  keras.utils.set_random_seed(seed)
  encoder = presets.build("bert_small", **TINY)
  head = MaskedLMHead(encoder.get_embedding_table())
  head(encoder(FEATURES)["sequence_output"], masked_positions=POSITIONS)
  return encoder, head


def outputs(encoder, head):
  sequence = encoder(FEATURES, training=False)["sequence_output"]
  return sequence.numpy(), head(sequence, masked_positions=POSITIONS).numpy()


def write_old_layout(encoder, head, directory):
  """A converted directory as the converters wrote it before: the encoder under the root `model`."""
  model_dir = ModelDir(directory)
  model_dir.write_vocab(VOCAB)
  model_dir.write_source(dict(format="hf-bert", path="/nowhere"))
  checkpoint = tf.train.Checkpoint(**{LEGACY_CONVERTED_ENCODER_ROOT: encoder, MASKED_LM_ROOT: head})
  model_dir.checkpoint_manager(checkpoint, max_to_keep=1).save(checkpoint_number=1)
  model_dir.write_config(describe(encoder, LENGTH, True))
  return model_dir


def test_converted_directories_hold_the_encoder_under_its_own_root(tmp_path):
  encoder, head = encoder_and_head(seed=1)
  prefix = write_model_dir(encoder, str(tmp_path / "new"), seq_length=LENGTH, lower_case=True,
                           source=dict(format="hf-bert", path="/nowhere"), vocab=VOCAB,
                           heads={MASKED_LM_ROOT: head})
  roots = checkpoint_roots(prefix)
  assert {ENCODER_ROOT, MASKED_LM_ROOT} <= roots and LEGACY_CONVERTED_ENCODER_ROOT not in roots
  assert encoder_root(prefix) == ENCODER_ROOT
  assert ModelDir(str(tmp_path / "new")).read_source() == dict(format="hf-bert", path="/nowhere")

  fresh, fresh_head = encoder_and_head(seed=2)
  assert restore_encoder(fresh, str(tmp_path / "new")) == prefix
  assert restore_heads(types.SimpleNamespace(checkpoint_items={MASKED_LM_ROOT: fresh_head}), prefix)
  for actual, expected in zip(outputs(fresh, fresh_head), outputs(encoder, head), strict=True):
    np.testing.assert_array_equal(actual, expected)


def test_an_old_layout_converted_directory_still_restores(tmp_path):
  encoder, head = encoder_and_head(seed=1)
  old = write_old_layout(encoder, head, str(tmp_path / "old"))
  prefix = old.latest_checkpoint()
  roots = checkpoint_roots(prefix)
  assert {LEGACY_CONVERTED_ENCODER_ROOT, MASKED_LM_ROOT} <= roots and ENCODER_ROOT not in roots
  assert encoder_root(prefix) == LEGACY_CONVERTED_ENCODER_ROOT

  fresh, fresh_head = encoder_and_head(seed=2)
  assert not np.allclose(outputs(fresh, fresh_head)[0], outputs(encoder, head)[0])
  assert restore_encoder(fresh, old.path) == prefix
  assert restore_heads(types.SimpleNamespace(checkpoint_items={MASKED_LM_ROOT: fresh_head}), old.path)
  for actual, expected in zip(outputs(fresh, fresh_head), outputs(encoder, head), strict=True):
    np.testing.assert_array_equal(actual, expected)
