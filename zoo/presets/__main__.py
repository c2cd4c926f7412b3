"""Prints the preset table: parameters and FLOPs against the relative Transformer."""

import argparse
import sys
from collections.abc import Sequence

from zoo import presets
from zoo.logs import command_name
from zoo.presets import cost

# The relative-attention Transformer of each width the papers compare against.
BASELINES = {768: "rel_transformer_base", 1024: "rel_transformer_large"}


def table(seq_length: int) -> str:
  rows = [f"{'preset':28} {'family':11} {'params':>9} {'params/base':>11} {'FLOPs/base':>10}  description"]
  for name in presets.names():
    preset = presets.get(name)
    params = cost.parameter_count(preset.family, preset.config)
    baseline_name = BASELINES.get(preset.hidden_size)
    ratios = "—".rjust(11), "—".rjust(10)
    if baseline_name:
      baseline = presets.get(baseline_name)
      param_ratio = params / cost.parameter_count(baseline.family, baseline.config)
      flop_ratio = (cost.flops(preset.family, preset.config, seq_length)
                    / cost.flops(baseline.family, baseline.config, seq_length))
      ratios = f"{param_ratio:10.2f}x", f"{flop_ratio:9.2f}x"
    rows.append(f"{name:28} {preset.family:11} {params / 1e6:8.1f}M {ratios[0]} {ratios[1]}  "
                f"{preset.description}")
  return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
      prog=command_name("zoo.presets"),
      description="List the encoder presets with parameter counts and the FLOPs ratio to the "
                  "relative-attention Transformer of the same width (rel_transformer_base for "
                  "H768, rel_transformer_large for H1024).")
  parser.add_argument("--seq-length", type=int, default=512, help="sequence length for FLOPs (512)")
  args = parser.parse_args(argv)
  print(table(args.seq_length))
  return 0


if __name__ == "__main__":
  sys.exit(main())
