"""`EncoderEmbeddings`' spec (`zoo.layers.embeddings`, `zoo.keras3.embeddings`): word, position and
token-type tables, their widths and the projection to the model width.
"""

from zoo.specs.base import LayerSpec


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
