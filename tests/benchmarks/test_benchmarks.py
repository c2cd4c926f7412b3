"""The benchmark machinery: timing order, op counts, the training step, memory, the report.

Speed itself is not tested here (that is what `python -m benchmarks.run` reports);
these tests check that the measurements measure what they say.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

import zoo.presets
from benchmarks import embeddings
from benchmarks import measure
from benchmarks import memory
from benchmarks import real_lengths
from benchmarks import run
from benchmarks import serving
from zoo.model_dir import ModelDir
from zoo.presets import cost

TINY = dict(hidden_size=32, num_heads=2, intermediate_size=64)
TINY_SETTINGS = run.Settings(
    lengths=(32,), tokens_per_batch=64, repeats=1, memory_batch_size=2, matmul_size=256,
    memory_models=(run.BASELINE, "funnel_b4_4_4"),   # the baseline and the model with a memory target
    transformer_overrides=dict(TINY, num_layers=2), funnel_overrides=dict(TINY, block_sizes=(1, 1, 1)))


def test_interleaved_medians_warms_up_then_rotates_the_order():
  calls = []
  functions = {name: (lambda name=name: calls.append(name)) for name in "abc"}
  timed = measure.interleaved_medians(functions, repeats=3, warmup=2)
  assert calls[:6] == ["a", "a", "b", "b", "c", "c"]
  assert calls[6:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
  for median, values in timed.values():
    assert len(values) == 3 and median == sorted(values)[1]


def test_interleaved_medians_tells_slow_from_fast():
  import time
  timed = measure.interleaved_medians(
      {"fast": lambda: time.sleep(0.001), "slow": lambda: time.sleep(0.03)}, repeats=3, warmup=0)
  assert timed["slow"][0] / timed["fast"][0] > 5


def test_op_counts_find_gathers_in_graph_and_hlo():
  table = tf.random.normal([10, 4])
  ids = tf.constant([1, 3])
  gather = lambda ids: tf.gather(table, ids)  # noqa: E731
  matmul = lambda x: tf.matmul(x, x, transpose_b=True)  # noqa: E731
  graph_types = measure.graph_op_types(tf.function(gather).get_concrete_function(ids))
  assert measure.count_ops(graph_types, "gather") == 1
  assert measure.count_ops(measure.graph_op_types(tf.function(matmul).get_concrete_function(table)),
                           "gather") == 0
  assert measure.hlo_gather_count(gather, ids) == 1
  assert measure.hlo_gather_count(matmul, table) == 0


def test_factorized_attention_has_no_gather_forward_or_backward():
  counts = run._attention_gathers("factorized", TINY_SETTINGS)
  assert counts["graph_gathers"] == 0 and counts["hlo_gathers"] == 0
  # The shift form reshapes and slices more: that is its relative shift.
  assert run._attention_gathers("shift", TINY_SETTINGS)["reshapes_and_slices"] > counts["reshapes_and_slices"]


def test_train_step_updates_every_weight_and_lowers_the_loss():
  encoder = zoo.presets.build("funnel_b4_4_4", seq_length=16, block_sizes=(1, 1), block_repeats=(1, 1),
                              dropout=0.0, attention_dropout=0.0, **TINY)
  step = measure.TrainStep(encoder, batch_size=4, seq_length=16, vocab_size=100, learning_rate=1e-2)
  before = [v.numpy().copy() for v in step.variables]
  losses = [step() for _ in range(5)]
  unchanged = [variable.name for variable, old in zip(step.variables, before, strict=True)
               if np.array_equal(variable.numpy(), old)]
  # The head reads [cls] of the last layer, whose relative terms separate_cls zeroes: that layer's
  # position and segment biases reach no output the loss depends on. Everything else trains.
  last = "block_1_layer_0/attention/"
  assert sorted(unchanged) == [last + "position_bias:0", last + "segment_bias:0"]
  assert losses[-1] < losses[0]
  features = step.features
  assert features["input_word_ids"].shape == (4, 16) and features["input_word_ids"].dtype == tf.int32
  assert int(tf.reduce_min(features["input_mask"])) == 1   # full-length sequences


def test_train_flops_are_three_forward_passes_per_sequence():
  settings = run.Settings()
  family, config = run._config("rel_transformer_base", settings)
  batch = settings.batch_size(128)
  assert batch == settings.tokens_per_batch // 128
  flops = cost.flops(family, config, 128)
  assert run._train_flops("rel_transformer_base", settings, 128) == 3 * batch * flops
  # An L12H768 layer at length 512: 4 projections, FFN, scores and context, relative terms.
  t, d, f, n = 512, 768, 3072, 12
  layer = 2 * t * d * d * 4 + 2 * t * d * f * 2 + 2 * t * t * d * 2 + 2 * t * d * d + 2 * n * t * t * d
  assert cost.flops(family, config, 512) == 12 * layer


@pytest.mark.slow
def test_memory_is_measured_in_a_fresh_process():
  result = run._memory_in_subprocess("bert_base", TINY_SETTINGS, 32, 2)
  assert result["preset"] == "bert_base" and result["batch_size"] == 2
  # bert_base's word embeddings alone, with two AdamW moments: 30522 x 32 x 4 bytes x 3.
  assert result["steady_bytes"] > 30522 * 32 * 4 * 3
  assert result["peak_bytes"] >= result["steady_bytes"]
  assert result["steady_bytes"] > result["runtime_bytes"]
  assert result["step_bytes"] == result["peak_bytes"] - result["steady_bytes"]
  assert result["model_bytes"] == result["peak_bytes"] - result["runtime_bytes"]
  json.dumps(result)


@pytest.mark.slow
def test_report_has_every_section_with_ratios(tmp_path):
  text = run.run(TINY_SETTINGS, "python -m benchmarks.run --tiny")
  for heading in ("## 1.", "## 2.", "## 3.", "## 5.", "## 6."):
    assert heading in text
  for name in ("rel_transformer_base", *run.FUNNELS, "realformer_base", run.MODEL_GARDEN):
    assert name in text
  assert "| 32 | rel_transformer_base |" in text and "| 1.00× | 1.00× |" in text
  # Every target that applies at length 32 is judged: RealFormer, Model Garden, memory, 2× efficiency.
  assert text.count(": met") + text.count(": MISSED") == 5
  assert "| factorized | 0 | 0 |" in text


@pytest.mark.parametrize("module, options", [
    (run, ("--quick", "--out")), (serving, ("--quick", "--out", "--work-dir")),
    (memory, ("--preset", "--seq-length", "--batch-size")),
    (real_lengths, ("--quick", "--out", "--vocab", "--only")),
    (embeddings, ("--quick", "--out", "--model", "--work"))],
    ids=["run", "serving", "memory", "real_lengths", "embeddings"])
def test_cli_help_lists_the_options(module, options, capsys):
  with pytest.raises(SystemExit) as exit:
    module.main(["--help"])
  assert exit.value.code == 0
  printed = capsys.readouterr().out
  assert all(option in printed for option in options), printed


# ---------------------------------------------------------------------------------------------
# Serving (benchmarks.serving): a tiny classifier exported by the training job's CLI.

TINY_SERVING_MODEL = serving.Model("tiny", (
    "--config", "tpu/configs/demo.json", "--seq-length", "32", "--model-override", "hidden_size=32",
    "--model-override", "num_heads=2", "--model-override", "intermediate_size=64",
    "--model-override", "block_sizes=[1,1,1]"), target=True)
TINY_SERVING = serving.Settings(models=(TINY_SERVING_MODEL,), latency_calls=30, batch_size=8,
                                throughput_rounds=3, warmup=1)


def test_long_texts_fill_the_sequence():
  texts = serving.long_texts(5, 40)
  assert len(texts) == 5 and len(set(texts)) == 5
  assert all(len(text.split()) >= 40 for text in texts)


@pytest.mark.slow
def test_serving_report_of_a_tiny_exported_classifier(tmp_path):
  results = serving.run(TINY_SERVING, str(tmp_path))
  result = results["tiny"]
  assert result["export_dir"] == ModelDir(str(tmp_path / "model_0")).export_version_dir(1)
  assert result["seq_length"] == 32 and 10_000 < result["parameters"] < 100_000
  for key, batch, rounds in (("batch1", 1, 30), ("batched", 8, 3)):
    timed = result[key]
    assert timed["batch"] == batch and timed["rounds"] == rounds
    assert timed["tokens_per_example"] == 32        # the texts fill the sequence
    assert 0 < timed["median"] <= timed["p99"] < 10
    assert timed["throughput"] == pytest.approx(batch / timed["median"])
    # The shares are the medians' ratios. Which median is larger is the benchmark's finding, not
    # this test's: on a model this small, tokenizing costs about what serving does, and a loaded
    # machine orders the two either way.
    assert 0 < timed["tokenize"] and 0 < timed["from_token_ids"]
    assert timed["tokenize_share"] == pytest.approx(timed["tokenize"] / timed["median"])
    assert timed["difference_share"] == pytest.approx(1 - timed["from_token_ids"] / timed["median"])
  text = serving.report(results, TINY_SERVING, "python -m benchmarks.serving --tiny")
  assert text.startswith(serving.SECTION) and "| tiny | 34k | 32 (32) |" in text
  assert text.count(": met") + text.count(": MISSED") == 1

  # Section 7 replaces itself in a report file and leaves the other sections alone.
  report_file = tmp_path / "BENCHMARKS.md"
  report_file.write_text("# Benchmarks\n\n## 6. Efficiency\n\ntable\n")
  serving.write_section(str(report_file), text)
  serving.write_section(str(report_file), text.replace("tiny", "small"))
  written = report_file.read_text()
  assert written.startswith("# Benchmarks\n\n## 6. Efficiency\n\ntable\n\n## 7.")
  assert written.count(serving.SECTION) == 1 and "| small |" in written and "| tiny |" not in written
