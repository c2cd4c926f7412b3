"""The zoo's keras-hub backbone: a `zoo.keras3` encoder with keras-hub's inputs and outputs."""

import keras
import keras_hub
from keras import ops

from zoo.configs import EncoderConfig
from zoo.keras3.models.encoder import PerLengthFunctions
from zoo.keras3.models.encoder import dtype_policy


class ZooBackbone(PerLengthFunctions, keras_hub.models.Backbone):
  """A keras-hub backbone around a `zoo.keras3` encoder (`encoder_class`) built from `encoder_config`: the
  family's configuration (`zoo.configs`), or its dict form (a saved preset's; `from_dict` reads it).

  Inputs `token_ids`, `segment_ids`, `padding_mask` (`[B, T]`, any length T the encoder takes:
  `length_problem`); outputs `sequence_output` and `pooled_output` (the tanh dense on [cls]).
  `seq_length` is the length the encoder's graph is built for first (a Funnel's has no
  maximum; an absolute position table's maximum is `max_sequence_length`). `dtype` (or a
  `dtype` in `encoder_config`; default the global policy) is the policy of every layer of
  the encoder: "bfloat16" keeps bfloat16 weights, "mixed_bfloat16" float32 weights and
  bfloat16 compute; layer norms, attention scores and probabilities stay float32.
  `word_embeddings`: another backbone's `token_embedding` to share (ELECTRA's generator).
  """

  encoder_class = None

  def __init__(self, encoder_config, dtype=None, seq_length=None, word_embeddings=None, **kwargs):
    config_class = self.encoder_class.config_class
    if not isinstance(encoder_config, EncoderConfig):   # a saved preset's dict (with its mixed policy)
      encoder_config = dict(encoder_config)
      configured = encoder_config.pop("dtype", None)   # the backbone's `dtype` wins
      dtype = dtype if dtype is not None else configured
      encoder_config = config_class.from_dict(encoder_config)
    if seq_length is not None:   # e.g. `from_preset(path, seq_length=128)`
      encoder_config = encoder_config.replace(seq_length=seq_length)
    policy = dtype_policy(dtype)   # the encoder's layers are built with it
    encoder = self.encoder_class(encoder_config, dtype=policy, word_embeddings=word_embeddings,
                                 name="encoder")
    # Any length, as keras-hub's BERT takes (the encoder rewires itself per length; see
    # `zoo.keras3.models.encoder.EncoderModel`).
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
    padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
    outputs = encoder(dict(input_word_ids=token_ids, input_mask=ops.cast(padding_mask, "int32"),
                           input_type_ids=segment_ids))
    super().__init__(
        inputs=dict(token_ids=token_ids, segment_ids=segment_ids, padding_mask=padding_mask),
        outputs=dict(sequence_output=outputs["sequence_output"], pooled_output=outputs["pooled_output"]),
        dtype=policy, **kwargs)
    self.encoder = encoder
    self.encoder_config = encoder_config
    self.token_embedding = encoder.get_embedding_layer()

  @property
  def vocabulary_size(self):
    return self.encoder_config.vocab_size

  def length_problem(self, length):
    """Why the backbone cannot run on `length` tokens (naming the lengths it takes), or None."""
    return self.encoder.length_problem(length)

  def get_config(self):
    config = super().get_config()
    config.update(encoder_config=self.encoder_config.to_dict())
    if self.dtype_policy.name.startswith("mixed_"):
      # Saved in `encoder_config` rather than as the layer's `dtype`: keras-hub 0.32's preset loader
      # cannot read a saved mixed policy back (`Invalid dtype: mixed_bfloat16`), and reads this one (a
      # `dtype` given to `from_preset` still wins). Plain float policies stay keras-hub's `dtype`,
      # which a load casts to the global policy.
      config.update(encoder_config=dict(self.encoder_config.to_dict(), dtype=self.dtype_policy.name),
                    dtype=None)
    return config
