"""What each layer and encoder is, written once for both editions: arguments, checks, config.

The zoo's layers exist twice: in `tf_keras` (`zoo.layers`, `zoo.models`: the training job's
and the exports' path) and in Keras 3 (`zoo.keras3`: JAX, TensorFlow and PyTorch). This
module holds everything about a layer that is not tensor code, as one mixin class per
layer: the constructor's arguments and defaults, their validation, the attributes they
set, `get_config`, and the static shape and position arithmetic. Each edition's layer
derives from its spec and its own Keras' `Layer` and keeps only `build` and `call`:

    class MultiHeadAttention(specs.MultiHeadAttentionSpec, base.ZooLayer):   # tf_keras
      def build(self, input_shape): ...        # the sublayers, in this edition's Keras
      def call(self, query, value=None, ...): ...   # the tensor code

The edition's base class names its Keras as `_keras` (for initializers); a spec calls
`super().__init__(**kwargs)` first, so the Keras `Layer` is set up before any attribute
is. The encoders' functional graphs are built here too, from the layer classes an edition
hands over (`EncoderKit`): the wiring of blocks, pooling, the residual-attention carry
and the decoder is written once.

Plain Python: importing this module loads neither Keras (see `zoo/choices.py` and
`zoo/grids.py`, the other modules both editions share).
"""

import types
import typing
import warnings

import numpy as np

from zoo.choices import ABSOLUTE
from zoo.choices import ACTIVATION_NAMES
from zoo.choices import AUTHORS_TF_POSITIONS
from zoo.choices import CARRY_AT_POOLING
from zoo.choices import FACTORIZED
from zoo.choices import HF_POOLING
from zoo.choices import LAYER_SHARING
from zoo.choices import POOLING_TYPES
from zoo.choices import POSITION_ENCODINGS
from zoo.choices import POSITION_RULES
from zoo.choices import RELATIVE_POSITION_ENCODINGS
from zoo.choices import SHIFT
from zoo.choices import WINDOW_START_POSITIONS
from zoo.choices import ZOO_POOLING
from zoo.choices import check_choice
from zoo.choices import check_pooling_semantics
from zoo.choices import recorded_pooling_semantics
from zoo.grids import authors_tf_positions
from zoo.grids import block_lengths
from zoo.grids import pool_positions
from zoo.grids import position_grid
from zoo.windows import local_geometry

# The named int32 `[B, T]` inputs of every encoder, as Model Garden's encoders take them.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


class AttentionResult(typing.NamedTuple):
  """What `MultiHeadAttention`, `RelativeMultiHeadAttention` and `TransformerBlock` return.

  The same three fields whatever the layer's flags; read them by name
  (`result.output`, `result.carry`, `result.probs`). Keras functional models and
  `.keras` files take it like any tuple of tensors.

  Fields:
    output: `[B, T, D]` in the compute dtype: the attention output, or for
      `TransformerBlock` the block's output.
    carry: float32 `[B, N, T, S]`: the full pre-softmax score `C_l = S_l + C_{l-1}`
      (RealFormer's residual-attention carry, undivided and unmasked), to pass as the
      next residual layer's `attention_carry`. A layer without `residual_attention`
      takes no carry and returns its own score `S_l`, which is what layer 0 of a
      RealFormer passes up.
    probs: float32 `[B, N, T, S]`: the attention probabilities, before dropout.
  """

  output: typing.Any
  carry: typing.Any
  probs: typing.Any


def clone_initializer(initializer):
  """A fresh initializer with the same config, so no two kernels start out equal."""
  if hasattr(initializer, "get_config"):
    return initializer.__class__.from_config(initializer.get_config())
  return initializer


class LayerSpec:
  """The base of every layer spec: initializers read and written by the edition's Keras.

  The edition's base layer class, after the spec in the bases, names its Keras module as
  `_keras` (`tf_keras` or `keras`).
  """

  def _initializer(self, value):
    return self._keras.initializers.get(value)

  def _serialized(self, initializer):
    return self._keras.initializers.serialize(initializer)


class MultiHeadAttentionSpec(LayerSpec):
  """`MultiHeadAttention`'s arguments (see the tf_keras layer's docstring)."""

  def __init__(self,
               num_heads,
               head_size,
               attention_dropout=0.0,
               residual_attention=False,
               running_mean=False,
               kernel_initializer="glorot_uniform",
               attention_window=None,
               global_tokens=1,
               **kwargs):
    if "dropout" in kwargs:   # the argument's name in configs saved before it was renamed
      if attention_dropout:
        raise TypeError(f"{type(self).__name__} got dropout and attention_dropout; "
                        "pass attention_dropout only")
      warnings.warn(f"{type(self).__name__}(dropout=...) is deprecated: the attention-probability "
                    "dropout rate is attention_dropout (re-save the model to update its config)",
                    FutureWarning, stacklevel=2)
      attention_dropout = kwargs.pop("dropout")
    super().__init__(**kwargs)
    if running_mean and not residual_attention:
      raise ValueError("running_mean=True needs residual_attention=True")
    self.num_heads = num_heads
    self.head_size = head_size
    self.attention_dropout = attention_dropout
    self.residual_attention = residual_attention
    self.running_mean = running_mean
    self.kernel_initializer = self._initializer(kernel_initializer)
    check_local_attention(attention_window, global_tokens)
    self.attention_window = attention_window
    self.global_tokens = global_tokens

  def _check_carry(self, attention_carry):
    if attention_carry is not None and not self.residual_attention:
      raise ValueError(f"{self.name}: attention_carry needs residual_attention=True")

  def _local_geometry(self, query_positions, key_positions, query_length, key_length):
    """The `zoo.windows.LocalGeometry` of a call with local attention (static lengths and positions)."""
    if query_length is None or key_length is None:
      raise ValueError(f"{self.name}: local attention (attention_window) needs static sequence lengths")
    grids = []
    for positions, length, name in ((query_positions, query_length, "query_positions"),
                                    (key_positions, key_length, "key_positions")):
      values = self._static_positions(positions, length, name)
      if values is None:
        raise ValueError(f"{self.name}: local attention (attention_window) needs {name} known when the "
                         "graph is built (a Python list, NumPy array or constant)")
      grids.append(values)
    return local_geometry(self.attention_window, self.global_tokens, *grids)

  _static_positions = staticmethod(lambda positions, length, name: (
      np.arange(length, dtype=np.float64) if positions is None else static_vector(positions, length, name)))

  def get_config(self):
    config = super().get_config()
    config.update(
        num_heads=self.num_heads,
        head_size=self.head_size,
        attention_dropout=self.attention_dropout,
        residual_attention=self.residual_attention,
        running_mean=self.running_mean,
        kernel_initializer=self._serialized(self.kernel_initializer),
        attention_window=self.attention_window,
        global_tokens=self.global_tokens,
    )
    return config


def check_local_attention(attention_window, global_tokens):
  """The local-attention settings: a window of `>= 0` keys on each side (None: full attention) and
  `>= 1` global tokens."""
  if attention_window is not None and (isinstance(attention_window, bool) or int(attention_window) !=
                                       attention_window or attention_window < 0):
    raise ValueError(f"attention_window must be None (full attention) or a whole number >= 0, got "
                     f"{attention_window!r}")
  if isinstance(global_tokens, bool) or int(global_tokens) != global_tokens or global_tokens < 1:
    raise ValueError(f"global_tokens must be a whole number >= 1 (the [cls] token at least), got "
                     f"{global_tokens!r}")


class RelativeMultiHeadAttentionSpec(MultiHeadAttentionSpec):
  """`RelativeMultiHeadAttention`'s arguments, weights and shift-form position grid.

  `build` is shared: the weights are the same in both editions (`content_bias` v,
  `position_bias` u, `position_kernel` W_r, and with the segment term `segment_bias` s and
  `segment_embedding`), then the edition's `MultiHeadAttention.build` adds the projections.
  """

  def __init__(self,
               num_heads,
               head_size,
               position_encoding=FACTORIZED,
               use_segment_bias=False,
               separate_cls=False,
               cls_segment_id=2,
               **kwargs):
    super().__init__(num_heads, head_size, **kwargs)
    check_choice("position_encoding", position_encoding, RELATIVE_POSITION_ENCODINGS)
    self.position_encoding = position_encoding
    self.use_segment_bias = use_segment_bias
    self.separate_cls = separate_cls
    self.cls_segment_id = cls_segment_id

  def build(self, input_shape):
    width = input_shape[-1]
    if width % 2:
      raise ValueError(f"relative attention needs an even model width, got {width}")
    heads = (self.num_heads, self.head_size)
    self.content_bias = self.add_weight(name="content_bias", shape=heads, initializer="zeros")      # v
    self.position_bias = self.add_weight(name="position_bias", shape=heads, initializer="zeros")    # u
    self.position_kernel = self.add_weight(                                                          # W_r
        name="position_kernel", shape=(width, *heads), initializer=clone_initializer(self.kernel_initializer))
    if self.use_segment_bias:
      self.segment_bias = self.add_weight(name="segment_bias", shape=heads, initializer="zeros")    # s
      self.segment_embedding = self.add_weight(                                                      # seg
          name="segment_embedding", shape=(2, *heads),
          initializer=clone_initializer(self.kernel_initializer))
    super().build(input_shape)

  def _check_segments(self, query_segment_ids):
    if self.use_segment_bias and query_segment_ids is None:
      raise ValueError("use_segment_bias=True needs query_segment_ids")

  def _shift_layout(self, query_positions, key_positions, query_length, key_length):
    """The shift form's static table: `(ratio, distances)`.

    The positions must be known when the model is built (`self._static_positions` reads
    them; None is the default grid) and evenly spaced, the query spacing a whole multiple
    `ratio` of the key spacing. The distances are
    `t_n = (q0 - k0) + (ratio·T - n)·k_stride` for `n < L = ratio·T + S`, so that pair
    `(i, j)` sits at `n = ratio·(T - i) + j`.
    """
    if query_length is None or key_length is None:
      raise ValueError("position_encoding='shift' needs static sequence lengths")
    q_start, q_stride = self._static_grid(query_positions, query_length, "query_positions")
    k_start, k_stride = self._static_grid(key_positions, key_length, "key_positions")
    k_stride = k_stride or q_stride or 1.0
    q_stride = q_stride or k_stride
    ratio = q_stride / k_stride
    if ratio < 1 or ratio != int(ratio):
      raise ValueError(
          "position_encoding='shift' needs the query spacing to be a whole multiple of the "
          f"key spacing, got {q_stride} and {k_stride}")
    ratio = int(ratio)
    num_distances = ratio * query_length + key_length
    distances = (q_start - k_start) + (ratio * query_length - np.arange(num_distances)) * k_stride
    return ratio, distances.astype(np.float32)

  def _static_grid(self, positions, length, name):
    values = self._static_positions(positions, length, name)
    if values is None:
      raise ValueError(
          f"position_encoding='shift' needs {name} known when the graph is built "
          "(a Python list, NumPy array or constant); use position_encoding='factorized' "
          "for positions computed at run time")
    return position_grid(values, name)

  def get_config(self):
    config = super().get_config()
    config.update(
        position_encoding=self.position_encoding,
        use_segment_bias=self.use_segment_bias,
        separate_cls=self.separate_cls,
        cls_segment_id=self.cls_segment_id,
    )
    return config


def static_vector(value, length, name):
  """A known position vector as 1-D float64 numpy, checked against `length`."""
  value = np.asarray(value, dtype=np.float64)
  if value.ndim != 1 or value.shape[0] != length:
    raise ValueError(f"{name} must be a vector of length {length}, got shape {value.shape}")
  return value


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


class EncoderEmbeddingsSpec(LayerSpec):
  """`EncoderEmbeddings`' arguments (see the tf_keras layer's docstring)."""

  def __init__(self,
               vocab_size,
               embedding_width,
               hidden_size,
               max_sequence_length=None,
               type_vocab_size=0,
               dropout=0.1,
               layer_norm_epsilon=1e-12,
               initializer="glorot_uniform",
               **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_width = embedding_width
    self.hidden_size = hidden_size
    self.max_sequence_length = max_sequence_length
    self.type_vocab_size = type_vocab_size
    self.dropout = dropout
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer = self._initializer(initializer)

  def get_config(self):
    config = super().get_config()
    config.update(
        vocab_size=self.vocab_size,
        embedding_width=self.embedding_width,
        hidden_size=self.hidden_size,
        max_sequence_length=self.max_sequence_length,
        type_vocab_size=self.type_vocab_size,
        dropout=self.dropout,
        layer_norm_epsilon=self.layer_norm_epsilon,
        initializer=self._serialized(self.initializer),
    )
    return config


class ClsSegmentIdsSpec(LayerSpec):
  """`ClsSegmentIds`' argument: the segment id [cls] gets."""

  def __init__(self, cls_segment_id=2, **kwargs):
    super().__init__(**kwargs)
    self.cls_segment_id = cls_segment_id

  def get_config(self):
    return {**super().get_config(), "cls_segment_id": self.cls_segment_id}


class FunnelPoolingSpec(LayerSpec):
  """`FunnelPooling`: its arguments, the semantics' dispatch and the mask, id and position helpers.

  The edition supplies its tensor code as `_pool_sequence` (its `pool_sequence`).
  """

  def __init__(self, pooling_type="mean", separate_cls=True, truncate_seq=True, semantics=ZOO_POOLING,
               **kwargs):
    # Pooling keeps the dtype it is given: a float32 attention carry stays float32
    # under mixed precision, and masks and ids stay integers.
    super().__init__(autocast=False, **kwargs)
    check_choice("pooling_type", pooling_type, POOLING_TYPES)
    check_pooling_semantics("semantics", semantics)
    self.pooling_type = pooling_type
    self.separate_cls = separate_cls
    self.truncate_seq = truncate_seq
    self.semantics = semantics

  def call(self, inputs, input_mask=None, axis=1, mode=None):
    if self.semantics != ZOO_POOLING:
      input_mask = None   # every token of a window counts, padding included
    return self._pool_sequence(inputs, axis, mode or self.pooling_type, self.separate_cls,
                               self.truncate_seq, input_mask=input_mask)

  def pool_mask(self, input_mask):
    """`[B, T]` mask -> `[B, T']`: a window is real if every token of it is (Hugging Face's semantics),
    else if any is."""
    return self(input_mask, mode="all" if self.semantics == HF_POOLING else "any")

  def pool_ids(self, ids):
    """`[B, T]` ids (e.g. segment ids) -> `[B, T']`, the first id of each window."""
    return self(ids, mode="first")

  def pool_positions(self, positions):
    """Position vector `[T]` -> `[T']` (numpy; positions are static)."""
    return pool_positions(positions, self.separate_cls, self.truncate_seq)

  def get_config(self):
    config = super().get_config()
    config.update(pooling_type=self.pooling_type, separate_cls=self.separate_cls,
                  truncate_seq=self.truncate_seq, semantics=self.semantics)
    return config

  @classmethod
  def from_config(cls, config):
    """A recorded config; "authors" there means Hugging Face's semantics (`zoo.choices`)."""
    config = dict(config)
    if "semantics" in config:
      config["semantics"] = recorded_pooling_semantics(config["semantics"])
    return super().from_config(config)


class FunnelUpsamplingSpec(LayerSpec):
  """`FunnelUpsampling`'s arguments."""

  def __init__(self, stride, separate_cls=True, truncate_seq=True, **kwargs):
    super().__init__(**kwargs)
    if stride < 1 or stride & (stride - 1):
      raise ValueError(f"stride must be a power of two, got {stride}")
    self.stride = stride
    self.separate_cls = separate_cls
    self.truncate_seq = truncate_seq

  def get_config(self):
    config = super().get_config()
    config.update(stride=self.stride, separate_cls=self.separate_cls, truncate_seq=self.truncate_seq)
    return config


class ReplacedTokenSamplerSpec(LayerSpec):
  """ELECTRA's `ReplacedTokenSampler`: float32 unless told otherwise (it samples from float32 logits)."""

  def __init__(self, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)


# --- Encoders -------------------------------------------------------------------------------


class EncoderKit(typing.NamedTuple):
  """What an edition hands the shared graph builders: its Keras and its layer classes.

  `options` go to every layer the encoder makes (Keras 3: its dtype policy),
  `embedding_options` to its `EncoderEmbeddings` only (Keras 3: a word-embedding layer to
  share); `cast(x, like)` casts a tensor to the dtype of another. `layers`, when a dict,
  keeps every layer the graph makes by name, and a graph built again with the same kit
  (at another sequence length) wires those same layers, so both share their weights.
  """

  keras: typing.Any
  embeddings: type
  block: type
  pooling: type
  upsampling: type
  cls_segment_ids: type
  cast: typing.Callable
  options: dict
  embedding_options: dict
  layers: dict | None = None

  def make(self, factory, *args, name, **kwargs):
    """`factory(*args, name=name, **kwargs)`, or the layer of that name this kit already made."""
    if self.layers is not None and name in self.layers:
      return self.layers[name]
    layer = factory(*args, name=name, **kwargs)
    if self.layers is not None:
      self.layers[name] = layer
    return layer


def encoder_inputs(keras, seq_length=None):
  """Named int32 `[B, T]` Keras inputs of `keras` (either edition's), as Model Garden's encoders take them."""
  return {name: keras.Input(shape=(seq_length,), dtype="int32", name=name) for name in INPUT_NAMES}


def _arguments(frame_locals):
  """An encoder's constructor arguments, from its `locals()` at the top of `__init__`."""
  return {name: value for name, value in frame_locals.items() if name not in ("self", "kwargs", "__class__")}


class EncoderSpec:
  """What both encoders share in both editions: a functional model rebuilt from its arguments.

  The edition's model class, after the spec in the bases, gives
  `_kit(kwargs) -> (EncoderKit, kwargs)` (taking out the keyword arguments that are its own,
  such as Keras 3's `dtype`), `_after_build(kit, graph)`, run once the model is made, and
  `_edition_config()` / `_edition_arguments(config)`, its own fields of the config and how
  they read back. `self._config` holds the constructor arguments and `self._embeddings` the
  `EncoderEmbeddings`, whose word table Model Garden's heads and pretrainers read through
  the accessors.
  """

  def _build(self, config, kwargs, graph):
    kit, kwargs = self._kit(kwargs)
    inputs, outputs, embeddings = graph(config, kit)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self._config = config
    self._embeddings = embeddings
    self._after_build(kit, graph)

  def length_problem(self, length):
    """Why the encoder cannot run on `length` tokens (naming the lengths it takes), or None."""
    return None

  def get_embedding_table(self):
    return self._embeddings.word_embeddings.embeddings

  def get_embedding_layer(self):
    return self._embeddings.word_embeddings

  def get_config(self):
    return dict(self._config, name=self.name, **self._edition_config())

  @classmethod
  def from_config(cls, config, custom_objects=None):
    arguments = cls._edition_arguments(config)
    if "pooling_semantics" in arguments:   # "authors" recorded there means Hugging Face's
      arguments["pooling_semantics"] = recorded_pooling_semantics(arguments["pooling_semantics"])
    return cls(**arguments)


class TransformerEncoderSpec(EncoderSpec):
  """`TransformerEncoder`'s arguments and functional graph (see the tf_keras encoder's docstring)."""

  def __init__(self,
               vocab_size,
               hidden_size=768,
               num_layers=12,
               num_heads=12,
               intermediate_size=3072,
               activation="gelu",
               dropout=0.1,
               attention_dropout=0.1,
               max_sequence_length=512,
               type_vocab_size=2,
               embedding_width=None,
               norm_first=False,
               residual_attention=False,
               running_mean=False,
               position_encoding=ABSOLUTE,
               layer_norm_epsilon=1e-12,
               initializer_range=0.02,
               seq_length=None,
               output_attention_probs=False,
               layer_sharing="none",
               attention_window=None,
               global_tokens=1,
               **kwargs):
    config = _arguments(locals())
    check_choice("layer_sharing", layer_sharing, LAYER_SHARING)
    check_local_attention(attention_window, global_tokens)
    if attention_window is not None and seq_length is None:
      raise ValueError("local attention (attention_window) needs a static seq_length")
    if position_encoding == ABSOLUTE and seq_length and seq_length > max_sequence_length:
      raise ValueError(f"seq_length {seq_length} exceeds max_sequence_length {max_sequence_length}, the size "
                       "of the absolute position table: raise max_sequence_length (the table grows, and a "
                       "checkpoint's smaller table no longer fits) or use a relative position_encoding")
    if hidden_size % num_heads:
      raise ValueError(f"hidden_size ({hidden_size}) must be a multiple of num_heads ({num_heads})")
    if position_encoding == SHIFT and seq_length is None:
      raise ValueError("position_encoding='shift' needs a static seq_length")
    self._build(config, kwargs, transformer_graph)

  def length_problem(self, length):
    if length < 1:
      return f"a sequence needs at least 1 token, got {length}"
    maximum = self._config["max_sequence_length"]
    if self._config["position_encoding"] == ABSOLUTE and length > maximum:
      return (f"{length} tokens exceed max_sequence_length {maximum}, the size of the absolute position "
              f"table: the encoder takes 1 to {maximum} tokens")
    return None


def layer_stack(make, names, sharing):
  """The blocks called `names` (`make(name, **shared)`), sharing across layers as `sharing` says
  (`zoo.choices.LAYER_SHARING`, ALBERT's Sec. 3.1): "none"; "all" (every layer is the first block,
  applied again); "attention" or "ffn" (each layer has its own block, whose attention or
  feed-forward net is the first block's). The first block runs first in the encoder's graph.
  """
  first = make(names[0])
  blocks = [first]
  for name in names[1:]:
    if sharing == "all":
      blocks.append(first)
    else:
      shared = {"attention": dict(shared_attention=first), "ffn": dict(shared_ffn=first)}.get(sharing, {})
      blocks.append(make(name, **shared))
  return blocks


def transformer_graph(config, kit, inputs=None):
  """`TransformerEncoder`'s layers and graph in `kit`'s edition: `(inputs, outputs, embeddings)`.

  `inputs`: the tensors to run the graph on (default new `keras.Input`s of `seq_length`).
  """
  c = types.SimpleNamespace(**config)
  relative = c.position_encoding != ABSOLUTE
  initializer = kit.keras.initializers.TruncatedNormal(stddev=c.initializer_range)

  embeddings = kit.make(
      kit.embeddings, c.vocab_size, c.embedding_width or c.hidden_size, c.hidden_size,
      max_sequence_length=None if relative else c.max_sequence_length,
      type_vocab_size=0 if relative else c.type_vocab_size, dropout=c.dropout,
      layer_norm_epsilon=c.layer_norm_epsilon, initializer=initializer, name="embeddings", **kit.options,
      **kit.embedding_options)

  def block(name, **shared):
    return kit.make(
        kit.block, c.num_heads, c.hidden_size // c.num_heads, c.intermediate_size, activation=c.activation,
        dropout=c.dropout, attention_dropout=c.attention_dropout, norm_first=c.norm_first,
        layer_norm_epsilon=c.layer_norm_epsilon, position_encoding=c.position_encoding,
        use_segment_bias=relative, residual_attention=c.residual_attention,
        running_mean=c.running_mean, kernel_initializer=initializer, attention_window=c.attention_window,
        global_tokens=c.global_tokens, name=name, **shared, **kit.options)
  blocks = layer_stack(block, [f"layer_{i}" for i in range(c.num_layers)], c.layer_sharing)
  final_norm = kit.make(kit.keras.layers.LayerNormalization, epsilon=c.layer_norm_epsilon, dtype="float32",
                        name="final_norm") if c.norm_first else None
  pooler = kit.make(kit.keras.layers.Dense, c.hidden_size, activation="tanh", kernel_initializer=initializer,
                    name="pooler", **kit.options)

  inputs = inputs if inputs is not None else encoder_inputs(kit.keras, c.seq_length)
  mask = inputs["input_mask"]
  hidden = embeddings(inputs["input_word_ids"], None if relative else inputs["input_type_ids"])
  block_kwargs = {}
  if relative:
    segments = kit.make(kit.cls_segment_ids, name="cls_segment_ids", **kit.options)
    block_kwargs["query_segment_ids"] = segments(inputs["input_type_ids"])
  if c.seq_length is not None and c.position_encoding == SHIFT:
    positions = list(range(c.seq_length))
    block_kwargs.update(query_positions=positions, key_positions=positions)
  carry, layer_outputs, attention_probs = None, [], []
  for index, block in enumerate(blocks):
    result = block(hidden, attention_mask=mask, attention_carry=carry, layer_index=index, **block_kwargs)
    hidden = result.output
    carry = result.carry if c.residual_attention else None
    attention_probs.append(result.probs)
    layer_outputs.append(hidden)
  if final_norm is not None:   # encoder_outputs keep the blocks' raw outputs
    hidden = kit.cast(final_norm(hidden), hidden)
  outputs = dict(sequence_output=hidden, pooled_output=pooler(hidden[:, 0]), encoder_outputs=layer_outputs)
  if c.output_attention_probs:
    outputs["attention_probs"] = attention_probs
  return inputs, outputs, embeddings


class FunnelEncoderSpec(EncoderSpec):
  """`FunnelEncoder`'s arguments, checks and functional graph (see the tf_keras encoder's docstring)."""

  def __init__(self,
               vocab_size,
               hidden_size=768,
               block_sizes=(6, 6, 6),
               block_repeats=None,
               num_heads=12,
               head_size=None,
               intermediate_size=3072,
               activation="gelu_approximate",
               dropout=0.1,
               attention_dropout=0.1,
               activation_dropout=0.0,
               embedding_width=None,
               pooling_type="mean",
               pooling_semantics=ZOO_POOLING,
               pool_q_only=True,
               separate_cls=True,
               truncate_seq=True,
               position_encoding=FACTORIZED,
               position_rules=WINDOW_START_POSITIONS,
               use_segment_bias=True,
               num_decoder_layers=0,
               decoder_residual_layer=None,
               residual_attention=False,
               running_mean=False,
               carry_at_pooling="pool",
               layer_norm_epsilon=1e-9,
               initializer_range=0.1,
               seq_length=512,
               output_attention_probs=False,
               layer_sharing="none",
               attention_window=None,
               global_tokens=1,
               **kwargs):
    block_sizes = tuple(block_sizes)
    block_repeats = tuple(block_repeats) if block_repeats else (1,) * len(block_sizes)
    config = _arguments(locals())
    check_funnel_config(config)
    self._build(config, kwargs, funnel_graph)

  def length_problem(self, length):
    c = self._config
    shortest = shortest_funnel_length(len(c["block_sizes"]), c["separate_cls"], c["truncate_seq"])
    if length < shortest:
      lengths = block_lengths(length, len(c["block_sizes"]), c["separate_cls"], c["truncate_seq"])
      return (f"{length} tokens are too few for {len(c['block_sizes'])} blocks (lengths {lengths}): the "
              f"encoder takes {shortest} tokens or more (relative positions: no maximum)")
    return None


def shortest_funnel_length(num_blocks, separate_cls=True, truncate_seq=True):
  """The fewest tokens a Funnel encoder of `num_blocks` blocks runs on: its last block keeps 2."""
  length = 2
  while block_lengths(length, num_blocks, separate_cls, truncate_seq)[-1] < 2:
    length += 1
  return length


def check_funnel_config(config):
  """The `FunnelEncoder` argument checks."""
  check_choice("pooling_type", config["pooling_type"], POOLING_TYPES)
  check_pooling_semantics("pooling_semantics", config["pooling_semantics"])
  check_choice("position_rules", config["position_rules"], POSITION_RULES)
  check_choice("carry_at_pooling", config["carry_at_pooling"], CARRY_AT_POOLING)
  check_choice("position_encoding", config["position_encoding"], RELATIVE_POSITION_ENCODINGS)
  check_choice("layer_sharing", config["layer_sharing"], LAYER_SHARING)
  if len(config["block_repeats"]) != len(config["block_sizes"]):
    raise ValueError(f"block_repeats {config['block_repeats']} must have one entry per block "
                     f"of block_sizes {config['block_sizes']}")
  if not config["seq_length"]:
    raise ValueError("FunnelEncoder needs a static seq_length")
  lengths = block_lengths(config["seq_length"], len(config["block_sizes"]), config["separate_cls"],
                          config["truncate_seq"])
  if lengths[-1] < 2:
    shortest = shortest_funnel_length(len(config["block_sizes"]), config["separate_cls"],
                                      config["truncate_seq"])
    raise ValueError(f"seq_length {config['seq_length']} is too short for "
                     f"{len(config['block_sizes'])} blocks (lengths {lengths}): at least {shortest}")
  applications = sum(s * r for s, r in zip(config["block_sizes"], config["block_repeats"], strict=True))
  check_local_attention(config["attention_window"], config["global_tokens"])
  pooled = len(config["block_sizes"]) > 1
  if config["attention_window"] is not None and config["residual_attention"] and pooled:
    if config["carry_at_pooling"] == "pool":
      raise ValueError(
          "local attention (attention_window) with residual_attention cannot pool the carry "
          "(carry_at_pooling='pool'): a pooled block's window spans pairs of the block below that no window "
          "scored, so the pooled carry would not be the full one; use carry_at_pooling='reset' (and "
          "pool_q_only=False)")
    if config["pool_q_only"]:
      raise ValueError(
          "local attention (attention_window) with residual_attention and pool_q_only: the pool-query-only "
          "layer's carry (pooled queries, unpooled keys) would have to be pooled to the next layer's keys, "
          "which spans pairs its windows never scored; use pool_q_only=False with carry_at_pooling='reset'")
  index = config["decoder_residual_layer"]
  if index is not None and not 0 <= index < applications:
    raise ValueError(f"decoder_residual_layer must be in [0, {applications}), got {index}")


def funnel_graph(config, kit, inputs=None):
  """`FunnelEncoder`'s layers and graph in `kit`'s edition: `(inputs, outputs, embeddings)`.

  `inputs`: the tensors to run the graph on (default new `keras.Input`s of `seq_length`).
  """
  c = types.SimpleNamespace(**config)
  head_size = c.head_size or c.hidden_size // c.num_heads
  initializer = kit.keras.initializers.TruncatedNormal(stddev=c.initializer_range)
  decoder_residual_layer = c.decoder_residual_layer
  if decoder_residual_layer is None:
    decoder_residual_layer = c.block_sizes[0] * c.block_repeats[0] - 1
  authors_tf = c.position_rules == AUTHORS_TF_POSITIONS
  # The attention layers zero the relative terms of token 0's pairs with separate_cls, and always
  # under the authors' TensorFlow rules.
  cls_terms_zeroed = c.separate_cls or authors_tf

  # Layers.
  def transformer_block(name, residual, **shared):
    return kit.make(
        kit.block, c.num_heads, head_size, c.intermediate_size, activation=c.activation, dropout=c.dropout,
        attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
        layer_norm_epsilon=c.layer_norm_epsilon, position_encoding=c.position_encoding,
        use_segment_bias=c.use_segment_bias, separate_cls=cls_terms_zeroed,
        residual_attention=residual, running_mean=c.running_mean and residual,
        kernel_initializer=initializer, attention_window=c.attention_window, global_tokens=c.global_tokens,
        name=name, **shared, **kit.options)

  embeddings = kit.make(
      kit.embeddings, c.vocab_size, c.embedding_width or c.hidden_size, c.hidden_size, dropout=c.dropout,
      layer_norm_epsilon=c.layer_norm_epsilon, initializer=initializer, name="embeddings", **kit.options,
      **kit.embedding_options)
  # The encoder's layers, block by block (the decoder's are never shared).
  names = [f"block_{b}_layer_{i}" for b, size in enumerate(c.block_sizes) for i in range(size)]
  stack = iter(layer_stack(lambda name, **shared: transformer_block(name, c.residual_attention, **shared),
                           names, c.layer_sharing))
  blocks = [[next(stack) for _ in range(size)] for size in c.block_sizes]
  pooling = kit.make(kit.pooling, c.pooling_type, c.separate_cls, c.truncate_seq,
                     semantics=c.pooling_semantics, name="pooling", **kit.options)
  decoder = [transformer_block(f"decoder_layer_{i}", False) for i in range(c.num_decoder_layers)]
  pooler = kit.make(kit.keras.layers.Dense, c.hidden_size, activation="tanh", kernel_initializer=initializer,
                    name="pooler", **kit.options)

  # The functional graph.
  inputs = inputs if inputs is not None else encoder_inputs(kit.keras, c.seq_length)
  full_mask = mask = inputs["input_mask"]
  segments = None
  if c.use_segment_bias:
    segments = kit.make(kit.cls_segment_ids, name="cls_segment_ids", **kit.options)(inputs["input_type_ids"])
  full_segments = segments
  full_positions = positions = np.arange(c.seq_length, dtype=np.float64)
  hidden = embeddings(inputs["input_word_ids"])
  carry, depth, layer_outputs, attention_probs = None, 0, [], []

  def run(layer, query, key_value=None, **kwargs):
    """One layer application; returns its output and updates the carry."""
    nonlocal carry, depth
    result = layer(query, key_value, attention_carry=carry if layer.residual_attention else None,
                   layer_index=depth, **kwargs)
    if layer.residual_attention:
      carry, depth = result.carry, depth + 1
    attention_probs.append(result.probs)
    return result.output

  # Each layer runs its repeats back to back (L0 L0 L1 L1), as in the authors' code.
  for b, block in enumerate(blocks):
    for i, layer in enumerate(block):
      for r in range(c.block_repeats[b]):
        same_grid = dict(query_positions=positions.tolist(), key_positions=positions.tolist(),
                         query_segment_ids=segments, key_segment_ids=segments)
        if not (b > 0 and r == 0 and i == 0):
          hidden = run(layer, hidden, attention_mask=mask, **same_grid)
          layer_outputs.append(hidden)
          continue
        # First layer of a pooled block: pool hidden states, mask, ids, positions, carry.
        if c.carry_at_pooling == "reset":
          carry, depth = None, 0
        pooled = pooling(hidden, input_mask=mask)                      # [B, T, D] -> [B, T', D]
        pooled_mask = pooling.pool_mask(mask)
        pooled_segments = None if segments is None else pooling.pool_ids(segments)
        pooled_positions = pool_positions(positions, c.separate_cls, c.truncate_seq)
        if authors_tf and c.position_encoding == SHIFT:
          pooled_positions = authors_tf_positions(pooled_positions.shape[0], b)
        if carry is not None:                                          # [B, N, T, T] -> [B, N, T', T]
          carry = pooling(carry, input_mask=mask, axis=2)
        if c.pool_q_only:   # pooled queries attend to the unpooled keys
          hidden_out = run(layer, pooled, hidden, attention_mask=mask,
                           **dict(same_grid, query_positions=pooled_positions.tolist(),
                                  query_segment_ids=pooled_segments))
          if carry is not None:                                        # [B, N, T', T] -> [B, N, T', T']
            carry = pooling(carry, input_mask=mask, axis=3)
        else:
          if carry is not None:
            carry = pooling(carry, input_mask=mask, axis=3)
          hidden_out = run(layer, pooled, attention_mask=pooled_mask,
                           query_positions=pooled_positions.tolist(),
                           key_positions=pooled_positions.tolist(),
                           query_segment_ids=pooled_segments, key_segment_ids=pooled_segments)
        hidden, mask, segments, positions = hidden_out, pooled_mask, pooled_segments, pooled_positions
        layer_outputs.append(hidden)
  encoder_output = hidden
  assert len(layer_outputs) == sum(s * r for s, r in zip(c.block_sizes, c.block_repeats, strict=True))

  sequence_output = encoder_output
  if decoder:
    upsampling = kit.make(kit.upsampling, 2 ** (len(c.block_sizes) - 1), c.separate_cls, c.truncate_seq,
                          name="upsampling", **kit.options)
    hidden = upsampling(encoder_output, target_length=c.seq_length) + layer_outputs[decoder_residual_layer]
    for layer in decoder:
      hidden = run(layer, hidden, attention_mask=full_mask, query_positions=full_positions.tolist(),
                   key_positions=full_positions.tolist(), query_segment_ids=full_segments,
                   key_segment_ids=full_segments)
    sequence_output = hidden

  outputs = dict(sequence_output=sequence_output, encoder_sequence_output=encoder_output,
                 pooled_output=pooler(encoder_output[:, 0]), encoder_outputs=layer_outputs)
  if c.output_attention_probs:
    outputs["attention_probs"] = attention_probs
  return inputs, outputs, embeddings

