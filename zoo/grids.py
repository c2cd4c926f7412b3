"""Static sequence geometry of the Funnel encoder and the relative position grids, in numpy.

Shared by both editions of the layers (`zoo.layers` for `tf_keras`, `zoo.keras3` for
Keras 3): lengths and positions are known when a model is built, so they are plain
numbers, and this module imports no Keras. `DESIGN.md` (Section 5) explains the grids.
"""

import numpy as np
from numpy.typing import ArrayLike


def pool_positions(positions: ArrayLike, separate_cls: bool = True, truncate_seq: bool = True) -> np.ndarray:
  """Positions of the pooled tokens, as a float numpy vector.

  A pooled token sits at the position of the first token of its window; with
  `separate_cls`, [cls] sits one stride before the first pooled token.
  """
  positions = np.asarray(positions, dtype=np.float64)
  if not separate_cls:
    return positions[::2]
  if positions.shape[0] < 2:
    raise ValueError("separate_cls pooling needs [cls] and at least one token")
  stride = positions[1] - positions[0]
  body = positions[1:-1] if truncate_seq else positions[1:]
  pooled = body[::2]
  if pooled.shape[0] == 0:
    raise ValueError(f"pooling {positions.shape[0]} positions leaves only [cls]")
  return np.concatenate([[pooled[0] - 2 * stride], pooled])


def authors_tf_positions(length: int, block: int) -> np.ndarray:
  """Positions of block `block`'s `length` tokens as the authors' TensorFlow code's shift form places them
  (`rel_shift_pos_enc`: `1 - 2^b + 2^b·i`, whether or not [cls] is separate)."""
  stride = 2 ** block
  return (1 - stride + stride * np.arange(length)).astype(np.float64)


def pooled_length(length: int, separate_cls: bool = True, truncate_seq: bool = True) -> int:
  """Sequence length after one stride-2 pooling step.

  512 -> 256 with `separate_cls` and `truncate_seq`, 512 -> 257 with `separate_cls`
  alone, and 512 -> 256 (odd lengths rounding up) without `separate_cls`.
  """
  if separate_cls:
    length = length if truncate_seq else length + 1
  return (length + 1) // 2


def block_lengths(seq_length: int, num_blocks: int, separate_cls: bool = True,
                  truncate_seq: bool = True) -> list[int]:
  """Sequence length inside each block, e.g. 512 -> [512, 256, 128]."""
  lengths = [seq_length]
  for _ in range(num_blocks - 1):
    lengths.append(pooled_length(lengths[-1], separate_cls, truncate_seq))
  return lengths


def position_grid(positions: np.ndarray, name: str) -> tuple[float, float | None]:
  """`(start, stride)` of an arithmetic position vector; raises if it is not one."""
  start = float(positions[0])
  stride = float(positions[1] - positions[0]) if positions.shape[0] > 1 else None
  if stride is not None and not np.allclose(np.diff(positions), stride):
    raise ValueError(
        f"{name} must be evenly spaced for position_encoding='shift' (got {positions}); "
        "use position_encoding='factorized' for arbitrary positions")
  return start, stride


def shift_distances(query_positions: np.ndarray, key_positions: np.ndarray) -> tuple[int, np.ndarray]:
  """The shift form's static table of two known position vectors: `(ratio, float32 distances)`.

  The positions must be evenly spaced (`position_grid`), the query spacing a whole multiple `ratio`
  of the key spacing. With `T` queries and `S` keys the distances are
  `t_n = (q0 - k0) + (ratio·T - n)·k_stride` for `n < L = ratio·T + S`, so that pair `(i, j)` sits at
  `n = ratio·(T - i) + j`.
  """
  q_start, q_stride = position_grid(query_positions, "query_positions")
  k_start, k_stride = position_grid(key_positions, "key_positions")
  _, k_stride, ratio = spacing_ratio(q_stride, k_stride, "position_encoding='shift'")
  query_length, key_length = query_positions.shape[0], key_positions.shape[0]
  num_distances = ratio * query_length + key_length
  distances = (q_start - k_start) + (ratio * query_length - np.arange(num_distances)) * k_stride
  return ratio, distances.astype(np.float32)


def spacing_ratio(query_stride: float | None, key_stride: float | None, feature: str
                  ) -> tuple[float, float, int]:
  """`(query spacing, key spacing, ratio)` of two grids (`position_grid`'s strides; a grid of one position
  takes the other's spacing, 1 for both) whose query spacing is a whole multiple `ratio` of the key
  spacing, as the shift form and local attention need (`feature` names which, for the error)."""
  key_stride = key_stride or query_stride or 1.0
  query_stride = query_stride or key_stride
  ratio = query_stride / key_stride
  if ratio < 1 or ratio != int(ratio):
    raise ValueError(f"{feature} needs the query spacing to be a whole multiple of the key spacing, got "
                     f"{query_stride} and {key_stride}")
  return query_stride, key_stride, int(ratio)


def static_vector(value: ArrayLike, length: int, name: str) -> np.ndarray:
  """A known position vector as 1-D float64 numpy, checked against `length`."""
  value = np.asarray(value, dtype=np.float64)
  if value.ndim != 1 or value.shape[0] != length:
    raise ValueError(f"{name} must be a vector of length {length}, got shape {value.shape}")
  return value
