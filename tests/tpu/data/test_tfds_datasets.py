"""TFDS sources under tfds.testing.mock_data (no downloads): the common format, splits, options."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tests.tpu.data.source_checks import source_examples as _examples
from tpu import data
from tpu.data.tfds_datasets import tfds_builder

# TFDS, under tfds.testing.mock_data: random text, nothing read from disk or network.

@pytest.mark.parametrize("name, data_type, label_names, pair", [
    ("glue/sst2", "classification", ["negative", "positive"], False),
    ("glue/mrpc", "classification", ["not_equivalent", "equivalent"], True),
    ("glue/stsb", "regression", None, True),
    ("imdb_reviews", "classification", ["neg", "pos"], False),
    ("ag_news_subset", "classification", ["World", "Sports", "Business", "Sci/Tech"], True),
])
def test_tfds_sources_have_the_common_format(name, data_type, label_names, pair):
  with tfds.testing.mock_data(num_examples=6):
    source = data.load(f"tfds:{name}", "train")
    examples = _examples(source)
  assert (source.data_type, source.label_names, source.sentence_pair) == (data_type, label_names, pair)
  assert source.num_classes == (len(label_names) if label_names else 1)
  assert (source.spec, source.split) == (f"tfds:{name}", "train")
  spec = source.dataset.element_spec
  assert sorted(spec) == (["label", "text_a", "text_b"] if pair else ["label", "text_a"])
  assert all(spec[key].dtype == tf.string and spec[key].shape == () for key in spec if key.startswith("text"))
  assert spec["label"].shape == ()
  assert spec["label"].dtype == (tf.int64 if data_type == "classification" else tf.float32)
  assert len(examples) == 6
  if label_names:
    assert all(0 <= example["label"] < len(label_names) for example in examples)


def _fake_as_dataset(requested_splits):
  """A mock `_as_dataset` whose examples say which feature they come from: "<feature> <index>"."""

  def as_dataset(builder, split, decoders=None, read_config=None, **kwargs):
    del decoders, read_config, kwargs
    requested_splits.append(split)
    examples = {}
    for key, feature in builder.info.features.items():
      if isinstance(feature, tfds.features.ClassLabel):
        examples[key] = np.arange(3, dtype=np.int64) % feature.num_classes
      elif feature.dtype == tf.string:
        examples[key] = [f"{key} {i}" for i in range(3)]
      else:
        examples[key] = np.arange(3).astype(feature.dtype.as_numpy_dtype) / 2
    return tf.data.Dataset.from_tensor_slices(examples)

  return as_dataset


@pytest.mark.parametrize("name, split, tfds_split, text_features", [
    ("glue/cola", "validation", "validation", ("sentence",)),
    ("glue/mnli", "validation", "validation_matched", ("premise", "hypothesis")),
    ("glue/mnli", "validation_mismatched", "validation_mismatched", ("premise", "hypothesis")),
    ("glue/qqp", "train", "train", ("question1", "question2")),
    ("glue/qnli", "validation", "validation", ("question", "sentence")),
    ("glue/rte", "train[:10%]", "train[:10%]", ("sentence1", "sentence2")),
    ("glue/wnli", "validation", "validation", ("sentence1", "sentence2")),
    ("glue/stsb", "validation", "validation", ("sentence1", "sentence2")),
    ("imdb_reviews", "validation", "test", ("text",)),
    ("ag_news_subset", "validation", "test", ("title", "description")),
])
def test_tfds_splits_and_features_map_onto_text_a_text_b(name, split, tfds_split, text_features):
  requested = []
  with tfds.testing.mock_data(num_examples=3, as_dataset_fn=_fake_as_dataset(requested)):
    source = data.load(f"tfds:{name}", split)
    examples = _examples(source)
  assert requested == [tfds_split]
  texts = [(example["text_a"], example.get("text_b")) for example in examples]
  expected_b = [f"{text_features[1]} {i}".encode() if len(text_features) == 2 else None for i in range(3)]
  assert texts == list(zip([f"{text_features[0]} {i}".encode() for i in range(3)], expected_b, strict=True))
  labels = [example["label"] for example in examples]
  assert labels == ([0.0, 0.5, 1.0] if name == "glue/stsb" else [0, 1, 2 % source.num_classes])


@pytest.mark.parametrize("split", ["test", "test_matched", "test[:10%]"])
def test_glue_test_splits_are_refused(split):
  with pytest.raises(ValueError, match=r"GLUE test splits carry no labels .* evaluate on split 'validation'"):
    data.load("tfds:glue/mnli", split)


def test_unknown_tfds_datasets_and_splits_name_what_exists():
  with pytest.raises(ValueError, match=r"tfds:squad is not supported; supported datasets: glue/cola, "):
    data.load("tfds:squad")
  with pytest.raises(ValueError, match=r"tfds:glue/sst2 has no split 'dev'; use one of \['train', 'valid"):
    data.load("tfds:glue/sst2", "dev")


def test_tfds_options_choose_columns_drop_labels_and_check_label_names():
  with tfds.testing.mock_data(num_examples=4):
    description_only = data.load("tfds:ag_news_subset", text_columns="description")
    assert not description_only.sentence_pair
    pretraining = data.load("tfds:glue/mrpc", data_type="text")
    assert sorted(pretraining.dataset.element_spec) == ["text_a", "text_b"]
    assert (pretraining.data_type, pretraining.label_names, pretraining.num_classes) == ("text", None, None)
    with pytest.raises(ValueError, match=r"has label names \['negative', 'positive'\], not the label_names"):
      data.load("tfds:glue/sst2", label_names=["bad", "good"])
    with pytest.raises(ValueError, match=r"tfds:glue/sst2 has no feature\(s\) \['title'\]; its features are"):
      data.load("tfds:glue/sst2", text_columns=["title"])
    with pytest.raises(ValueError, match=r"is regression data; data_type can be 'regression' or 'text'"):
      data.load("tfds:glue/stsb", data_type="classification")


# Table files: happy paths.


def _unreachable_builder(name, data_dir, real_builder=tfds_builder):
  """TFDS' builder of `name` in an empty `data_dir`, whose download fails as it does offline."""
  import requests
  builder = real_builder(name, data_dir)

  def download_and_prepare():
    raise requests.ConnectionError("HTTPSConnectionPool(host='dl.fbaipublicfiles.com', port=443): Max "
                                   "retries exceeded with url: /glue/data/SST-2.zip\n(NameResolutionError)")
  builder.download_and_prepare = download_and_prepare
  return builder


def test_a_dataset_that_is_not_prepared_offline_is_one_message_and_the_job_exits_without_a_traceback(
    monkeypatch, tmp_path, capsys):
  from tpu import train
  from tpu.data import tfds_datasets
  builder = _unreachable_builder("glue/sst2", str(tmp_path))
  with pytest.raises(data.DataError) as error:
    tfds_datasets.read(builder, "train", download=True, shuffle_files=False)
  message = str(error.value)
  assert message.startswith(f"tfds:glue/sst2: not prepared in {builder.data_dir} and could not be "
                            "downloaded and prepared here (ConnectionError: HTTPSConnectionPool")
  assert "\n" not in message and "tfds build glue/sst2 --data_dir DIR" in message
  assert message.endswith("set TFDS_DATA_DIR=DIR or pass --data-dir DIR")
  monkeypatch.setattr(tfds_datasets, "tfds_builder", _unreachable_builder)
  code = train.main(["--model", "bert_small", "--task", "classify", "--data", "tfds:glue/sst2", "--data-dir",
                     str(tmp_path), "--model-dir", str(tmp_path / "run"), "--steps", "1"])
  err = capsys.readouterr().err
  assert code == 2 and "Traceback" not in err
  assert err.strip().splitlines()[-1] == f"tpu.train: error: {message}"


def test_a_dataset_out_of_reach_fails_within_seconds_naming_its_hosts_directory_and_the_fix(
    monkeypatch, tmp_path):
  """Offline, TFDS' downloader retries for about 4 minutes; one connection attempt per download host
  (refused here as a machine without network refuses it) ends it before any download starts."""
  import socket
  import time

  from tpu.data import tfds_datasets
  hosts = []

  def no_network(address, timeout=None):
    hosts.append(address)
    raise socket.gaierror(-2, "Name or service not known")

  def no_download(*args, **kwargs):
    raise AssertionError("a download started")

  monkeypatch.setattr(socket, "create_connection", no_network)
  monkeypatch.setattr(tfds.download.DownloadManager, "download", no_download)
  monkeypatch.setattr("urllib.request.getproxies", lambda: {})
  builder = tfds_builder("glue/sst2", str(tmp_path))
  started = time.monotonic()
  with pytest.raises(data.DataError) as error:
    tfds_datasets.read(builder, "train", download=True, shuffle_files=False)
  assert time.monotonic() - started < 10
  glue_hosts = ("bit.ly", "dl.fbaipublicfiles.com", "firebasestorage.googleapis.com")
  assert hosts == [(host, 443) for host in glue_hosts]
  assert str(error.value) == (
      f"tfds:glue/sst2: not prepared in {builder.data_dir} and could not be downloaded and prepared here "
      "(DownloadUnreachable: none of its download hosts answers (bit.ly, dl.fbaipublicfiles.com, "
      "firebasestorage.googleapis.com: [Errno -2] Name or service not known): no network access). Prepare "
      "it where there is network access (`tfds build glue/sst2 --data_dir DIR`, after `pip install "
      "tensorflow-datasets`), copy DIR here and set TFDS_DATA_DIR=DIR or pass --data-dir DIR")
  # Through a proxy the downloader decides; so it does for a dataset whose hosts are not known.
  monkeypatch.setattr("urllib.request.getproxies", lambda: {"https": "http://proxy:3128"})
  tfds_datasets.check_download_hosts(builder)
  assert tfds_datasets.download_hosts(tfds_builder("conll2003", str(tmp_path))) == ["www.aclweb.org"]
