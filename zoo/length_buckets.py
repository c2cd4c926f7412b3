"""Length buckets: a short ladder of sequence lengths, so a batch of short texts costs short-text compute.

An encoder built for `seq_length` T runs a batch whose texts hold at most n tokens at the
smallest length L of a fixed ladder (16, 32, 64, ..., T, `default_ladder`) whose *capacity* is
at least n, and
its outputs are padded back to T. Each ladder length is one static shape (one traced
function, one XLA program), so TPUs keep their static shapes.

A ladder length L can hold a text of n real tokens when the encoder's outputs at the real
positions are the same at L as at T:

- A Transformer encoder (BERT, ALBERT, RealFormer): padding is masked out of the
  attention, so every n <= L.
- A Funnel encoder with the zoo's pooling semantics: a pooled window reads only its real
  tokens, so outputs do not depend on padding, except where `truncate_seq` drops the last
  token of a sequence before pooling: at L that token may be real where at T it would be
  pooled with padding. The capacity of L is the largest n for which every block's pooled
  windows (their real tokens) and the decoder's upsampled positions are those of T for
  every n' <= n (`funnel_capacity`, computed from the pooling geometry of `zoo.grids`).
- A Funnel encoder with Hugging Face's or the authors' semantics pools padding into the
  windows that hold the last real tokens, so L holds only the texts whose windows it holds
  whole (`funnel_capacity` with their `semantics`); such encoders use buckets only when
  asked by name (`padding_dependence` says why).

This module is plain Python: both editions, the training job and the export read it.

Example:
  >>> default_ladder(128)
  [16, 32, 64, 128]
  >>> default_ladder(128, per_octave=4)
  [16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128]
  >>> parse_ladder("32,64", 128)
  [32, 64, 128]
  >>> funnel_capacity(16, 128, num_blocks=3, separate_cls=True, truncate_seq=True, decoder=False)
  13
"""

from __future__ import annotations

import numpy as np

# The ladder's smallest length. "auto" is powers of two from 16 up to the trained length in training
# (each length a branch of the step's one program: a TPU compiles them all) and two lengths per
# doubling from 8 in exports (each text runs at the shortest that holds it, so finer steps pad less, but
# split a call into more, smaller sub-batches: four per doubling measured no faster, and doubled the
# export's graphs; lengths an encoder cannot take are left out).
SHORTEST = 16
SERVING_PER_OCTAVE = 2
SERVING_SHORTEST = 8
OFF = "off"
AUTO = "auto"


def default_ladder(seq_length: int, per_octave: int = 1, shortest: int = SHORTEST) -> list[int]:
  """`per_octave` evenly spaced lengths in each doubling from `shortest` below `seq_length`, then
  `seq_length`: powers of two by default (`[16, 32, 64, 128]`), quarter steps with 4 (`[16, 20, 24, ...]`)."""
  lengths = []
  octave = shortest
  while octave < seq_length:
    lengths += [length for length in range(octave, 2 * octave, octave // per_octave) if length < seq_length]
    octave *= 2
  return lengths + [seq_length]


def parse_ladder(value: str | list[int] | None, seq_length: int, per_octave: int = 1,
                 shortest: int = SHORTEST) -> list[int]:
  """The ladder a setting names: "auto" (`default_ladder` with `per_octave` lengths per doubling), "off" or
  None (`[]`: no buckets), or lengths ("32,64" or a list), to which `seq_length` is added. Raises a
  ValueError naming the valid forms."""
  if value is None or value == OFF or value == []:
    return []
  if value == AUTO:
    return default_ladder(seq_length, per_octave, shortest)
  if isinstance(value, str):
    try:
      lengths = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
      raise ValueError(f"length buckets must be {AUTO!r}, {OFF!r} or comma-separated lengths such as "
                       f"'32,64', got {value!r}") from None
  else:
    lengths = [int(length) for length in value]
  bad = [length for length in lengths if length < 1 or length > seq_length]
  if bad:
    raise ValueError(f"length buckets {bad} are outside 1..{seq_length} (seq_length): a bucket length is at "
                     "most the trained length, which is always the last bucket")
  return sorted(set(lengths) | {seq_length})


def describe_ladder(value: str | list[int] | None) -> str:
  """A ladder setting as recorded (a list as "32,64,128")."""
  if isinstance(value, list | tuple):
    return ",".join(str(length) for length in value)
  return OFF if value is None else str(value)


def funnel_windows(length: int, num_blocks: int, separate_cls: bool, truncate_seq: bool) -> list[np.ndarray]:
  """Each block's pooled windows at `length` tokens: `[starts, ends]` (half-open token ranges), block 0 first.

  The geometry of `zoo.grids.pool_positions`: with `separate_cls` [cls] is a window of its own and
  `truncate_seq` drops the last token before pairing; otherwise consecutive pairs (the last one
  alone when the count is odd).
  """
  windows = np.stack([np.arange(length), np.arange(length) + 1])
  blocks = [windows]
  for _ in range(num_blocks - 1):
    if separate_cls:
      cls, body = windows[:, :1], windows[:, 1:-1] if truncate_seq else windows[:, 1:]
    else:
      cls, body = windows[:, :0], windows
    starts = body[0, 0::2]
    ends = body[1, 1::2]
    if ends.shape[0] < starts.shape[0]:   # an odd count: the last window is one token
      ends = np.concatenate([ends, body[1, -1:]])
    windows = np.concatenate([cls, np.stack([starts, ends])], axis=1)
    blocks.append(windows)
  return blocks


def mixed_window_counts(seq_length: int, num_blocks: int, separate_cls: bool,
                        truncate_seq: bool) -> list[int]:
  """The counts of real tokens (with [cls]) below `seq_length` for which a pooled window holds both real
  tokens and padding: the inputs on which the three pooling semantics (`zoo.choices.POOLING_SEMANTICS`)
  compute otherwise, padded to `seq_length`.

  One pooling: with `separate_cls` and `truncate_seq`, every odd count of tokens after [cls] but the
  last; each further pooling doubles the window, so with three blocks every count after [cls] that is
  not a multiple of 4 (e.g. 6, 10, 26).

  >>> [n - 1 for n in mixed_window_counts(16, 3, True, True)]
  [1, 2, 3, 5, 6, 7, 9, 10, 11, 13]
  """
  windows = funnel_windows(seq_length, num_blocks, separate_cls, truncate_seq)[1:]
  return [real for real in range(1, seq_length)
          if any(np.any((block[0] < real) & (block[1] > real)) for block in windows)]


def _windows_read(windows: np.ndarray, real: int, whole: bool) -> np.ndarray:
  """The windows holding a real token (start < `real`): whole (pooling reads their padding too), or cut to
  their real tokens (the zoo's semantics reads only those)."""
  kept = windows[:, windows[0] < real]
  return kept if whole else np.stack([kept[0], np.minimum(kept[1], real)])


def _upsampled(length: int, last_block: int, stride: int, separate_cls: bool) -> np.ndarray:
  """Which pooled vector `FunnelUpsampling` puts at each of `length` positions (-1: zeros past them)."""
  positions = np.arange(length)
  if separate_cls:
    source = np.where(positions == 0, 0, 1 + (positions - 1) // stride)
  else:
    source = positions // stride
  return np.where(source < last_block, source, -1)


def funnel_capacity(length: int, seq_length: int, *, num_blocks: int, separate_cls: bool, truncate_seq: bool,
                    decoder: bool, semantics: str = "zoo") -> int:
  """The most real tokens a Funnel at `length` holds with the outputs it has at `seq_length`.

  n real tokens fit when each block's windows that hold a real token (and, with a decoder, the pooled
  vector each real position is upsampled from) are the same at both lengths; the capacity is the largest
  n for which every n' <= n fits, 0 when none does. Under the zoo's pooling semantics a window's real
  tokens must be the same; under Hugging Face's and the authors' (`semantics` "huggingface",
  "funnel_authors"), which pool padding too, the whole window: padding tokens are the same vectors at
  both lengths (a padding query attends to the same real keys), so whole windows pool alike. Under
  Hugging Face's a window is a real key only when every token of it is: a block with no such window
  attends over padding alone, so its windows must all be the same.
  """
  if length >= seq_length:
    return length
  short = funnel_windows(length, num_blocks, separate_cls, truncate_seq)
  full = funnel_windows(seq_length, num_blocks, separate_cls, truncate_seq)
  stride = 2 ** (num_blocks - 1)
  up_short = _upsampled(length, short[-1].shape[1], stride, separate_cls)
  up_full = _upsampled(seq_length, full[-1].shape[1], stride, separate_cls)[:length]
  capacity = 0
  whole = semantics != "zoo"
  for real in range(1, length + 1):
    same = all(np.array_equal(_windows_read(a, real, whole), _windows_read(b, real, whole))
               for a, b in zip(short, full, strict=True))
    if semantics == "huggingface":   # a block without a wholly real window: every window must be the same
      same = same and all(np.any(a[1] <= real) or np.array_equal(a, b)
                          for a, b in zip(short, full, strict=True))
    if decoder:
      same = same and np.array_equal(up_short[:real], up_full[:real])
    if not same:
      break
    capacity = real
  return capacity
