"""The named choices of the zoo's layers and encoders, each defined once, in plain Python.

Both editions of the layers read these: the `tf_keras` one (`zoo.layers`, whose activation
functions are `zoo.layers.ACTIVATIONS`) and the Keras 3 one (`zoo.keras3`). So the valid choices an
error message lists are always the ones the code accepts, and importing them loads no
Keras.
"""

from collections.abc import Collection

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
# What a pooling window does with padding (DESIGN.md, "Masks"):
# - "zoo": a window is real if any of its tokens is, and mean/max read only its real
#   tokens, so outputs at real positions do not depend on padding, except for a text that nearly
#   fills one padded length and not another, where `truncate_seq` drops a real token at the first
#   only (DESIGN.md, "Masks").
# - "huggingface": a window is real only if every token of it is (the minimum of a mask
#   that is 1 for real tokens), and mean/max run over the whole window, padding included:
#   Hugging Face's port, and what its Funnel checkpoints compute.
# - "funnel_authors": a window is real if any of its tokens is (their code takes the
#   minimum of a mask that is 1 for padding), and mean/max run over the whole window,
#   padding included: the authors' TensorFlow and PyTorch code, with which the paper's
#   checkpoints were trained and evaluated.
ZOO_POOLING = "zoo"
HF_POOLING = "huggingface"
AUTHORS_POOLING = "funnel_authors"
POOLING_SEMANTICS = (ZOO_POOLING, HF_POOLING, AUTHORS_POOLING)
# Names configurations recorded before: "authors" was Hugging Face's semantics (taken for the
# authors' until their own code showed otherwise).
RECORDED_POOLING_NAMES = {"authors": HF_POOLING}

# Where the relative terms put [cls] and pooled tokens when `separate_cls` is off (with it,
# the two agree). "window_start": a pooled token sits at the first token of its window and
# token 0 has position and segment terms like any other (Hugging Face; the authors' PyTorch
# code). "authors_tf": the authors' TensorFlow code, which zeroes token 0's position and
# segment terms anyway and, in the shift form, places block b's pooled queries at
# 1 - 2^b + 2^b·i.
WINDOW_START_POSITIONS = "window_start"
AUTHORS_TF_POSITIONS = "authors_tf"
POSITION_RULES = (WINDOW_START_POSITIONS, AUTHORS_TF_POSITIONS)

# The feed-forward activations ("gelu_approximate" is the tanh form, which Hugging Face
# calls "gelu_new"); each edition maps them to its Keras' functions.
ACTIVATION_NAMES = ("gelu", "gelu_approximate", "relu", "swish")

# Cross-layer parameter sharing (ALBERT, Lan et al., 2020, Sec. 3.1): every encoder layer is the
# first one ("all"), or shares its attention ("attention") or its feed-forward net ("ffn") with it.
LAYER_SHARING = ("none", "all", "attention", "ffn")

# What a Funnel encoder does with the residual-attention carry at a block boundary.
CARRY_AT_POOLING = ("pool", "reset")
# How text pairs are trimmed to a sequence length (`zoo.text.packing`): transformers' rule (its fast
# tokenizers' `truncation="longest_first"`, the default), tensorflow-text's round robin, or the first
# segment first.
TRUNCATORS = ("longest_first", "round_robin", "waterfall")
DEFAULT_TRUNCATOR = "longest_first"


def recorded_pooling_semantics(value: str) -> str:
  """The pooling semantics a recorded configuration means (`RECORDED_POOLING_NAMES`), else `value`."""
  return RECORDED_POOLING_NAMES.get(value, value)


def check_pooling_semantics(name: str, value: object) -> None:
  """`check_choice` for pooling semantics, saying what the old name "authors" became."""
  if value in RECORDED_POOLING_NAMES:
    raise ValueError(
        f"{name}={value!r} is ambiguous: it named Hugging Face's semantics, which is {HF_POOLING!r} now "
        f"(what a configuration recorded with {value!r} loads as); the authors' own code's is "
        f"{AUTHORS_POOLING!r}. Choose one of {POOLING_SEMANTICS}")
  check_choice(name, value, POOLING_SEMANTICS)


def check_choice(name: str, value: object, choices: Collection[object]) -> None:
  """Raises `ValueError("<name> must be one of <choices>, got <value>")` unless `value in choices`."""
  if value not in choices:
    raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
