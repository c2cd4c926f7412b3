"""Runs the cases of `cases.py` in both editions and reports their largest differences.

The tf_keras side (`reference`) runs in the test process: it builds each case, gives
every weight a random value (so each bias and term of the scores counts), and saves the
weights by their tf_keras names with the inputs' outputs. The Keras 3 side runs once per
backend in a process of its own (`python -m tests.zoo.keras3.twins BACKEND REFERENCE OUT`,
the backend being fixed when Keras is imported): it builds the same cases with
`zoo.keras3`, sets the weights by name (`zoo.named_weights`), and writes the largest
absolute difference of every output, with the checks of that backend (`.keras` files in
safe mode, `mixed_bfloat16`, and under JAX the compiled step and its gathers), as JSON.
"""

import json
import os
import pickle
import sys
import time

import numpy as np

from tests.forward_pass import files_run
from tests.memory_guard import resident
from tests.memory_guard import return_free_memory
from tests.zoo.keras3 import cases

# Under JAX every eager operation compiles an executable per shape and keeps it: hundreds of cases
# grow the process past 3.5 GB. Clearing JAX's caches after every case bounds it near 1.3 GB but
# recompiles each case's operations (2.7 times the time); clearing above this size does neither.
JAX_CACHE_BOUND_BYTES = 2.4e9


def _bound_memory():
  """Drops JAX's compiled executables once the process holds more than `JAX_CACHE_BOUND_BYTES`."""
  import keras
  if keras.backend.backend() != "jax" or resident() < JAX_CACHE_BOUND_BYTES:
    return
  import gc

  import jax
  jax.clear_caches()
  gc.collect()
  return_free_memory()


def _numpy(value):
  if hasattr(value, "detach"):   # torch
    value = value.detach().cpu()
    value = value.float() if value.is_floating_point() else value
  value = np.asarray(value)
  return value.astype(np.float32) if value.dtype.kind == "f" or "bfloat16" in str(value.dtype) else value


def _random_weights(holder, seed):
  """Random values for every weight: layer-norm scales near 1, everything else N(0, 0.3²) in a
  layer and N(0, 0.15²) in an encoder (a stack of them, whose float32 rounding grows with the
  size of its weights)."""
  rng = np.random.default_rng(seed)
  scale = 0.15 if hasattr(holder, "layers") else 0.3
  values = []
  for weight in holder.weights:
    shape = tuple(weight.shape)
    if weight.name.split(":")[0].endswith("gamma"):
      values.append(1.0 + 0.1 * rng.normal(size=shape))
    else:
      values.append(scale * rng.normal(size=shape))
  holder.set_weights([value.astype(np.float32) for value in values])


def reference(path, full_grid=False):
  """tf_keras: every case's weights (by name) and outputs, pickled to `path`; returns the case names.

  The functional encoders are built without AutoGraph: their layers' calls have no control flow on
  tensors (a tensor in a Python `if` or loop would raise while the graph is built)."""
  import tensorflow as tf

  import zoo.layers
  import zoo.models
  lib = _Library(zoo.layers, zoo.models)
  records = {}
  selected = cases.encoder_cases(full_grid=True) if full_grid else {**cases.layer_cases(),
                                                                    **cases.encoder_cases()}
  for seed, (name, case) in enumerate(sorted(selected.items())):
    holder, run = tf.autograph.experimental.do_not_convert(case)(lib)
    if holder is not None and not holder.built:   # layers build on their first call, encoders at once
      run()
    weights = {}
    if holder is not None:
      _random_weights(holder, seed)
      weights = {weight.name: weight.numpy() for weight in holder.weights}
    records[name] = dict(weights=weights, outputs={key: _numpy(value) for key, value in run().items()})
  training = {} if full_grid else _training_reference(lib)
  with open(path, "wb") as file:
    pickle.dump(dict(records=records, full_grid=full_grid, training=training), file)
  return sorted(records)


def _training_reference(lib):
  """tf_keras: for each of `cases.training_cases()`, the weights before and after one step of SGD on
  the loss of `cases.training_targets` (gradients by `tf.GradientTape`, in training mode), and the loss."""
  import tensorflow as tf
  records = {}
  for seed, (name, (class_name, arguments)) in enumerate(sorted(cases.training_cases().items())):
    encoder = getattr(lib, class_name)(**arguments)
    _random_weights(encoder, 50 + seed)
    inputs, targets = cases.every_length_inputs(), cases.training_targets(seed)
    before = {weight.name: weight.numpy() for weight in encoder.trainable_weights}
    with tf.GradientTape() as tape:
      outputs = encoder(inputs, training=True)
      loss = (tf.reduce_sum(outputs["sequence_output"] * targets["seq"])
              + tf.reduce_sum(outputs["pooled_output"] * targets["pooled"])) / cases.LENGTH
    gradients = tape.gradient(loss, encoder.trainable_weights)
    after = {weight.name: weight.numpy() - cases.TRAINING_RATE * tf.convert_to_tensor(gradient).numpy()
             for weight, gradient in zip(encoder.trainable_weights, gradients, strict=True)}
    records[name] = dict(before=before, after=after, loss=float(loss))
  return records


class _Library:
  """The tf_keras names of both packages under one namespace, as `zoo.keras3` has them."""

  def __init__(self, *modules):
    self.modules = modules

  def __getattr__(self, name):
    for module in self.modules:
      if hasattr(module, name):
        return getattr(module, name)
    raise AttributeError(name)


def compare(reference_path, layers=True):
  """Keras 3 (this process's backend): `{case: {output: largest |difference|}}`, without the layer cases
  unless `layers`.

  Under JAX the encoders run as one function compiled by XLA (`_jitted`), the layers eagerly; the
  checks of `_jax_checks` compare the two modes."""
  import keras

  import zoo.keras3
  from zoo.named_weights import assign_named_arrays
  with open(reference_path, "rb") as file:
    stored = pickle.load(file)
  full = stored["full_grid"]
  selected = cases.encoder_cases(full_grid=True) if full else {**cases.layer_cases(), **cases.encoder_cases()}
  compiled = keras.backend.backend() == "jax"
  differences, seconds = {}, {}
  for name, record in sorted(stored["records"].items()):
    if not layers and name not in cases.encoder_cases(full_grid=full):
      continue
    start = time.time()
    holder, run = selected[name](zoo.keras3)
    if holder is not None and not holder.built:   # layers build on their first call, encoders at once
      run()
    elif holder is not None and compiled:   # an encoder: its forward pass compiled by XLA
      run = _jitted(holder, run)
    if holder is not None:
      assign_named_arrays(holder, record["weights"], source=f"the tf_keras weights of {name}")
    outputs = run()
    assert sorted(outputs) == sorted(record["outputs"]), (name, sorted(outputs), sorted(record["outputs"]))
    differences[name] = {}
    for key, expected in record["outputs"].items():
      actual = _numpy(outputs[key])
      assert actual.shape == expected.shape, (name, key, actual.shape, expected.shape)
      difference = np.abs(actual.astype(np.float64) - expected)
      differences[name][key] = float(difference.max()) if actual.size else 0.0
    seconds[name] = time.time() - start
    _bound_memory()
  return differences, seconds


def compare_training(reference_path):
  """Keras 3: each training case trained one step by `train_on_batch` (this backend's gradients, its
  compiled train step, training mode) with SGD from the tf_keras weights: `{case: {"loss": |difference|,
  "weights": largest |difference| of an updated weight, "moved": largest update}}`."""
  import keras

  import zoo.keras3
  from zoo.named_weights import assign_named_arrays
  from zoo.named_weights import named_arrays
  from zoo.named_weights import weight_key
  with open(reference_path, "rb") as file:
    stored = pickle.load(file)["training"]
  if not stored:   # the full grid of Funnel flags: outputs only
    return {}

  def projection(target, output):   # per example: Σ output · target
    return keras.ops.sum(keras.ops.reshape(output * target, (keras.ops.shape(output)[0], -1)), axis=1)

  results = {}
  for seed, (name, (class_name, arguments)) in enumerate(sorted(cases.training_cases().items())):
    record = stored[name]
    encoder = getattr(zoo.keras3, class_name)(**arguments)
    assign_named_arrays(encoder, record["before"], source=f"the tf_keras weights of {name}")
    outputs = encoder(encoder.input)
    model = keras.Model(encoder.input, dict(seq=outputs["sequence_output"], pooled=outputs["pooled_output"]))
    model.compile(optimizer=keras.optimizers.SGD(cases.TRAINING_RATE),
                  loss=dict(seq=projection, pooled=projection))
    loss = model.train_on_batch(cases.every_length_inputs(), cases.training_targets(seed))
    after = named_arrays(encoder)
    expected = {weight_key(key): value for key, value in record["after"].items()}
    before = {weight_key(key): value for key, value in record["before"].items()}
    assert sorted(after) == sorted(expected), (name, sorted(set(after) ^ set(expected)))
    results[name] = dict(
        loss=abs(float(np.asarray(loss).reshape(-1)[0]) - record["loss"]),
        weights=max(float(np.abs(after[key] - expected[key]).max()) for key in expected),
        moved=max(float(np.abs(expected[key] - before[key]).max()) for key in expected))
    _bound_memory()
  return results


def _jitted(holder, run):
  """`run` as one function compiled by `jax.jit`, the holder's variables its arguments."""
  import jax
  import keras

  variables = holder.variables

  def call(values):
    with keras.StatelessScope(state_mapping=list(zip(variables, values, strict=True))):
      return run()
  compiled = jax.jit(call)
  return lambda: compiled([variable.value for variable in variables])


# ---------------------------------------------------------------------------------------------
# The checks of one backend beyond the numbers.


def _layers_model(keras, lib):
  """A functional model of every zoo.keras3 layer, for the `.keras` round trip."""
  inputs = cases.encoder_inputs_spec(keras)
  ids, mask, types = inputs["input_word_ids"], inputs["input_mask"], inputs["input_type_ids"]
  hidden = lib.EncoderEmbeddings(cases.VOCAB, 8, cases.WIDTH, max_sequence_length=32, type_vocab_size=2,
                                 name="embeddings")(ids, types)
  segments = lib.ClsSegmentIds(name="cls_segment_ids")(types)
  block = lib.TransformerBlock(cases.HEADS, cases.HEAD_SIZE, cases.FFN, position_encoding="factorized",
                               use_segment_bias=True, separate_cls=True, residual_attention=True,
                               name="block")
  first = block(hidden, attention_mask=mask, query_segment_ids=segments)
  pooling = lib.FunnelPooling("max", semantics="funnel_authors", name="pooling")
  positions = list(range(cases.LENGTH))
  pooled_positions = pooling.pool_positions(positions).tolist()
  shift = lib.RelativeMultiHeadAttention(cases.HEADS, cases.HEAD_SIZE, position_encoding="shift",
                                         residual_attention=True, name="shift_attention")
  second = shift(pooling(first.output, input_mask=mask), first.output, attention_mask=mask,
                 attention_carry=pooling(first.carry, input_mask=mask, axis=2), layer_index=1,
                 query_positions=pooled_positions, key_positions=positions)
  plain = lib.MultiHeadAttention(cases.HEADS, cases.HEAD_SIZE, name="plain_attention")(
      second.output, attention_mask=pooling.pool_mask(mask))
  upsampled = lib.FunnelUpsampling(2, name="upsampling")(plain.output, target_length=cases.LENGTH)
  return keras.Model(inputs, dict(output=upsampled, carry=second.carry, probs=plain.probs))


def _max_difference(a, b):
  return max(float(np.abs(_numpy(a[key]).astype(np.float64) - _numpy(b[key])).max()) for key in a)


def backend_checks(tmp_dir):
  import keras

  import zoo.keras3
  from zoo.named_weights import copy_weights

  inputs = cases.every_length_inputs()
  checks = {}
  # .keras files, loaded in safe mode: every layer in a functional model, and both encoders.
  models = {
      "layers": _layers_model(keras, zoo.keras3),
      "funnel": zoo.keras3.FunnelEncoder(**cases.TINY_FUNNEL, residual_attention=True, pooling_type="max"),
      "transformer": zoo.keras3.TransformerEncoder(**cases.TINY_TRANSFORMER, norm_first=True),
  }
  for name, model in models.items():
    expected = model(inputs)
    if name != "layers":   # a second call, as a reader follows it (the first also builds the layers)
      checks[f"forward_pass_files_{name}"] = files_run(lambda model=model: model(inputs))
    path = os.path.join(tmp_dir, f"{name}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    actual = loaded(inputs)
    keys = [key for key in expected if key != "encoder_outputs"]
    checks[f"keras_file_{name}"] = _max_difference({k: actual[k] for k in keys},
                                                   {k: expected[k] for k in keys})
    checks[f"config_round_trip_{name}"] = type(model).from_config(model.get_config()).get_config() == \
        model.get_config() if name != "layers" else True
    _bound_memory()

  # mixed_bfloat16: bfloat16 activations; float32 carry, probabilities and layer norms.
  funnel = models["funnel"]
  config = dict(cases.TINY_FUNNEL, residual_attention=True, pooling_type="max", output_attention_probs=True)
  reference_outputs = zoo.keras3.FunnelEncoder(**config)
  copy_weights(funnel, reference_outputs)
  float32 = _numpy(reference_outputs(inputs)["sequence_output"])
  keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    mixed = zoo.keras3.FunnelEncoder(**config)
    block = zoo.keras3.TransformerBlock(cases.HEADS, cases.HEAD_SIZE, cases.FFN,
                                        position_encoding="factorized", residual_attention=True)
    carry = np.zeros([2, cases.HEADS, 8, 8], np.float32)
    block_result = block(cases._hidden(2, 8, 1), attention_carry=carry)
  finally:
    keras.mixed_precision.set_global_policy("float32")
  copy_weights(funnel, mixed)

  def run_mixed():
    return mixed(inputs)
  # Under JAX compiled by XLA, as the encoders of `compare` are.
  outputs = (_jitted(mixed, run_mixed) if keras.backend.backend() == "jax" else run_mixed)()
  sequence = _numpy(outputs["sequence_output"])
  dtype = keras.backend.standardize_dtype
  checks["bfloat16_dtypes"] = dict(
      sequence_output=dtype(outputs["sequence_output"].dtype),
      attention_probs=sorted({dtype(p.dtype) for p in outputs["attention_probs"]}),
      block_output=dtype(block_result.output.dtype), block_carry=dtype(block_result.carry.dtype),
      block_probs=dtype(block_result.probs.dtype), attention_norm=block.attention_norm.compute_dtype,
      kernel=dtype(block.attention.query_dense.kernel.dtype))
  checks["bfloat16_finite"] = bool(np.all(np.isfinite(sequence)))
  checks["bfloat16_vs_float32"] = float(np.abs(sequence - float32).max())
  checks.update(_dtype_argument_checks(keras, zoo.keras3, funnel, config, inputs, sequence, tmp_dir))
  _bound_memory()

  if keras.backend.backend() == "jax":
    checks.update(_jax_checks(zoo.keras3, funnel, inputs))
  return checks


def _dtype_argument_checks(keras, lib, funnel, config, inputs, global_mixed, tmp_dir):
  """The policy given as the encoder's `dtype`, the global policy float32: "mixed_bfloat16" computes
  what the global mixed policy does; "bfloat16" keeps its weights in bfloat16 (layer norms apart),
  also through a `.keras` file."""
  from zoo.named_weights import copy_weights
  dtype = keras.backend.standardize_dtype
  checks = {}
  for policy in ("mixed_bfloat16", "bfloat16"):
    encoder = lib.FunnelEncoder(**config, dtype=policy)
    copy_weights(funnel, encoder)
    outputs = encoder(inputs)
    weights = encoder.weights
    checks[f"argument_{policy}"] = dict(
        policy=encoder.dtype_policy.name, sequence_output=dtype(outputs["sequence_output"].dtype),
        attention_probs=sorted({dtype(p.dtype) for p in outputs["attention_probs"]}),
        weights=sorted({dtype(w.dtype) for w in weights if "norm" not in w.path}),
        norms=sorted({dtype(w.dtype) for w in weights if "norm" in w.path}),
        vs_global_mixed=float(np.abs(_numpy(outputs["sequence_output"]) - global_mixed).max()),
        largest=float(np.abs(global_mixed).max()))
    if policy == "bfloat16":
      path = os.path.join(tmp_dir, "bfloat16.keras")
      encoder.save(path)
      loaded = keras.saving.load_model(path, safe_mode=True)
      checks["argument_bfloat16_keras_file"] = dict(
          policy=loaded.dtype_policy.name,
          weights=sorted({dtype(w.dtype) for w in loaded.weights if "norm" not in w.path}),
          difference=float(np.abs(_numpy(loaded(inputs)["sequence_output"])
                                  - _numpy(outputs["sequence_output"])).max()))
  return checks


def _jax_checks(lib, funnel, inputs):
  """The Funnel encoder and the factorized layer compiled by XLA under JAX; their gathers."""
  import jax

  def stateless(model):
    def call(trainable, non_trainable, x):
      outputs, _ = model.stateless_call(trainable, non_trainable, x, training=False)
      return outputs["sequence_output"]
    return (call, [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables])

  call, trainable, non_trainable = stateless(funnel)
  compiled = jax.jit(call).lower(trainable, non_trainable, inputs).compile()
  eager = _numpy(funnel(inputs)["sequence_output"])
  jitted = _numpy(compiled(trainable, non_trainable, inputs))
  hlo = compiled.as_text()
  encoder_gathers = sum(1 for line in hlo.splitlines() if " gather(" in line)

  layer = lib.RelativeMultiHeadAttention(cases.HEADS, cases.HEAD_SIZE, use_segment_bias=True,
                                         separate_cls=True, residual_attention=True)
  query, value = cases._hidden(2, 4, 1), cases._hidden(2, 8, 2)
  segments_q, segments_k = cases._segments(2, 4, 3), cases._segments(2, 8, 4)
  kwargs = dict(query_positions=[-1, 1, 3, 5], key_positions=list(range(8)), query_segment_ids=segments_q,
                key_segment_ids=segments_k)
  layer(query, value, **kwargs)

  def layer_call(variables, query, value, carry):
    outputs, _ = layer.stateless_call(variables, [], query, value, attention_carry=carry, **kwargs)
    return outputs
  carry = np.zeros([2, cases.HEADS, 4, 8], np.float32)
  jaxpr = str(jax.make_jaxpr(layer_call)([v.value for v in layer.trainable_variables], query, value, carry))
  layer_hlo = jax.jit(layer_call).lower([v.value for v in layer.trainable_variables], query, value,
                                        carry).compile().as_text()
  return dict(jit_vs_eager=float(np.abs(jitted - eager).max()), encoder_hlo_gathers=encoder_gathers,
              factorized_jaxpr_gathers=jaxpr.count("gather"),
              factorized_hlo_gathers=sum(1 for line in layer_hlo.splitlines() if " gather(" in line))


def main(argv):
  backend, reference_path, out_path = argv[:3]
  os.environ["KERAS_BACKEND"] = backend
  start = time.time()
  differences, case_seconds = compare(reference_path, layers="--no-layer-cases" not in argv)
  training = compare_training(reference_path)
  compared = time.time()
  import tempfile
  with tempfile.TemporaryDirectory() as tmp_dir:
    checks = {} if "--no-checks" in argv else backend_checks(tmp_dir)
  import keras
  report = dict(backend=keras.backend.backend(), differences=differences, checks=checks, training=training,
                seconds=dict(compare=compared - start, checks=time.time() - compared, cases=case_seconds))
  with open(out_path, "w") as file:
    json.dump(report, file, indent=1)


if __name__ == "__main__":
  main(sys.argv[1:])
