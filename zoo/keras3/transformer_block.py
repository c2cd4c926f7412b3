"""Transformer encoder block (Post-LN or Pre-LN), absolute or relative attention, in Keras 3.

The Keras 3 twin of `zoo.layers.transformer_block`. Axes: B batch, T query length,
S key length, D model width, F feed-forward width, N heads.
"""

import keras
from keras import ops

from zoo.choices import ACTIVATION_NAMES
from zoo.keras3.attention import AttentionLayer
from zoo.keras3.attention import AttentionResult
from zoo.keras3.attention import MultiHeadAttention
from zoo.keras3.relative_attention import RelativeMultiHeadAttention
from zoo.specs.base import clone_initializer
from zoo.specs.transformer_block import TransformerBlockSpec

ACTIVATIONS = {
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    "gelu_approximate": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "swish": keras.activations.silu,
}
assert tuple(ACTIVATIONS) == ACTIVATION_NAMES


@keras.saving.register_keras_serializable(package="zoo")
class TransformerBlock(TransformerBlockSpec, AttentionLayer):
  """One encoder layer: multi-head attention and a feed-forward net, each residual.

  `zoo.layers.TransformerBlock` for Keras 3 (see its docstring): Post-LN
  `h = LN(x + Attention(x, kv)); out = LN(h + FFN(h))` or Pre-LN (`norm_first`), absolute
  or relative attention (factorized or shift), RealFormer's carry passed through. The
  same arguments, sublayers (`attention`, `attention_norm`, `output_norm` in float32,
  `intermediate`, `output`) and `AttentionResult`.
  """

  def build(self, input_shape):
    width = input_shape[-1]
    self.attention = self._attention_layer(MultiHeadAttention, RelativeMultiHeadAttention,
                                           dtype=self.dtype_policy)
    if not self.attention.built:
      self.attention.build((None, None, width))
    # Layer norms compute in float32 under mixed precision.
    norm = dict(epsilon=self.layer_norm_epsilon, dtype="float32")
    self.attention_norm = keras.layers.LayerNormalization(name="attention_norm", **norm)
    self.output_norm = keras.layers.LayerNormalization(name="output_norm", **norm)
    self.attention_norm.build((None, None, width))
    self.output_norm.build((None, None, width))
    self.attention_output_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy,
                                                          name="attention_output_dropout")

    def feed_forward():
      intermediate = keras.layers.EinsumDense(
          "BTD,DF->BTF", output_shape=(None, self.intermediate_size), bias_axes="F",
          kernel_initializer=clone_initializer(self.kernel_initializer), dtype=self.dtype_policy,
          name="intermediate")
      intermediate.build((None, None, width))
      output = keras.layers.EinsumDense(
          "BTF,FD->BTD", output_shape=(None, width), bias_axes="D",
          kernel_initializer=clone_initializer(self.kernel_initializer), dtype=self.dtype_policy,
          name="output")
      output.build((None, None, self.intermediate_size))
      return intermediate, output
    self.intermediate_dense, self.output_dense = self._ffn_layers(feed_forward)
    self.activation_dropout_layer = keras.layers.Dropout(self.activation_dropout, dtype=self.dtype_policy,
                                                          name="activation_dropout")
    self.output_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name="output_dropout")
    self.built = True

  def call(self, hidden_states, key_value=None, attention_mask=None, query_positions=None,
           key_positions=None, query_segment_ids=None, key_segment_ids=None, attention_carry=None,
           layer_index=0, training=None):
    hidden_states = self._hidden(hidden_states)
    self_attention = key_value is None
    key_value = hidden_states if self_attention else self._hidden(key_value)
    attention_kwargs = self._attention_arguments(
        attention_mask, query_positions, key_positions, query_segment_ids, key_segment_ids,
        attention_carry, layer_index, training)

    if self.norm_first:
      query = self._cast(self.attention_norm(hidden_states))
      key_value = query if self_attention else self._cast(self.attention_norm(key_value))
    else:
      query = hidden_states
    attention = self.attention(query, key_value, **attention_kwargs)
    hidden = hidden_states + self.attention_output_dropout(attention.output, training=training)
    if not self.norm_first:
      hidden = self._cast(self.attention_norm(hidden))

    ffn_input = self._cast(self.output_norm(hidden)) if self.norm_first else hidden
    ffn = ACTIVATIONS[self.activation](self.intermediate_dense(ffn_input))
    ffn = self.activation_dropout_layer(ffn, training=training)
    ffn = self.output_dropout(self.output_dense(ffn), training=training)
    output = hidden + ffn
    if not self.norm_first:
      output = self._cast(self.output_norm(output))
    return AttentionResult(output=output, carry=attention.carry, probs=attention.probs)

  def _cast(self, x):
    return ops.cast(x, self.compute_dtype)
