"""The Model Garden encoder interface shared by every zoo encoder.

Axes: B batch, T sequence length.
"""

import tensorflow as tf
import tf_keras as keras

from zoo.layers.base import ZooLayer
from zoo.models import bucketing
from zoo.models.bucketing import bucket_index
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
  """What every zoo encoder's tf_keras edition shares: the kit its spec builds the graph with, and length
  buckets.

  The constructor's arguments, its checks and the functional graph are each encoder's spec
  (`zoo.specs.transformer_encoder`, `zoo.specs.funnel_encoder`), shared with `zoo.keras3`;
  the spec builds the graph from the encoder's `layer_classes()` and gives the embedding
  accessors Model Garden's heads and pretrainers call.

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

  @classmethod
  def _kit(cls, kwargs):
    kit = EncoderKit(keras=keras, **cls.layer_classes(),
                     cast=lambda x, like: keras.backend.cast(x, like.dtype), options={}, embedding_options={},
                     layers={})
    return kit, kwargs

  def _after_build(self, kit, graph):
    # tf_keras layers take the global dtype policy. Not tracked (the functional graph tracks the
    # layers): what wires the same layers at another static length, for length buckets.
    object.__setattr__(self, "_rewire", lambda length, inputs: graph(dict(self._config, seq_length=length),
                                                                     kit, inputs=inputs)[1])
    object.__setattr__(self, "_ladder", None)
    object.__setattr__(self, "_per_text", False)

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
      ladder = self.length_ladder(self._config, lengths, padding_dependent)
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
    if length == self._config["seq_length"]:
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

  def _edition_config(self):
    return {}

  @classmethod
  def _edition_arguments(cls, config):
    return config


def _pad_to(tensor: tf.Tensor, shape: tf.TensorShape) -> tf.Tensor:
  """`tensor` padded with zeros at the end of each axis shorter than in `shape` (the built graph's output)."""
  paddings = [[0, 0 if full is None or full == own else full - own]
              for own, full in zip(tensor.shape.as_list(), shape.as_list(), strict=True)]
  if not any(after for _, after in paddings):
    return tensor
  return tf.pad(tensor, paddings)
