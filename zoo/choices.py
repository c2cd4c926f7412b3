"""The named choices of the zoo's layers and encoders, each defined once, in plain Python.

Both editions of the layers read these: the `tf_keras` one (`zoo.layers.constants`, which
adds the activation functions) and the Keras 3 one (`zoo.keras3`). So the valid choices an
error message lists are always the ones the code accepts, and importing them loads no
Keras.
"""

# Position encodings. "absolute": positions are added to the embeddings below the
# stack, so the attention has no position term. "factorized" and "shift": the two
# forms of Transformer-XL relative attention (Funnel paper, appendix A.2.2 and A.2.1).
ABSOLUTE = "absolute"
FACTORIZED = "factorized"
SHIFT = "shift"
RELATIVE_POSITION_ENCODINGS = (FACTORIZED, SHIFT)
POSITION_ENCODINGS = (ABSOLUTE, *RELATIVE_POSITION_ENCODINGS)

# Funnel pooling of hidden states (Funnel paper, Sec. 2.2).
POOLING_TYPES = ("mean", "max")
# What a pooling window does with padding. "zoo": a window is real if any of its tokens
# is, and mean/max read only its real tokens (outputs never depend on padding). "authors":
# the window's mask is the minimum of its tokens' and mean/max run over every token of the
# window, padding included (the published checkpoints were trained so: the authors' code
# and Hugging Face's port).
ZOO_POOLING = "zoo"
AUTHORS_POOLING = "authors"
POOLING_SEMANTICS = (ZOO_POOLING, AUTHORS_POOLING)

# The feed-forward activations ("gelu_approximate" is the tanh form, which Hugging Face
# calls "gelu_new"); each edition maps them to its Keras' functions.
ACTIVATION_NAMES = ("gelu", "gelu_approximate", "relu", "swish")

# Cross-layer parameter sharing (ALBERT, Lan et al., 2020, Sec. 3.1): every encoder layer is the
# first one ("all"), or shares its attention ("attention") or its feed-forward net ("ffn") with it.
LAYER_SHARING = ("none", "all", "attention", "ffn")

# What a Funnel encoder does with the residual-attention carry at a block boundary.
CARRY_AT_POOLING = ("pool", "reset")


def check_choice(name, value, choices):
  """Raises `ValueError("<name> must be one of <choices>, got <value>")` unless `value in choices`."""
  if value not in choices:
    raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
