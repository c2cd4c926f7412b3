"""The pre-training input benchmark on tiny corpora: every field measured, the report in its layout."""

import os

import pytest

from benchmarks import input_pipeline


@pytest.mark.slow
def test_corpus_has_the_size_asked_for(tmp_path):
  size = input_pipeline.write_corpus(str(tmp_path / "corpus.txt"), 0.3)
  assert size == os.path.getsize(tmp_path / "corpus.txt") and 300_000 <= size < 400_000
  documents = (tmp_path / "corpus.txt").read_text(encoding="utf-8").split("\n\n")
  assert len(documents) > 20 and all(document.strip() for document in documents[:-1])


@pytest.mark.slow
def test_measure_and_report(tmp_path):
  results = input_pipeline.measure(0.2, 0.6, seq_length=64, batch=16, batches=5, folder=str(tmp_path),
                                   beam=False)   # Beam's engines are compared in test_shard_writer
  small, large = results["preprocess_small"], results["preprocess_large"]
  assert 0.2 <= small["megabytes"] < 0.3 and 0.6 <= large["megabytes"] < 0.7
  assert large["tokens"] > 2 * small["tokens"] > 0 and large["mb_per_second"] > 0
  assert small["peak_mb"] > 50 and results["memory_ratio"] == large["peak_mb"] / small["peak_mb"]
  assert results["pipeline"]["examples_per_second"] > 0
  table = input_pipeline.report(results)
  assert table.count("\n") == 5 and "examples/s" in table and "MB/s" in table
  results.update(beam1_large=large, beam2_large=large, beam2_small=small, beam2_memory_ratio=1.0,
                 identical=True)
  table = input_pipeline.report(results)
  assert "| Beam DirectRunner, 2 workers, 2 cores | " in table and "byte-identical outputs: yes" in table
