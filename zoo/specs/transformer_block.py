"""`TransformerBlock`'s spec (`zoo.layers.transformer_block`, `zoo.keras3.transformer_block`):
attention and feed-forward arguments, Post-LN / Pre-LN, shared sub-layers (ALBERT's sharing)
and the arguments a block passes to its attention layer.
"""

from zoo.choices import ABSOLUTE
from zoo.choices import ACTIVATION_NAMES
from zoo.choices import POSITION_ENCODINGS
from zoo.choices import check_choice
from zoo.specs.attention import check_local_attention
from zoo.specs.base import LayerSpec


class TransformerBlockSpec(LayerSpec):
  """`TransformerBlock`'s arguments (see the tf_keras layer's docstring)."""

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
    self.kernel_initializer = self._initializer(kernel_initializer)

  def _attention_layer(self, absolute_class, relative_class, **options):
    """The block's `attention` sublayer: `absolute_class` or, for relative positions, `relative_class`
    (or `shared_attention`'s)."""
    if self._shared_attention is not None:
      return self._shared_part(self._shared_attention, "attention")[0]
    arguments = dict(
        num_heads=self.num_heads, head_size=self.head_size, attention_dropout=self.attention_dropout,
        residual_attention=self.residual_attention, running_mean=self.running_mean,
        kernel_initializer=self.kernel_initializer, attention_window=self.attention_window,
        global_tokens=self.global_tokens, name="attention", **options)
    if self.position_encoding == ABSOLUTE:
      return absolute_class(**arguments)
    return relative_class(position_encoding=self.position_encoding, use_segment_bias=self.use_segment_bias,
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
        kernel_initializer=self._serialized(self.kernel_initializer),
        attention_window=self.attention_window,
        global_tokens=self.global_tokens,
    )
    return config
