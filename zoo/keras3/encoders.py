"""The Transformer and Funnel-Transformer encoders in Keras 3.

The Keras 3 twins of `zoo.models.TransformerEncoder` and `zoo.models.FunnelEncoder`:
functional models with the same constructor arguments (and so the same config fields),
the same inputs (`input_word_ids`, `input_mask`, `input_type_ids`, int32 `[B, T]`) and
outputs (`sequence_output`, `pooled_output`, `encoder_outputs`, the Funnel's
`encoder_sequence_output`, `attention_probs` on request), and the same layer and weight
names, so weights move between the editions by name (`zoo.named_weights`).
"""

import keras
from keras import ops

from zoo import specs
from zoo.keras3.embeddings import ClsSegmentIds
from zoo.keras3.embeddings import EncoderEmbeddings
from zoo.keras3.funnel_pooling import FunnelPooling
from zoo.keras3.funnel_pooling import FunnelUpsampling
from zoo.keras3.transformer_block import TransformerBlock


def encoder_inputs(seq_length=None):
  """Named int32 `[B, T]` Keras 3 inputs, as Model Garden's encoders take them."""
  return specs.encoder_inputs(keras, seq_length)


def dtype_policy(dtype=None):
  """The dtype policy of an encoder and of every layer in it: `dtype` (a name such as
  "mixed_bfloat16", or a policy), or the global policy when None. The float32 islands
  (layer norms, attention scores and probabilities, the carry) stay float32 under any of them."""
  return keras.dtype_policies.get(dtype) if dtype is not None else keras.config.dtype_policy()


class EncoderModel(keras.Model):
  """What both encoders' Keras 3 edition shares: its layers' classes, the dtype and the config.

  The constructor's arguments, checks and functional graph are each encoder's spec
  (`zoo.specs`, shared with the tf_keras edition). Two keyword arguments are this edition's:
  `dtype` (as for any Keras layer) sets the policy of every layer of the encoder, and
  `word_embeddings`, another encoder's word-embedding layer, makes this one use that layer
  (ELECTRA's generator shares the discriminator's table; not part of the config).
  """

  @staticmethod
  def _kit(kwargs):
    kwargs = dict(kwargs)
    policy = dtype_policy(kwargs.pop("dtype", None))
    shared = kwargs.pop("word_embeddings", None)
    kit = specs.EncoderKit(keras=keras, embeddings=EncoderEmbeddings, block=TransformerBlock,
                           pooling=FunnelPooling, upsampling=FunnelUpsampling, cls_segment_ids=ClsSegmentIds,
                           cast=lambda x, like: ops.cast(x, like.dtype), options=dict(dtype=policy),
                           embedding_options={} if shared is None else dict(word_embeddings=shared))
    return kit, kwargs

  def _after_build(self, kit):
    self.dtype_policy = kit.options["dtype"]   # a functional model takes no dtype: its layers' policy

  def _edition_config(self):
    return {"dtype": self.dtype_policy.name}

  @classmethod
  def _edition_arguments(cls, config):
    config = {key: value for key, value in config.items() if key != "trainable"}
    if isinstance(config.get("dtype"), dict):   # a serialized policy
      config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return config


@keras.saving.register_keras_serializable(package="zoo")
class TransformerEncoder(specs.TransformerEncoderSpec, EncoderModel):
  """A stack of `TransformerBlock`s over token embeddings: Post-LN, Pre-LN, RealFormer.

  `zoo.models.TransformerEncoder` for Keras 3; see its docstring for the arguments.
  """


@keras.saving.register_keras_serializable(package="zoo")
class FunnelEncoder(specs.FunnelEncoderSpec, EncoderModel):
  """Funnel-Transformer: blocks of relative-attention layers with pooling in between.

  `zoo.models.FunnelEncoder` for Keras 3; see its docstring for the arguments (blocks
  and repeats, pooling type and semantics, pool-query-only, `separate_cls`,
  `truncate_seq`, position rules, the decoder, residual attention across blocks).
  """
