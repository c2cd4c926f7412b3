"""The activations of the zoo's tf_keras layers, by the names `zoo.choices.ACTIVATION_NAMES` lists.

The other named choices (position encodings, pooling types and semantics, ...) are
`zoo.choices`, plain Python both editions read; the Keras 3 edition's activations are
`zoo.keras3.layers.transformer_block.ACTIVATIONS`.
"""

import tf_keras as keras

# Activation names -> Keras activations ("gelu_approximate" is the tanh form, which
# Hugging Face calls "gelu_new").
ACTIVATIONS = {
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    "gelu_approximate": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "swish": keras.activations.swish,
}

