"""Static geometry of block-local attention with global tokens, in numpy.

Shared by both editions of the layers: lengths and positions are known when a model is
built, so the blocks, the windows and their masks are plain numbers and this module
imports no Keras. `DESIGN.md` (Section 9) explains the computation.

The pattern. Query `i` (position `p_i`) may attend key `j` (position `p_j`) when

    |p_i - p_j| <= W · δ_k     (the window: W keys on each side, δ_k the keys' spacing)
    or i < G or j < G          (the G global tokens: the first G queries attend to every
                                key, and every query attends to the first G keys)

and key `j` is not padding. Without pooling the positions are `0..T-1` and the window is
`|i - j| <= W`; in a pooled Funnel block the window counts W tokens of that block's own
sequence; a pool-query-only layer (queries pooled, keys not) counts W keys.

The blocks. Queries are cut into `num_blocks` blocks of `query_block` queries; the keys
into blocks of `key_block = ratio · query_block` keys (`ratio = δ_q / δ_k`, 1 or 2), and
query block `k` scores the three key blocks `k - 1, k, k + 1` of a key sequence shifted by
`lead` (a `[3 · key_block]` window), chosen so that every pair of the band lies in its
query's window. The relative distance of a (query slot, key slot) pair is then the same in
every block: one small position table serves every block, and no `[T, S]` tensor exists.
The global pairs are computed apart: the G global queries' rows against every key, and
every query against the G global keys (columns beside each block's window).
"""

import functools
import math

import numpy as np
from numpy.typing import ArrayLike

from zoo.grids import position_grid
from zoo.grids import spacing_ratio


class LocalGeometry:
  """Blocks, windows and masks of block-local attention over two static position grids.

  Args:
    window: W, keys on each side of a query (in the keys' spacing); `>= 0`.
    global_tokens: G, the leading queries and keys that attend to and are attended by
      every position; `>= 1` (the [cls] token at least).
    query_positions, key_positions: 1-D evenly spaced positions (numpy), the query
      spacing a whole multiple `ratio` of the key spacing.

  Attributes: `query_length` T, `key_length` S, `ratio`, `query_block`, `key_block`,
  `num_blocks`, `lead` (how many pad keys precede key 0 in the padded key sequence; negative:
  keys cropped), `key_padding` (pad keys after the last key; negative: keys cropped),
  `local_query_positions` `[query_block]` and `local_key_positions` `[3 · key_block]`
  (positions relative to a block's origin, the same in every block), `local_allowed` bool
  `[num_blocks, query_block, 3 · key_block]` (the band without global keys, inside the
  sequences).
  """

  def __init__(self, window: int, global_tokens: int, query_positions: ArrayLike,
               key_positions: ArrayLike) -> None:
    window, global_tokens = int(window), int(global_tokens)
    if window < 0:
      raise ValueError(f"attention_window must be >= 0, got {window}")
    if global_tokens < 1:
      raise ValueError(f"global_tokens must be >= 1 (the [cls] token at least), got {global_tokens}")
    query_positions = np.asarray(query_positions, np.float64)
    key_positions = np.asarray(key_positions, np.float64)
    self.window, self.global_tokens = window, global_tokens
    self.query_positions, self.key_positions = query_positions, key_positions
    self.query_length, self.key_length = len(query_positions), len(key_positions)
    if global_tokens > min(self.query_length, self.key_length):
      raise ValueError(f"global_tokens ({global_tokens}) exceeds the sequence length "
                       f"({self.query_length} queries, {self.key_length} keys)")
    q_start, q_stride = _grid(query_positions, "query_positions")
    k_start, k_stride = _grid(key_positions, "key_positions")
    q_stride, k_stride, ratio = spacing_ratio(q_stride, k_stride, "local attention")
    self.ratio = ratio
    self.key_stride = k_stride
    # Query i sits at key coordinate c_i = c0 + ratio · i (key j sits at j).
    c0 = (q_start - k_start) / k_stride
    key_block = max(ratio, ratio * math.ceil((2 * window - ratio + 1) / (2 * ratio)))
    while True:   # the smallest block whose three-block windows hold every band pair
      low, high = math.ceil(window - c0 - key_block), math.floor(key_block - 1 - c0 + ratio - window)
      if low <= high:
        break
      key_block += ratio
    self.key_block, self.query_block = key_block, key_block // ratio
    self.num_blocks = -(-self.query_length // self.query_block)
    self.lead = key_block + low
    self.key_padding = (self.num_blocks + 2) * key_block - self.lead - self.key_length

    slots = np.arange(3 * key_block)
    self.local_query_positions = q_start + np.arange(self.query_block) * q_stride
    self.local_key_positions = k_start + (slots - self.lead) * k_stride
    queries = np.arange(self.num_blocks)[:, None, None] * self.query_block + np.arange(
        self.query_block)[None, :, None]                                        # [K, bq, 1]
    keys = (np.arange(self.num_blocks)[:, None, None] * key_block + slots[None, None, :]
            - self.lead)                                                                 # [K, 1, 3bk]
    in_band = np.abs(c0 + ratio * queries - keys) <= window + 1e-9
    self.local_allowed = (in_band & (queries < self.query_length) & (keys >= global_tokens)
                          & (keys < self.key_length))
    self._check_cover(c0)

  def _check_cover(self, c0: float) -> None:
    """Every query's band (outside the global rows and columns) lies in its block's window: interval
    arithmetic per query, no `[T, S]` array."""
    queries = np.arange(self.global_tokens, self.query_length)
    centers = c0 + self.ratio * queries
    low = np.maximum(np.ceil(centers - self.window - 1e-9), self.global_tokens)
    high = np.minimum(np.floor(centers + self.window + 1e-9), self.key_length - 1)
    start = queries // self.query_block * self.key_block - self.lead
    missed = (low <= high) & ((low < start) | (high > start + 3 * self.key_block - 1))
    if missed.any():   # an error of this module, never of the input
      raise AssertionError(f"local attention blocks miss band pairs (window {self.window}, c0 {c0})")

  def dense_allowed(self) -> np.ndarray:
    """bool `[T, S]`: the pattern as a full mask (the band, the global rows and columns)."""
    c = (self.query_positions[:, None] - self.key_positions[None, :]) / self.key_stride
    allowed = np.abs(c) <= self.window + 1e-9
    allowed[:self.global_tokens] = True
    allowed[:, :self.global_tokens] = True
    return allowed

  def dense_probs(self, rows: ArrayLike, blocks: ArrayLike) -> np.ndarray:
    """The probabilities of a local attention layer as a full `[B, N, T, S]` array (numpy).

    `rows`: `[B, N, G, S]`, the global queries' probabilities; `blocks`:
    `[B, K, N, query_block, G + 3 · key_block]`, every query's probabilities over the global
    keys and its window (`AttentionResult.probs` of a local layer). Pairs outside the
    pattern are 0. For analysis: the full array is what local attention avoids.
    """
    rows, blocks = np.asarray(rows), np.asarray(blocks)
    batch, heads = rows.shape[:2]
    g, t, s = self.global_tokens, self.query_length, self.key_length
    out = np.zeros([batch, heads, t, s], blocks.dtype)
    k, q, slot = np.nonzero(self.local_allowed)
    rows_at, columns_at = k * self.query_block + q, k * self.key_block + slot - self.lead
    out[:, :, rows_at, columns_at] = blocks[:, k, :, q, g + slot].transpose(1, 2, 0)
    flat = blocks.transpose(0, 2, 1, 3, 4).reshape(batch, heads, -1, blocks.shape[-1])[:, :, :t]
    out[:, :, :, :g] = flat[:, :, :, :g]
    out[:, :, :g] = rows
    return out


@functools.lru_cache(maxsize=256)
def _cached_geometry(window: int, global_tokens: int, query_positions: tuple[float, ...],
                     key_positions: tuple[float, ...]) -> LocalGeometry:
  return LocalGeometry(window, global_tokens, np.array(query_positions), np.array(key_positions))


def local_geometry(window: int, global_tokens: int, query_positions: ArrayLike,
                   key_positions: ArrayLike) -> LocalGeometry:
  """A `LocalGeometry`, made once per setting and grids (every layer of an encoder shares its block's)."""
  grids = (tuple(np.asarray(grid, np.float64).tolist()) for grid in (query_positions, key_positions))
  return _cached_geometry(int(window), int(global_tokens), *grids)


def _grid(positions: np.ndarray, name: str) -> tuple[float, float | None]:
  if positions.ndim != 1 or positions.shape[0] == 0:
    raise ValueError(f"local attention needs {name} as a non-empty vector, got shape {positions.shape}")
  try:
    return position_grid(positions, name)
  except ValueError:
    raise ValueError(f"local attention needs evenly spaced {name}, got {positions}") from None
