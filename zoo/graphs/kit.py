"""What both encoder graphs share in both editions: their named inputs (`INPUT_NAMES`, `encoder_inputs`),
the kit of layer classes an edition hands the graph builders (`EncoderKit`) and ALBERT's cross-layer
sharing of a stack of blocks (`layer_stack`).
"""

import typing

# The named int32 `[B, T]` inputs of every encoder, as Model Garden's encoders take them.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(keras, seq_length=None):
  """Named int32 `[B, T]` Keras inputs of `keras` (either edition's), as Model Garden's encoders take them."""
  return {name: keras.Input(shape=(seq_length,), dtype="int32", name=name) for name in INPUT_NAMES}


class AttentionResult(typing.NamedTuple):
  """What both editions' `MultiHeadAttention`, `RelativeMultiHeadAttention` and `TransformerBlock` return,
  and the graphs read.

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


class EncoderKit(typing.NamedTuple):
  """What an edition hands the shared graph builders: its Keras and its layer classes (each
  encoder's `layer_classes()`: what it is made of in that edition).

  `options` go to every layer the encoder makes (Keras 3: its dtype policy),
  `embedding_options` to its `EncoderEmbeddings` only (Keras 3: a word-embedding layer to
  share); `cast(x, like)` casts a tensor to the dtype of another. `layers`, when a dict,
  keeps every layer the graph makes by name, and a graph built again with the same kit
  (at another sequence length) wires those same layers, so both share their weights.
  """

  keras: typing.Any
  embeddings: type
  block: type
  cls_segment_ids: type
  cast: typing.Callable
  options: dict
  embedding_options: dict
  pooling: type | None = None      # a Funnel encoder's
  upsampling: type | None = None   # a Funnel encoder's decoder's
  layers: dict | None = None

  def make(self, factory, *args, name, **kwargs):
    """`factory(*args, name=name, **kwargs)`, or the layer of that name this kit already made."""
    if self.layers is not None and name in self.layers:
      return self.layers[name]
    layer = factory(*args, name=name, **kwargs)
    if self.layers is not None:
      self.layers[name] = layer
    return layer


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
