"""Token classification (tagging): words to WordPieces and back, and entity-level metrics.

Each word's label sits on its FIRST WordPiece; the word's other pieces, the special
tokens and padding carry no loss (Devlin et al., 2019, Sec. 5.3). `encode_words` packs
batches of pre-split words (`[CLS] pieces... [SEP]`, one segment) and gives, per word,
the position of its first piece in the packed sequence (0 when the word has no piece
in it: truncated away, or a word that tokenizes to nothing). The loss and the
predictions read the logits at those positions (a gather of `W` positions per
sequence, like the masked-LM head's).

Metrics (`entity_metrics`) are CoNLL's: entities are the maximal chunks of BIO tags
(IOB1 or IOB2: a chunk starts at `B-X`, or at `I-X` after `O` or after another type;
conlleval's rules), and a predicted entity counts when its type and both boundaries
equal a gold entity's. Precision, recall and F1 are micro-averaged over all entities;
token accuracy is over all words. Tags other than `B-...`/`I-...` count as outside.

Axes: B batch, W words (the static `max_words`), T sequence length, C tags.

Example:
  >>> spans(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
  [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
  >>> entity_metrics([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
  {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'token_accuracy': 0.6666666666666666, 'entities': 1}
"""

import re

import numpy as np

from tpu.tasks.base import Task
from tpu.tasks.base import build_encoder
from tpu.tasks.base import check_full_length
from tpu.tasks.base import weighted_sum
from tpu.tasks.registry import register
from zoo.lazy import lazy_module

tf = lazy_module("tensorflow")

# The label of a word without a prediction (beyond the sequence length).
OUTSIDE = "O"
_TAG = re.compile(r"([BI])-(.+)")


def _split(tag):
  match = _TAG.fullmatch(tag)
  return (match.group(1), match.group(2)) if match else (OUTSIDE, None)


def spans(tags):
  """The entities of one sentence's BIO/IOB tags: `[(type, start, end)]`, end exclusive, in order."""
  found = []
  start, current = None, None
  for index, tag in enumerate(list(tags) + [OUTSIDE]):
    prefix, kind = _split(tag)
    begins = prefix == "B" or (prefix == "I" and kind != current)
    if current is not None and (prefix == OUTSIDE or begins):
      found.append((current, start, index))
      current = None
    if begins:
      start, current = index, kind
  return found


def entity_metrics(gold, predicted):
  """Entity precision, recall and F1 and token accuracy over sentences of tag strings.

  Args:
    gold: list of sentences, each a list of tag strings.
    predicted: the same shape.

  Returns:
    dict of `precision`, `recall`, `f1` (0 where undefined, as conlleval prints it),
    `token_accuracy` and `entities` (the number of gold entities).
  """
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted ones")
  gold_entities, predicted_entities, correct_tokens, tokens = set(), set(), 0, 0
  for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted, strict=True)):
    if len(gold_tags) != len(predicted_tags):
      raise ValueError(f"sentence {index}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted")
    gold_entities.update((index, *span) for span in spans(gold_tags))
    predicted_entities.update((index, *span) for span in spans(predicted_tags))
    correct_tokens += sum(g == p for g, p in zip(gold_tags, predicted_tags, strict=True))
    tokens += len(gold_tags)
  correct = len(gold_entities & predicted_entities)
  precision = correct / len(predicted_entities) if predicted_entities else 0.0
  recall = correct / len(gold_entities) if gold_entities else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return dict(precision=precision, recall=recall, f1=f1,
              token_accuracy=correct_tokens / tokens if tokens else 0.0, entities=len(gold_entities))


def sentences_of(label_ids, predicted_ids, label_names):
  """Gold and predicted tag strings per sentence from int `[N, W]` arrays.

  Words are the positions with a gold label id >= 0; a predicted id < 0 (no prediction:
  the word was past the sequence length) reads as `OUTSIDE`.
  """
  names = list(label_names)
  gold, predicted = [], []
  for labels, predictions in zip(np.asarray(label_ids), np.asarray(predicted_ids), strict=True):
    words = labels >= 0
    gold.append([names[i] for i in labels[words]])
    predicted.append([names[i] if i >= 0 else OUTSIDE for i in predictions[words]])
  return gold, predicted


def encode_words(text_encoder, words, max_words):
  """Packs batches of words into encoder inputs, with the position of each word's first piece.

  Args:
    text_encoder: a `zoo.text.TextEncoder` (its vocabulary, casing and `seq_length` T).
    words: string `[B, (words)]` ragged (or a `[B, n]` tensor): the words of each sentence.
    max_words: W, the static number of words kept per sentence.

  Returns:
    `input_word_ids`, `input_mask`, `input_type_ids` int32 `[B, T]` and
    `word_positions` int32 `[B, W]`: the first piece of each word, 0 for a word with no
    piece in the sequence and for padding.
  """
  import tensorflow as tf

  from zoo.text.packing import pack

  if not isinstance(words, tf.RaggedTensor):
    words = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(words, tf.string))
  seq_length = text_encoder.seq_length
  pieces = text_encoder.tokenize(words.flat_values)   # [words, (pieces)]: a word may split further
  tokens = words.with_flat_values(pieces).merge_dims(1, 2)   # [B, (pieces)]
  features = pack([tokens], seq_length, cls_id=text_encoder.cls_id, sep_id=text_encoder.sep_id,
                  pad_id=text_encoder.pad_id)
  counts = tf.cast(pieces.row_lengths(), tf.int32)   # pieces per word
  before = tf.cumsum(counts, exclusive=True)   # pieces before each word, over the whole batch
  row_start = tf.gather(tf.concat([before, [tf.reduce_sum(counts)]], 0),
                        tf.cast(words.row_starts(), tf.int32))
  before = before - tf.repeat(row_start, tf.cast(words.row_lengths(), tf.int32))   # ... within its sentence
  inside = (counts > 0) & (before < seq_length - 2)
  positions = words.with_flat_values(tf.where(inside, before + 1, 0))
  features["word_positions"] = positions.to_tensor(0, shape=[None, max_words])
  return features


def pad_words(values, max_words, fill):
  """`[B, (words)]` ragged (or dense) -> `[B, W]`, cut to W and padded with `fill`."""
  import tensorflow as tf

  if not isinstance(values, tf.RaggedTensor):
    values = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(values))
  return values.to_tensor(tf.cast(fill, values.dtype), shape=[None, max_words])


@register
class TagTask(Task):
  """Token classification (e.g. CoNLL-2003 named entities) on `TokenClassifier`'s logits.

  Each word's label sits on its first WordPiece (`tpu.tagging`); the loss is the
  cross-entropy there, over the global number of labelled words. Evaluation: CoNLL's
  entity precision, recall and F1 and the token accuracy, over the first `seq_length`
  words of each sentence (a word past the sequence length counts as predicted "O").
  Served on raw text: the words as the text encoder splits them, one tag and its
  probability per word (the words that fit in the sequence).
  """

  name = "tag"
  data_type = "tagging"
  description = "token classification, e.g. named entities (fine-tuning)"
  stat_names = ("token_accuracy",)
  prediction_fields = (("words", "words", "texts", "num_words"), ("tags", "tags", "texts", "num_words"),
                       ("probabilities", "tag_probabilities", "list", "num_words"))

  @property
  def max_words(self):
    """W: the words kept per sentence (each takes at least one of the T positions)."""
    return self.config.seq_length

  def data_metadata(self, source):
    names = list(source.label_names)
    return dict(sentence_pair=False, num_classes=len(names), label_names=names)

  def eval_load_kwargs(self, train_source):
    return dict(label_names=train_source.label_names)

  def build(self):
    from zoo import models
    check_full_length(self.config, "a token classifier")
    dropout = 0.1 if self.config.dropout is None else self.config.dropout
    return models.TokenClassifier(build_encoder(self.config), num_classes=self.config.num_classes,
                                  dropout=dropout, name="tagger")

  def features(self, raw, text_encoder, seed=None):
    features = encode_words(text_encoder, raw["words"], self.max_words)
    labels = tf.cast(pad_words(raw["tags"], self.max_words, -1), tf.int32)
    features["word_labels"] = labels
    features["word_weights"] = tf.cast((features["word_positions"] > 0) & (labels >= 0), tf.float32)
    features["weight"] = tf.ones_like(features["input_mask"][:, 0], tf.float32)
    return features

  def denominators(self, features):
    return dict(words=tf.reduce_sum(features["word_weights"]))

  def _word_logits(self, features, logits):
    """The logits of each word's first piece, `[B, W, C]`."""
    return tf.gather(tf.cast(logits, tf.float32), features["word_positions"], batch_dims=1)

  def loss(self, features, word_logits, denominator):
    from zoo.models import losses
    return losses.token_classification_loss(features["word_labels"], word_logits, features["word_weights"],
                                            denominator)

  def loss_and_stats(self, features, outputs, denominators):
    count = denominators["words"]
    word_logits = self._word_logits(features, outputs)
    correct = tf.equal(tf.argmax(word_logits, axis=-1, output_type=tf.int32), features["word_labels"])
    return (self.loss(features, word_logits, count),
            dict(token_accuracy=(weighted_sum(correct, features["word_weights"]), count)))

  def eval_outputs(self, features, outputs, denominators):
    word_logits = self._word_logits(features, outputs)
    predictions = tf.where(features["word_positions"] > 0,
                           tf.argmax(word_logits, axis=-1, output_type=tf.int32), -1)
    labels = tf.where(features["weight"][:, tf.newaxis] > 0, features["word_labels"], -1)
    return (dict(loss=(self.loss(features, word_logits, 1.0), denominators["words"])),
            dict(word_labels=labels, word_predictions=predictions, weight=features["weight"]))

  def metrics(self, stats, examples):
    keep = examples["weight"] > 0
    results = super().metrics(stats, examples)
    gold, predicted = sentences_of(examples["word_labels"][keep], examples["word_predictions"][keep],
                                           self.label_names())
    results.update(entity_metrics(gold, predicted))
    results["examples"] = int(keep.sum())
    return results

  def label_names(self):
    names = self.config.label_names
    if not names or len(names) != self.config.num_classes:
      raise ValueError(f"the {self.name} run in {self.config.model_dir} needs its tag names in config.json "
                       f"(label_names, num_classes), got {names!r}")
    return [str(name) for name in names]

  def serving_network(self, model):
    return model

  def serving_outputs(self, network, features, label_names):
    """Per token: `logits` and `probabilities` `[B, T, C]`, `label_ids` and `labels` `[B, T]`."""
    logits = tf.cast(network(features, training=False), tf.float32)
    label_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return dict(logits=logits, probabilities=tf.nn.softmax(logits), label_ids=label_ids,
                labels=tf.gather(label_names, label_ids))

  def serving_from_text(self, texts, text_encoder, from_token_ids, label_names):
    """Per word of the raw text: `words`, `tags`, `tag_ids`, `tag_probabilities` `[B, W]`, `num_words` `[B]`.

    The words are the text encoder's (punctuation apart); W is the most words of an
    example of the batch that fit in the sequence, and shorter examples are padded
    with "" (tags ""; id -1, probability 0).
    """
    words = text_encoder.split_words(texts["text"])
    features = encode_words(text_encoder, words, None)
    positions = features.pop("word_positions")   # [B, W]: each word has a piece, so the kept ones lead
    probabilities = tf.gather(from_token_ids(**features)["probabilities"], positions, batch_dims=1)
    kept = positions > 0
    num_words = tf.reduce_sum(tf.cast(kept, tf.int32), axis=1)
    width = tf.reduce_max(tf.concat([num_words, [0]], axis=0))
    kept = kept[:, :width]
    tag_ids = tf.where(kept, tf.argmax(probabilities[:, :width], axis=-1, output_type=tf.int32), -1)
    return dict(words=tf.where(kept, words.to_tensor("")[:, :width], ""),
                tags=tf.where(kept, tf.gather(label_names, tf.maximum(tag_ids, 0)), ""), tag_ids=tag_ids,
                tag_probabilities=tf.where(kept, tf.reduce_max(probabilities[:, :width], axis=-1), 0.0),
                num_words=num_words)

  def export_info(self):
    return dict(super().export_info(), num_classes=self.config.num_classes, label_names=self.label_names())


