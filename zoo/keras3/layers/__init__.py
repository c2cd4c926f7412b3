"""The zoo's Keras 3 layers, one module per layer as in `zoo.layers` (their tf_keras twins): `attention`,
`relative_attention`, `transformer_block`, `embeddings`, `funnel_pooling`, and `base` (what they share)."""
