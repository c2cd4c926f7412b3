import gc
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The suite runs as several test processes (pytest-xdist), as many as there are cores, beside the
# training processes some tests start: one thread per operation in each (TensorFlow's intra-op pool,
# and OpenMP's for PyTorch and numpy) keeps them from contending for the cores. The processes the
# tests start inherit it.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# One operation at a time in each TensorFlow process, so that two training runs agree to the last
# bit (tests compare a resumed run's losses with an uninterrupted run's exactly). TensorFlow's CPU
# AddN, which sums the gradients of a tensor that several operations read (a relative attention
# reads its query three times), adds its inputs in an order that depends on which input's buffer it may
# reuse when it runs, that is, on which other operations have finished: with two at a time, two
# runs of the same 16 steps differed in the last bits of some losses in about 1 run in 15 (and in
# 0 of 90 with one at a time).
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
# TensorFlow's oneDNN kernels pay a set-up per operation and shape that the suite's small models
# never earn back: without them a test file of encoder checks took 44-48 CPU-s instead of 51-55,
# and one of training jobs and exports 40 instead of 41-46 (alternating runs). The tests' tolerances
# hold either way; the processes the tests start inherit it.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
# Without it, `import tensorflow` loads Keras 3 (and scikit-learn with it) for TensorFlow's own
# Keras attribute, which the project never uses (tests/test_project.py forbids it): 1.4 s of CPU
# in each of the ~60 TensorFlow processes of a run. The Keras 3 tests import `keras` itself,
# which this leaves alone.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# XLA's CPU backend, in this process and the ones the tests start (TensorFlow's jit_compile and every
# JAX function), without LLVM's optimization passes (compiling takes about half the time) and with
# its older code generator for fusions, which compiles a small program in about half the time of
# the fusion emitters (JAX compiles one for every eager operation and shape): the Keras 3 runners
# under JAX took 93 CPU-s instead of 151 (the layer and encoder twins) and 107 instead of 135
# (pre-training), and tests of TensorFlow's jit_compile 4-10% less. The compiled programs' HLO,
# and so their gathers, are the same.
XLA_TEST_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
for _flag in XLA_TEST_FLAGS:
  if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), _flag]))

import pytest  # noqa: E402

# Fails a run whose test processes exceed the memory budget, naming the tests that grew them.
pytest_plugins = ["tests.memory_guard"]


def fast_or_slow(values, fast):
  """`values` as parameters of a test, marked slow unless they are in `fast`: `make test-fast` runs
  those, the full suite all of them."""
  return [pytest.param(value, marks=() if value in fast else pytest.mark.slow) for value in values]


# Growth of resident memory during a test past which the test's garbage is collected at its end,
# and the resident memory past which it is, whatever the test's own growth.
COLLECT_AFTER_GROWTH_BYTES = 200e6
COLLECT_ABOVE_BYTES = 2.5e9
_COLLECTED = {"ceiling": COLLECT_ABOVE_BYTES}


@pytest.fixture(autouse=True)
def _float32_policy():
  """Every test starts and ends with the float32 policy and a fresh Keras graph; a test that grew
  the process by more than COLLECT_AFTER_GROWTH_BYTES, or left it above COLLECT_ABOVE_BYTES, has
  its garbage collected at its end.

  Keras models are reference cycles, which only Python's cyclic collector frees, and it runs by
  counts of Python objects, not bytes: a test that builds a large model from a few objects
  (the full-width presets: hundreds of MB each) would otherwise leave it in memory for many
  tests after it (a worker reached 15 GB). What the collection frees goes back to the system."""
  # Imported here, not with this module: pytest-xdist's controlling process loads this module but
  # runs no test, and would spend about 4 s before starting the test processes.
  import tf_keras as keras

  from tests import memory_guard  # the plugin, imported by pytest_plugins
  keras.mixed_precision.set_global_policy("float32")
  keras.backend.clear_session()
  before = memory_guard.resident()
  yield
  keras.mixed_precision.set_global_policy("float32")
  held = memory_guard.resident()
  if held - before > COLLECT_AFTER_GROWTH_BYTES or held > _COLLECTED["ceiling"]:
    keras.backend.clear_session()
    gc.collect()
    memory_guard.return_free_memory()
    # What a collection leaves is held for good (caches, compiled functions): the next
    # collection by size comes COLLECT_ABOVE_BYTES above it, not after every test.
    _COLLECTED["ceiling"] = max(COLLECT_ABOVE_BYTES, memory_guard.resident() + COLLECT_AFTER_GROWTH_BYTES)


# The modules whose tests take longest (their summed durations, measured on 2 cores), longest
# first: they run first, each module's tests together and in their order (module fixtures are set
# up once). pytest-xdist gives each worker a contiguous share of the collection and an idle worker
# takes the end of another's queue, so the last tests of a session are short ones and neither
# worker waits long for the other at the end. The other modules follow in collection order; the
# order decides speed only, never an outcome.
LONGEST_FIRST = (
    "tests/tpu/test_multi_worker.py", "tests/tpu/test_train.py", "tests/notebooks/test_notebooks.py",
    "tests/tpu/tasks/test_embedding.py", "tests/zoo/keras3/test_text_embedder.py",
    "tests/zoo/convert/test_sentence_transformers.py",
    "tests/zoo/keras3/test_twins.py", "tests/tpu/tasks/test_squad.py", "tests/zoo/convert/test_end_to_end.py",
    "tests/zoo/convert/test_hf_funnel.py", "tests/zoo/convert/test_to_hf.py", "tests/zoo/test_presets.py",
    "tests/benchmarks/test_benchmarks.py",
    "tests/zoo/keras3/test_hf_presets.py", "tests/zoo/keras3/test_pretraining.py",
    "tests/tpu/data/test_records.py",
    "tests/zoo/models/test_funnel_encoder.py",
    "tests/tpu/data/test_shard_writer_faults.py", "tests/tpu/data/test_shard_writer.py",
    "tests/zoo/keras3/test_loading.py", "tests/tpu/test_resume.py",
    "tests/tpu/tasks/test_tagging.py", "tests/zoo/models/test_transformer_encoder.py",
    "tests/export/test_serving_ops.py", "tests/export/test_predict.py",
    "tests/benchmarks/test_input_pipeline.py",
)


def pytest_collection_modifyitems(items):
  rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))   # stable


def shared_file(tmp_path_factory, name, make):
  """`make(path)` once for the whole run, whichever test worker (pytest-xdist) asks first: the
  others wait for its file (the pattern pytest-xdist documents for session fixtures). Without
  workers the run's own temporary directory holds it (its parent is shared by every run).
  Returns the path."""
  from filelock import FileLock

  from zoo.atomic_files import atomic_path
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent   # shared by every worker of this run
  path = root / name
  with FileLock(str(path) + ".lock"):
    if not path.exists():
      with atomic_path(str(path)) as temporary:
        make(temporary)
  return str(path)


PROSE_VOCAB_SIZE = 8000


@pytest.fixture(scope="session")
def prose_vocab(tmp_path_factory):
  """`path(lower_case)`: a WordPiece vocabulary of PROSE_VOCAB_SIZE pieces learned with
  tensorflow-text from every fourth line of the standard library's docstrings (so the other
  lines also meet words it splits or lacks); learned once per run and casing."""
  def path(lower_case):
    def make(out):
      import tensorflow as tf

      from tests.zoo.text.test_reference import stdlib_prose
      from zoo.text.vocab import learn_vocab
      from zoo.text.vocab import write_vocab
      lines = stdlib_prose()[::4]
      write_vocab(learn_vocab(tf.data.Dataset.from_tensor_slices(lines), PROSE_VOCAB_SIZE,
                              lower_case=lower_case), out)
    return shared_file(tmp_path_factory, f"prose-vocab-{'lower' if lower_case else 'cased'}.txt", make)
  return path
