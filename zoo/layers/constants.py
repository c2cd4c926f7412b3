"""The named choices of the zoo's layers and encoders, each defined once.

Layers, encoders and their error messages all read these, so the valid choices a
message lists are always the ones the code accepts. The names live in `zoo.choices`
(plain Python, shared with the Keras 3 edition); this module adds the activations.
"""

import tf_keras as keras

from zoo.choices import ABSOLUTE  # noqa: F401
from zoo.choices import AUTHORS_POOLING  # noqa: F401
from zoo.choices import FACTORIZED  # noqa: F401
from zoo.choices import HF_POOLING  # noqa: F401
from zoo.choices import POOLING_SEMANTICS  # noqa: F401
from zoo.choices import POOLING_TYPES  # noqa: F401
from zoo.choices import POSITION_ENCODINGS  # noqa: F401
from zoo.choices import POSITION_RULES  # noqa: F401
from zoo.choices import RELATIVE_POSITION_ENCODINGS  # noqa: F401
from zoo.choices import SHIFT  # noqa: F401
from zoo.choices import ZOO_POOLING  # noqa: F401
from zoo.choices import check_choice  # noqa: F401

# Activation names -> Keras activations ("gelu_approximate" is the tanh form, which
# Hugging Face calls "gelu_new").
ACTIVATIONS = {
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    "gelu_approximate": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "swish": keras.activations.swish,
}

