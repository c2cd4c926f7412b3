"""Attention analysis of the RealFormer paper (Liu et al., 2021, Sec. 4.3, Figures 4 and 5).

Axes: L layers, B batch, N heads, T query tokens, S key tokens.

- `attention_entropy`: the entropy (nats) of each attention distribution, one value per
  (layer, head, real query token): what the paper's violin plots (Figure 4) show per
  layer and head. Low entropy = attention focused on few tokens.
- `adjacent_layer_js_divergence`: the Jensen–Shannon divergence between the attention
  distributions of the same head in vertically adjacent layers (Figure 5), averaged
  over real query tokens. RealFormer's residual scores make adjacent layers' heads
  attend more alike (lower divergence) than Post-LN's.
- `attention_probabilities`: runs an encoder built with `output_attention_probs=True`
  and returns its probabilities as numpy `[L, B, N, T, S]`.

Every function takes the input mask (1 = real token) and counts only real query
tokens; padded keys carry (near) zero probability, so they add nothing.

Example:
  >>> probs = np.array([[[[[0.5, 0.5], [1.0, 0.0]]]]])   # [L=1, B=1, N=1, T=2, S=2]
  >>> [round(float(h), 4) for h in attention_entropy(probs, np.ones([1, 2]))[0][0]]
  [0.6931, 0.0]
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from zoo.windows import local_geometry

_TINY = 1e-12


def _entropy(p: ArrayLike, axis: int = -1) -> np.ndarray:
  p = np.asarray(p, np.float64)
  return 0.0 - np.sum(np.where(p > 0, p * np.log(np.maximum(p, _TINY)), 0.0), axis=axis)   # +0.0, not -0.0


def _real_queries(mask: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
  """bool `[B, T]` of real query tokens, broadcastable against `[L, B, N, T]` after expansion."""
  mask = np.asarray(mask).astype(bool)
  if mask.shape != (shape[1], shape[3]):
    raise ValueError(f"input_mask must have shape [B, T] = [{shape[1]}, {shape[3]}], got {list(mask.shape)}")
  return mask


def attention_entropy(probs: ArrayLike, input_mask: ArrayLike) -> list[list[np.ndarray]]:
  """Entropy of every attention distribution of every real query token.

  Args:
    probs: float `[L, B, N, T, S]` attention probabilities (rows sum to 1).
    input_mask: `[B, T]`, 1 for real tokens.

  Returns:
    A nested list `[L][N]` of 1-D float64 arrays: the entropies (nats) of head n of
    layer l over all real query tokens of the batch.
  """
  probs = np.asarray(probs, np.float64)
  if probs.ndim != 5:
    raise ValueError(f"probs must be [L, B, N, T, S], got shape {list(probs.shape)}")
  real = _real_queries(input_mask, probs.shape)
  entropy = _entropy(probs)   # [L, B, N, T]
  layers, _, heads = probs.shape[:3]
  return [[entropy[layer, :, head][real] for head in range(heads)] for layer in range(layers)]


def js_divergence(p: ArrayLike, q: ArrayLike, axis: int = -1) -> np.ndarray:
  """Jensen–Shannon divergence (nats, in [0, ln 2]) between distributions along `axis`."""
  p = np.asarray(p, np.float64)
  q = np.asarray(q, np.float64)
  m = 0.5 * (p + q)
  return _entropy(m, axis) - 0.5 * (_entropy(p, axis) + _entropy(q, axis))


def adjacent_layer_js_divergence(probs: ArrayLike, input_mask: ArrayLike) -> np.ndarray:
  """Mean JS divergence between head n of layer l and head n of layer l + 1.

  Args:
    probs: float `[L, B, N, T, S]` attention probabilities, L >= 2.
    input_mask: `[B, T]`, 1 for real tokens.

  Returns:
    float64 `[L - 1, N]`: entry `[l, n]` averages, over the real query tokens, the
    divergence between the two layers' distributions for that token.
  """
  probs = np.asarray(probs, np.float64)
  if probs.ndim != 5 or probs.shape[0] < 2:
    raise ValueError(f"probs must be [L, B, N, T, S] with L >= 2, got shape {list(probs.shape)}")
  real = _real_queries(input_mask, probs.shape)   # [B, T]
  divergence = js_divergence(probs[:-1], probs[1:])   # [L-1, B, N, T]
  weights = real[None, :, None, :].astype(np.float64)
  return (divergence * weights).sum(axis=(1, 3)) / np.maximum(weights.sum(axis=(1, 3)), 1.0)


def attention_probabilities(encoder: Any, inputs: Mapping[str, Any]) -> np.ndarray:
  """Numpy `[L, B, N, T, S]` probabilities of an encoder built with `output_attention_probs=True`.

  Works for encoders whose layers all see the same sequence length (Transformer
  encoders); a Funnel's pooled layers have other shapes. With local attention
  (`attention_window`) each layer's global rows and blocks are spread to the full map, 0
  outside the window and the global tokens.
  """
  outputs = encoder(inputs, training=False)
  if "attention_probs" not in outputs:
    raise ValueError("the encoder returns no attention_probs: build it with output_attention_probs=True")
  maps = []
  for probs in outputs["attention_probs"]:
    if isinstance(probs, (tuple, list)):   # local attention: the global rows and the blocks
      config = encoder.get_config()
      positions = np.arange(probs[0].shape[-1])
      geometry = local_geometry(config["attention_window"], config["global_tokens"], positions, positions)
      expected = (geometry.num_blocks, probs[1].shape[2], geometry.query_block,
                  geometry.global_tokens + 3 * geometry.key_block)
      if tuple(probs[1].shape[1:]) != expected:   # a pooled (Funnel) layer: another grid
        raise ValueError("the layers' local attention maps are not self-attention over the input length "
                         "(a Funnel's pooled layers); analyse them one by one with zoo.windows.LocalGeometry")
      probs = geometry.dense_probs(*(np.asarray(part) for part in probs))
    maps.append(probs)
  outputs = dict(outputs, attention_probs=maps)
  shapes = {tuple(p.shape) for p in outputs["attention_probs"]}
  if len(shapes) != 1:
    raise ValueError(f"the layers' attention maps differ in shape ({sorted(shapes)}); "
                     "analyse them one by one")
  return np.stack([np.asarray(p, np.float64) for p in outputs["attention_probs"]])
