"""TensorFlow Datasets: `tfds:NAME[/CONFIG][:VERSION]`, the datasets of `DATASETS`.

Text classification and regression: GLUE, imdb_reviews and ag_news_subset, each a
`TextDataset` mapping its features onto text_a / text_b / label. Tagging
(`tfds:conll2003`) and question answering (`tfds:squad/v1.1`, `tfds:squad/v2.0`)
are registered here by their own modules (`tpu.data.tagged`, `tpu.data.squad`), with
`register_dataset`.

`split` is "train" or "validation", optionally with a TFDS slice ("train[:10%]").
"validation" means validation_matched for glue/mnli (validation_mismatched is
available by name) and the labelled test split for imdb_reviews and ag_news_subset,
which have no validation split. GLUE test splits are refused: their labels are all -1.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

from tpu.data.source_registry import DataSource
from tpu.data.source_registry import Source
from tpu.data.source_registry import check_same_labels
from tpu.data.source_registry import register
from tpu.data.source_registry import text_columns_tuple
from zoo.lazy import lazy_module

if TYPE_CHECKING:
  from tpu.data.source_registry import DataError

tf = lazy_module("tensorflow")

SCHEME = "tfds"
TRAIN_VALIDATION = {"train": "train", "validation": "validation"}
_TEST_AS_VALIDATION = {"train": "train", "validation": "test", "test": "test"}
# Seconds a download host has to take a connection before a dataset that is not prepared counts as
# out of reach (`check_download_hosts`).
PROBE_SECONDS = 5


@dataclasses.dataclass(frozen=True)
class TextDataset:
  """How one TFDS text dataset maps onto text_a / text_b / label.

  Attributes:
    text_features: one or two Text feature names (text_a, text_b).
    data_type: "classification" (ClassLabel label) or "regression" (float label).
    splits: split name accepted by `load` -> TFDS split name.
    label_feature: the label feature's name.
  """

  text_features: tuple
  data_type: str = "classification"
  splits: dict = dataclasses.field(default_factory=lambda: dict(TRAIN_VALIDATION))
  label_feature: str = "label"

  def load(self, name: str, split: str, *, text_columns: str | Sequence[str] | None, label_column: str | None,
         data_type: str | None, label_names: Sequence[str] | None, num_classes: int | None,
         data_dir: str | None, download: bool, shuffle_files: bool) -> DataSource:
    builder = tfds_builder(name, data_dir)
    tfds_split = split_name(name, split, self.splits)
    features = builder.info.features
    text_features = text_columns_tuple(text_columns) or self.text_features
    label_feature = label_column or self.label_feature
    if data_type not in (None, "text", self.data_type):
      raise ValueError(f"{spec_of(name)} is {self.data_type} data; data_type can be {self.data_type!r} or "
                       f"'text' (drop the labels), got {data_type!r}")
    data_type = data_type or self.data_type
    wanted = text_features + ((label_feature,) if data_type != "text" else ())
    missing = [feature for feature in wanted if feature not in features]
    if missing:
      raise ValueError(f"{spec_of(name)} has no feature(s) {missing}; its features are {sorted(features)}")
    names = list(features[label_feature].names) if data_type == "classification" else None
    dataset, count = read(builder, tfds_split, download, shuffle_files)
    label_dtype = tf.int64 if data_type == "classification" else tf.float32

    def to_example(example):
      converted = {"text_a": example[text_features[0]]}
      if len(text_features) == 2:
        converted["text_b"] = example[text_features[1]]
      if data_type != "text":
        converted["label"] = tf.cast(example[label_feature], label_dtype)
      return converted

    source = DataSource(dataset.map(to_example, num_parallel_calls=tf.data.AUTOTUNE), data_type, names,
                        sentence_pair=len(text_features) == 2, num_examples=count)
    check_same_labels(spec_of(name), source, label_names, num_classes)
    return source


DATASETS: dict[str, Any] = {
    "glue/cola": TextDataset(("sentence",)),
    "glue/sst2": TextDataset(("sentence",)),
    "glue/mrpc": TextDataset(("sentence1", "sentence2")),
    "glue/qqp": TextDataset(("question1", "question2")),
    "glue/mnli": TextDataset(("premise", "hypothesis"),
                             splits={"train": "train", "validation": "validation_matched",
                                     "validation_matched": "validation_matched",
                                     "validation_mismatched": "validation_mismatched"}),
    "glue/qnli": TextDataset(("question", "sentence")),
    "glue/rte": TextDataset(("sentence1", "sentence2")),
    "glue/stsb": TextDataset(("sentence1", "sentence2"), data_type="regression"),
    "glue/wnli": TextDataset(("sentence1", "sentence2")),
    "imdb_reviews": TextDataset(("text",), splits=_TEST_AS_VALIDATION),
    "imdb_reviews/plain_text": TextDataset(("text",), splits=_TEST_AS_VALIDATION),
    "ag_news_subset": TextDataset(("title", "description"), splits=_TEST_AS_VALIDATION),
}


def register_dataset(name: str, dataset: Any) -> None:
  """Adds a dataset: an object with a `data_type` and `load(name, split, **options)` (`TextDataset`'s)."""
  if name in DATASETS:
    raise ValueError(f"{spec_of(name)} is registered already")
  DATASETS[name] = dataset


def spec_of(name: str) -> str:
  """The spec of a TFDS dataset name, e.g. "tfds:glue/sst2"."""
  return f"{SCHEME}:{name}"


def dataset_name(spec: str) -> str | None:
  """The dataset name of a TFDS spec, or None for a spec of another scheme."""
  scheme, _, name = spec.partition(":")
  return name if scheme == SCHEME and name else None


def tfds_builder(name: str, data_dir: str | None) -> Any:
  import tensorflow_datasets as tfds  # slow to import; only TFDS specs need it
  return tfds.builder(name, data_dir=data_dir)


def not_prepared_error(builder: Any, error: BaseException) -> DataError:
  """The DataError of a dataset that is not prepared under its data directory and could not be."""
  from tpu.data.source_registry import DataError
  name = builder.info.full_name.rsplit("/", 1)[0] if "/" in builder.info.full_name else builder.name
  cause = " ".join(f"{type(error).__name__}: {error}".split())
  if len(cause) > 300:
    cause = cause[:300] + " ..."
  return DataError(
      spec_of(name), None,
      f"not prepared in {builder.data_dir} and could not be downloaded and prepared here ({cause}). "
      f"Prepare it where there is network access (`tfds build {name} --data_dir DIR`, after `pip install "
      f"tensorflow-datasets`), copy DIR here and set TFDS_DATA_DIR=DIR or pass --data-dir DIR")


class DownloadUnreachable(OSError):
  """None of a dataset's download hosts answers (no network access): raised before any download."""


def download_hosts(builder: Any) -> list[str]:
  """The hosts a dataset downloads from: those of its checksums file's URLs, else its homepage's."""
  from urllib.parse import urlparse
  urls = list(builder.url_infos or ()) or [builder.info.homepage or ""]
  return sorted({urlparse(url).hostname for url in urls if urlparse(url).hostname})


def check_download_hosts(builder: Any, timeout: float = PROBE_SECONDS) -> None:
  """Raises `DownloadUnreachable` where none of the dataset's download hosts takes a connection.

  TFDS's downloader retries each URL ten times with doubling waits (about 4 minutes in all) before it
  gives up; one connection attempt per host says the same within seconds. Through a proxy
  (`HTTPS_PROXY`, ...) or for a dataset of unknown hosts nothing is checked: the download decides.
  """
  import socket
  import urllib.request
  hosts = download_hosts(builder)
  if not hosts or urllib.request.getproxies():
    return
  errors = []
  for host in hosts:
    try:
      socket.create_connection((host, 443), timeout=timeout).close()
      return
    except OSError as error:
      errors.append(error)
  raise DownloadUnreachable(f"none of its download hosts answers ({', '.join(hosts)}: {errors[0]}): "
                            "no network access")


def _checking_hosts_first(builder):
  """`builder`, whose download (`download_and_prepare` once it decides to download, never under
  `tfds.testing.mock_data`) first checks that its hosts answer (`check_download_hosts`)."""
  make_download_manager = getattr(builder, "_make_download_manager", None)
  if make_download_manager is None:   # another TFDS release: its downloader decides
    return builder

  def checked(*args, **kwargs):
    check_download_hosts(builder)
    return make_download_manager(*args, **kwargs)

  builder._make_download_manager = checked
  return builder


def split_name(name: str, split: str, splits: dict[str, str]) -> str:
  """The TFDS split (with its slice) of a `load` split; errors list the splits."""
  match = re.fullmatch(r"([^\[]*)(\[.*\])?", split)
  assert match is not None, f"split {split!r} is a name with an optional [slice]"
  base, slice_ = match.groups()
  if name.startswith("glue/") and base.startswith("test"):
    raise ValueError(f"{spec_of(name)}: GLUE test splits carry no labels (every label is -1); "
                     "evaluate on split 'validation'")
  if base not in splits:
    raise ValueError(f"{spec_of(name)} has no split {split!r}; use one of {sorted(splits)}")
  return splits[base] + (slice_ or "")


def read(builder: Any, tfds_split: str, download: bool, shuffle_files: bool) -> tuple[Any, int | None]:
  """(the split's `tf.data.Dataset`, its number of examples or None), prepared first if `download`.

  Raises:
    DataError: the dataset is not prepared in its data directory and preparing it failed (no network,
      found within seconds by `check_download_hosts`; a failed download): one message naming the
      dataset, the directory and how to prepare it elsewhere.
  """
  if download and not builder.is_prepared():
    logging.getLogger(__name__).info("%s is not prepared in %s: downloading and preparing it",
                                     builder.info.full_name, builder.data_dir)
    try:
      _checking_hosts_first(builder).download_and_prepare()
    except Exception as error:   # noqa: BLE001  (requests', TFDS' and the file systems' errors alike)
      raise not_prepared_error(builder, error) from None
  elif download:
    builder.download_and_prepare()
  dataset = builder.as_dataset(split=tfds_split, shuffle_files=shuffle_files)
  try:
    count = int(builder.info.splits[tfds_split].num_examples)
  except (KeyError, ValueError):   # not generated (e.g. under tfds.testing.mock_data)
    count = None
  return dataset, count


@register
class TfdsSource(Source):
  scheme = SCHEME
  usage = "tfds:NAME[/CONFIG]"
  description = "a TensorFlow Datasets dataset (GLUE, imdb_reviews, ag_news_subset, conll2003, squad)"
  options = frozenset({"text_columns", "label_column", "data_type", "label_names", "num_classes", "data_dir",
                       "download", "shuffle_files"})
  data_types = ("classification", "regression", "text", "tagging", "question_answering")
  splits = ("train", "validation")

  def load(self, target: str, split: str, **options: Any) -> DataSource:
    dataset = DATASETS.get(target.partition(":")[0])
    if dataset is None:
      others = ", ".join(source.usage for source in _table_sources())
      raise ValueError(f"{spec_of(target)} is not supported; supported datasets: {', '.join(DATASETS)}. "
                       f"Other data can be read from {others} files")
    return dataset.load(target, split, **options)

  def input_files(self, target: str, data_dir: str | None = None) -> list[str] | None:
    """The prepared dataset's files (its version's folder: record shards, dataset_info.json), or None
    when it is not prepared there."""
    import tensorflow as tf
    try:
      folder = tfds_builder(target, data_dir).data_path
    except Exception:   # noqa: BLE001  (an unknown name is refused by `load`, which runs first)
      return None
    folder = str(folder)
    if not tf.io.gfile.isdir(folder):
      return None
    paths = (os.path.join(folder, name) for name in tf.io.gfile.listdir(folder))
    return sorted(path for path in paths if not tf.io.gfile.isdir(path))


def _table_sources():
  from tpu.data.source_registry import SOURCES
  return [source for source in SOURCES.values() if source.typed_by_caller]
