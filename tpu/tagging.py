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
