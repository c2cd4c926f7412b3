"""The names weights move by (zoo.named_weights), without Keras: keys, and what a mismatch says."""

import types

import numpy as np
import pytest

from zoo.named_weights import WeightMismatch
from zoo.named_weights import assign_named_arrays
from zoo.named_weights import weight_key


def test_weight_keys_drop_the_variable_suffix_and_the_enclosing_scopes():
  assert weight_key("block_0_layer_0/attention/query/kernel:0") == "block_0_layer_0/attention/query/kernel"
  top = {"embeddings", "block_0_layer_0"}
  assert weight_key("funnel_backbone/funnel_encoder/block_0_layer_0/attention/position_kernel", top) == \
      "block_0_layer_0/attention/position_kernel"
  # The first top-level name counts: "embeddings" is also the name of the table inside it.
  assert weight_key("embeddings/word_embeddings/embeddings", top) == "embeddings/word_embeddings/embeddings"


class _Variable:
  def __init__(self, path, shape):
    self.path, self.shape, self.dtype, self.value = path, shape, "float32", None

  def assign(self, value):
    self.value = value


def _model(*variables):
  return types.SimpleNamespace(name="encoder", weights=list(variables),
                               layers=[types.SimpleNamespace(name="pooler")])


def test_every_weight_gets_one_value_by_name_whatever_the_order():
  kernel, bias = _Variable("pooler/kernel", (2, 2)), _Variable("pooler/bias", (2,))
  assign_named_arrays(_model(kernel, bias), {"pooler/bias:0": np.ones(2), "pooler/kernel:0": np.eye(2)})
  np.testing.assert_array_equal(kernel.value, np.eye(2))
  np.testing.assert_array_equal(bias.value, np.ones(2))


@pytest.mark.parametrize("arrays,message", [
    ({"pooler/kernel": np.eye(2)}, r"missing \['pooler/bias'\]; not used nothing"),
    ({"pooler/kernel": np.eye(2), "pooler/bias": np.ones(2), "pooler/scale": np.ones(2)},
     r"missing nothing; not used \['pooler/scale'\]"),
    ({"pooler/kernel": np.eye(3), "pooler/bias": np.ones(2)},
     r"shapes differ: pooler/kernel: \(3, 3\) for \(2, 2\)"),
    ({"pooler/kernel": np.eye(2), "pooler/bias": np.ones(2), "x/pooler/bias:0": np.ones(2)}, "two weights"),
])
def test_mismatches_name_what_does_not_fit(arrays, message):
  with pytest.raises(WeightMismatch, match=message):
    assign_named_arrays(_model(_Variable("pooler/kernel", (2, 2)), _Variable("pooler/bias", (2,))), arrays)
