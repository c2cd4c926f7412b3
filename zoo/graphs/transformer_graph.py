"""The Transformer encoder's forward wiring (BERT's Post-LN, Pre-LN, RealFormer, the relative and
local-attention variants), written once: `transformer_graph` wires the layers of a `TransformerConfig`,
which `zoo.models.TransformerEncoder` (tf_keras) and `zoo.keras3.TransformerEncoder` build with their
own layer classes (an `EncoderKit`).
"""

from zoo.choices import SHIFT
from zoo.configs import TransformerConfig
from zoo.graphs.kit import EncoderKit
from zoo.graphs.kit import layer_stack


def transformer_graph(c: TransformerConfig, kit: EncoderKit, inputs: dict) -> tuple[dict, object]:
  """`TransformerEncoder`'s layers and graph in `kit`'s edition on `inputs` (the encoder's named `[B, T]`
  inputs): `(outputs, embeddings)`."""
  relative = c.relative
  initializer = kit.keras.initializers.TruncatedNormal(stddev=c.initializer_range)

  embeddings = kit.make(
      kit.embeddings, c.vocab_size, c.embedding_width or c.hidden_size, c.hidden_size,
      max_sequence_length=None if relative else c.max_sequence_length,
      type_vocab_size=0 if relative else c.type_vocab_size, dropout=c.dropout,
      layer_norm_epsilon=c.layer_norm_epsilon, initializer=initializer, name="embeddings", **kit.options,
      **kit.embedding_options)

  def block(name, **shared):
    return kit.make(
        kit.block, c.num_heads, c.head_size, c.intermediate_size, activation=c.activation,
        dropout=c.dropout, attention_dropout=c.attention_dropout, norm_first=c.norm_first,
        layer_norm_epsilon=c.layer_norm_epsilon, position_encoding=c.position_encoding,
        use_segment_bias=relative, residual_attention=c.residual_attention,
        running_mean=c.running_mean, kernel_initializer=initializer, attention_window=c.attention_window,
        global_tokens=c.global_tokens, name=name, **shared, **kit.options)
  blocks = layer_stack(block, [f"layer_{i}" for i in range(c.num_layers)], c.layer_sharing)
  final_norm = kit.make(kit.keras.layers.LayerNormalization, epsilon=c.layer_norm_epsilon, dtype="float32",
                        name="final_norm") if c.norm_first else None
  pooler = kit.make(kit.keras.layers.Dense, c.hidden_size, activation="tanh", kernel_initializer=initializer,
                    name="pooler", **kit.options)

  mask = inputs["input_mask"]
  hidden = embeddings(inputs["input_word_ids"], None if relative else inputs["input_type_ids"])
  block_kwargs = {}
  if relative:
    segments = kit.make(kit.cls_segment_ids, name="cls_segment_ids", **kit.options)
    block_kwargs["query_segment_ids"] = segments(inputs["input_type_ids"])
  if c.seq_length is not None and c.position_encoding == SHIFT:
    positions = list(range(c.seq_length))
    block_kwargs.update(query_positions=positions, key_positions=positions)
  carry, layer_outputs, attention_probs = None, [], []
  for index, block in enumerate(blocks):
    result = block(hidden, attention_mask=mask, attention_carry=carry, layer_index=index, **block_kwargs)
    hidden = result.output
    carry = result.carry if c.residual_attention else None
    attention_probs.append(result.probs)
    layer_outputs.append(hidden)
  if final_norm is not None:   # encoder_outputs keep the blocks' raw outputs
    hidden = kit.cast(final_norm(hidden), hidden)
  outputs = dict(sequence_output=hidden, pooled_output=pooler(hidden[:, 0]), encoder_outputs=layer_outputs)
  if c.output_attention_probs:
    outputs["attention_probs"] = attention_probs
  return outputs, embeddings
