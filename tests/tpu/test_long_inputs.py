"""The long-input presets pre-trained by the training job on packed 4096-token shards of real long
documents: the standard library's longest docstrings, through `tpu.pretraining_data`'s shard writer
and `--data tfrecord:...`, at a small width on CPU."""

import numpy as np
import pytest
import tensorflow as tf

from tpu import train
from tpu.config import TrainConfig
from tpu.data import pydocs
from tpu.data import shard_writer
from zoo.model_dir import ModelDir
from zoo.text import load_vocab

T = 4096
SMALL = dict(hidden_size=32, num_heads=2, intermediate_size=64)


def _long_documents():
  """The train split's documents of over 3,000 words (9 of them, up to 8,000 words), one per
  blank-line-separated block, a paragraph per line."""
  documents = [text for _, text in pydocs.documents("train") if len(text.split()) > 3000]
  assert len(documents) >= 5
  return documents


@pytest.mark.slow
def test_long_presets_pretrain_on_packed_4096_token_shards_of_long_documents(prose_vocab, tmp_path):
  corpus = tmp_path / "long_docs.txt"
  corpus.write_text("\n\n".join("\n".join(line for line in text.split("\n") if line.strip())
                                for text in _long_documents()) + "\n", encoding="utf-8")
  vocab = prose_vocab(True)
  records = tmp_path / "records"
  shard_writer.write_pretraining_data([str(corpus)], vocab, T, str(records), 2, progress=False)
  sep = load_vocab(vocab).index("[SEP]")
  parse = lambda record: tf.io.parse_single_example(   # noqa: E731
      record, {"input_word_ids": tf.io.FixedLenFeature([T], tf.int64)})["input_word_ids"]
  examples = [ids for path in sorted(records.glob("*.tfrecord"))
              for ids in tf.data.TFRecordDataset(str(path)).map(parse).as_numpy_iterator()]
  # Packed: full 4096-token examples, the corpus's tail apart.
  assert len(examples) >= 4 and sum(ids[-1] == 0 for ids in examples) <= 1
  # Real long documents: a run of over 2,048 tokens without a document boundary ([SEP]), the example's
  # ends counting as boundaries.
  longest = max(np.diff(np.concatenate([[0], np.flatnonzero(ids == sep), [T]])).max() for ids in examples)
  assert longest > 2048

  for model, overrides in (("realformer_base_long", dict(SMALL, num_layers=2)),
                           ("funnel_b4_4_4_decoder_long", dict(SMALL, block_sizes=(1, 1, 1)))):
    model_dir = tmp_path / model
    config = TrainConfig(model=model, model_overrides=overrides, task="mlm",
                         data=f"tfrecord:{records}/*.tfrecord",
                         vocab=vocab, model_dir=str(model_dir), seq_length=T, batch_size=1, steps=4,
                         max_predictions_per_seq=200, learning_rate=3e-3, warmup_steps=0, checkpoint_every=4,
                         export=False)
    train.run(config)
    settings = ModelDir(str(model_dir)).read_config()
    assert settings["seq_length"] == T and settings["model"] == model
    losses = [record["loss"] for record in ModelDir(str(model_dir)).read_history() if "loss" in record]
    print(f"{model} at T={T}: losses {np.round(losses, 3).tolist()}")
    assert len(losses) == 4 and np.isfinite(losses).all() and losses[-1] < losses[0]
