"""The Model Garden encoder interface shared by every zoo encoder.

Axes: B batch, T sequence length.
"""

import tensorflow as tf
import tf_keras as keras

from zoo.layers.base import ZooLayer
from zoo.specs import encoder_inputs as input_specs
from zoo.specs.encoder import EncoderKit
from zoo.specs.encoder_inputs import ClsSegmentIdsSpec


def encoder_inputs(seq_length: int | None = None) -> dict[str, tf.Tensor]:
  """Named int32 `[B, T]` Keras inputs, as Model Garden's encoders take them."""
  return input_specs.encoder_inputs(keras, seq_length)


@keras.utils.register_keras_serializable(package="zoo")
class ClsSegmentIds(ClsSegmentIdsSpec, ZooLayer):
  """Marks the first token ([cls]) with its own segment id, `[B, T] -> [B, T]`.

  Funnel-Transformer's relative segment term treats [cls] (type id 2 in the authors'
  and Hugging Face's tokenizers) as belonging to every segment. Pipelines that give
  [cls] type 0, as Model Garden's do, get the same behaviour through this layer.

  Example:
    >>> ClsSegmentIds()(tf.constant([[0, 0, 1, 1]])).numpy().tolist()
    [[2, 0, 1, 1]]
  """

  def call(self, type_ids: tf.Tensor) -> tf.Tensor:
    type_ids = tf.cast(type_ids, tf.int32)
    cls = tf.fill(tf.shape(type_ids[:, :1]), self.cls_segment_id)
    return tf.concat([cls, type_ids[:, 1:]], axis=1)


class EncoderModel(keras.Model):
  """What every zoo encoder's tf_keras edition shares: the kit its spec builds the graph with.

  The constructor's arguments, its checks and the functional graph are each encoder's spec
  (`zoo.specs.transformer_encoder`, `zoo.specs.funnel_encoder`), shared with `zoo.keras3`;
  the spec builds the graph from the encoder's `layer_classes()` and gives the embedding
  accessors Model Garden's heads and pretrainers call.
  """

  @classmethod
  def _kit(cls, kwargs):
    kit = EncoderKit(keras=keras, **cls.layer_classes(),
                     cast=lambda x, like: keras.backend.cast(x, like.dtype), options={}, embedding_options={})
    return kit, kwargs

  def _after_build(self, kit, graph):
    del kit, graph   # tf_keras layers take the global dtype policy; the graph has its static length

  def _edition_config(self):
    return {}

  @classmethod
  def _edition_arguments(cls, config):
    return config
