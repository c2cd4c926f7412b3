"""Independent numpy references for the attention maths of DESIGN.md (repository root).

Written straight from the formulas with explicit loops over pairs, sharing no code
with `zoo`. Weights are read from the layer under test and used here in numpy.
"""

import numpy as np


def sinusoid(t, width):
  k = np.arange(width // 2, dtype=np.float64)
  angles = t * 10000.0 ** (-2.0 * k / width)
  return np.concatenate([np.sin(angles), np.cos(angles)])


def dense(x, kernel, bias):
  """x [B, L, D] with kernel [D, N, H] and bias [N, H] -> [B, L, N, H]."""
  return np.einsum("bld,dnh->blnh", x, kernel) + bias


def relative_scores(weights, query, value, query_positions, key_positions,
                    query_segment_ids=None, key_segment_ids=None,
                    separate_cls=False, cls_segment_id=2):
  """Pre-softmax scores [B, N, T, S] with R(p_i - p_j) materialised per pair."""
  q = dense(query, weights["query/kernel"], weights["query/bias"])
  k = dense(value, weights["key/kernel"], weights["key/bias"])
  head_size = q.shape[-1]
  scale = 1.0 / np.sqrt(head_size)
  v_bias, u_bias = weights["content_bias"], weights["position_bias"]
  w_r = weights["position_kernel"]   # [D, N, H]
  batch, t_len, heads, _ = q.shape
  s_len = k.shape[1]
  width = w_r.shape[0]
  out = np.zeros([batch, heads, t_len, s_len])
  for b in range(batch):
    for i in range(t_len):
      for j in range(s_len):
        r = np.einsum("d,dnh->nh", sinusoid(query_positions[i] - key_positions[j], width), w_r)
        for n in range(heads):
          qh = q[b, i, n] * scale
          content = (qh + v_bias[n] * scale) @ k[b, j, n]
          position = (qh + u_bias[n] * scale) @ r[n]
          segment = 0.0
          if query_segment_ids is not None:
            qi, kj = query_segment_ids[b, i], key_segment_ids[b, j]
            same = qi == kj or qi == cls_segment_id or kj == cls_segment_id
            segment = (qh + weights["segment_bias"][n] * scale) @ weights["segment_embedding"][int(same), n]
          if separate_cls and (i == 0 or j == 0):
            position, segment = 0.0, 0.0
          out[b, n, i, j] = content + position + segment
  return out


def softmax(x, axis=-1):
  e = np.exp(x - x.max(axis=axis, keepdims=True))
  return e / e.sum(axis=axis, keepdims=True)


def named_weights(layer):
  """Layer weights keyed by their path below the layer, e.g. 'query/kernel'."""
  prefix = layer.name + "/"
  result = {}
  for w in layer.weights:
    name = w.name.split(":")[0]
    name = name[name.index(prefix) + len(prefix):] if prefix in name else name
    result[name] = w.numpy().astype(np.float64)
  return result


def attention_output(weights, probs, value):
  """probs [B, N, T, S], value [B, S, D] -> projected output [B, T, D]."""
  v = dense(value, weights["value/kernel"], weights["value/bias"])
  context = np.einsum("bnts,bsnh->btnh", probs, v)
  return np.einsum("btnh,nhd->btd", context, weights["attention_output/kernel"]) + weights[
      "attention_output/bias"]


def content_scores(weights, query, value):
  """Absolute-position pre-softmax scores q·k / sqrt(H): [B, N, T, S]."""
  q = dense(query, weights["query/kernel"], weights["query/bias"])
  k = dense(value, weights["key/kernel"], weights["key/bias"])
  return np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])


def layer_norm(x, gamma, beta, epsilon):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


def gelu(x):
  from math import erf
  return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))
