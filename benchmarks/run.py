"""Speed and memory of the zoo's encoders against the papers' claims and Model Garden.

    python -m benchmarks.run            # the full run; writes BENCHMARKS.md
    python -m benchmarks.run --quick    # fewer rounds and models to measure, under 10 minutes

Everything is measured in one run on this machine and reported as ratios: training
steps are timed interleaved (`benchmarks.measure.interleaved_medians`), peak memory is
read from one fresh process per model (`benchmarks.memory`). Progress goes to stderr,
the report (Markdown) to stdout and to `--out`.

1. Funnel-Transformer vs the relative Transformer L12H768 (Funnel paper, Table 1 and
   Sec. 4.1), training step at lengths 512 and 128.
2. RealFormer vs Post-LN BERT of the same size (RealFormer paper, Sec. 3: residual
   attention adds no multiplications).
3. Factorized vs shift relative attention on this CPU, with the gather ops of each.
4. The zoo's `bert_base` vs Model Garden's `BertEncoderV2` with the same configuration.
5. Peak memory of a training step, Funnel vs the relative Transformer.
6. The training step's achieved FLOP/s against this CPU's matmul peak, float32 and bfloat16.
7. Serving an exported classifier (`benchmarks.serving`): latency at batch 1, throughput at
   batch 32 and the share of the time spent tokenizing.
"""

import argparse
import dataclasses
import gc
import json
import os
import subprocess
import sys
import time

import zoo.presets
from benchmarks import serving
from benchmarks.report import log
from benchmarks.report import machine_description
from benchmarks.report import table
from zoo.atomic_files import write_atomically
from zoo.lazy import lazy_module
from zoo.presets import cost

# TensorFlow, tf_keras and the timing helpers load on first use: `--help` answers without them.
tf = lazy_module("tensorflow")
keras = lazy_module("tf_keras")
measure = lazy_module("benchmarks.measure")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = "rel_transformer_base"
FUNNELS = ("funnel_b4_4_4", "funnel_b6_3x2_3x2", "funnel_b6_6_6")
MODEL_GARDEN = "model_garden_bert_base"

# Published figures: Funnel paper Table 7 (time relative to L12H768 at length 512, GPU and
# TPU v2-8) and its memory comparison at length 512; RealFormer's "no extra multiplications".
PAPER_TIME_512 = {"funnel_b4_4_4": "0.64× GPU, 0.55× TPU", "funnel_b6_6_6": "0.94× GPU, 0.81× TPU"}
PAPER_MEMORY = {"funnel_b4_4_4": "9.0 GB vs 14.3 GB: 0.63× (GPU)"}
# Targets on this machine: (upper or lower bound, "max" or "min").
TIME_TARGETS_512 = {"funnel_b4_4_4": 0.60, "funnel_b6_6_6": 0.90}
REALFORMER_TARGET = 1.03
MODEL_GARDEN_TARGET = 1.00
MEMORY_TARGET = 0.65
EFFICIENCY_TARGET = 0.50


@dataclasses.dataclass
class Settings:
  """What one run measures; `quick()` and `full()` are the two the CLI offers."""
  lengths: tuple = (512, 128)
  tokens_per_batch: int = 2048         # batch size = tokens_per_batch // length
  repeats: int = 7                     # timed rounds per group (after one warm-up round)
  memory_batch_size: int = 8           # at the longest length
  memory_models: tuple = (BASELINE, "funnel_b4_4_4", "funnel_b6_6_6")
  matmul_size: int = 4096
  # Constructor arguments over the presets', per family (smoke tests shrink the models).
  transformer_overrides: dict = dataclasses.field(default_factory=dict)
  funnel_overrides: dict = dataclasses.field(default_factory=dict)

  @classmethod
  def full(cls):
    return cls()

  @classmethod
  def quick(cls):
    return cls(tokens_per_batch=1024, repeats=3, memory_models=(BASELINE, "funnel_b4_4_4"))

  def batch_size(self, length):
    return max(1, self.tokens_per_batch // length)


def _preset_overrides(name, settings):
  family = zoo.presets.get(name).family
  return dict(settings.funnel_overrides if family == "funnel" else settings.transformer_overrides)


def _config(name, settings, **extra):
  preset = zoo.presets.get(name)
  return preset.family, {**preset.config, **_preset_overrides(name, settings), **extra}


def _train_flops(name, settings, length, **extra):
  """Matmul FLOPs of one training step: 3× the forward pass (backward costs two)."""
  family, config = _config(name, settings, **extra)
  return 3 * settings.batch_size(length) * cost.flops(family, config, length)


def _build_encoder(name, settings, length, **extra):
  if name == MODEL_GARDEN:
    return _model_garden_bert(settings)
  return zoo.presets.build(name, seq_length=length, **_preset_overrides(name, settings), **extra)


def _model_garden_bert(settings):
  """Model Garden's BertEncoderV2 configured as the zoo's `bert_base` (exact GELU)."""
  from official.nlp.modeling import networks

  _, config = _config("bert_base", settings)
  return networks.BertEncoderV2(
      vocab_size=config["vocab_size"], hidden_size=config["hidden_size"], num_layers=config["num_layers"],
      num_attention_heads=config["num_heads"], inner_dim=config["intermediate_size"],
      inner_activation=lambda x: keras.activations.gelu(x, approximate=False), type_vocab_size=2,
      max_sequence_length=512)


def _vocab_size(name):
  return zoo.presets.get("bert_base" if name == MODEL_GARDEN else name).config["vocab_size"]


def time_group(models, settings, length, others=None):
  """Interleaved medians of the training steps of `models` ({label: (preset, extra)}) and of
  the callables `others` ({label: callable}), timed in the same rounds."""
  steps = dict(others or {})
  for label, (name, extra) in models.items():
    log(f"building {label} (length {length}, batch {settings.batch_size(length)})")
    encoder = _build_encoder(name, settings, length, **extra)
    steps[label] = measure.TrainStep(encoder, settings.batch_size(length), length, _vocab_size(name))
  log(f"timing {', '.join(steps)}: {settings.repeats} rounds")
  timed = measure.interleaved_medians(steps, settings.repeats, progress=log)
  result = {label: median for label, (median, _) in timed.items()}
  del steps
  keras.backend.clear_session()
  gc.collect()
  return result


def _status(value, bound, kind="max"):
  met = value <= bound if kind == "max" else value >= bound
  return f"{'≤' if kind == 'max' else '≥'} {bound:.2f}: {'met' if met else 'MISSED'}"


def bench_funnel(settings):
  rows = []
  for length in settings.lengths:
    models = {name: (name, {}) for name in (BASELINE, *FUNNELS)}
    medians = time_group(models, settings, length)
    base_flops = _train_flops(BASELINE, settings, length)
    for name in models:
      ratio = medians[name] / medians[BASELINE]
      target = TIME_TARGETS_512.get(name) if length == 512 else None
      rows.append(dict(
          length=length, model=name, seconds=medians[name], ratio=ratio,
          flops_ratio=_train_flops(name, settings, length) / base_flops,
          paper=PAPER_TIME_512.get(name, "") if length == 512 else "",
          target=_status(ratio, target) if target else ""))
  return rows


def bench_bert(settings):
  """Sections 2 and 4 in one group: Post-LN, RealFormer and Model Garden, all BERT-base."""
  rows = []
  for length in settings.lengths:
    models = {"bert_base": ("bert_base", {}), "realformer_base": ("realformer_base", {}),
              MODEL_GARDEN: (MODEL_GARDEN, {})}
    medians = time_group(models, settings, length)
    rows.append(dict(length=length, seconds=medians,
                     realformer_ratio=medians["realformer_base"] / medians["bert_base"],
                     model_garden_ratio=medians["bert_base"] / medians[MODEL_GARDEN]))
  return rows


def _attention_gathers(position_encoding, settings):
  """Gather ops in one relative attention layer's forward + backward graph and HLO."""
  from zoo.layers import RelativeMultiHeadAttention

  _, config = _config(BASELINE, settings)
  width, heads, length = config["hidden_size"], config["num_heads"], 128
  layer = RelativeMultiHeadAttention(heads, width // heads, position_encoding=position_encoding,
                                     use_segment_bias=True)
  hidden = tf.random.normal([1, length, width])
  segments = tf.zeros([1, length], tf.int32)
  layer(hidden, query_segment_ids=segments)

  def forward_backward(hidden):
    with tf.GradientTape() as tape:
      output = layer(hidden, query_segment_ids=segments, query_positions=list(range(length)),
                     key_positions=list(range(length))).output
      loss = tf.reduce_sum(output)
    return loss, tape.gradient(loss, [hidden, *layer.trainable_variables])

  graph = tf.function(forward_backward).get_concrete_function(hidden)
  op_types = measure.graph_op_types(graph)
  return dict(graph_gathers=measure.count_ops(op_types, "gather"),
              hlo_gathers=measure.hlo_gather_count(forward_backward, hidden),
              reshapes_and_slices=sum(measure.count_ops(op_types, kind) for kind in ("reshape", "slice")))


def bench_attention_forms(settings):
  rows = []
  for length in settings.lengths:
    models = {"factorized": (BASELINE, {}), "shift": (BASELINE, {"position_encoding": "shift"})}
    medians = time_group(models, settings, length)
    rows.append(dict(length=length, seconds=medians, ratio=medians["factorized"] / medians["shift"]))
  gathers = {form: _attention_gathers(form, settings) for form in ("factorized", "shift")}
  return dict(rows=rows, gathers=gathers)


def _memory_in_subprocess(name, settings, length, batch_size):
  overrides = _preset_overrides(name, settings)
  code = ("import json, sys; from benchmarks import memory; "
          f"json.dump(memory.measure({name!r}, {length}, {batch_size}, **{overrides!r}), sys.stdout)")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
  if result.returncode:
    raise RuntimeError(f"memory measurement of {name} failed:\n{result.stderr[-3000:]}")
  return json.loads(result.stdout.strip().splitlines()[-1])


def bench_memory(settings):
  length, batch_size = max(settings.lengths), settings.memory_batch_size
  results = {}
  for name in settings.memory_models:
    log(f"peak memory of {name} (length {length}, batch {batch_size}) in a fresh process")
    results[name] = _memory_in_subprocess(name, settings, length, batch_size)
  return dict(length=length, batch_size=batch_size, results=results)


def bench_efficiency(settings):
  """Achieved FLOP/s of bert_base's training step against one large matmul timed in the same
  rounds, in float32 and under mixed_bfloat16 (against a bfloat16 matmul)."""
  rows = []
  for precision, dtype in (("float32", tf.float32), ("mixed_bfloat16", tf.bfloat16)):
    keras.mixed_precision.set_global_policy(precision)
    try:
      for length in settings.lengths:
        matmul = measure.Matmul(dtype, settings.matmul_size)
        label, peak_label = f"bert_base ({precision})", f"{dtype.name} matmul"
        seconds = time_group({label: ("bert_base", {})}, settings, length, others={peak_label: matmul})
        flops = _train_flops("bert_base", settings, length)
        rows.append(dict(length=length, precision=precision, seconds=seconds[label], flops=flops,
                         achieved=flops / seconds[label], peak=matmul.flops / seconds[peak_label]))
    finally:
      keras.mixed_precision.set_global_policy("float32")
  for row in rows:
    row["fraction"] = row["achieved"] / row["peak"]
  return rows


# ---------------------------------------------------------------------------------------------
# The report.


def _memory_row(name, memory):
  gb = 1e9
  measured, base = memory["results"][name], memory["results"][BASELINE]
  ratio = measured["model_bytes"] / base["model_bytes"]
  sizes = ("runtime_bytes", "steady_bytes", "peak_bytes", "model_bytes", "step_bytes")
  return [name, *(f"{measured[key] / gb:.2f}" for key in sizes), f"{ratio:.2f}×",
          f"{measured['step_bytes'] / base['step_bytes']:.2f}×", PAPER_MEMORY.get(name, ""),
          _status(ratio, MEMORY_TARGET) if name == "funnel_b4_4_4" else ""]


def report(settings, command, funnel, bert, forms, memory, efficiency):
  sections = [
      "# Benchmarks",
      f"Machine: {machine_description()}.\n\nCommand: `{command}`. A training step is forward with dropout, "
      "a 2-class head on `pooled_output`, backward and an update by the training job's AdamW (Model Garden) "
      f"(`benchmarks/measure.py`); batch {settings.tokens_per_batch} tokens "
      f"({', '.join(f'{settings.batch_size(n)}×{n}' for n in settings.lengths)}); times are medians of "
      f"{settings.repeats} interleaved rounds after a warm-up round, in seconds. Ratios are taken within "
      "one group of interleaved runs; absolute times vary from run to run on a shared machine.",
      "## 1. Funnel-Transformer vs the relative Transformer L12H768",
      "FLOPs ratio: matmul FLOPs of the step from `zoo.presets.cost`, the work the ratio would show if "
      "every FLOP cost the same.",
      table(["length", "model", "step (s)", "time ratio", "FLOPs ratio", "paper", "target"],
             [[r["length"], r["model"], f"{r['seconds']:.3f}", f"{r['ratio']:.2f}×",
               f"{r['flops_ratio']:.2f}×", r["paper"], r["target"]] for r in funnel]),
      "## 2. RealFormer vs Post-LN (same size) and 4. zoo vs Model Garden BERT-base",
      "Residual attention adds one `[B, N, T, T]` addition per layer and no multiplication. "
      f"`{MODEL_GARDEN}` is `official.nlp.modeling.networks.BertEncoderV2` with `bert_base`'s "
      "configuration (exact GELU, 2 token types).",
      table(["length", "bert_base (s)", "realformer_base (s)", f"{MODEL_GARDEN} (s)",
              "RealFormer / Post-LN", "zoo / Model Garden"],
             [[r["length"], f"{r['seconds']['bert_base']:.3f}", f"{r['seconds']['realformer_base']:.3f}",
               f"{r['seconds'][MODEL_GARDEN]:.3f}",
               f"{r['realformer_ratio']:.3f}× ({_status(r['realformer_ratio'], REALFORMER_TARGET)})",
               f"{r['model_garden_ratio']:.3f}× ({_status(r['model_garden_ratio'], MODEL_GARDEN_TARGET)})"]
              for r in bert]),
      "## 3. Factorized vs shift relative attention",
      f"`{BASELINE}` training step with each form. Gathers: ops whose type contains \"Gather\" in the "
      "TensorFlow graph of one relative attention layer's forward and backward pass, and `gather` "
      "instructions in its XLA HLO (what a TPU runs).",
      table(["length", "factorized (s)", "shift (s)", "factorized / shift"],
             [[r["length"], f"{r['seconds']['factorized']:.3f}", f"{r['seconds']['shift']:.3f}",
               f"{r['ratio']:.2f}×"] for r in forms["rows"]]),
      table(["form", "gather ops (graph)", "gather (HLO)", "reshape and slice ops (graph)"],
             [[form, g["graph_gathers"], g["hlo_gathers"], g["reshapes_and_slices"]]
              for form, g in forms["gathers"].items()]),
      "## 5. Peak memory of a training step",
      f"Length {memory['length']}, batch {memory['batch_size']}, one fresh process per model "
      "(`benchmarks/memory.py`), resident sizes. Runtime: TensorFlow started, no model; steady: with "
      "the weights and AdamW's moments; peak: the largest size during two steps. Model peak = peak − "
      "runtime, what an accelerator would hold (the paper's GPU figures count the same); step = peak − "
      "steady. The target applies to the model peak.",
      table(["model", "runtime (GB)", "steady (GB)", "peak (GB)", "model peak (GB)", "step (GB)",
              "model peak ratio", "step ratio", "paper", "target"],
             [_memory_row(name, memory) for name in memory["results"]]),
      "## 6. Efficiency against this CPU's matmul peak",
      "`bert_base`'s training step, timed in the same rounds as one "
      f"[{settings.matmul_size}, {settings.matmul_size}] × [{settings.matmul_size}, {settings.matmul_size}] "
      "matmul in the step's precision (bfloat16 for `mixed_bfloat16`), whose FLOP/s are the peak. "
      "Achieved: the step's matmul FLOPs (3× the forward pass of `zoo.presets.cost`) over its median time.",
      table(["length", "precision", "step (s)", "GFLOP per step", "achieved GFLOP/s", "peak GFLOP/s",
              "of peak", "target"],
             [[r["length"], r["precision"], f"{r['seconds']:.3f}", f"{r['flops'] / 1e9:.0f}",
               f"{r['achieved'] / 1e9:.0f}", f"{r['peak'] / 1e9:.0f}", f"{r['fraction']:.0%}",
               _status(r["fraction"], EFFICIENCY_TARGET, "min")] for r in efficiency]),
  ]
  return "\n\n".join(sections) + "\n"


def run(settings, command="python -m benchmarks.run", serving_settings=None):
  """Runs every section with `settings` (and section 7 with `serving_settings`, if given); returns
  the Markdown report."""
  started = time.perf_counter()
  funnel = bench_funnel(settings)
  bert = bench_bert(settings)
  forms = bench_attention_forms(settings)
  memory = bench_memory(settings)
  efficiency = bench_efficiency(settings)
  text = report(settings, command, funnel, bert, forms, memory, efficiency)
  if serving_settings:
    text += "\n" + serving.report(serving.run(serving_settings), serving_settings, command)
  minutes = (time.perf_counter() - started) / 60
  return text + f"\nThe run took {minutes:.1f} minutes.\n"


def main(argv=None):
  parser = argparse.ArgumentParser(
      prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
  parser.add_argument("--quick", action="store_true",
                      help="batches of 1024 tokens instead of 2048, 3 timed rounds instead of 7, "
                      "memory of the baseline and funnel_b4_4_4 only")
  parser.add_argument("--out", help="write the report here too (default: BENCHMARKS.md for a full run, "
                      "nothing for --quick)")
  args = parser.parse_args(argv)
  settings = Settings.quick() if args.quick else Settings.full()
  out = args.out or (None if args.quick else os.path.join(ROOT, "BENCHMARKS.md"))
  command = "python -m benchmarks.run" + (" --quick" if args.quick else "")
  text = run(settings, command, serving.Settings.quick() if args.quick else serving.Settings.full())
  print(text)
  if out:
    write_atomically(out, text)
    log(f"wrote {out}")


if __name__ == "__main__":
  main()
