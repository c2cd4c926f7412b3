"""BERT-style Transformer encoder: Post-LN, Pre-LN and RealFormer.

Axes: B batch, T sequence length, D model width, N heads.
"""

import tf_keras as keras

from zoo.layers import EncoderEmbeddings
from zoo.layers import TransformerBlock
from zoo.layers.constants import ABSOLUTE
from zoo.layers.constants import SHIFT
from zoo.models.encoder_inputs import ClsSegmentIds
from zoo.models.encoder_inputs import EncoderModel
from zoo.models.encoder_inputs import encoder_inputs


@keras.utils.register_keras_serializable(package="zoo")
class TransformerEncoder(EncoderModel):
  """A stack of `TransformerBlock`s over token embeddings, BERT's encoder interface.

  - Post-LN (BERT, Devlin et al., 2019): the default.
  - Pre-LN (Xiong et al., 2020): `norm_first=True`; a final layer norm is added.
  - RealFormer (Liu et al., 2021): `residual_attention=True`, with `running_mean=True`
    for the paper's deep (36-layer) models.
  - Absolute positions (learned table) or Transformer-XL relative attention
    (`position_encoding="factorized"` or `"shift"`) with the relative segment term,
    as in the Funnel paper's Transformer baselines; [cls] gets segment id 2 there.

  Inputs are Model Garden's dict of int32 `[B, T]` tensors (`input_word_ids`,
  `input_mask`, `input_type_ids`); outputs are a dict with `sequence_output`
  `[B, T, D]`, `pooled_output` `[B, D]` (tanh dense on [cls]), `encoder_outputs`
  (every block's output; for Pre-LN before the final layer norm) and, with
  `output_attention_probs`, `attention_probs` (each layer's float32 `[B, N, T, T]`).
  So it can serve as the `network` of Model Garden's `BertClassifier` or
  `BertPretrainerV2`.

  Args:
    vocab_size: number of word ids.
    hidden_size, num_layers, num_heads, intermediate_size: model width D, depth,
      heads and feed-forward width.
    activation: feed-forward activation (see `zoo.layers.constants.ACTIVATIONS`).
    dropout, attention_dropout: hidden and attention-probability dropout rates.
    max_sequence_length: size of the absolute position table.
    type_vocab_size: number of token types (absolute positions only).
    embedding_width: embedding width E, projected to D when different (default D).
    norm_first: Pre-LN.
    residual_attention, running_mean: RealFormer.
    position_encoding: "absolute", "factorized" or "shift"
      (`zoo.layers.constants.POSITION_ENCODINGS`).
    layer_norm_epsilon: epsilon of every layer norm.
    initializer_range: stddev of the truncated-normal initializer.
    seq_length: static sequence length of the inputs (None for any; "shift" needs it).
    output_attention_probs: also return each layer's attention probabilities.

  Example:
    >>> encoder = TransformerEncoder(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4,
    ...                              intermediate_size=64, residual_attention=True)
    >>> ids = tf.ones([2, 8], tf.int32)
    >>> outputs = encoder(dict(input_word_ids=ids, input_mask=ids, input_type_ids=0 * ids))
    >>> outputs["sequence_output"].shape, outputs["pooled_output"].shape
    (TensorShape([2, 8, 32]), TensorShape([2, 32]))
  """

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
               **kwargs):
    config = dict(
        vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads,
        intermediate_size=intermediate_size, activation=activation, dropout=dropout,
        attention_dropout=attention_dropout, max_sequence_length=max_sequence_length,
        type_vocab_size=type_vocab_size, embedding_width=embedding_width, norm_first=norm_first,
        residual_attention=residual_attention, running_mean=running_mean,
        position_encoding=position_encoding, layer_norm_epsilon=layer_norm_epsilon,
        initializer_range=initializer_range, seq_length=seq_length,
        output_attention_probs=output_attention_probs)
    if hidden_size % num_heads:
      raise ValueError(f"hidden_size ({hidden_size}) must be a multiple of num_heads ({num_heads})")
    if position_encoding == SHIFT and seq_length is None:
      raise ValueError("position_encoding='shift' needs a static seq_length")
    relative = position_encoding != ABSOLUTE
    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)

    # Layers.
    embeddings = EncoderEmbeddings(
        vocab_size, embedding_width or hidden_size, hidden_size,
        max_sequence_length=None if relative else max_sequence_length,
        type_vocab_size=0 if relative else type_vocab_size, dropout=dropout,
        layer_norm_epsilon=layer_norm_epsilon, initializer=initializer, name="embeddings")
    blocks = [
        TransformerBlock(
            num_heads, hidden_size // num_heads, intermediate_size, activation=activation,
            dropout=dropout, attention_dropout=attention_dropout, norm_first=norm_first,
            layer_norm_epsilon=layer_norm_epsilon, position_encoding=position_encoding,
            use_segment_bias=relative, residual_attention=residual_attention,
            running_mean=running_mean, kernel_initializer=initializer, name=f"layer_{i}")
        for i in range(num_layers)
    ]
    final_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype="float32", name="final_norm") if norm_first else None
    pooler = keras.layers.Dense(hidden_size, activation="tanh", kernel_initializer=initializer,
                                name="pooler")

    # The functional graph.
    inputs = encoder_inputs(seq_length)
    mask = inputs["input_mask"]
    hidden = embeddings(inputs["input_word_ids"],
                        None if relative else inputs["input_type_ids"])
    block_kwargs = {}
    if relative:
      block_kwargs["query_segment_ids"] = ClsSegmentIds(name="cls_segment_ids")(inputs["input_type_ids"])
    carry, layer_outputs, attention_probs = None, [], []
    for index, block in enumerate(blocks):
      result = block(hidden, attention_mask=mask, attention_carry=carry, layer_index=index, **block_kwargs)
      hidden = result.output
      carry = result.carry if residual_attention else None
      attention_probs.append(result.probs)
      layer_outputs.append(hidden)
    if final_norm is not None:   # encoder_outputs keep the blocks' raw outputs
      hidden = keras.backend.cast(final_norm(hidden), hidden.dtype)
    outputs = dict(sequence_output=hidden, pooled_output=pooler(hidden[:, 0]),
                   encoder_outputs=layer_outputs)
    if output_attention_probs:
      outputs["attention_probs"] = attention_probs
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # The config.
    self._config = config
    self._embeddings = embeddings
