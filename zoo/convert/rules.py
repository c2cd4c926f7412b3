"""How one checkpoint weight becomes one zoo variable, and back.

Every converter lists its weights as entries `(checkpoint name, zoo variable, Rule)`.
A `Rule` knows the checkpoint's shape for a zoo variable's shape (`expected`), turns
the checkpoint's array into the variable's value (`to_zoo`) and the variable's value
back into the checkpoint's array (`to_source`), so the same entries import a checkpoint
and export one (`zoo.convert.to_hf.weights`).

Axes: the zoo's dense kernels are `[inputs..., outputs...]` (`EinsumDense` keeps the
heads as axes of their own: `[D, N, H]`, `[N, H, D]`); a torch `Linear.weight` is
`[out, in]`, flat; a TF1 kernel is `[in, out]`, flat.

Example:
  >>> import numpy as np
  >>> rule = torch_linear(1)                        # [N·H, D] <-> [D, N, H]
  >>> rule.expected((4, 2, 3))
  (6, 4)
  >>> kernel = np.arange(24.0).reshape(4, 2, 3)
  >>> np.array_equal(rule.to_zoo(rule.to_source(kernel, (4, 2, 3)), (4, 2, 3)), kernel)
  True
"""

import typing
from collections.abc import Iterable

import numpy as np


class Rule(typing.NamedTuple):
  """`expected(zoo shape) -> checkpoint shape`, `to_zoo(array, zoo shape)`, `to_source(value, zoo shape)`."""
  expected: typing.Callable
  to_zoo: typing.Callable
  to_source: typing.Callable


def _split(shape, input_axes):
  return int(np.prod(shape[:input_axes])), int(np.prod(shape[input_axes:]))


def torch_linear(input_axes: int) -> Rule:
  """A torch `Linear.weight` `[out, in]` <-> a kernel whose first `input_axes` axes are the input."""
  return Rule(lambda shape: _split(shape, input_axes)[::-1],
              lambda value, shape: value.T.reshape(shape),
              lambda value, shape: np.reshape(value, _split(shape, input_axes)).T)


def tf1_kernel(input_axes: int) -> Rule:
  """A TF1 dense kernel `[in, out]` <-> a kernel whose first `input_axes` axes are the input."""
  return Rule(lambda shape: _split(shape, input_axes),
              lambda value, shape: value.reshape(shape),
              lambda value, shape: np.reshape(value, _split(shape, input_axes)))


def flat() -> Rule:
  """A vector <-> a variable of any shape with as many elements (biases `[N·H] <-> [N, H]`)."""
  return Rule(lambda shape: (int(np.prod(shape)),),
              lambda value, shape: value.reshape(shape),
              lambda value, shape: np.reshape(value, (-1,)))


def same() -> Rule:
  """The same shape both ways."""
  return Rule(tuple, lambda value, shape: value, lambda value, shape: value)


def exported(entries: Iterable[tuple[str, typing.Any, Rule]]) -> dict[str, np.ndarray]:
  """`{checkpoint name: float32 array}` of the entries' zoo variables (the inverse of assigning them)."""
  return {name: np.ascontiguousarray(rule.to_source(np.asarray(variable.numpy(), np.float32),
                                                    tuple(variable.shape)))
          for name, variable, rule in entries}
