"""Presets: names, paper ratios, full-size parameter counts, one training step each."""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from tests.conftest import fast_or_slow
from tests.conftest import shared_file
from zoo import presets
from zoo.presets import __main__ as presets_cli
from zoo.presets import cost

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REQUIRED = [
    "bert_small", "bert_base", "bert_large", "prenorm_small", "prenorm_base", "prenorm_large",
    "realformer_small", "realformer_base", "realformer_large", "realformer_xlarge",
    "rel_transformer_base", "rel_transformer_large", "funnel_b4_4_4", "funnel_b6_3x2_3x2", "funnel_b6_6_6",
    "funnel_b8_8_8", "funnel_b10_10_10", "funnel_b4_4_4_decoder", "funnel_b6_6_6_decoder",
    "albert_base", "albert_large",
]


# BERT-base (110M in the BERT paper), and a Funnel with what the full-width builds of every preset (at
# depths 1 and 2, without repeats, one decoder layer) leave out: repeated blocks and a 2-layer decoder.
FULL_SIZE = ["bert_base", "funnel_b6_3x2_3x2_decoder"]


def _full_size_overrides(name):
  return {"seq_length": 128} if presets.get(name).family == "funnel" else {}


def _builds_of(item):
  """The `[preset, overrides]` builds a selected test of this module counts the parameters of."""
  if getattr(item, "module", None) is not sys.modules[__name__]:
    return []
  if item.originalname == "test_full_size_preset_builds_with_the_counted_parameters":
    name = item.callspec.params["name"]
    return [[name, _full_size_overrides(name)]]
  if item.originalname == "test_every_preset_builds_at_full_width_with_the_counted_parameters":
    name = item.callspec.params["name"]
    return [[name, _depth_override(presets.get(name), depth)] for depth in (1, 2)]
  return []


@pytest.fixture(scope="session")
def built(request, tmp_path_factory):
  """`count(name, overrides)`: the parameters of a preset build, from one process of its own
  (`tests.zoo.preset_builds`) that builds what the selected tests ask for, once per run."""
  specs = [build for item in request.session.items for build in _builds_of(item)]

  def make(out):
    subprocess.run([sys.executable, "-m", "tests.zoo.preset_builds", out, json.dumps(specs)], check=True,
                   cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=900)

  digest = hashlib.sha256(json.dumps(specs).encode()).hexdigest()[:16]
  with open(shared_file(tmp_path_factory, f"preset-counts-{digest}.json", make)) as file:
    counts = json.load(file)
  # JSON text as the key: tuples and lists of the same values are the same build.
  by_build = {json.dumps(spec, sort_keys=True): count for spec, count in zip(specs, counts, strict=True)}
  return lambda name, overrides: by_build[json.dumps([name, overrides], sort_keys=True)]


def _params(name):
  preset = presets.get(name)
  return cost.parameter_count(preset.family, preset.config)


def test_required_presets_exist():
  assert set(REQUIRED) <= set(presets.names())
  xlarge = presets.get("realformer_xlarge").config
  assert xlarge["num_layers"] == 36 and xlarge["running_mean"] and xlarge["residual_attention"]
  assert not presets.get("realformer_large").config["running_mean"]
  assert presets.get("funnel_b6_3x2_3x2").config["block_sizes"] == (6, 3, 3)
  assert presets.get("funnel_b6_3x2_3x2").config["block_repeats"] == (1, 2, 2)


def test_get_returns_a_copy_and_unknown_names_list_choices():
  presets.get("bert_base").config["num_layers"] = 1
  assert presets.get("bert_base").config["num_layers"] == 12
  with pytest.raises(ValueError,
                     match="unknown preset 'bert_huge'; choose one of: albert_base, albert_large, bert_base"):
    presets.get("bert_huge")
  with pytest.raises(ValueError, match=r"has no argument\(s\) \['num_blocks'\]"):
    presets.build("funnel_b4_4_4", num_blocks=2)


@pytest.mark.parametrize("name,paper,tolerance", [
    ("funnel_b6_6_6", 1.39, 0.02), ("funnel_b6_3x2_3x2", 1.00, 0.02), ("funnel_b4_4_4", 1.00, 0.02),
    ("funnel_b8_8_8", 1.00, 0.02),
])
def test_parameter_ratios_reproduce_funnel_paper_table_1(name, paper, tolerance):
  baseline = "rel_transformer_large" if presets.get(name).hidden_size == 1024 else "rel_transformer_base"
  assert abs(_params(name) / _params(baseline) - paper) <= tolerance


def test_bert_base_has_bert_base_parameter_count():
  assert abs(_params("bert_base") - 109.5e6) < 0.2e6   # BERT-Base: 110M


# ALBERT paper: Table 1 (base and large, every layer shared) and Table 4 (base, E = 128, each sharing).
@pytest.mark.parametrize("name, sharing, millions", [
    ("albert_base", "all", 12), ("albert_base", "none", 89), ("albert_base", "attention", 64),
    ("albert_base", "ffn", 38), ("albert_large", "all", 18)])
def test_albert_parameter_counts_equal_the_albert_papers_tables(name, sharing, millions):
  """The tables give whole millions (not shared: 89.65M counted, "89M" printed), so within 0.7M."""
  config = dict(presets.get(name).config, layer_sharing=sharing)
  assert abs(cost.parameter_count("transformer", config) / 1e6 - millions) < 0.7


def test_long_presets_add_only_the_longer_position_table_and_cut_the_attention_flops():
  assert _params("realformer_base_long") - _params("realformer_base") == (4096 - 512) * 768
  assert _params("funnel_b4_4_4_long") == _params("funnel_b4_4_4")
  assert _params("funnel_b4_4_4_decoder_long") == _params("funnel_b4_4_4_decoder")
  for name in ("realformer_base_long", "funnel_b4_4_4_long", "funnel_b4_4_4_decoder_long"):
    preset = presets.get(name)
    assert preset.config["attention_window"] == 128 and preset.config["global_tokens"] == 1
    full = dict(preset.config, attention_window=None)
    # Linear in the length: doubling it doubles the local model's FLOPs (to 10%), not the full one's.
    local_growth = (cost.flops(preset.family, preset.config, 8192)
                    / cost.flops(preset.family, preset.config, 4096))
    assert local_growth < 2.2 < cost.flops(preset.family, full, 8192) / cost.flops(preset.family, full, 4096)
    assert cost.flops(preset.family, preset.config, 4096) < 0.6 * cost.flops(preset.family, full, 4096)


def test_single_block_funnel_flops_equal_the_relative_transformer():
  transformer = presets.get("rel_transformer_base").config
  funnel = dict(presets.get("funnel_b4_4_4").config, block_sizes=(12,), block_repeats=(1,))
  assert cost.flops("funnel", funnel, 512) == cost.flops("transformer", transformer, 512)
  assert cost.flops("funnel", presets.get("funnel_b4_4_4").config, 512) < cost.flops(
      "transformer", transformer, 512)


# Full-size builds of the presets behind the paper's parameter ratios.
@pytest.mark.slow
@pytest.mark.parametrize("name", FULL_SIZE)
def test_full_size_preset_builds_with_the_counted_parameters(name, built):
  assert built(name, _full_size_overrides(name)) == _params(name)


def _depth_override(preset, depth):
  if preset.family == "funnel":
    return dict(block_sizes=(depth,) + (1,) * (len(preset.config["block_sizes"]) - 1),
                block_repeats=None, num_decoder_layers=min(preset.config.get("num_decoder_layers", 0), 1),
                seq_length=16)
  return dict(num_layers=depth)


# `make test-fast` builds a few presets of both families; the others run in the full suite.
FAST_PRESETS = ("bert_small", "funnel_b4_4_4", "realformer_base")


# A process of its own builds them (`built`): the full suite only.
@pytest.mark.slow
@pytest.mark.parametrize("name", presets.names())
def test_every_preset_builds_at_full_width_with_the_counted_parameters(name, built):
  """Parameters are linear in depth, so two full-width depths fix the full-size count."""
  preset = presets.get(name)
  counts = []
  for depth in (1, 2):
    overrides = _depth_override(preset, depth)
    counts.append(built(name, overrides))
    assert counts[-1] == cost.parameter_count(preset.family, {**preset.config, **overrides})
  per_layer = counts[1] - counts[0]
  if preset.family == "funnel":
    layers = sum(preset.config["block_sizes"]) + preset.config.get("num_decoder_layers", 0)
    depth_one_layers = len(preset.config["block_sizes"]) + min(preset.config.get("num_decoder_layers", 0), 1)
  else:
    layers, depth_one_layers = preset.config["num_layers"], 1
  assert counts[0] + (layers - depth_one_layers) * per_layer == _params(name)


def _reduced_overrides(name):
  """A width/depth-reduced override of the preset keeping its structure."""
  preset = presets.get(name)
  small = dict(vocab_size=64, hidden_size=32, num_heads=2, intermediate_size=64)
  if preset.family == "funnel":
    small.update(block_sizes=(1,) * len(preset.config["block_sizes"]), seq_length=16)
  else:
    small.update(num_layers=min(preset.config["num_layers"], 3), max_sequence_length=16)
  if preset.config.get("attention_window") is not None:   # several blocks at 16 tokens
    small.update(attention_window=2, seq_length=16)
  return small


def _distinct_reduced_presets():
  """One preset per distinct reduced model: sizes of one family reduce to the same model."""
  chosen = {}
  for name in presets.names():
    preset = presets.get(name)
    reduced = {**preset.config, **_reduced_overrides(name)}
    chosen.setdefault((preset.family, repr(sorted(reduced.items()))), name)
  return sorted(chosen.values())


def test_reduced_models_cover_every_structure():
  names = _distinct_reduced_presets()
  # Post-LN, Pre-LN, RealFormer, RealFormer with running mean, relative Transformer, ALBERT (shared
  # layers, factorized embeddings), the Funnel layouts with and without repeated layers and the decoder,
  # and local attention (a RealFormer, a Funnel with and without the decoder).
  assert len(names) == 13 and {"bert_base", "realformer_xlarge", "funnel_b6_3x2_3x2_decoder", "albert_base",
                               "realformer_base_long", "funnel_b4_4_4_decoder_long"} <= set(names)


@pytest.mark.parametrize("name", fast_or_slow(_distinct_reduced_presets(), FAST_PRESETS))
def test_reduced_preset_trains_a_step(name):
  keras.utils.set_random_seed(0)
  encoder = presets.build(name, **_reduced_overrides(name))
  rng = np.random.default_rng(0)
  inputs = dict(input_word_ids=rng.integers(1, 64, size=(2, 16)).astype(np.int32),
                input_mask=np.ones([2, 16], np.int32), input_type_ids=np.zeros([2, 16], np.int32))
  head = keras.layers.Dense(2)
  optimizer = keras.optimizers.SGD(0.1)

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      outputs = encoder(inputs, training=True)
      logits = head(outputs["pooled_output"])
      # Both outputs enter the loss, so every weight (decoders included) gets a gradient.
      loss = (tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits([0, 1], logits))
              + 1e-2 * tf.reduce_mean(tf.square(outputs["sequence_output"])))
    variables = encoder.trainable_variables + head.trainable_variables
    gradients = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(gradients, variables, strict=True))
    return loss, gradients

  before = [v.numpy() for v in encoder.trainable_variables]
  loss, gradients = step()
  assert np.isfinite(loss.numpy())
  # Every weight gets a non-zero gradient (a gradient of ~1e-9 on a gain of 1.0 can
  # round away in float32, so "changed" is checked on the encoder as a whole).
  assert all(np.abs(tf.convert_to_tensor(g).numpy()).max() > 0 for g in gradients)
  after = [v.numpy() for v in encoder.trainable_variables]
  changed = [not np.array_equal(b, a) for b, a in zip(before, after, strict=True)]
  assert np.mean(changed) > 0.5


def test_cli_prints_the_table(capsys):
  assert presets_cli.main([]) == 0
  out = capsys.readouterr().out
  assert "funnel_b6_6_6" in out and "1.40x" in out
