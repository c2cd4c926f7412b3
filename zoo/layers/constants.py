"""The named choices of the zoo's layers and encoders, each defined once.

Layers, encoders and their error messages all read these, so the valid choices a
message lists are always the ones the code accepts.
"""

import tf_keras as keras

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

# Activation names -> Keras activations ("gelu_approximate" is the tanh form, which
# Hugging Face calls "gelu_new").
ACTIVATIONS = {
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    "gelu_approximate": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "swish": keras.activations.swish,
}


def check_choice(name, value, choices):
  """Raises `ValueError("<name> must be one of <choices>, got <value>")` unless `value in choices`."""
  if value not in choices:
    raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
