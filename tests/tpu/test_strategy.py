"""Strategy resolution, the one entry point of the training job and the notebooks; a TPU that does not
open is faked; multi-replica runs use 2 logical CPUs in a fresh process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from tpu import hardware
from tpu import strategy as strategy_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_default_strategy_on_one_cpu(monkeypatch, caplog):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  caplog.set_level("INFO")
  strategy = strategy_lib.get_strategy()
  assert strategy is tf.distribute.get_strategy()
  assert "default strategy (one CPU), num_replicas_in_sync=1" in caplog.text


def _tpu_chips(monkeypatch, *files):
  """This machine's TPU chips, as `tpu.hardware.tpu_device_files` reports them to `get_strategy`."""
  monkeypatch.setattr(hardware, "tpu_device_files", lambda root="/": list(files))


def _tpu_fails_to_open(monkeypatch, error):
  """Makes opening any TPU fail with `error` (a real attempt blocks or needs TPU kernels)."""
  def resolver(tpu):
    raise error

  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)


def _message_of_the_notebooks():
  with pytest.raises(strategy_lib.TPUUnavailableError) as raised:
    strategy_lib.get_strategy(tpu="auto")
  assert isinstance(raised.value, RuntimeError)
  return raised.value


def _message_of_the_training_cli(capsys):
  from tpu import train

  capsys.readouterr()
  assert train.main(["--tpu", "local"]) == 1   # the strategy comes first, before the settings are checked
  err = capsys.readouterr().err
  prefix = "tpu.train: error: "
  assert err.startswith(prefix), err
  return err[len(prefix):].rstrip("\n")


@pytest.mark.parametrize("chip", ["/dev/accel0", "/dev/vfio/0"])
def test_a_tpu_that_does_not_open_is_reported_alike_by_the_notebooks_and_the_training_cli(
    monkeypatch, capsys, chip):
  """`get_strategy(tpu="auto")` on a TPU machine (the notebooks) and `python -m tpu.train --tpu local`
  give the same message: the TPU tried, TensorFlow's whole error, the chips, the devices TensorFlow
  sees, the installed TensorFlow builds and libtpu, and what to do."""
  monkeypatch.delenv("TF_CONFIG", raising=False)
  _tpu_chips(monkeypatch, chip)
  failure = RuntimeError(f"TPU initialization failed: open({chip}): Device or resource busy")
  _tpu_fails_to_open(monkeypatch, failure)

  error = _message_of_the_notebooks()
  assert error.__cause__ is failure
  cli = _message_of_the_training_cli(capsys)
  assert cli == str(error)
  for message in (str(error), cli):
    lines = message.splitlines()
    assert lines[0] == "could not reach the TPU 'local' (tried TPUClusterResolver(tpu='local') and " \
                       "initialize_tpu_system)."
    assert f"Error: {failure}" in lines                     # the whole error, not its first clause
    assert f"TPU device files on this machine: 1 ({chip})." in lines
    assert "Devices TensorFlow sees: CPU:0." in lines
    assert any(line.startswith("Installed: tensorflow-tpu ") and "libtpu " in line for line in lines)
    assert lines[-1].startswith("What to do: ") and "requirements-tpu.txt" in lines[-1]


def test_a_named_tpu_that_does_not_answer_is_named_with_what_to_check(monkeypatch):
  # Connecting to an address that does not answer blocks, so the resolver is made to fail.
  _tpu_chips(monkeypatch)
  _tpu_fails_to_open(monkeypatch, ValueError("Could not lookup TPU metadata for my-tpu"))
  with pytest.raises(strategy_lib.TPUUnavailableError) as raised:
    strategy_lib.get_strategy(tpu="my-tpu")
  message = str(raised.value)
  assert message.startswith("could not reach the TPU 'my-tpu' (tried TPUClusterResolver(tpu='my-tpu')")
  assert "Error: Could not lookup TPU metadata for my-tpu" in message
  assert "TPU device files on this machine: none." in message
  assert "What to do: check that the TPU 'my-tpu' exists" in message


def test_auto_without_tpu_chips_is_the_default_strategy_and_connects_nothing(monkeypatch, caplog):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  _tpu_chips(monkeypatch)
  _tpu_fails_to_open(monkeypatch, AssertionError("no TPU may be opened without TPU chips"))
  caplog.set_level("INFO")
  strategy = strategy_lib.get_strategy(tpu="auto")
  assert strategy is tf.distribute.get_strategy()
  assert "TPU device files: none" in caplog.text and "default strategy (one CPU)" in caplog.text


def test_auto_with_tpu_chips_opens_the_local_tpu(monkeypatch):
  _tpu_chips(monkeypatch, "/dev/vfio/0")
  opened, sentinel = [], tf.distribute.get_strategy()
  monkeypatch.setattr(strategy_lib, "_tpu_strategy", lambda tpu: opened.append(tpu) or sentinel)
  assert strategy_lib.get_strategy(tpu="auto") is sentinel
  assert opened == ["local"]


@pytest.mark.slow
def test_plain_tensorflow_on_tpu_hardware_raises_with_tensorflows_own_error():
  """The real connection, in a fresh process, on a machine said to have a TPU chip: this TensorFlow has
  no TPU kernels, as on a TPU host where the plain build was installed."""
  script = textwrap.dedent("""
      from tpu import hardware, strategy
      hardware.tpu_device_files = lambda root="/": ["/dev/accel0"]
      try:
        strategy.get_strategy(tpu="auto")
      except strategy.TPUUnavailableError as error:
        print(error)
      else:
        raise SystemExit("no error")
  """)
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
  assert result.returncode == 0, result.stdout + result.stderr
  message = result.stdout
  assert "could not reach the TPU 'local'" in message
  assert "ConfigureDistributedTPU" in message             # TensorFlow's own error, kept whole
  assert "TPU device files on this machine: 1 (/dev/accel0)." in message
  assert "Devices TensorFlow sees: CPU:0" in message
  assert "tensorflow-tpu not installed" in message and "requirements-tpu.txt" in message


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
