"""Every weight format `save_pretrained` has written converts to the same model directory, bit for bit.

The PyTorch files (`pytorch_model.bin`, single or sharded with its index) are written here with
`torch.save`, as transformers before safetensors wrote them (transformers 5 saves safetensors only).
"""

import fnmatch
import json
import os
import shutil
import sys

import numpy as np
import pytest
import torch
import transformers

from tests.zoo.convert.test_bert import TINY as BERT_TINY
from tests.zoo.convert.test_hf_funnel import BLOCKS
from tests.zoo.convert.test_hf_funnel import TINY as FUNNEL_TINY
from zoo.convert import hf_hub as hub
from zoo.convert import weights
from zoo.convert.__main__ import main

LENGTH = 16
LAYOUTS = ("safetensors", "safetensors-sharded", "bin", "bin-sharded")


def _write_layout(model, folder, layout):
  """`model` saved in one weight layout, with its config.json."""
  os.makedirs(folder)
  model.config.save_pretrained(folder)
  if layout == "safetensors":
    model.save_pretrained(folder, safe_serialization=True)
  elif layout == "safetensors-sharded":
    model.save_pretrained(folder, safe_serialization=True, max_shard_size="40KB")
    assert os.path.exists(os.path.join(folder, "model.safetensors.index.json"))
  else:
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    if layout == "bin":
      torch.save(state, os.path.join(folder, "pytorch_model.bin"))
    else:   # three shards and the index transformers wrote for them
      names = sorted(state)
      parts = [names[i::3] for i in range(3)]
      weight_map = {}
      for number, part in enumerate(parts, start=1):
        shard = f"pytorch_model-{number:05d}-of-00003.bin"
        torch.save({name: state[name] for name in part}, os.path.join(folder, shard))
        weight_map.update({name: shard for name in part})
      with open(os.path.join(folder, "pytorch_model.bin.index.json"), "w") as file:
        json.dump(dict(metadata=dict(total_size=0), weight_map=weight_map), file)
  return folder


def _contents(directory):
  """`{entry: bytes}` of a model directory's files and checkpoint variables.

  Left out: `source.json` (it names the source) and the checkpoint's own files, whose index
  holds the object graph with Keras names that count the models built in this process
  (conversions in separate processes write the same bytes there too); every variable's
  bytes are in, and so is the `checkpoint` state file.
  """
  import tensorflow as tf
  contents = {}
  for root, _, names in os.walk(directory):
    for name in names:
      relative = os.path.relpath(os.path.join(root, name), directory)
      if relative != "source.json" and not relative.startswith("checkpoints/ckpt-"):
        with open(os.path.join(root, name), "rb") as file:
          contents[relative] = file.read()
  prefix = tf.train.latest_checkpoint(os.path.join(directory, "checkpoints"))
  reader = tf.train.load_checkpoint(prefix)
  for name, _ in tf.train.list_variables(prefix):
    if name.endswith(".ATTRIBUTES/VARIABLE_VALUE"):
      contents[name] = reader.get_tensor(name).tobytes()
  return contents


@pytest.mark.parametrize("kind", [pytest.param("hf-funnel", marks=pytest.mark.slow), "hf-bert"])
def test_every_layout_converts_to_the_same_model_directory(tmp_path, kind):
  torch.manual_seed(5)
  if kind == "hf-funnel":
    model = transformers.FunnelModel(transformers.FunnelConfig(**{**FUNNEL_TINY, **BLOCKS})).eval()
  else:
    model = transformers.BertForPreTraining(transformers.BertConfig(**{**BERT_TINY, "vocab_size": 40})).eval()
  vocab = [f"w{i}" for i in range(model.config.vocab_size)]
  outputs = {}
  for layout in LAYOUTS:
    folder = _write_layout(model, str(tmp_path / layout), layout)
    with open(os.path.join(folder, "vocab.txt"), "w") as file:
      special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
      file.write("".join(f"{token}\n" for token in special + vocab[5:]))
    read = weights.read_weights(folder)
    expected = {name: tensor.numpy() for name, tensor in model.state_dict().items()}
    # safetensors keep one copy of tied tensors (BERT's decoder weight is the word embeddings).
    assert set(read) <= set(expected) and len(read) >= len(expected) - 2
    assert all(np.array_equal(read[name], expected[name]) for name in read)
    out = str(tmp_path / f"out-{layout}")
    assert main([kind, folder, "--out", out, "--seq-length", str(LENGTH)]) == 0
    outputs[layout] = _contents(out)
  reference = outputs["safetensors"]
  assert len(reference) > 4
  for layout in LAYOUTS[1:]:
    assert outputs[layout].keys() == reference.keys(), layout
    assert [name for name in reference if outputs[layout][name] != reference[name]] == [], layout


def test_safetensors_are_preferred_and_broken_layouts_are_named(tmp_path):
  torch.manual_seed(6)
  model = transformers.BertModel(transformers.BertConfig(**{**BERT_TINY, "vocab_size": 40})).eval()
  folder = _write_layout(model, str(tmp_path / "both"), "bin")
  model.save_pretrained(folder, safe_serialization=True)
  assert weights.weight_files(folder)[0] == weights.SAFETENSORS
  os.remove(os.path.join(folder, "model.safetensors"))
  assert weights.weight_files(folder)[0] == weights.PYTORCH
  with open(os.path.join(folder, "pytorch_model.bin"), "r+b") as file:   # a truncated download
    file.truncate(100)
  with pytest.raises(weights.WeightsError, match="pytorch_model.bin: cannot be read as a PyTorch checkpoint"):
    weights.read_weights(folder)
  sharded = _write_layout(model, str(tmp_path / "sharded"), "bin-sharded")
  os.remove(os.path.join(sharded, "pytorch_model-00002-of-00003.bin"))
  with pytest.raises(weights.WeightsError, match="lists shards that are missing"):
    weights.read_weights(sharded)
  with pytest.raises(weights.WeightsError, match="no checkpoint weights .*safetensors.*pytorch_model.bin"):
    weights.read_weights(str(tmp_path))


def test_without_torch_the_error_names_both_ways_out(tmp_path, monkeypatch, capsys):
  torch.manual_seed(7)
  model = transformers.BertModel(transformers.BertConfig(**{**BERT_TINY, "vocab_size": 40})).eval()
  folder = _write_layout(model, str(tmp_path / "bin"), "bin")
  monkeypatch.setitem(sys.modules, "torch", None)   # `import torch` raises ImportError
  assert main(["hf-bert", folder, "--out", str(tmp_path / "out"), "--seq-length", str(LENGTH)]) == 1
  error = capsys.readouterr().err
  assert "pytorch_model.bin is a PyTorch checkpoint, which needs torch to read: install torch" in error
  assert "a revision of the checkpoint that has model.safetensors (--revision)" in error


class FakeHub:
  """`huggingface_hub.snapshot_download` over local folders, one per revision: it copies what the
  patterns allow and records every call."""

  def __init__(self, revisions, root):
    self.revisions, self.root, self.calls = revisions, root, []

  def snapshot_download(self, repo_id, revision=None, allow_patterns=None):
    revision = revision or "main"
    self.calls.append((repo_id, revision, tuple(allow_patterns)))
    snapshot = os.path.join(self.root, repo_id.replace("/", "--"), revision)
    os.makedirs(snapshot, exist_ok=True)
    for name in os.listdir(self.revisions[revision]):
      if any(fnmatch.fnmatch(name, pattern) for pattern in allow_patterns):
        shutil.copy(os.path.join(self.revisions[revision], name), snapshot)
    return snapshot


def test_a_hub_id_downloads_one_format_of_the_revision_asked_for(tmp_path, monkeypatch):
  torch.manual_seed(8)
  model = transformers.BertModel(transformers.BertConfig(**{**BERT_TINY, "vocab_size": 40})).eval()
  main_folder = _write_layout(model, str(tmp_path / "main"), "bin")
  model.save_pretrained(main_folder, safe_serialization=True)   # main: both formats
  old = _write_layout(model, str(tmp_path / "old"), "bin-sharded")   # an old revision: PyTorch only
  fake = FakeHub(dict(main=main_folder, v1=old), str(tmp_path / "cache"))
  monkeypatch.setitem(sys.modules, "huggingface_hub", fake)

  path, source = hub.download("someone/tiny-bert")
  assert sorted(name for name in os.listdir(path) if "model" in name) == ["model.safetensors"]
  assert len(fake.calls) == 1 and source["hub_id"] == "someone/tiny-bert"

  fake.calls.clear()
  path, source = hub.download("someone/tiny-bert", revision="v1")
  assert [call[1] for call in fake.calls] == ["v1", "v1"]   # safetensors asked first, then PyTorch
  assert not any(fnmatch.fnmatch("pytorch_model.bin", p) for p in fake.calls[0][2])
  assert sorted(name for name in os.listdir(path) if name.startswith("pytorch_model")) == [
      "pytorch_model-00001-of-00003.bin", "pytorch_model-00002-of-00003.bin",
      "pytorch_model-00003-of-00003.bin", "pytorch_model.bin.index.json"]
  assert source["revision"] == "v1"
  read = weights.read_weights(path)
  assert all(np.array_equal(read[name], tensor.numpy()) for name, tensor in model.state_dict().items())


def test_revision_is_for_hub_ids_only(tmp_path, capsys):
  assert main(["hf-bert", str(tmp_path), "--revision", "v1", "--out", str(tmp_path / "out")]) == 1
  assert "--revision applies to Hugging Face hub ids" in capsys.readouterr().err
