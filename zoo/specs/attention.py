"""`MultiHeadAttention`'s spec (`zoo.layers.attention`, `zoo.keras3.attention`): its arguments,
checks and config, the residual-attention carry's rules, and the local-attention settings
(`check_local_attention`) every attention layer and encoder validates.
"""

import warnings

import numpy as np

from zoo.specs.base import LayerSpec
from zoo.specs.base import static_vector
from zoo.windows import local_geometry


class MultiHeadAttentionSpec(LayerSpec):
  """`MultiHeadAttention`'s arguments (see the tf_keras layer's docstring)."""

  def __init__(self,
               num_heads,
               head_size,
               attention_dropout=0.0,
               residual_attention=False,
               running_mean=False,
               kernel_initializer="glorot_uniform",
               attention_window=None,
               global_tokens=1,
               **kwargs):
    if "dropout" in kwargs:   # the argument's name in configs saved before it was renamed
      if attention_dropout:
        raise TypeError(f"{type(self).__name__} got dropout and attention_dropout; "
                        "pass attention_dropout only")
      warnings.warn(f"{type(self).__name__}(dropout=...) is deprecated: the attention-probability "
                    "dropout rate is attention_dropout (re-save the model to update its config)",
                    FutureWarning, stacklevel=2)
      attention_dropout = kwargs.pop("dropout")
    super().__init__(**kwargs)
    if running_mean and not residual_attention:
      raise ValueError("running_mean=True needs residual_attention=True")
    self.num_heads = num_heads
    self.head_size = head_size
    self.attention_dropout = attention_dropout
    self.residual_attention = residual_attention
    self.running_mean = running_mean
    self.kernel_initializer = self._initializer(kernel_initializer)
    check_local_attention(attention_window, global_tokens)
    self.attention_window = attention_window
    self.global_tokens = global_tokens

  def _check_carry(self, attention_carry):
    if attention_carry is not None and not self.residual_attention:
      raise ValueError(f"{self.name}: attention_carry needs residual_attention=True")

  def _local_geometry(self, query_positions, key_positions, query_length, key_length):
    """The `zoo.windows.LocalGeometry` of a call with local attention (static lengths and positions)."""
    if query_length is None or key_length is None:
      raise ValueError(f"{self.name}: local attention (attention_window) needs static sequence lengths")
    grids = []
    for positions, length, name in ((query_positions, query_length, "query_positions"),
                                    (key_positions, key_length, "key_positions")):
      values = self._static_positions(positions, length, name)
      if values is None:
        raise ValueError(f"{self.name}: local attention (attention_window) needs {name} known when the "
                         "graph is built (a Python list, NumPy array or constant)")
      grids.append(values)
    return local_geometry(self.attention_window, self.global_tokens, *grids)

  _static_positions = staticmethod(lambda positions, length, name: (
      np.arange(length, dtype=np.float64) if positions is None else static_vector(positions, length, name)))

  def get_config(self):
    config = super().get_config()
    config.update(
        num_heads=self.num_heads,
        head_size=self.head_size,
        attention_dropout=self.attention_dropout,
        residual_attention=self.residual_attention,
        running_mean=self.running_mean,
        kernel_initializer=self._serialized(self.kernel_initializer),
        attention_window=self.attention_window,
        global_tokens=self.global_tokens,
    )
    return config


def check_local_attention(attention_window, global_tokens):
  """The local-attention settings: a window of `>= 0` keys on each side (None: full attention) and
  `>= 1` global tokens."""
  if attention_window is not None and (isinstance(attention_window, bool) or int(attention_window) !=
                                       attention_window or attention_window < 0):
    raise ValueError(f"attention_window must be None (full attention) or a whole number >= 0, got "
                     f"{attention_window!r}")
  if isinstance(global_tokens, bool) or int(global_tokens) != global_tokens or global_tokens < 1:
    raise ValueError(f"global_tokens must be a whole number >= 1 (the [cls] token at least), got "
                     f"{global_tokens!r}")
