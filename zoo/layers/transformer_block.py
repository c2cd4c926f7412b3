"""Transformer encoder block: attention + feed-forward, Post-LN or Pre-LN.

Axes: B batch, T query length, S key length, D model width, F feed-forward width,
N heads.
"""

import tensorflow as tf
import tf_keras as keras
from official.modeling.tf_utils import clone_initializer

from zoo.choices import ABSOLUTE
from zoo.choices import ACTIVATION_NAMES
from zoo.choices import POSITION_ENCODINGS
from zoo.choices import check_choice
from zoo.configs.encoder import check_local_attention
from zoo.layers import seeds
from zoo.layers.attention import AttentionResult
from zoo.layers.attention import Carry
from zoo.layers.attention import MultiHeadAttention
from zoo.layers.base import ZooLayer
from zoo.layers.relative_attention import Positions
from zoo.layers.relative_attention import RelativeMultiHeadAttention

# Activation names -> Keras activations ("gelu_approximate" is the tanh form, which
# Hugging Face calls "gelu_new").
ACTIVATIONS = {
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    "gelu_approximate": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "swish": keras.activations.swish,
}


@keras.utils.register_keras_serializable(package="zoo")
class TransformerBlock(ZooLayer):
  """One encoder layer: multi-head attention and a feed-forward net, each residual.

  Post-LN (Vaswani et al., 2017; BERT), the default:
      h = LN(x + Attention(x, kv));  out = LN(h + FFN(h))
  Pre-LN (Xiong et al., 2020), `norm_first=True`:
      h = x + Attention(LN(x), LN(kv));  out = h + FFN(LN(h))
  (a Pre-LN stack needs a final layer norm on top, which the encoder adds).

  The attention is absolute (positions live in the embeddings) or Transformer-XL
  relative in the factorized or shift form (Funnel paper, A.2), and optionally
  RealFormer residual attention, with the carry passed through. For Funnel's
  pool-query-only layer, pass the pooled sequence as `hidden_states` (queries and the
  residual) and the unpooled one as `key_value`.

  Args:
    num_heads: number of heads.
    head_size: width of each head.
    intermediate_size: feed-forward width F.
    activation: one of `zoo.layers.ACTIVATIONS`.
    dropout: hidden dropout, on the attention output and the feed-forward output.
    attention_dropout: dropout on the attention probabilities.
    activation_dropout: dropout after the feed-forward activation.
    norm_first: Pre-LN instead of Post-LN.
    layer_norm_epsilon: epsilon of the layer norms.
    position_encoding: one of `zoo.choices.POSITION_ENCODINGS`: "absolute" (positions
      live in the embeddings; plain `MultiHeadAttention`), "factorized" or "shift"
      (`RelativeMultiHeadAttention`).
    use_segment_bias, separate_cls, cls_segment_id: see `RelativeMultiHeadAttention`.
    residual_attention, running_mean: see `MultiHeadAttention`.
    kernel_initializer: initializer of all kernels.
    attention_window, global_tokens: block-local attention with global tokens (see
      `MultiHeadAttention`; None: full attention).
    shared_attention, shared_ffn: another block whose attention, or feed-forward dense
      layers, this block uses instead of its own (cross-layer sharing); that block must
      run first. Not part of the config: whoever shares passes them again (the encoders'
      `layer_sharing`).

  Call arguments:
    hidden_states: `[B, T, D]`.
    key_value: `[B, S, D]`, defaults to `hidden_states`.
    attention_mask, attention_carry, layer_index: see `MultiHeadAttention`.
    query_positions, key_positions, query_segment_ids, key_segment_ids: see
      `RelativeMultiHeadAttention` (relative position encodings only).

  Returns:
    An `AttentionResult` whatever the flags: `output` is the block's `[B, T, D]`
    output; `carry` and `probs` are its attention's.

  Example:
    >>> block = TransformerBlock(num_heads=4, head_size=8, intermediate_size=64,
    ...                          position_encoding="factorized", residual_attention=True)
    >>> x = tf.random.normal([2, 8, 32])
    >>> first = block(x)
    >>> second = block(first.output, attention_carry=first.carry, layer_index=1)
    >>> second.output.shape, second.carry.shape
    (TensorShape([2, 8, 32]), TensorShape([2, 4, 8, 8]))
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
    self.attention = self._attention_layer()
    norm = dict(epsilon=self.layer_norm_epsilon, dtype="float32")
    # Layer norms compute in float32 under mixed precision.
    self.attention_norm = keras.layers.LayerNormalization(name="attention_norm", **norm)
    self.output_norm = keras.layers.LayerNormalization(name="output_norm", **norm)
    self.attention_output_dropout = seeds.Dropout(self.dropout, name="attention_output_dropout")

    def feed_forward():
      return (keras.layers.EinsumDense(
                  "BTD,DF->BTF", output_shape=(None, self.intermediate_size), bias_axes="F",
                  kernel_initializer=clone_initializer(self.kernel_initializer), name="intermediate"),
              keras.layers.EinsumDense(
                  "BTF,FD->BTD", output_shape=(None, width), bias_axes="D",
                  kernel_initializer=clone_initializer(self.kernel_initializer), name="output"))
    self.intermediate_dense, self.output_dense = self._ffn_layers(feed_forward)
    self.activation_dropout_layer = seeds.Dropout(
        self.activation_dropout, name="activation_dropout")
    self.output_dropout = seeds.Dropout(self.dropout, name="output_dropout")
    super().build(input_shape)

  def call(self,
           hidden_states: tf.Tensor,
           key_value: tf.Tensor | None = None,
           attention_mask: tf.Tensor | None = None,
           query_positions: Positions | None = None,
           key_positions: Positions | None = None,
           query_segment_ids: tf.Tensor | None = None,
           key_segment_ids: tf.Tensor | None = None,
           attention_carry: Carry | None = None,
           layer_index: int = 0,
           training: bool | None = None) -> AttentionResult:
    key_value = hidden_states if key_value is None else key_value
    attention_kwargs = self._attention_arguments(
        attention_mask, query_positions, key_positions, query_segment_ids, key_segment_ids,
        attention_carry, layer_index, training)

    if self.norm_first:
      query = self._cast(self.attention_norm(hidden_states))
      key_value = query if key_value is hidden_states else self._cast(self.attention_norm(key_value))
    else:
      query = hidden_states
    attention = self.attention(query, key_value, **attention_kwargs)
    hidden = hidden_states + self.attention_output_dropout(attention.output, training=training)
    if not self.norm_first:
      hidden = self._cast(self.attention_norm(hidden))

    ffn_input = self._cast(self.output_norm(hidden)) if self.norm_first else hidden
    ffn = self.intermediate_dense(ffn_input)
    ffn = ACTIVATIONS[self.activation](ffn)
    ffn = self.activation_dropout_layer(ffn, training=training)
    ffn = self.output_dropout(self.output_dense(ffn), training=training)
    output = hidden + ffn
    if not self.norm_first:
      output = self._cast(self.output_norm(output))
    return AttentionResult(output=output, carry=attention.carry, probs=attention.probs)

  def _cast(self, x):
    return keras.backend.cast(x, self.compute_dtype)
