"""The encoders' inputs in either edition: their names (Model Garden's), the named int32 `[B, T]`
Keras inputs, and `ClsSegmentIds`' spec (the [cls] token's own segment id for the relative
encoders' segment bias).
"""

from zoo.specs.base import LayerSpec

# The named int32 `[B, T]` inputs of every encoder, as Model Garden's encoders take them.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


class ClsSegmentIdsSpec(LayerSpec):
  """`ClsSegmentIds`' argument: the segment id [cls] gets."""

  def __init__(self, cls_segment_id=2, **kwargs):
    super().__init__(**kwargs)
    self.cls_segment_id = cls_segment_id

  def get_config(self):
    return {**super().get_config(), "cls_segment_id": self.cls_segment_id}


def encoder_inputs(keras, seq_length=None):
  """Named int32 `[B, T]` Keras inputs of `keras` (either edition's), as Model Garden's encoders take them."""
  return {name: keras.Input(shape=(seq_length,), dtype="int32", name=name) for name in INPUT_NAMES}
