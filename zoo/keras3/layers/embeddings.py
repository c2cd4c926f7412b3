"""Token embeddings below an encoder stack, and the [cls] segment id, in Keras 3.

The Keras 3 twins of `zoo.layers.EncoderEmbeddings` and
`zoo.layers.embeddings.ClsSegmentIds`. Axes: B batch, T length, E embedding width,
D model width.
"""

import keras
from keras import ops

from zoo.keras3.layers.base import WeightlessLayer
from zoo.keras3.layers.base import ZooLayer
from zoo.keras3.layers.base import clone_initializer


@keras.saving.register_keras_serializable(package="zoo")
class PositionEmbedding(ZooLayer):
  """A learned table of absolute positions, `[B, T, E] -> [B, T, E]` (the first T rows).

  Model Garden's `PositionEmbedding` (weight `embeddings`, `[max_length, E]`), in Keras 3.
  """

  def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.max_length = max_length
    self.initializer = keras.initializers.get(initializer)

  def build(self, input_shape):
    self.embeddings = self.add_weight(name="embeddings", shape=(self.max_length, input_shape[-1]),
                                      initializer=self.initializer)

  def call(self, inputs):
    length = inputs.shape[1] if inputs.shape[1] is not None else ops.shape(inputs)[1]
    table = ops.cast(self.embeddings[:length], inputs.dtype)
    return ops.broadcast_to(ops.expand_dims(table, 0), ops.shape(inputs))

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    return {**super().get_config(), "max_length": self.max_length,
            "initializer": keras.initializers.serialize(self.initializer)}


@keras.saving.register_keras_serializable(package="zoo")
class EncoderEmbeddings(ZooLayer):
  """Word embeddings, plus absolute positions and token types when enabled, then layer
  norm (float32), dropout and an optional projection E -> D.

  `zoo.layers.EncoderEmbeddings` for Keras 3: the same arguments and weights
  (`word_embeddings`, `position_embeddings`, `type_embeddings`, `norm`, `projection`).
  Call: `word_ids [B, T]`, `type_ids [B, T]` (needed when `type_vocab_size > 0`).

  `word_embeddings`: an existing `keras.layers.Embedding` (of `vocab_size` rows of
  `embedding_width`) to use instead of a new one: two encoders then share one table
  (ELECTRA). It is not part of the config; whoever shares it passes it again.
  """

  def __init__(self,
               vocab_size,
               embedding_width,
               hidden_size,
               max_sequence_length=None,
               type_vocab_size=0,
               dropout=0.1,
               layer_norm_epsilon=1e-12,
               initializer="glorot_uniform",
               word_embeddings=None,
               **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_width = embedding_width
    self.hidden_size = hidden_size
    self.max_sequence_length = max_sequence_length
    self.type_vocab_size = type_vocab_size
    self.dropout = dropout
    self.layer_norm_epsilon = layer_norm_epsilon
    self.initializer = keras.initializers.get(initializer)
    wanted = (self.vocab_size, self.embedding_width)
    if word_embeddings is not None and (word_embeddings.input_dim, word_embeddings.output_dim) != wanted:
      raise ValueError(f"the shared word embeddings are {word_embeddings.input_dim} x "
                       f"{word_embeddings.output_dim}, this layer needs {wanted[0]} x {wanted[1]} "
                       "(vocab_size x embedding_width)")
    object.__setattr__(self, "_shared_word_embeddings", word_embeddings)   # tracked once built, as its own

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
        initializer=keras.initializers.serialize(self.initializer),
    )
    return config

  def build(self, input_shape):
    width = self.embedding_width
    self.word_embeddings = self._shared_word_embeddings or keras.layers.Embedding(
        self.vocab_size, width, embeddings_initializer=clone_initializer(self.initializer),
        dtype=self.dtype_policy, name="word_embeddings")
    if not self.word_embeddings.built:
      self.word_embeddings.build((None, None))
    self.position_embeddings = None
    if self.max_sequence_length:
      self.position_embeddings = PositionEmbedding(
          self.max_sequence_length, initializer=clone_initializer(self.initializer),
          dtype=self.dtype_policy, name="position_embeddings")
      self.position_embeddings.build((None, None, width))
    self.type_embeddings = None
    if self.type_vocab_size:
      self.type_embeddings = keras.layers.Embedding(
          self.type_vocab_size, width, embeddings_initializer=clone_initializer(self.initializer),
          dtype=self.dtype_policy, name="type_embeddings")
      self.type_embeddings.build((None, None))
    self.norm = keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon, dtype="float32",
                                                name="norm")
    self.norm.build((None, None, width))
    self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name="dropout")
    self.projection = None
    if self.embedding_width != self.hidden_size:
      self.projection = keras.layers.EinsumDense(
          "BTE,ED->BTD", output_shape=(None, self.hidden_size), bias_axes="D",
          kernel_initializer=clone_initializer(self.initializer), dtype=self.dtype_policy,
          name="projection")
      self.projection.build((None, None, width))
    self.built = True

  def call(self, word_ids, type_ids=None, training=None):
    embeddings = self.word_embeddings(word_ids)
    if self.position_embeddings is not None:
      embeddings = embeddings + self.position_embeddings(embeddings)
    if self.type_embeddings is not None:
      if type_ids is None:
        raise ValueError("type_vocab_size > 0 needs type_ids")
      # A one-hot matmul, as Model Garden's on-device type embedding: no gather.
      one_hot = ops.one_hot(ops.cast(type_ids, "int32"), self.type_vocab_size, dtype=self.compute_dtype)
      embeddings = embeddings + ops.matmul(one_hot, ops.cast(self.type_embeddings.embeddings,
                                                             self.compute_dtype))
    embeddings = ops.cast(self.norm(embeddings), self.compute_dtype)
    embeddings = self.dropout_layer(embeddings, training=training)
    if self.projection is not None:
      embeddings = self.projection(embeddings)
    return embeddings

  def compute_output_spec(self, word_ids, type_ids=None, training=None):
    return keras.KerasTensor((*word_ids.shape, self.hidden_size), dtype=self.compute_dtype)

@keras.saving.register_keras_serializable(package="zoo")
class ClsSegmentIds(WeightlessLayer):
  """Marks the first token ([cls]) with its own segment id, `[B, T] -> [B, T]`."""
  def __init__(self, cls_segment_id=2, **kwargs):
    super().__init__(**kwargs)
    self.cls_segment_id = cls_segment_id

  def get_config(self):
    return {**super().get_config(), "cls_segment_id": self.cls_segment_id}

  def call(self, type_ids):
    type_ids = ops.cast(type_ids, "int32")
    cls = ops.full_like(type_ids[:, :1], self.cls_segment_id)
    return ops.concatenate([cls, type_ids[:, 1:]], axis=1)
