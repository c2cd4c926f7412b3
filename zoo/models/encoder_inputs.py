"""The Model Garden encoder interface shared by every zoo encoder.

Axes: B batch, T sequence length.
"""

import tensorflow as tf
import tf_keras as keras

from zoo.layers.base import WithoutAutograph

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(seq_length=None):
  """Named int32 `[B, T]` Keras inputs, as Model Garden's encoders take them."""
  return {name: keras.Input(shape=(seq_length,), dtype=tf.int32, name=name) for name in INPUT_NAMES}


@keras.utils.register_keras_serializable(package="zoo")
class ClsSegmentIds(WithoutAutograph, keras.layers.Layer):
  """Marks the first token ([cls]) with its own segment id, `[B, T] -> [B, T]`.

  Funnel-Transformer's relative segment term treats [cls] (type id 2 in the authors'
  and Hugging Face's tokenizers) as belonging to every segment. Pipelines that give
  [cls] type 0, as Model Garden's do, get the same behaviour through this layer.

  Example:
    >>> ClsSegmentIds()(tf.constant([[0, 0, 1, 1]])).numpy().tolist()
    [[2, 0, 1, 1]]
  """

  def __init__(self, cls_segment_id=2, **kwargs):
    super().__init__(**kwargs)
    self.cls_segment_id = cls_segment_id

  def call(self, type_ids):
    type_ids = tf.cast(type_ids, tf.int32)
    cls = tf.fill(tf.shape(type_ids[:, :1]), self.cls_segment_id)
    return tf.concat([cls, type_ids[:, 1:]], axis=1)

  def get_config(self):
    return {**super().get_config(), "cls_segment_id": self.cls_segment_id}


class EncoderModel(keras.Model):
  """What every zoo encoder shares: a functional model rebuilt from its arguments.

  Subclasses build their functional graph in `__init__`, then set `self._config` (the
  constructor arguments) and `self._embeddings` (their `EncoderEmbeddings`). The
  embedding accessors are the ones Model Garden's heads and pretrainers call.
  """

  def get_embedding_table(self):
    return self._embeddings.word_embeddings.embeddings

  def get_embedding_layer(self):
    return self._embeddings.word_embeddings

  def get_config(self):
    return dict(self._config, name=self.name)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**config)
