"""zoo.keras3 against its tf_keras twin under the JAX, TensorFlow and PyTorch backends.

With the tf_keras weights moved over by name, every layer and encoder of `cases.py` must
give the tf_keras outputs (themselves pinned to Hugging Face's and to numpy references
in tests/zoo/layers and tests/zoo/convert) to 1e-5 in float32, on inputs padded to every
length. Each backend runs all cases in one process of its own (`twins.py`), shared by the
tests here; under JAX, where each eager operation compiles a program, the layers are checked
inside the encoders, which run compiled by XLA.
"""

import numpy as np
import pytest

from tests.zoo.keras3 import cases
from tests.zoo.keras3.conftest import BACKENDS
from tests.zoo.keras3.conftest import run_in_backend

TOLERANCE = 1e-5


def _failures(differences, names):
  return {name: {key: value for key, value in differences[name].items() if value > TOLERANCE}
          for name in names if max(differences[name].values()) > TOLERANCE}


# Under JAX the layers are checked inside the encoders, compiled whole (see `backend_report`).
@pytest.mark.slow
@pytest.mark.parametrize("backend", [backend for backend in BACKENDS if backend != "jax"])
def test_layers_equal_their_tf_keras_twins(backend_report, backend):
  report = backend_report(backend)
  assert report["backend"] == backend
  names = sorted(cases.layer_cases())
  assert set(names) <= set(report["differences"])
  assert _failures(report["differences"], names) == {}


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_encoders_equal_their_tf_keras_twins(backend_report, backend):
  differences = backend_report(backend)["differences"]
  names = sorted(cases.encoder_cases())
  assert {"funnel-residual-pool", "transformer-realformer-running-mean"} <= set(names) <= set(differences)
  assert _failures(differences, names) == {}
  # Every output is compared: each layer application and its attention probabilities.
  assert len(differences["funnel-residual-pool"]) == 3 + 4 + 5   # 3 outputs, 4 layer applications, 5 probs


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_keras_files_load_in_safe_mode_and_configs_round_trip(backend_report, backend):
  checks = backend_report(backend)["checks"]
  for name in ("layers", "funnel", "transformer"):
    assert checks[f"keras_file_{name}"] == 0.0
    assert checks[f"config_round_trip_{name}"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_keras_3_encoders_forward_pass_reads_few_files(backend_report, backend):
  checks = backend_report(backend)["checks"]
  for name in ("funnel", "transformer"):
    files = checks[f"forward_pass_files_{name}"]
    assert "zoo/keras3/layers/transformer_block.py" in files and len(files) <= 8, files


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_bfloat16_keeps_the_float32_islands(backend_report, backend):
  checks = backend_report(backend)["checks"]
  assert checks["bfloat16_dtypes"] == dict(
      sequence_output="bfloat16", attention_probs=["float32"], block_output="bfloat16", block_carry="float32",
      block_probs="float32", attention_norm="float32", kernel="float32")
  assert checks["bfloat16_finite"] and checks["bfloat16_vs_float32"] < 0.15
  # The same policies as the encoder's `dtype` argument, the global policy float32.
  mixed, pure = checks["argument_mixed_bfloat16"], checks["argument_bfloat16"]
  assert {**mixed, "vs_global_mixed": 0.0, "largest": 0.0} == dict(
      policy="mixed_bfloat16", sequence_output="bfloat16", attention_probs=["float32"], weights=["float32"],
      norms=["float32"], vs_global_mixed=0.0, largest=0.0)
  # The compiled and eager runs round differently through the stack: a few bfloat16 steps (8 bits of
  # mantissa) at the largest output's magnitude (measured up to 3 steps).
  assert mixed["vs_global_mixed"] <= 4 * 2.0 ** (np.floor(np.log2(mixed["largest"])) - 7)
  assert {**pure, "vs_global_mixed": 0.0, "largest": 0.0} == dict(
      policy="bfloat16", sequence_output="bfloat16", attention_probs=["float32"], weights=["bfloat16"],
      norms=["float32"], vs_global_mixed=0.0, largest=0.0)
  assert pure["vs_global_mixed"] < 0.15
  assert checks["argument_bfloat16_keras_file"] == dict(policy="bfloat16", weights=["bfloat16"],
                                                        difference=0.0)


@pytest.mark.slow
def test_jax_compiles_the_encoder_with_no_gather_in_the_factorized_attention(backend_report):
  checks = backend_report("jax")["checks"]
  assert checks["jit_vs_eager"] < TOLERANCE
  assert checks["factorized_jaxpr_gathers"] == 0 and checks["factorized_hlo_gathers"] == 0
  assert checks["encoder_hlo_gathers"] == 1   # the word-embedding lookup, the only one


@pytest.mark.slow
def test_every_funnel_flag_combination_equals_its_twin(tmp_path):
  """All 64 combinations of the Funnel flags under PyTorch, the backend whose kernels are
  furthest from tf_keras' (a covering set of them, every pair of flag values, runs under every
  backend above; under TensorFlow those equal their twins exactly)."""
  import json

  from tests.zoo.keras3 import twins
  reference = str(tmp_path / "grid.pkl")
  names = twins.reference(reference, full_grid=True)
  assert len(names) == 64
  for backend in ("torch",):
    out = str(tmp_path / f"{backend}.json")
    run_in_backend(backend, "tests.zoo.keras3.twins", backend, reference, out, "--no-checks")
    with open(out) as file:
      differences = json.load(file)["differences"]
    assert sorted(differences) == names
    assert _failures(differences, names) == {}, backend


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_one_training_step_updates_the_weights_as_the_tf_keras_twin_does(backend_report, backend):
  """The same weights, dropout off, one step of SGD in training mode: the backend's gradients (through
  `train_on_batch`, its compiled train step) move every weight as tf_keras' GradientTape does."""
  training = backend_report(backend)["training"]
  assert sorted(training) == sorted(cases.training_cases())
  for name, result in training.items():
    print(f"{backend} {name}: one SGD step, updated weights vs tf_keras: max |diff| {result['weights']:.2e} "
          f"(largest update {result['moved']:.2f}); loss |diff| {result['loss']:.2e}")
    assert result["moved"] > 0.1, (name, result)   # the step moves the weights well beyond the tolerance
    assert result["weights"] < TOLERANCE and result["loss"] < 1e-4, (name, result)
