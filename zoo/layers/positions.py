"""Sinusoid relative-position tables (Transformer-XL, Funnel paper appendix A.2).

Axes: T query length, S key length, L number of relative distances, D model width.
Positional tables are built in float32 and cast to the compute dtype only where they
enter a matmul.
"""

from typing import TypeAlias

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

from zoo.grids import static_vector

# Positions as the layers take them: a tensor (`[T]` or `[B, T]`), or numbers `tf.convert_to_tensor` takes.
Positions: TypeAlias = tf.Tensor | ArrayLike


def sinusoid_frequencies(width: int) -> tf.Tensor:
  """`f_k = 10000^(-2k/width)` for `k < width/2`, float32 `[width/2]`."""
  if width % 2:
    raise ValueError(f"the sinusoid width must be even, got {width}")
  k = tf.range(width // 2, dtype=tf.float32)
  return 1.0 / tf.pow(10000.0, 2.0 * k / float(width))


def sinusoid(positions: Positions, width: int) -> tf.Tensor:
  """`concat[sin(t·f), cos(t·f)]` (not interleaved): `[..., L] -> [..., L, width]`."""
  angles = tf.cast(positions, tf.float32)[..., None] * sinusoid_frequencies(width)
  return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)


def static_positions(positions: Positions | None, length: int, name: str) -> np.ndarray | None:
  """Returns `positions` as a 1-D float numpy array when known at trace time, else None.

  `None` means the default grid `0, 1, ..., length-1`.
  """
  if positions is None:
    return np.arange(length, dtype=np.float64)
  value = tf.get_static_value(positions) if tf.is_tensor(positions) else positions
  return None if value is None else static_vector(value, length, name)
