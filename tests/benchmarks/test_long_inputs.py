"""benchmarks.long_inputs: both attentions of one model timed in one process per length, memory per
process, and the section it writes."""

import json

import pytest

from benchmarks import long_inputs

TINY = dict(num_layers=1, hidden_size=16, num_heads=2, intermediate_size=32, attention_window=8)


def test_the_full_model_is_the_local_one_without_its_window():
  assert long_inputs._overrides("full", TINY, 64) == dict(TINY, attention_window=None, max_sequence_length=64)
  assert long_inputs._overrides("local", TINY, 4096) == dict(TINY, max_sequence_length=4096)


def test_the_section_states_the_ratios_and_whether_the_expectations_hold(tmp_path):
  mb = 2**20
  rows = [dict(seq_length=512, time=dict(full=1.0, local=0.5), memory=dict(full=400 * mb, local=100 * mb),
               step_memory=dict(full=300, local=90)),
          dict(seq_length=4096, time=dict(full=20.0, local=4.0), memory=dict(full=3000 * mb, local=900 * mb),
               step_memory=dict(full=2900, local=800), load=(0.5, 1.25))]
  section = long_inputs.report(rows, 1, 3, TINY)
  assert "| 4096 | 20.000 | 4.000 | 0.20× | 3000 | 900 | 0.30× | 0.28× | 8.0× (8×) | 0.5 → 1.2 |" in section
  assert "XLA_FLAGS unset" in section or "XLA_FLAGS \"" in section
  assert "0.20× full attention's step time (expected ≤ 0.33: met) and 0.30× its memory (expected ≤ 0.25: " \
         "not met)" in section


@pytest.mark.slow
def test_a_tiny_run_measures_both_models(capsys):
  """The command end to end at T = 64 (window 8): its three processes (both models timed in one, each
  model's memory in its own) fill every cell of the row."""
  assert long_inputs.main(["--lengths", "64", "--repeats", "1", "--overrides", json.dumps(TINY)]) == 0
  section = capsys.readouterr().out
  assert long_inputs.SECTION_TITLE in section
  rows = [line for line in section.splitlines() if line.startswith("| 64 ")]
  assert len(rows) == 1 and rows[0].count("×") == 5 and "nan" not in rows[0] and "→" in rows[0]
