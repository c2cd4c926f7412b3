"""Token classification (tagging): sentences in windows, words to WordPieces and back, CoNLL's scores.

Each word's label sits on its FIRST WordPiece; the word's other pieces, the special
tokens and padding carry no loss (Devlin et al., 2019, Sec. 5.3).

Windows (`word_windows`): every word of every sentence gets a prediction. A sentence's
pieces are cut into windows of T - 2 pieces, `[CLS] pieces... [SEP]`, that start
`stride` pieces apart (one window when the sentence fits), as BERT's `run_squad.py`
cuts contexts. A window holds the words whose first piece it holds; each word takes
its prediction from the window where it has the most context, `min(pieces before,
pieces after) + 0.01 · window length` (the first such window on ties), so an entity
near a window's edge is read where its neighbours are visible. Training labels every
word of every window. All in TensorFlow ops with static shapes `[K, T]` for the input
pipeline and for serving alike. A word that tokenizes to nothing has no piece, no
window and no prediction (read as "O").

Metrics (`entity_metrics`) are CoNLL's over every gold entity of every sentence, as
`seqeval` computes them: for IOB1 and IOB2 conlleval's chunking (a chunk starts at
`B-X`, or at `I-X` after `O` or after another type; seqeval's default mode), for IOBES
and BILOU the strict chunking of the scheme (an entity is `S-X`/`U-X`, or `B-X`,
`I-X`..., `E-X`/`L-X`, all of one type; anything else is no entity: seqeval's strict
mode). A predicted entity counts when its type and both boundaries equal a gold
entity's; precision, recall and F1 are micro-averaged over all entities, token
accuracy over all words.

Axes: B sentences, K windows, W words of a sentence, P = T - 2 piece slots of a
window, T sequence length, C tags.

Example:
  >>> spans(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
  [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
  >>> spans(["B-PER", "E-PER", "B-LOC", "I-LOC", "S-ORG"], scheme="iobes")
  [('PER', 0, 2), ('ORG', 4, 5)]
  >>> entity_metrics([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
  {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'token_accuracy': 0.6666666666666666, 'entities': 1}
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

import numpy as np

from tpu.data.tagged import OUTSIDE
from tpu.data.tagged import TAG_SCHEMES
from tpu.data.tagged import split_tag
from tpu.tasks.base import Config
from tpu.tasks.base import Features
from tpu.tasks.base import Stats
from tpu.tasks.base import Task
from tpu.tasks.base import build_encoder
from tpu.tasks.base import check_full_length
from tpu.tasks.base import weighted_sum
from tpu.tasks.task_registry import Setting
from tpu.tasks.task_registry import register
from zoo.lazy import lazy_module

if TYPE_CHECKING:
  from tpu.data import DataSource
  from zoo.text import TextEncoder

tf = lazy_module("tensorflow")

# The last and single prefixes of the strict schemes.
_STRICT = {"iobes": ("E", "S"), "bilou": ("L", "U")}


def _parts(tag):
  return split_tag(tag) or (OUTSIDE, None)


def _conlleval_spans(tags):
  found = []
  start, current = None, None
  for index, tag in enumerate(list(tags) + [OUTSIDE]):
    prefix, kind = _parts(tag)
    begins = prefix == "B" or (prefix == "I" and kind != current)
    if current is not None and (prefix == OUTSIDE or begins):
      found.append((current, start, index))
      current = None
    if begins:
      start, current = index, kind
  return found


def _strict_spans(tags, scheme):
  """Well-formed entities only: single, or begin (inside)* last, all of one type."""
  last, single = _STRICT[scheme]
  parts = [_parts(tag) for tag in tags]
  found, index = [], 0
  while index < len(parts):
    prefix, kind = parts[index]
    if prefix == single:
      found.append((kind, index, index + 1))
      index += 1
      continue
    if prefix != "B":
      index += 1
      continue
    end = index + 1
    while end < len(parts) and parts[end][1] == kind and parts[end][0] == "I":
      end += 1
    if end < len(parts) and parts[end] == (last, kind):
      found.append((kind, index, end + 1))
      index = end + 1
    else:
      index = end   # not closed: no entity; read on from where it broke off
  return found


def spans(tags: Sequence[str], scheme: str = "iob2") -> list[tuple[str, int, int]]:
  """The entities of one sentence's tags: `[(type, start, end)]`, end exclusive, in order.

  `scheme` (`tpu.data.tagged.TAG_SCHEMES`): "iob1" and "iob2" chunk as conlleval does,
  "iobes" and "bilou" strictly (see the module docstring). Tags of no known form count
  as outside.
  """
  if scheme not in TAG_SCHEMES:
    raise ValueError(f"unknown tag scheme {scheme!r}; choose one of {', '.join(TAG_SCHEMES)}")
  return _strict_spans(tags, scheme) if scheme in _STRICT else _conlleval_spans(tags)


def entity_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                   scheme: str = "iob2") -> dict[str, float]:
  """Entity precision, recall and F1 and token accuracy over sentences of tag strings.

  Args:
    gold: list of sentences, each a list of tag strings: every word of every sentence.
    predicted: the same shape.
    scheme: the tag scheme (`spans`).

  Returns:
    dict of `precision`, `recall`, `f1` (0 where undefined, as conlleval prints it),
    `token_accuracy` and `entities` (the number of gold entities).
  """
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted ones")
  gold_entities: set[tuple[Any, ...]] = set()
  predicted_entities: set[tuple[Any, ...]] = set()
  correct_tokens, tokens = 0, 0
  for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted, strict=True)):
    if len(gold_tags) != len(predicted_tags):
      raise ValueError(f"sentence {index}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted")
    gold_entities.update((index, *span) for span in spans(gold_tags, scheme))
    predicted_entities.update((index, *span) for span in spans(predicted_tags, scheme))
    correct_tokens += sum(g == p for g, p in zip(gold_tags, predicted_tags, strict=True))
    tokens += len(gold_tags)
  correct = len(gold_entities & predicted_entities)
  precision = correct / len(predicted_entities) if predicted_entities else 0.0
  recall = correct / len(gold_entities) if gold_entities else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return dict(precision=precision, recall=recall, f1=f1,
              token_accuracy=correct_tokens / tokens if tokens else 0.0, entities=len(gold_entities))


def sentence_predictions(windows: dict[str, np.ndarray], num_words: Sequence[int]) -> list[np.ndarray]:
  """Per sentence, the predicted tag id of each word from its max-context window (-1: none).

  Args:
    windows: numpy arrays of the evaluated windows: `example` `[K]` (the sentence),
      `word_index`, `word_predictions` int and `max_context` bool `[K, P]`.
    num_words: the words of each sentence.
  """
  predicted = [np.full([count], -1, np.int64) for count in num_words]
  rows, slots = np.nonzero(windows["max_context"])
  for row, slot in zip(rows, slots, strict=True):
    predicted[int(windows["example"][row])][int(windows["word_index"][row, slot])] = (
        windows["word_predictions"][row, slot])
  return predicted


def word_windows(text_encoder: TextEncoder, words: Any, tags: Any = None, *, stride: int) -> Features:
  """Sentences of words -> their windows (see the module docstring).

  Args:
    text_encoder: a `zoo.text.TextEncoder` (its vocabulary, casing and `seq_length` T).
    words: string `[B, (words)]` ragged (or a `[B, n]` tensor): the words of each sentence.
    tags: optional int `[B, (words)]` tag ids.
    stride: pieces between the starts of a sentence's windows, in `[1, T - 2]`.

  Returns:
    dict of `input_word_ids`, `input_mask`, `input_type_ids` int32 `[K, T]`; `example`
    int32 `[K]`, the window's sentence; per piece slot `[K, P]`: `word_positions` (the
    first piece of each word the window holds, 0 after them), `word_index` (the word's
    index in its sentence, -1 after them), `max_context` (bool: the word's prediction
    comes from this window) and, with `tags`, `word_labels` (-1 after them).
  """
  seq_length = text_encoder.seq_length
  slots = seq_length - 2
  if not 1 <= stride <= slots:
    raise ValueError(f"the window stride must be in [1, {slots}] (seq_length - 2), got {stride}")
  if not isinstance(words, tf.RaggedTensor):
    words = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(words, tf.string))
  pieces = text_encoder.tokenize(words.flat_values)   # [words, (pieces)]: a word may split further
  counts = tf.cast(pieces.row_lengths(), tf.int32)
  starts = tf.cast(words.row_starts(), tf.int32)
  before = tf.cumsum(counts, exclusive=True)   # pieces before each word, over the whole batch
  row_start = tf.gather(tf.concat([before, [tf.reduce_sum(counts)]], 0), starts)
  first = before - tf.repeat(row_start, tf.cast(words.row_lengths(), tf.int32))   # ... within its sentence
  length = tf.reduce_sum(words.with_flat_values(counts), axis=1)   # [B] pieces per sentence
  sentences = tf.shape(length)[0]
  num_windows = tf.where(length <= slots, 1, (length - slots + stride - 1) // stride + 1)
  example = tf.repeat(tf.range(sentences), num_windows)   # [K]
  start = tf.ragged.range(num_windows).flat_values * stride   # [K]
  used = tf.minimum(slots, tf.gather(length, example) - start)   # [K] pieces in the window

  sentence_pieces = words.with_flat_values(pieces).merge_dims(1, 2).to_tensor(text_encoder.pad_id)
  sentence_pieces = tf.pad(sentence_pieces, [[0, 0], [0, 1]], constant_values=text_encoder.pad_id)
  last = tf.shape(sentence_pieces)[1] - 1
  slot = tf.range(slots)[tf.newaxis, :]
  tokens = tf.gather(tf.gather(sentence_pieces, example), tf.minimum(start[:, tf.newaxis] + slot, last),
                     batch_dims=1)   # [K, P]
  position = tf.range(seq_length)[tf.newaxis, :]
  count = used[:, tf.newaxis]
  token_at = tf.gather(tokens, tf.broadcast_to(tf.clip_by_value(position - 1, 0, slots - 1),
                                                [tf.shape(tokens)[0], seq_length]), batch_dims=1)
  ids = tf.where(position == 0, text_encoder.cls_id,
                 tf.where(position <= count, token_at,
                          tf.where(position == count + 1, text_encoder.sep_id, text_encoder.pad_id)))
  features = dict(input_word_ids=tf.cast(ids, tf.int32),
                  input_mask=tf.cast(position <= count + 1, tf.int32),
                  input_type_ids=tf.broadcast_to(tf.where(position == 0, text_encoder.cls_type_id, 0),
                                                 tf.shape(ids)),
                  example=example)

  first_dense = tf.gather(words.with_flat_values(first).to_tensor(-1), example)   # [K, W]
  has_piece = tf.gather(words.with_flat_values(counts).to_tensor(0), example) > 0
  window_start = start[:, tf.newaxis]
  inside = has_piece & (first_dense >= window_start) & (first_dense < window_start + count)
  context = tf.minimum(first_dense - window_start, window_start + count - 1 - first_dense)
  score = tf.where(inside, tf.cast(context, tf.float32) + 0.01 * tf.cast(count, tf.float32), -1.0)
  best = tf.math.unsorted_segment_max(score, example, sentences)   # [B, W]
  index = tf.range(tf.shape(example)[0])[:, tf.newaxis]
  is_best = inside & (score >= tf.gather(best, example))
  first_window = tf.math.unsorted_segment_min(tf.where(is_best, index, tf.int32.max), example, sentences)
  max_context = is_best & (tf.gather(first_window, example) == index)

  def compact(values, fill):   # the window's words to the front of its P slots
    return tf.ragged.boolean_mask(values, inside).to_tensor(fill, shape=[None, slots])

  word_index = tf.broadcast_to(tf.range(tf.shape(first_dense)[1])[tf.newaxis, :], tf.shape(first_dense))
  features.update(word_positions=compact(first_dense - window_start + 1, 0),
                  word_index=compact(word_index, -1), max_context=compact(max_context, False))
  if tags is not None:
    if not isinstance(tags, tf.RaggedTensor):
      tags = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(tags))
    features["word_labels"] = compact(tf.gather(tf.cast(tags, tf.int32).to_tensor(-1), example), -1)
  return features


@register
class TagTask(Task):
  """Token classification (e.g. CoNLL-2003 named entities) on `TokenClassifier`'s logits.

  Sentences become windows (`word_windows`, `--tag-stride`); each word's label sits on
  its first WordPiece, and the loss is the cross-entropy there over the global number
  of labelled words of the windows. Evaluation: every word of every sentence takes
  its prediction from its max-context window, and CoNLL's entity precision, recall
  and F1 (every gold entity counts; `--tag-scheme`, detected from the training tags by
  default) and the token accuracy are computed over whole sentences. Served on raw
  text: each word as it appears in the text, its character offsets, its tag and the
  tag's probability, for every word of the text.
  """

  name = "tag"
  data_type = "tagging"
  description = "token classification, e.g. named entities (fine-tuning)"
  settings = (
      Setting("tag_scheme", str, "auto", "the tags' scheme: how entities are read from them (auto: detected "
              "from the training tags)", choices=("auto", *TAG_SCHEMES), input=True),
      Setting("tag_stride", int, None, "tokens between the starts of a long sentence's windows (default: "
              "half of --seq-length)", minimum=1, input=True),
  )
  stat_names = ("token_accuracy",)
  prediction_fields = (("words", "words", "texts", "num_words"), ("starts", "starts", "list", "num_words"),
                       ("ends", "ends", "list", "num_words"), ("tags", "tags", "texts", "num_words"),
                       ("probabilities", "tag_probabilities", "list", "num_words"))
  # Sentences windowed at once in the input pipeline.
  expand_batch = 64

  @classmethod
  def derived_settings(cls, config: Config) -> dict[str, Any]:
    return dict(tag_stride=config.tag_stride or max(1, (config.seq_length - 2) // 2))

  @classmethod
  def check_config(cls, config: Config) -> None:
    if config.tag_stride is not None and config.tag_stride > config.seq_length - 2:
      raise ValueError(f"tag_stride {config.tag_stride} leaves words of a long sentence in no window: it "
                       f"must be at most seq_length - 2 = {config.seq_length - 2}")

  def data_metadata(self, source: DataSource) -> dict[str, Any]:
    assert source.label_names is not None, "tagging data names its tags"
    names = list(source.label_names)
    scheme = self.config.tag_scheme
    if scheme == "auto":
      scheme = getattr(source, "tag_scheme", "iob2")
    return dict(sentence_pair=False, num_classes=len(names), label_names=names, tag_scheme=scheme)

  def eval_load_kwargs(self, train_source: DataSource) -> dict[str, Any]:
    return dict(label_names=train_source.label_names)

  def build(self) -> Any:
    from zoo import models
    check_full_length(self.config, "a token classifier")
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.TokenClassifier(build_encoder(self.config), num_classes=self.config.num_classes,
                                  dropout=dropout, name="tagger")

  @property
  def scheme(self) -> str:
    scheme = self.config.tag_scheme
    return "iob2" if scheme == "auto" else scheme

  # Input pipeline.
  def _windows(self, text_encoder, words, tags=None):
    return word_windows(text_encoder, words, tags, stride=self.config.tag_stride)

  def expand(self, examples: Any, text_encoder: TextEncoder) -> Any:
    """Each sentence -> its windows; `example` is the sentence's index in `examples`."""
    return self.expand_in_windows(
        examples, lambda raw: self._windows(text_encoder, raw["words"], raw["tags"]), self.expand_batch)

  def features(self, raw: Features, text_encoder: TextEncoder, seed: Any = None) -> Features:
    features = dict(raw)
    features["word_weights"] = tf.cast((features["word_positions"] > 0) & (features["word_labels"] >= 0),
                                       tf.float32)
    features["weight"] = tf.ones_like(features["example"], tf.float32)
    return features

  def denominators(self, features: Features) -> Features:
    return dict(words=tf.reduce_sum(features["word_weights"]))

  def _word_logits(self, features, logits):
    """The logits of each word's first piece, `[B, P, C]`."""
    return tf.gather(tf.cast(logits, tf.float32), features["word_positions"], batch_dims=1)

  def loss(self, features: Features, word_logits: Any, denominator: Any) -> Any:
    from zoo.models import losses
    return losses.token_classification_loss(features["word_labels"], word_logits, features["word_weights"],
                                            denominator)

  def loss_and_stats(self, features: Features, outputs: Any, denominators: Features) -> tuple[Any, Stats]:
    count = denominators["words"]
    word_logits = self._word_logits(features, outputs)
    correct = tf.equal(tf.argmax(word_logits, axis=-1, output_type=tf.int32), features["word_labels"])
    return (self.loss(features, word_logits, count),
            dict(token_accuracy=(weighted_sum(correct, features["word_weights"]), count)))

  # Evaluation.
  def prepare_evaluation(self, source: DataSource) -> DataSource | None:
    """Keeps the gold tags of every word of every evaluation sentence, in the order of the data."""
    self._gold: list[np.ndarray] = []
    for example in source.dataset:
      tags = example["tags"]
      tags = tags.to_list() if hasattr(tags, "to_list") else tags.numpy()
      self._gold.append(np.asarray(tags, np.int64))
    return None

  def eval_outputs(self, features: Features, outputs: Any, denominators: Features) -> tuple[Stats, Features]:
    word_logits = self._word_logits(features, outputs)
    predictions = tf.where(features["word_positions"] > 0,
                           tf.argmax(word_logits, axis=-1, output_type=tf.int32), -1)
    return (dict(loss=(self.loss(features, word_logits, 1.0), denominators["words"])),
            dict(word_predictions=predictions, word_index=features["word_index"],
                 max_context=features["max_context"], example=features["example"], weight=features["weight"]))

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    if getattr(self, "_gold", None) is None:
      raise RuntimeError("prepare_evaluation(source) must read the evaluation data before metrics")
    keep = examples["weight"] > 0
    results = super().metrics(stats, examples)
    windows = {key: value[keep] for key, value in examples.items()}
    predicted = sentence_predictions(windows, [len(tags) for tags in self._gold])
    names = self.label_names()
    gold_tags = [[names[i] for i in tags] for tags in self._gold]
    predicted_tags = [[names[i] if i >= 0 else OUTSIDE for i in sentence] for sentence in predicted]
    results.update(entity_metrics(gold_tags, predicted_tags, self.scheme))
    results.update(examples=len(self._gold), windows=int(keep.sum()))
    self._predictions = {str(index): tags for index, tags in enumerate(predicted_tags)}
    return results

  def eval_predictions(self) -> tuple[dict[str, Any], dict[str, float] | None] | None:
    """`{sentence index: [predicted tag of every word]}` of the last evaluation (no null odds)."""
    predictions = getattr(self, "_predictions", None)
    return None if predictions is None else (predictions, None)

  def label_names(self) -> list[str]:
    names = self.config.label_names
    if not names or len(names) != self.config.num_classes:
      raise ValueError(f"the {self.name} run in {self.config.model_dir} needs its tag names in config.json "
                       f"(label_names, num_classes), got {names!r}")
    return [str(name) for name in names]

  # Serving.
  def serving_network(self, model: Any) -> Any:
    return model

  def serving_outputs(self, network: Any, features: Features, label_names: Any) -> Features:
    """Per token: `logits` and `probabilities` `[B, T, C]`, `label_ids` and `labels` `[B, T]`."""
    logits = tf.cast(network(features, training=False), tf.float32)
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return dict(logits=logits, probabilities=tf.nn.softmax(logits), label_ids=label_ids,
                labels=tf.gather(label_names, label_ids))

  def serving_from_text(self, texts: Features, text_encoder: TextEncoder, from_token_ids: Callable[..., Any],
                        label_names: Any) -> Features:
    """Per word of the raw text, `[B, W]`: `words` (as they appear in the text), `starts` and `ends`
    (their characters in the text, end exclusive), `tags`, `tag_ids` and `tag_probabilities`; and
    `num_words` `[B]`.

    Every word of the text is tagged, from its max-context window. W is the most words
    of a text of the batch; shorter texts are padded with "" (offsets -1, tags "", id
    -1, probability 0). A word with no WordPiece has tag "" and id -1.
    """
    from zoo.graphs.kit import INPUT_NAMES
    from zoo.text.normalize import valid_utf8
    text = valid_utf8(texts["text"])
    words, byte_starts, byte_ends = text_encoder.split_words_with_offsets(text)
    features = self._windows(text_encoder, words)
    token_probabilities = from_token_ids(**{name: features[name] for name in INPUT_NAMES})["probabilities"]
    probabilities = tf.gather(token_probabilities, features["word_positions"], batch_dims=1)   # [K, P, C]
    num_words = tf.cast(words.row_lengths(), tf.int32)
    shape = tf.stack([tf.size(num_words), tf.reduce_max(tf.concat([num_words, [0]], 0))])
    chosen = tf.where(features["max_context"])   # [n, 2]: (window, slot)
    target = tf.stack([tf.gather(features["example"], chosen[:, 0]),
                       tf.gather_nd(features["word_index"], chosen)], axis=1)
    best = tf.gather_nd(probabilities, chosen)   # [n, C]
    tag_ids = tf.tensor_scatter_nd_update(tf.fill(shape, -1), target,
                                          tf.argmax(best, axis=-1, output_type=tf.int32))
    tag_probabilities = tf.tensor_scatter_nd_update(tf.zeros(shape), target, tf.reduce_max(best, axis=-1))
    present = tf.sequence_mask(num_words, shape[1])
    starts, ends = (tf.cast(offsets.to_tensor(0), tf.int32) for offsets in (byte_starts, byte_ends))
    lines = tf.repeat(text[:, tf.newaxis], shape[1], axis=1)
    original = tf.strings.substr(lines, starts, ends - starts)   # the word's bytes in the text
    characters = lambda end: tf.strings.length(   # noqa: E731
        tf.strings.substr(lines, tf.zeros_like(end), end), unit="UTF8_CHAR")
    tags = tf.where(tag_ids >= 0, tf.gather(label_names, tf.maximum(tag_ids, 0)), "")
    return dict(words=tf.where(present, original, ""), starts=tf.where(present, characters(starts), -1),
                ends=tf.where(present, characters(ends), -1), tags=tags, tag_ids=tag_ids,
                tag_probabilities=tag_probabilities, num_words=num_words)

  def export_info(self) -> dict[str, Any]:
    return dict(super().export_info(), num_classes=self.config.num_classes, label_names=self.label_names(),
                tag_scheme=self.scheme, tag_stride=self.config.tag_stride)
