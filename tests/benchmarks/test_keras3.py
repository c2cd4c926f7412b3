"""benchmarks.keras3: the section it writes into BENCHMARKS.md (the timings themselves are a run's)."""

from benchmarks import keras3


def test_the_section_reports_ratios_to_the_tf_keras_step_and_replaces_its_old_self(tmp_path):
  results = dict(tf_keras=2.0, jax=1.5, tensorflow=2.5)
  section = keras3.report("funnel_b4_4_4", 128, 8, 5, results)
  assert "| Keras 3, JAX backend (jit) | 1.500 | 0.75× |" in section
  assert "| Keras 3, TensorFlow backend | 2.500 | 1.25× |" in section
  assert "no slower than the tf_keras graph step here (0.75×" in section
  path = tmp_path / "BENCHMARKS.md"
  path.write_text("# Benchmarks\n\n## 8. Earlier\n\ntext\n")
  keras3.write_section(str(path), section)
  keras3.write_section(str(path), keras3.report("funnel_b4_4_4", 128, 8, 5, dict(results, jax=3.0)))
  text = path.read_text()
  assert text.count(keras3.SECTION_TITLE) == 1 and "## 8. Earlier\n\ntext\n" in text
  assert "slower than the tf_keras graph step here (1.50×" in text
