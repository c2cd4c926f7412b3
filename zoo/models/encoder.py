"""What every tf_keras encoder shares (`EncoderModel`): the functional model its configuration's graph
builds, Model Garden's encoder interface, and length buckets.

Axes: B batch, T sequence length.
"""

from collections.abc import Callable
from typing import Any

import tensorflow as tf
import tf_keras as keras

from zoo.configs import EncoderConfig
from zoo.graphs.kit import EncoderKit
from zoo.graphs.kit import encoder_inputs
from zoo.models import bucketing
from zoo.models.bucketing import bucket_index


class EncoderModel(keras.Model):
  """What every zoo encoder's tf_keras edition shares: the functional model of its configuration, the
  embedding accessors Model Garden's heads and pretrainers call, and length buckets.

  An encoder takes its family's configuration (`config_class`, `zoo.configs`), or the configuration's
  fields as keyword arguments: `FunnelEncoder(FunnelConfig(vocab_size=100))` and
  `FunnelEncoder(vocab_size=100)` are the same encoder. `graph` (`zoo.graphs`) wires the layers
  `layer_classes()` names; `self.config` is the configuration, and `get_config()` its fields with the
  layer's name.

  Length buckets (`use_length_buckets`, `zoo.length_buckets`): the encoder still takes and
  returns tensors of its built `seq_length` T, but runs each batch at the smallest ladder
  length that holds its longest text (`bucket_capacity`) and pads the outputs back to T with
  zeros. Each ladder length is a branch of one `tf.switch_case` over the same layers (the
  graph wired again at that static length), so a traced function or XLA program holds one
  branch per ladder length and a call runs one of them. The outputs at real positions are those
  of T; past a batch's ladder length they are zeros (positions the masks and losses ignore).
  Per text (`per_text`, for servers): each text runs at its own ladder length, a sub-batch per
  length.
  """

  config_class: type[EncoderConfig] = EncoderConfig
  # The family's `zoo.graphs` function: (config, kit, inputs) -> (outputs, embeddings).
  graph: Callable[[Any, EncoderKit, dict], tuple[dict, Any]]

  def __init__(self, config: EncoderConfig | None = None, **kwargs: Any) -> None:
    config, kwargs = self.config_class.taken_from(config, kwargs)
    # tf_keras layers take the global dtype policy.
    kit = EncoderKit(keras=keras, **self.layer_classes(),
                     cast=lambda x, like: keras.backend.cast(x, like.dtype), options={}, embedding_options={},
                     layers={})
    inputs = encoder_inputs(keras, config.built_length)
    outputs, embeddings = type(self).graph(config, kit, inputs)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    # Not tracked (the functional graph tracks the layers).
    object.__setattr__(self, "config", config)
    object.__setattr__(self, "_built_length", config.built_length)   # the length every call compares
    object.__setattr__(self, "_embeddings", embeddings)
    # What wires the same layers at another static length, for length buckets.
    object.__setattr__(self, "_rewire", lambda length, inputs: type(self).graph(
        config.replace(seq_length=length), kit, inputs)[0])
    object.__setattr__(self, "_ladder", None)
    object.__setattr__(self, "_per_text", False)

  @staticmethod
  def layer_classes() -> dict[str, type]:
    """The layers the encoder is made of (`EncoderKit` fields)."""
    raise NotImplementedError

  def get_embedding_table(self) -> tf.Variable:
    return self._embeddings.word_embeddings.embeddings

  def get_embedding_layer(self) -> keras.layers.Layer:
    return self._embeddings.word_embeddings

  def get_config(self) -> dict:
    return dict(self.config.to_dict(), name=self.name)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    name = config.pop("name", None)
    return cls(cls.config_class.from_dict(config, ignore=("trainable", "dtype")), name=name)

  # What the rest of the zoo asks of an encoder, answered by its configuration.
  def length_problem(self, length: int) -> str | None:
    """Why the encoder cannot run on `length` tokens (naming the lengths it takes), or None."""
    return self.config.length_problem(length)

  def padding_dependence(self) -> str | None:
    """Why the pooling reads padding, or None (`EncoderConfig.padding_dependence`)."""
    return self.config.padding_dependence()

  def bucket_capacity(self, length: int) -> int:
    """The most real tokens that run at `length` with the outputs of the built length."""
    return self.config.bucket_capacity(length)

  def sequence_mask(self, input_mask: tf.Tensor) -> tf.Tensor:
    """The mask of `sequence_output`'s real positions for `input_mask` `[B, T]` (the input mask itself for an
    encoder whose sequence output is as long as its input)."""
    return input_mask

  @property
  def length_buckets(self) -> list[tuple[int, int]] | None:
    """`[(ladder length, capacity), ...]` of `use_length_buckets`, or None (every call at the built
    length)."""
    return self._ladder

  def use_length_buckets(self, lengths: list[int] | None, padding_dependent: bool = False,
                         per_text: bool = False) -> None:
    """Runs later calls at the smallest of `lengths` that holds each batch's longest text (None or []: at the
    built length, as before).

    `per_text` (serving): each text of a call runs at the smallest length that holds it instead, the call's
    texts split into one sub-batch per ladder length (gathered, run where not empty, stitched back in
    order). Its sub-batch sizes depend on the texts, so it is for servers, not for XLA or TPUs, whose steps
    run the whole batch at one length.

    Raises a ValueError for lengths the encoder cannot take and, unless `padding_dependent`, for an encoder
    whose pooling reads padding (`padding_dependence`: its lengths hold fewer texts, those whose pooling
    windows they hold whole; the outputs are still those of the built length).
    """
    object.__setattr__(self, "_per_text", False)
    if not lengths:
      object.__setattr__(self, "_ladder", None)
      return
    try:
      ladder = self.config.length_ladder(lengths, padding_dependent)
    except ValueError as error:
      raise ValueError(f"{self.name}: {error}") from None
    object.__setattr__(self, "_ladder", ladder)
    object.__setattr__(self, "_per_text", per_text)

  def call(self, inputs, training=None, mask=None):
    ladder = self._ladder
    if (not ladder or len(ladder) == 1 or not isinstance(inputs, dict)
        or keras.backend.is_keras_tensor(inputs["input_mask"])):
      return super().call(inputs, training=training, mask=mask)
    if self._per_text and bucketing.step_bucket() is None:
      return self._per_text_call(inputs, training, mask)
    return self._bucketed_call(inputs, training, mask)

  def _at_length(self, length, inputs, training, mask):
    """The encoder's outputs for `inputs` cut to `length` tokens, padded back to the built graph's shapes."""
    if length == self._built_length:
      outputs = super().call(inputs, training=training, mask=mask)
    else:
      outputs = self._rewire(length, {name: value[:, :length] for name, value in inputs.items()})
    shapes = tf.nest.map_structure(lambda tensor: tensor.shape, self.output)
    return tf.nest.map_structure(_pad_to, outputs, shapes)

  def _per_text_call(self, inputs, training, mask):
    ladder = self._ladder
    buckets = bucketing.text_buckets(inputs["input_mask"], [capacity for _, capacity in ladder])   # [B]

    def empty():
      return tf.nest.map_structure(lambda tensor: tf.zeros([0, *tensor.shape[1:]], tensor.dtype), self.output)

    rows, parts = [], []
    for index, (length, _) in enumerate(ladder):
      taken = tf.cast(tf.reshape(tf.where(tf.equal(buckets, index)), [-1]), tf.int32)
      sub = {name: tf.gather(value, taken) for name, value in inputs.items()}
      parts.append(tf.cond(tf.size(taken) > 0,
                           lambda sub=sub, length=length: self._at_length(length, sub, training, mask),
                           empty, name=f"length_{length}"))
      rows.append(taken)
    return tf.nest.map_structure(lambda *values: tf.dynamic_stitch(rows, list(values)), *parts)

  def _bucketed_call(self, inputs, training, mask):
    ladder = self._ladder
    index = bucketing.step_bucket()
    if isinstance(index, int):   # a ladder index known when traced: that length alone, no switch
      return self._at_length(ladder[index][0], inputs, training, mask)
    if index is None:
      index = bucket_index(inputs["input_mask"], [capacity for _, capacity in ladder])

    def branch(length):
      return lambda: self._at_length(length, inputs, training, mask)

    return tf.switch_case(index, [branch(length) for length, _ in ladder])


def _pad_to(tensor: tf.Tensor, shape: tf.TensorShape) -> tf.Tensor:
  """`tensor` padded with zeros at the end of each axis shorter than in `shape` (the built graph's output)."""
  paddings = [[0, 0 if full is None or full == own else full - own]
              for own, full in zip(tensor.shape.as_list(), shape.as_list(), strict=True)]
  if not any(after for _, after in paddings):
    return tensor
  return tf.pad(tensor, paddings)
