import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tf_keras as keras  # noqa: E402


@pytest.fixture(autouse=True)
def _float32_policy():
  """Every test starts and ends with the float32 policy and a fresh Keras graph."""
  keras.mixed_precision.set_global_policy("float32")
  keras.backend.clear_session()
  yield
  keras.mixed_precision.set_global_policy("float32")
