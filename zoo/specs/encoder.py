"""What both encoders share in both editions: the kit of layer classes an edition hands the graph
builders (`EncoderKit`), the functional model rebuilt from its arguments (`EncoderSpec`), and
ALBERT's cross-layer sharing of a stack of blocks (`layer_stack`).
"""

import typing

from zoo.choices import recorded_pooling_semantics


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


def constructor_arguments(frame_locals):
  """An encoder's constructor arguments, from its `locals()` at the top of `__init__`."""
  return {name: value for name, value in frame_locals.items() if name not in ("self", "kwargs", "__class__")}


class EncoderSpec:
  """What both encoders share in both editions: a functional model rebuilt from its arguments.

  The edition's model class, after the spec in the bases, gives `layer_classes()` (the
  `EncoderKit` fields of the layers the encoder is made of),
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
    return self.config_length_problem(self._config, length)

  def padding_dependence(self):
    """Why the pooling reads padding (a length then holds fewer texts with the built length's outputs), or
    None when the outputs at real positions never depend on how far the inputs are padded."""
    return self.config_padding_dependence(self._config)

  def sequence_mask(self, input_mask):
    """The mask of `sequence_output`'s real positions for `input_mask` `[B, T]`: the input mask itself for an
    encoder whose sequence output is as long as its input."""
    return input_mask

  def bucket_capacity(self, length):
    """The most real tokens that run at `length` (a length bucket, `zoo.length_buckets`) with the outputs they
    have at the built `seq_length` (0: none)."""
    return self.config_bucket_capacity(self._config, length)

  @staticmethod
  def config_length_problem(config, length):
    """`length_problem` of the encoder a constructor-argument dict builds."""
    return None

  @staticmethod
  def config_padding_dependence(config):
    """`padding_dependence` of the encoder a constructor-argument dict builds."""
    return None

  @staticmethod
  def config_bucket_capacity(config, length):
    """`bucket_capacity` of the encoder a constructor-argument dict builds."""
    return length

  @classmethod
  def length_ladder(cls, config, lengths, padding_dependent=False):
    """`[(length, capacity), ...]` of the lengths `lengths` and the built `seq_length` for the encoder a
    constructor-argument dict builds: each length with the most real tokens it runs with the outputs of
    `seq_length`, lengths that hold no more than a shorter one left out.

    Raises a ValueError for lengths the encoder cannot take and, unless `padding_dependent`, for an encoder
    whose pooling reads padding (`padding_dependence`).
    """
    built = config["seq_length"]
    if built is None:
      raise ValueError("length buckets need an encoder built for a static seq_length")
    problem = cls.config_padding_dependence(config)
    if problem and not padding_dependent:
      raise ValueError(f"length buckets for an encoder whose pooling reads padding are taken only when asked "
                       f"for (padding_dependent=True): {problem}")
    ladder = []
    for length in sorted(set(lengths) | {built}):
      if length > built:
        raise ValueError(f"length bucket {length} is longer than its seq_length {built}")
      problem = cls.config_length_problem(config, length)
      if problem:
        raise ValueError(f"length bucket {length}: {problem}")
      capacity = cls.config_bucket_capacity(config, length)
      if capacity > (ladder[-1][1] if ladder else 0):
        ladder.append((length, capacity))
    return ladder

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
