"""Strategy resolution; multi-replica runs use 2 logical CPUs in a fresh process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from tpu import strategy as strategy_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_default_strategy_on_one_cpu(monkeypatch, caplog):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  caplog.set_level("INFO")
  strategy = strategy_lib.get_strategy()
  assert strategy is tf.distribute.get_strategy()
  assert "default strategy (one CPU), num_replicas_in_sync=1" in caplog.text


def test_unreachable_tpu_names_what_was_tried(monkeypatch):
  # Connecting to an address that does not answer blocks, so the resolver is made to fail.
  def unreachable(tpu):
    raise ValueError(f"Could not lookup TPU metadata for {tpu}")

  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", unreachable)
  with pytest.raises(RuntimeError, match=r"could not reach the TPU 'my-tpu' \(tried TPUClusterResolver"):
    strategy_lib.get_strategy(tpu="my-tpu")


def test_tf_config_workers_are_counted(monkeypatch):
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {}}))
  assert strategy_lib._num_workers() == 2
  monkeypatch.setenv("TF_CONFIG", "{not json")
  with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
    strategy_lib._num_workers()


@pytest.mark.slow
def test_mirrored_strategy_over_two_logical_cpus_matches_one_device():
  """The same global batch gives the same loss trajectory on 2 replicas as on 1."""
  script = textwrap.dedent("""
      import numpy as np, tensorflow as tf, tf_keras as keras
      cpu = tf.config.list_physical_devices("CPU")[0]
      tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
      from zoo.models import TransformerEncoder, SequenceClassifier

      def run(strategy):
        keras.utils.set_random_seed(0)
        with strategy.scope():
          encoder = TransformerEncoder(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2,
                                       intermediate_size=32, max_sequence_length=8, seq_length=8,
                                       dropout=0.0, attention_dropout=0.0)
          model = SequenceClassifier(encoder, num_classes=2, dropout=0.0)
          model.compile(optimizer=keras.optimizers.SGD(0.5),
                        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        rng = np.random.default_rng(0)
        x = dict(input_word_ids=rng.integers(1, 50, (32, 8)).astype(np.int32),
                 input_mask=np.ones((32, 8), np.int32), input_type_ids=np.zeros((32, 8), np.int32))
        y = (x["input_word_ids"][:, 1] > 25).astype(np.int32)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True)
        return model.fit(data, epochs=3, verbose=0, shuffle=False).history["loss"], strategy

      one, _ = run(tf.distribute.OneDeviceStrategy("/cpu:0"))
      two, mirrored = run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
      assert mirrored.num_replicas_in_sync == 2
      print("LOSSES", one, two, max(abs(a - b) for a, b in zip(one, two)))
      """)
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  line = [ln for ln in result.stdout.splitlines() if ln.startswith("LOSSES")][-1]
  difference = float(line.split()[-1])
  assert difference < 1e-5, line
