"""Full vs local attention at growing lengths: training-step time and peak memory of the same model.

    python -m benchmarks.long_inputs                        # T = 512 ... 8192; prints the table
    python -m benchmarks.long_inputs --out BENCHMARKS.md    # also writes it as section 11

The model is `realformer_base_long` (RealFormer, block-local attention with a window of 128
keys on each side and [cls] global, `zoo.windows`) at a size this CPU trains at 8192 tokens with
full attention (`--overrides`, default 2 layers, H256, A4, F1024), against the same model with
full attention (`attention_window=None`), batch 1.

- **Time**: for each length, one process builds both models and runs their training steps
  (`benchmarks.measure.TrainStep`: dropout on, a 2-class head, backward, AdamW; graph mode)
  in turn, the order rotated every round, after a warm-up step (`interleaved_medians`); a
  ratio is the ratio of the two medians.
- **Memory**: a fresh process per model and length (`benchmarks.memory`): the peak resident
  size over two training steps less the runtime's, i.e. weights, slots, gradients and the
  activations the backward pass keeps. Which model of a length goes first alternates.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION_TITLE = "## 11. Long inputs: local vs full attention from 512 to 8192 tokens"
PRESET = "realformer_base_long"
LENGTHS = (512, 1024, 2048, 4096, 8192)
SMALL = dict(num_layers=2, hidden_size=256, num_heads=4, intermediate_size=1024)
MODES = ("full", "local")
MB = 2**20


def _overrides(mode, overrides, seq_length):
  values = dict(overrides, max_sequence_length=max(seq_length, overrides.get("max_sequence_length", 0)))
  if mode == "full":
    values["attention_window"] = None
  return values


def time_worker(seq_length, batch_size, repeats, overrides):
  """Both models' median step times at one length, in this process."""
  import zoo.presets
  from benchmarks.measure import TrainStep
  from benchmarks.measure import interleaved_medians
  vocab_size = zoo.presets.get(PRESET).config["vocab_size"]
  steps = {mode: TrainStep(zoo.presets.build(PRESET, seq_length=seq_length, **_overrides(mode, overrides,
                                                                                          seq_length)),
                           batch_size, seq_length, vocab_size)
           for mode in MODES}
  medians = interleaved_medians(steps, repeats,
                                progress=lambda message: print(f"T={seq_length}: {message}", file=sys.stderr))
  return {mode: dict(median=median, times=times) for mode, (median, times) in medians.items()}


def _run(arguments, what):
  result = subprocess.run([sys.executable, "-m", *arguments], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              filter(None, [ROOT, os.environ.get("PYTHONPATH")]))))
  if result.returncode:
    raise RuntimeError(f"{what} failed:\n{result.stderr[-4000:]}")
  return json.loads(result.stdout.strip().splitlines()[-1])


def run(lengths, batch_size, repeats, overrides, progress=print):
  """`[{seq_length, time: {mode: median s}, memory: {mode: model bytes}}]`, one row per length."""
  rows = []
  for index, seq_length in enumerate(lengths):
    progress(f"T={seq_length}: timing both models")
    load_before = os.getloadavg()[0]
    times = _run(["benchmarks.long_inputs", "--worker", "--lengths", str(seq_length), "--batch-size",
                  str(batch_size), "--repeats", str(repeats), "--overrides", json.dumps(overrides)],
                 f"the timing process at T={seq_length}")
    load = (load_before, os.getloadavg()[0])
    memory = {}
    for mode in (MODES if index % 2 == 0 else MODES[::-1]):
      progress(f"T={seq_length}: peak memory of the {mode}-attention model")
      memory[mode] = _run(["benchmarks.memory", "--preset", PRESET, "--seq-length", str(seq_length),
                           "--batch-size", str(batch_size), "--overrides",
                           json.dumps(_overrides(mode, overrides, seq_length))],
                          f"the memory process of the {mode}-attention model at T={seq_length}")
    rows.append(dict(seq_length=seq_length, time={mode: times[mode]["median"] for mode in MODES},
                     memory={mode: memory[mode]["model_bytes"] for mode in MODES},
                     step_memory={mode: memory[mode]["step_bytes"] for mode in MODES}, load=load))
  return rows


def report(rows, batch_size, repeats, overrides):
  from benchmarks.report import machine_description
  from benchmarks.report import table
  from zoo import presets
  window = presets.get(PRESET).config["attention_window"]
  xla_flags = json.dumps(os.environ["XLA_FLAGS"]) if os.environ.get("XLA_FLAGS") else "unset"
  first = rows[0]
  lines = [SECTION_TITLE, "",
           f"`python -m benchmarks.long_inputs --out BENCHMARKS.md`: `{PRESET}` with "
           f"`{json.dumps(overrides)}` (local attention, window {window}, [cls] global) against the same "
           f"model with full attention; batch {batch_size}, median of {repeats} interleaved training steps "
           "(graph mode); memory: the peak over two steps less the runtime's size, each in a process of "
           "its own (the step's own: less the weights' and AdamW slots' too). Machine: "
           + machine_description() + f"; XLA_FLAGS {xla_flags}; the load column is the 1-minute load "
           "average when each length's timing process began and ended.", ""]
  body = []
  for row in rows:
    full_time, local_time = row["time"]["full"], row["time"]["local"]
    full_memory, local_memory = row["memory"]["full"], row["memory"]["local"]
    step_ratio = row["step_memory"]["local"] / row["step_memory"]["full"]
    body.append([row["seq_length"], f"{full_time:.3f}", f"{local_time:.3f}", f"{local_time / full_time:.2f}×",
                 f"{full_memory / MB:.0f}", f"{local_memory / MB:.0f}", f"{local_memory / full_memory:.2f}×",
                 f"{step_ratio:.2f}×",
                 f"{local_time / first['time']['local']:.1f}× "
                 f"({row['seq_length'] / first['seq_length']:.0f}×)",
                 " → ".join(f"{value:.1f}" for value in row.get("load", ()))])
  lines.append(table(["T", "full step (s)", "local step (s)", "time local/full", "full peak (MB)",
                      "local peak (MB)", "memory local/full", "step's own memory local/full",
                      "local step vs T=" + str(first["seq_length"]) + " (length ratio)", "load"], body))
  at_4096 = next((row for row in rows if row["seq_length"] == 4096), None)
  if at_4096:
    time_ratio = at_4096["time"]["local"] / at_4096["time"]["full"]
    memory_ratio = at_4096["memory"]["local"] / at_4096["memory"]["full"]
    lines += ["", f"At T=4096 local attention takes {time_ratio:.2f}× full attention's step time (expected "
              f"≤ 0.33: {'met' if time_ratio <= 1 / 3 else 'not met'}) and {memory_ratio:.2f}× its memory "
              f"(expected ≤ 0.25: {'met' if memory_ratio <= 0.25 else 'not met'})."]
  return "\n".join(lines) + "\n"


def main(argv=None):
  parser = argparse.ArgumentParser(prog="python -m benchmarks.long_inputs",
                                   description=__doc__.split("\n\n")[0])
  parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)),
                      help="comma-separated sequence lengths")
  parser.add_argument("--batch-size", type=int, default=1)
  parser.add_argument("--repeats", type=int, default=3, help="timed rounds per length (after a warm-up)")
  parser.add_argument("--overrides", default=json.dumps(SMALL),
                      help=f"encoder arguments over {PRESET}'s, as JSON")
  parser.add_argument("--out", help="write the section into this Markdown file (BENCHMARKS.md)")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  lengths = [int(length) for length in args.lengths.split(",")]
  overrides = json.loads(args.overrides)
  if args.worker:
    print(json.dumps(time_worker(lengths[0], args.batch_size, args.repeats, overrides)))
    return 0
  rows = run(lengths, args.batch_size, args.repeats, overrides,
             progress=lambda message: print(message, file=sys.stderr))
  section = report(rows, args.batch_size, args.repeats, overrides)
  from benchmarks.keras3 import publish
  publish(section, args.out, SECTION_TITLE)
  return 0


if __name__ == "__main__":
  sys.exit(main())
