"""The named choices (`zoo.choices`) and the activations (`zoo.layers.ACTIVATIONS`): what every layer and
encoder accepts and lists."""

import ast
import re

import pytest

from zoo import choices as constants
from zoo.convert import hf_funnel
from zoo.layers import FunnelPooling
from zoo.layers import RelativeMultiHeadAttention
from zoo.layers import TransformerBlock
from zoo.layers import pool_sequence
from zoo.layers.transformer_block import ACTIVATIONS
from zoo.models import FunnelEncoder
from zoo.models import TransformerEncoder

SMALL_FUNNEL = dict(vocab_size=10, hidden_size=8, block_sizes=(1, 1), num_heads=2, intermediate_size=8,
                    seq_length=8)
SMALL_TRANSFORMER = dict(vocab_size=10, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=8)


def test_the_choices():
  assert constants.POSITION_ENCODINGS == ("absolute", "factorized", "shift")
  assert constants.RELATIVE_POSITION_ENCODINGS == ("factorized", "shift")
  assert constants.ABSOLUTE not in constants.RELATIVE_POSITION_ENCODINGS
  assert constants.POOLING_TYPES == ("mean", "max")
  assert set(ACTIVATIONS) == {"gelu", "gelu_approximate", "relu", "swish"}


def test_check_choice_lists_the_choices():
  constants.check_choice("pooling_type", "max", constants.POOLING_TYPES)
  with pytest.raises(ValueError, match=re.escape("pooling_type must be one of ('mean', 'max'), got 'min'")):
    constants.check_choice("pooling_type", "min", constants.POOLING_TYPES)
  with pytest.raises(ValueError, match=re.escape("activation must be one of ('gelu', 'gelu_approximate',")):
    constants.check_choice("activation", "tanh", ACTIVATIONS)


# (name, constructor of a bad value, the choices its message must list)
REJECTIONS = [
    ("block_position_encoding", lambda: TransformerBlock(2, 4, 8, position_encoding="rotary"),
     constants.POSITION_ENCODINGS),
    ("block_activation", lambda: TransformerBlock(2, 4, 8, activation="tanh"), tuple(ACTIVATIONS)),
    ("relative_position_encoding", lambda: RelativeMultiHeadAttention(2, 4, position_encoding="absolute"),
     constants.RELATIVE_POSITION_ENCODINGS),
    ("funnel_pooling_type", lambda: FunnelPooling("min"), constants.POOLING_TYPES),
    ("pool_sequence_mode", lambda: pool_sequence([[1.0, 2.0]], mode="min"),
     (*constants.POOLING_TYPES, "first", "any", "all")),
    ("funnel_encoder_pooling_type", lambda: FunnelEncoder(**SMALL_FUNNEL, pooling_type="min"),
     constants.POOLING_TYPES),
    ("funnel_encoder_position_encoding", lambda: FunnelEncoder(**SMALL_FUNNEL, position_encoding="absolute"),
     constants.RELATIVE_POSITION_ENCODINGS),
    ("transformer_encoder_position_encoding",
     lambda: TransformerEncoder(**SMALL_TRANSFORMER, position_encoding="rotary"),
     constants.POSITION_ENCODINGS),
    ("funnel_encoder_pooling_semantics",
     lambda: FunnelPooling("mean", semantics="min"), constants.POOLING_SEMANTICS),
    ("transformer_encoder_activation", lambda: TransformerEncoder(**SMALL_TRANSFORMER, activation="tanh"),
     tuple(ACTIVATIONS)),
]


@pytest.mark.parametrize("make,choices", [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS])
def test_errors_list_the_choices_of_constants(make, choices):
  with pytest.raises(ValueError) as error:
    make()
  listed = re.search(r"must be one of (\(.*?\)), got", str(error.value)).group(1)
  assert ast.literal_eval(listed) == tuple(choices)


def test_the_hugging_face_names_map_to_zoo_choices():
  assert set(hf_funnel.ACTIVATIONS.values()) <= set(ACTIVATIONS)
  assert set(hf_funnel.POSITION_ENCODINGS.values()) == set(constants.RELATIVE_POSITION_ENCODINGS)
  assert set(hf_funnel.POOLING_TYPES) == set(constants.POOLING_TYPES)
