"""Moving weights between the zoo's editions, and out of its TensorFlow checkpoints, by name.

Imports neither Keras: the Keras 3 edition (`zoo.keras3.weights`) and the tf_keras one
(`python -m zoo.convert keras3`) both use it.

Every weight of a zoo encoder has one name in both editions: the path of the layers that
hold it and the weight's own name, from the encoder's top-level layer down, e.g.
`block_1_layer_0/attention/position_kernel` or `embeddings/word_embeddings/embeddings`.
`tf_keras` writes it as the variable's name (with a `:0` suffix), Keras 3 as the
variable's `path`, and a TensorFlow checkpoint of the encoder records it as each
variable's `full_name`. Weights move by that key alone: every weight of the target is
given exactly one value of the same shape, and anything missing, left over or misshapen
raises `WeightMismatch` naming it.
"""

from collections.abc import Collection
from collections.abc import Mapping
from typing import Any
from typing import TypeVar

import numpy as np

# A zoo encoder or layer of either edition (`tf_keras` or Keras 3), returned as given.
Model = TypeVar("Model", bound=Any)


class WeightMismatch(ValueError):
  """The source weights do not fit the target model (names missing, left over, or shapes)."""


def weight_key(name: str, top_level_names: Collection[str] | None = None) -> str:
  """`"block_0_layer_0/attention/query/kernel:0"` -> `"block_0_layer_0/attention/query/kernel"`.

  With `top_level_names` (the names of the model's own layers), anything above the first
  of them is dropped: the key of a weight does not depend on the models or scopes the
  encoder sits in (`"funnel_backbone/.../block_0_layer_0/..."` -> `"block_0_layer_0/..."`).
  """
  name = name.split(":")[0]
  if top_level_names:
    parts = name.split("/")
    for index, part in enumerate(parts):
      if part in top_level_names:
        return "/".join(parts[index:])
  return name


def _name(variable: Any) -> str:
  # Keras 3 variables have a `path`; tf_keras ones a `name` with the same parts.
  return getattr(variable, "path", None) or variable.name


def named_variables(model: Any) -> dict[str, Any]:
  """`{key: variable}` of a zoo encoder's or layer's weights (either edition), keyed by `weight_key`."""
  top = _top_level_names(model)
  variables = {}
  for variable in model.weights:
    key = weight_key(_name(variable), top)
    if key in variables:
      raise WeightMismatch(f"two weights of {model.name} have the key {key!r}")
    variables[key] = variable
  return variables


def named_arrays(model: Any) -> dict[str, np.ndarray]:
  """`{key: numpy array}` of a zoo encoder's weights: `tf_keras` or Keras 3 alike."""
  return {key: np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable)
          for key, variable in named_variables(model).items()}


def _top_level_names(model: Any) -> set[str]:
  return {layer.name for layer in model.layers} if hasattr(model, "layers") else {model.name}


def assign_named_arrays(model: Model, arrays: Mapping[str, np.ndarray], source: str = "the source") -> Model:
  """Sets every weight of `model` (Keras 3 or tf_keras) from `arrays`, each used once.

  `arrays` maps weight names to values: keys as `weight_key` gives them, tf_keras weight
  names (`...:0`) or checkpoint names, each read through `weight_key`.

  Raises:
    WeightMismatch: a weight of `model` has no array, an array fits no weight, two arrays
      have one key, or shapes differ.
  """
  variables = named_variables(model)
  top = _top_level_names(model)
  keyed = {}
  for name, array in arrays.items():
    key = weight_key(name, top)
    if key in keyed:
      raise WeightMismatch(f"{source} has two weights with the key {key!r}")
    keyed[key] = array
  arrays = keyed
  missing = sorted(set(variables) - set(arrays))
  unused = sorted(set(arrays) - set(variables))
  if missing or unused:
    raise WeightMismatch(f"{source} does not fit {model.name}: "
                         f"missing {missing or 'nothing'}; not used {unused or 'nothing'}")
  misshapen = [f"{key}: {tuple(arrays[key].shape)} for {tuple(variable.shape)}"
               for key, variable in variables.items() if tuple(arrays[key].shape) != tuple(variable.shape)]
  if misshapen:
    raise WeightMismatch(f"{source} does not fit {model.name}: shapes differ: {'; '.join(misshapen)}")
  for key, variable in variables.items():
    dtype = getattr(variable.dtype, "as_numpy_dtype", variable.dtype)   # a tf.DType (tf_keras) or a name
    variable.assign(np.asarray(arrays[key], dtype=np.dtype(dtype)))
  return model


def copy_weights(source: Any, target: Model) -> Model:
  """Copies the weights of one zoo encoder into its twin (`tf_keras` -> Keras 3, or Keras 3 -> Keras 3)."""
  return assign_named_arrays(target, named_arrays(source), source=f"the weights of {source.name}")


def checkpoint_arrays(prefix: str, root: str = "encoder") -> dict[str, np.ndarray]:
  """`{full_name: array}` of the variables under `root` of the TensorFlow checkpoint `prefix`.

  Reads the checkpoint's object graph (TensorFlow's checkpoint format needs TensorFlow,
  whatever the Keras backend; it never imports `tf_keras`) and returns every variable
  reachable from the root object `root` by its recorded name.
  """
  import tensorflow as tf
  from tensorflow.core.protobuf import trackable_object_graph_pb2

  reader = tf.train.load_checkpoint(prefix)
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  roots = {child.local_name: child.node_id for child in graph.nodes[0].children}
  if root not in roots:
    raise WeightMismatch(f"the checkpoint {prefix} has no root {root!r} (it has {sorted(roots)})")
  arrays, seen, stack = {}, set(), [roots[root]]
  while stack:
    node_id = stack.pop()
    if node_id in seen:
      continue
    seen.add(node_id)
    node = graph.nodes[node_id]
    for attribute in node.attributes:
      if attribute.name == "VARIABLE_VALUE":
        arrays[attribute.full_name] = reader.get_tensor(attribute.checkpoint_key)
    stack.extend(child.node_id for child in node.children)
  return arrays
