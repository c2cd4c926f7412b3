"""Token embeddings below an encoder stack: words, optional positions and types.

Axes: B batch, T sequence length, E embedding width, D model width.
"""

import tensorflow as tf
import tf_keras as keras
from official.modeling.tf_utils import clone_initializer
from official.nlp.modeling import layers as nlp_layers

from zoo.layers import seeds
from zoo.layers.base import ZooLayer


@keras.utils.register_keras_serializable(package="zoo")
class EncoderEmbeddings(ZooLayer):
  """Word embeddings, plus absolute positions and token types when enabled, then
  layer norm, dropout and an optional projection from width E to the model width D.

  BERT adds word, position and type embeddings (Devlin et al., 2019, Sec. 3).
  Relative-attention models (Funnel-Transformer, Transformer-XL) use word embeddings
  only: positions and segments enter through the attention.

  Args:
    vocab_size: number of word ids.
    embedding_width: E.
    hidden_size: D; a projection E -> D is added when they differ.
    max_sequence_length: size of the absolute position table; None for none.
    type_vocab_size: number of token types; 0 for no type embeddings.
    dropout: dropout rate after the layer norm.
    layer_norm_epsilon: epsilon of the layer norm.
    initializer: initializer of the embedding tables and projection.

  Call arguments:
    word_ids: int `[B, T]`.
    type_ids: int `[B, T]`, needed when `type_vocab_size > 0`.

  Returns:
    `[B, T, D]`.

  Example:
    >>> embed = EncoderEmbeddings(vocab_size=100, embedding_width=16, hidden_size=32)
    >>> embed(tf.constant([[5, 6, 7]])).shape
    TensorShape([1, 3, 32])
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
    self.word_embeddings = nlp_layers.OnDeviceEmbedding(
        self.vocab_size, self.embedding_width, initializer=clone_initializer(self.initializer),
        name="word_embeddings")
    self.position_embeddings = None
    if self.max_sequence_length:
      self.position_embeddings = nlp_layers.PositionEmbedding(
          self.max_sequence_length, initializer=clone_initializer(self.initializer),
          name="position_embeddings")
    self.type_embeddings = None
    if self.type_vocab_size:
      self.type_embeddings = nlp_layers.OnDeviceEmbedding(
          self.type_vocab_size, self.embedding_width, initializer=clone_initializer(self.initializer),
          use_one_hot=True, name="type_embeddings")
    self.norm = keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon, dtype="float32",
                                                name="norm")
    self.dropout_layer = seeds.Dropout(self.dropout, name="dropout")
    self.projection = None
    if self.embedding_width != self.hidden_size:
      self.projection = keras.layers.EinsumDense(
          "BTE,ED->BTD", output_shape=(None, self.hidden_size), bias_axes="D",
          kernel_initializer=clone_initializer(self.initializer), name="projection")
    super().build(input_shape)

  def call(self, word_ids: tf.Tensor, type_ids: tf.Tensor | None = None,
           training: bool | None = None) -> tf.Tensor:
    embeddings = self.word_embeddings(word_ids)
    if self.position_embeddings is not None:
      embeddings += self.position_embeddings(embeddings)
    if self.type_embeddings is not None:
      if type_ids is None:
        raise ValueError("type_vocab_size > 0 needs type_ids")
      embeddings += self.type_embeddings(type_ids)
    embeddings = keras.backend.cast(self.norm(embeddings), self.compute_dtype)
    embeddings = self.dropout_layer(embeddings, training=training)
    if self.projection is not None:
      embeddings = self.projection(embeddings)
    return embeddings


@keras.utils.register_keras_serializable(package="zoo")
class ClsSegmentIds(ZooLayer):
  """Marks the first token ([cls]) with its own segment id, `[B, T] -> [B, T]`.

  Funnel-Transformer's relative segment term treats [cls] (type id 2 in the authors'
  and Hugging Face's tokenizers) as belonging to every segment. Pipelines that give
  [cls] type 0, as Model Garden's do, get the same behaviour through this layer.

  Example:
    >>> ClsSegmentIds()(tf.constant([[0, 0, 1, 1]])).numpy().tolist()
    [[2, 0, 1, 1]]
  """

  def __init__(self, cls_segment_id=2, **kwargs):
    super().__init__(**kwargs)
    self.cls_segment_id = cls_segment_id

  def get_config(self):
    return {**super().get_config(), "cls_segment_id": self.cls_segment_id}

  def call(self, type_ids: tf.Tensor) -> tf.Tensor:
    type_ids = tf.cast(type_ids, tf.int32)
    cls = tf.fill(tf.shape(type_ids[:, :1]), self.cls_segment_id)
    return tf.concat([cls, type_ids[:, 1:]], axis=1)
