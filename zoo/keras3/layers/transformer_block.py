"""Transformer encoder block (Post-LN or Pre-LN), absolute or relative attention, in Keras 3.

The Keras 3 twin of `zoo.layers.transformer_block`. Axes: B batch, T query length,
S key length, D model width, F feed-forward width, N heads.
"""

import keras
from keras import ops

from zoo.choices import ABSOLUTE
from zoo.choices import ACTIVATION_NAMES
from zoo.choices import POSITION_ENCODINGS
from zoo.choices import check_choice
from zoo.configs.encoder import check_local_attention
from zoo.keras3.layers.attention import AttentionLayer
from zoo.keras3.layers.attention import AttentionResult
from zoo.keras3.layers.attention import MultiHeadAttention
from zoo.keras3.layers.base import clone_initializer
from zoo.keras3.layers.relative_attention import RelativeMultiHeadAttention

ACTIVATIONS = {
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    "gelu_approximate": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "swish": keras.activations.silu,
}
assert tuple(ACTIVATIONS) == ACTIVATION_NAMES


@keras.saving.register_keras_serializable(package="zoo")
class TransformerBlock(AttentionLayer):
  """One encoder layer: multi-head attention and a feed-forward net, each residual.

  `zoo.layers.TransformerBlock` for Keras 3 (see its docstring): Post-LN
  `h = LN(x + Attention(x, kv)); out = LN(h + FFN(h))` or Pre-LN (`norm_first`), absolute
  or relative attention (factorized or shift), RealFormer's carry passed through. The
  same arguments, sublayers (`attention`, `attention_norm`, `output_norm` in float32,
  `intermediate`, `output`) and `AttentionResult`.
  """

  def __init__(self,
               num_heads,
               head_size,
               intermediate_size,
               activation="gelu",
               dropout=0.1,
               attention_dropout=0.1,
               activation_dropout=0.0,
               norm_first=False,
               layer_norm_epsilon=1e-12,
               position_encoding=ABSOLUTE,
               use_segment_bias=False,
               separate_cls=False,
               cls_segment_id=2,
               residual_attention=False,
               running_mean=False,
               kernel_initializer="glorot_uniform",
               shared_attention=None,
               shared_ffn=None,
               attention_window=None,
               global_tokens=1,
               **kwargs):
    super().__init__(**kwargs)
    check_choice("position_encoding", position_encoding, POSITION_ENCODINGS)
    check_local_attention(attention_window, global_tokens)
    self.attention_window = attention_window
    self.global_tokens = global_tokens
    check_choice("activation", activation, ACTIVATION_NAMES)
    # Another block whose attention, or feed-forward net, this one uses (cross-layer sharing): it must
    # have run before this one first does. Not part of the config: the encoder passes it again.
    object.__setattr__(self, "_shared_attention", shared_attention)
    object.__setattr__(self, "_shared_ffn", shared_ffn)
    if position_encoding == ABSOLUTE and (use_segment_bias or separate_cls):
      raise ValueError("use_segment_bias and separate_cls need a relative position_encoding")
    self.num_heads = num_heads
    self.head_size = head_size
    self.intermediate_size = intermediate_size
    self.activation = activation
    self.dropout = dropout
    self.attention_dropout = attention_dropout
    self.activation_dropout = activation_dropout
    self.norm_first = norm_first
    self.layer_norm_epsilon = layer_norm_epsilon
    self.position_encoding = position_encoding
    self.use_segment_bias = use_segment_bias
    self.separate_cls = separate_cls
    self.cls_segment_id = cls_segment_id
    self.residual_attention = residual_attention
    self.running_mean = running_mean
    self.kernel_initializer = keras.initializers.get(kernel_initializer)

  def _attention_layer(self, **options):
    """The block's `attention` sublayer: `MultiHeadAttention` or, for relative positions,
    `RelativeMultiHeadAttention` (or `shared_attention`'s)."""
    if self._shared_attention is not None:
      return self._shared_part(self._shared_attention, "attention")[0]
    arguments = dict(
        num_heads=self.num_heads, head_size=self.head_size, attention_dropout=self.attention_dropout,
        residual_attention=self.residual_attention, running_mean=self.running_mean,
        kernel_initializer=self.kernel_initializer, attention_window=self.attention_window,
        global_tokens=self.global_tokens, name="attention", **options)
    if self.position_encoding == ABSOLUTE:
      return MultiHeadAttention(**arguments)
    return RelativeMultiHeadAttention(
        position_encoding=self.position_encoding, use_segment_bias=self.use_segment_bias,
        separate_cls=self.separate_cls, cls_segment_id=self.cls_segment_id, **arguments)

  def _ffn_layers(self, make):
    """`(intermediate, output)` dense layers: `shared_ffn`'s, else `make()`'s."""
    if self._shared_ffn is not None:
      return self._shared_part(self._shared_ffn, "intermediate_dense", "output_dense")
    return make()

  def _shared_part(self, block, *names):
    if not block.built:
      raise ValueError(f"{self.name} shares sublayers of {block.name}, which has not run yet: call "
                       f"{block.name} first")
    return tuple(getattr(block, name) for name in names)

  def _attention_arguments(self, attention_mask, query_positions, key_positions, query_segment_ids,
                           key_segment_ids, attention_carry, layer_index, training):
    """The attention call's keyword arguments (positions and segments for relative attention only)."""
    arguments = dict(attention_mask=attention_mask, attention_carry=attention_carry, layer_index=layer_index,
                     training=training)
    if self.position_encoding != ABSOLUTE:
      arguments.update(query_positions=query_positions, key_positions=key_positions,
                       query_segment_ids=query_segment_ids, key_segment_ids=key_segment_ids)
    return arguments

  def get_config(self):
    config = super().get_config()
    config.update(
        num_heads=self.num_heads,
        head_size=self.head_size,
        intermediate_size=self.intermediate_size,
        activation=self.activation,
        dropout=self.dropout,
        attention_dropout=self.attention_dropout,
        activation_dropout=self.activation_dropout,
        norm_first=self.norm_first,
        layer_norm_epsilon=self.layer_norm_epsilon,
        position_encoding=self.position_encoding,
        use_segment_bias=self.use_segment_bias,
        separate_cls=self.separate_cls,
        cls_segment_id=self.cls_segment_id,
        residual_attention=self.residual_attention,
        running_mean=self.running_mean,
        kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        attention_window=self.attention_window,
        global_tokens=self.global_tokens,
    )
    return config

  def build(self, input_shape):
    width = input_shape[-1]
    self.attention = self._attention_layer(dtype=self.dtype_policy)
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
