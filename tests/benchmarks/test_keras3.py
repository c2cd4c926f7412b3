"""benchmarks.keras3: both steps alternate in one process per backend, and the section it writes."""

import numpy as np
import pytest

from benchmarks import keras3

TINY = dict(hidden_size=16, num_heads=2, intermediate_size=32, block_sizes=[1, 1, 1], vocab_size=50)


def test_the_steps_alternate_round_by_round_after_a_warm_up():
  calls = []
  times = keras3.alternate(dict(a=lambda: calls.append("a"), b=lambda: calls.append("b")), repeats=3)
  assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]   # warm-up, then ab, ba, ab
  assert {name: [len(times[name]["wall"]), len(times[name]["cpu"])] for name in times} == dict(a=[3, 3],
                                                                                               b=[3, 3])


def _result(keras3_wall, tf_keras_wall, ratio):
  return dict(load=[0.5, 1.25],
              wall=dict(keras3=keras3_wall, tf_keras=tf_keras_wall, ratio=ratio),
              cpu=dict(keras3=keras3_wall, tf_keras=tf_keras_wall, ratio=ratio + 0.1))


def test_the_section_reports_per_process_ratios_and_the_xla_flags_and_replaces_its_old_self(tmp_path):
  results = dict(jax=_result(1.5, 2.0, 0.75), tensorflow=_result(2.5, 2.0, 1.25))
  section = keras3.report("funnel_b4_4_4", 128, 8, 5, results, xla_flags="--xla_backend_optimization_level=0")
  assert "| Keras 3, JAX backend (jit) | 1.500 | 2.000 | 0.75× | 0.85× | 0.5 → 1.2 |" in section
  assert "| Keras 3, TensorFlow backend | 2.500 | 2.000 | 1.25× | 1.35× | 0.5 → 1.2 |" in section
  assert 'XLA_FLAGS "--xla_backend_optimization_level=0"' in section
  assert "no slower than the tf_keras graph step here (0.75×" in section
  assert "XLA_FLAGS unset" in keras3.report("funnel_b4_4_4", 128, 8, 5, results)
  path = tmp_path / "BENCHMARKS.md"
  path.write_text("# Benchmarks\n\n## 8. Earlier\n\ntext\n")
  keras3.write_section(str(path), section)
  keras3.write_section(str(path), keras3.report("funnel_b4_4_4", 128, 8, 5,
                                                dict(results, jax=_result(3.0, 2.0, 1.5))))
  text = path.read_text()
  assert text.count(keras3.SECTION_TITLE) == 1 and "## 8. Earlier\n\ntext\n" in text
  assert "slower than the tf_keras graph step here (1.50×" in text


@pytest.mark.slow
def test_a_run_of_a_tiny_model_times_both_steps_in_a_backends_process():
  # One backend: the worker is the same code under each (`KERAS_BACKEND`); the benchmark runs both.
  results = keras3.run("funnel_b4_4_4", 16, 2, 2, TINY, progress=lambda message: None, backends=("jax",))
  assert sorted(results) == ["jax"]
  for backend, result in results.items():
    assert result["backend"] == backend and result["rounds"] == 2 and len(result["load"]) == 2
    for kind in ("wall", "cpu"):
      assert result[kind]["keras3"] > 0 and result[kind]["tf_keras"] > 0
      assert np.isfinite(result[kind]["ratio"]) and result[kind]["ratio"] > 0
