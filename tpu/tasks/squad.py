"""Extractive question answering (SQuAD v1.1 and v2.0): windows, span decoding and SQuAD's metrics.

Windows (`windows`): the question's WordPiece tokens (at most `max_query_length`) and
a window of the context's tokens make one example of exactly T ids,
`[CLS] question [SEP] context window [SEP]` (type 0 for the question, 1 for the
context; [CLS] has the text encoder's type). A context longer than one window is
covered by windows that start `doc_stride` tokens apart, as in BERT's `run_squad.py`
(Devlin et al., 2019). Each window records, per position, the byte range in the
context of the word its token belongs to (`TextEncoder.tokenize_with_offsets`;
-1 outside the context) and whether the window gives that token its "maximum
context" (the most tokens on its shorter side; the first such window on ties). The
answer's characters are mapped to the first and last tokens whose words overlap it;
a window that does not hold the whole answer, and every window of a question
without one, points at [CLS] (position 0). Everything is in TensorFlow ops, with
static shapes `[N, T]`, for the input pipeline and for serving alike.

Decoding (`window_spans`, then the best window of each question): the span
`start <= end < start + max_answer_length` of context tokens with the highest
`start_logit + end_logit`, whose start is in its maximum-context window, over all
windows of a question; this is the exact maximum over every valid span (BERT's
`run_squad.py` searches the pairs of its 20 best starts and 20 best ends, which finds
the same answer whenever it is among them). The answer text is the context's bytes
from the first word's start to the last word's end, so it is the original text, with
its case, accents and inner spaces. SQuAD v2.0: the null score is the lowest
`start_logit + end_logit` at [CLS] over the question's windows; the question gets
no answer when `null score - best span score > null_score_diff_threshold`.

Metrics: SQuAD's answer normalisation (lower case, no punctuation, no articles,
single spaces), exact match and token F1, the maximum over the gold answers; for
v2.0 also over answerable and unanswerable questions and the best no-answer
thresholds. The numbers equal those of the official evaluation scripts (v1.1: in
percent, where Model Garden's copy gives fractions).

Axes: B questions, N windows, T positions.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Callable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any

import numpy as np

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

# Windows whose best spans are searched at once in evaluation ([chunk, T, T] scores).
DECODE_CHUNK = 64


def _positions(ragged):
  """int32 `[B, (n)]`: 0, 1, ... in each row of `ragged`."""
  return tf.ragged.range(tf.cast(ragged.row_lengths(), tf.int32))


def _gather_padded(values, indices, inside):
  """`values[indices]` where `inside`, 0 elsewhere (indices outside `values` are not read)."""
  padded = tf.concat([tf.cast(values, tf.int32), [0]], axis=0)   # [n + 1]: index n is a safe 0
  safe = tf.where(inside, indices, tf.shape(padded)[0] - 1)
  return tf.where(inside, tf.gather(padded, safe), 0)


def windows(text_encoder: TextEncoder, questions: Any, contexts: Any, *, max_query_length: int,
            doc_stride: int, answers: Any = None, answer_starts: Any = None) -> Features:
  """Questions and contexts `[B]` -> the features of their windows, `[N, ...]`.

  Args:
    text_encoder: the `zoo.text.TextEncoder` (vocabulary, casing, T, special tokens).
    questions, contexts: string `[B]`.
    max_query_length: question tokens kept (the first ones).
    doc_stride: tokens between the starts of consecutive windows of a context.
    answers: optional string `[B]`, the answer text ("" for none).
    answer_starts: optional int `[B]`, the answer's first character in the context (-1 for none).

  Returns:
    A dict: `input_word_ids`, `input_mask`, `input_type_ids`, `token_starts`,
    `token_ends` (bytes, -1 outside the context) and `max_context` (0/1), int32
    `[N, T]`; `example` int32 `[N]`, the question each window belongs to; with answers,
    `start_positions` and `end_positions` int32 `[N]`.
  """
  length = text_encoder.seq_length
  question_ids = text_encoder.tokenize(questions)[:, :max_query_length]
  context_ids, token_starts, token_ends = text_encoder.tokenize_with_offsets(contexts)
  query_length = tf.cast(question_ids.row_lengths(), tf.int32)   # [B]
  context_length = tf.cast(context_ids.row_lengths(), tf.int32)
  room = length - 3 - query_length   # context tokens per window
  stride = tf.minimum(doc_stride, room)
  count = 1 + (tf.maximum(context_length - room, 0) + stride - 1) // stride   # windows per question

  example = tf.repeat(tf.range(tf.size(count)), count)   # [N]
  first = tf.ragged.range(count).flat_values * tf.gather(stride, example)   # first context token
  window_length = tf.minimum(tf.gather(room, example), tf.gather(context_length, example) - first)
  queries = tf.gather(query_length, example)[:, tf.newaxis]
  position = tf.range(length)[tf.newaxis, :]   # [1, T]
  in_question = (position >= 1) & (position <= queries)
  context_start = queries + 2
  in_context = (position >= context_start) & (position < context_start + window_length[:, tf.newaxis])
  last_sep = context_start + window_length[:, tf.newaxis]
  token = first[:, tf.newaxis] + position - context_start   # context token index, [N, T]
  flat_token = tf.gather(tf.cast(context_ids.row_starts(), tf.int32), example)[:, tf.newaxis] + token
  flat_question = (tf.gather(tf.cast(question_ids.row_starts(), tf.int32), example)[:, tf.newaxis]
                   + position - 1)

  ids = tf.where(in_question, _gather_padded(question_ids.flat_values, flat_question, in_question),
                 _gather_padded(context_ids.flat_values, flat_token, in_context))
  ids = tf.where(position == 0, text_encoder.cls_id, ids)
  ids = tf.where((position == queries + 1) | (position == last_sep), text_encoder.sep_id, ids)
  mask = position <= last_sep
  ids = tf.where(mask, ids, text_encoder.pad_id)
  type_ids = tf.where(in_context | (position == last_sep), 1, 0)
  type_ids = tf.where(position == 0, text_encoder.cls_type_id, type_ids)

  starts = tf.where(in_context, _gather_padded(token_starts.flat_values, flat_token, in_context), -1)
  ends = tf.where(in_context, _gather_padded(token_ends.flat_values, flat_token, in_context), -1)

  # Maximum context: the score of a token in a window is min(left, right) + 0.01 * length.
  offset = tf.cast(position - context_start, tf.float32)
  window_float = tf.cast(window_length, tf.float32)[:, tf.newaxis]
  score = tf.minimum(offset, window_float - 1 - offset) + 0.01 * window_float
  total = tf.size(context_ids.flat_values)
  segments = tf.boolean_mask(flat_token, in_context)
  best = tf.math.unsorted_segment_max(tf.boolean_mask(score, in_context), segments, total)
  window = tf.broadcast_to(tf.range(tf.size(example))[:, tf.newaxis], tf.shape(score))
  candidates = tf.where(tf.boolean_mask(score, in_context) >= tf.gather(best, segments),
                        tf.boolean_mask(window, in_context), tf.size(example))
  first_best = tf.math.unsorted_segment_min(candidates, segments, total)
  max_context = in_context & tf.equal(_gather_padded(first_best, flat_token, in_context), window)

  features = dict(input_word_ids=ids, input_mask=tf.cast(mask, tf.int32), input_type_ids=type_ids,
                  token_starts=starts, token_ends=ends, max_context=tf.cast(max_context, tf.int32),
                  example=example)
  if answers is not None:
    features.update(_positions_of_answers(contexts, answers, answer_starts, token_starts, token_ends,
                                          example, first, window_length, queries[:, 0]))
  for value in features.values():
    value.set_shape([None] + ([length] if value.shape.rank == 2 else []))
  return features


def _positions_of_answers(contexts, answers, answer_starts, token_starts, token_ends, example, first,
                          window_length, queries):
  """`start_positions`, `end_positions` `[N]` of each window (0: [CLS], the answer is not all inside)."""
  from zoo.text.normalize import valid_utf8
  answer_starts = tf.cast(answer_starts, tf.int32)
  prefix = tf.strings.substr(valid_utf8(contexts), tf.zeros_like(answer_starts), tf.maximum(answer_starts, 0),
                             unit="UTF8_CHAR")
  begin = tf.strings.length(prefix)   # bytes
  end = begin + tf.strings.length(answers)
  rows = tf.cast(token_starts.value_rowids(), tf.int32)
  overlaps = ((tf.cast(token_ends.flat_values, tf.int32) > tf.gather(begin, rows))
              & (tf.cast(token_starts.flat_values, tf.int32) < tf.gather(end, rows)))
  index = _positions(token_starts).flat_values
  batch = tf.size(answers)
  first_token = tf.math.unsorted_segment_min(tf.where(overlaps, index, np.iinfo(np.int32).max), rows, batch)
  last_token = tf.math.unsorted_segment_max(tf.where(overlaps, index, -1), rows, batch)
  answerable = (answer_starts >= 0) & (end > begin) & (last_token >= 0)
  first_token, last_token = tf.gather(first_token, example), tf.gather(last_token, example)
  inside = (tf.gather(answerable, example) & (first_token >= first)
            & (last_token < first + window_length))
  return dict(start_positions=tf.where(inside, first_token - first + queries + 2, 0),
              end_positions=tf.where(inside, last_token - first + queries + 2, 0))


def window_spans(start_logits: Any, end_logits: Any, token_starts: Any, max_context: Any,
                 max_answer_length: int) -> tuple[Any, Any, Any, Any]:
  """The best span of each window: (score float32 `[N]`, start int32 `[N]`, end `[N]`, null score `[N]`).

  A span starts on a token of its maximum-context window and ends on a context token
  at most `max_answer_length - 1` tokens later; a window without one scores -inf.
  The null score is `start_logit + end_logit` at [CLS].
  """
  start_logits = tf.cast(start_logits, tf.float32)
  end_logits = tf.cast(end_logits, tf.float32)
  length = tf.shape(start_logits)[1]
  valid_start = tf.cast(max_context, tf.bool)
  valid_end = tf.convert_to_tensor(token_starts) >= 0
  band = tf.cast(tf.linalg.band_part(tf.ones([length, length]), 0, max_answer_length - 1), tf.bool)
  valid = valid_start[:, :, tf.newaxis] & valid_end[:, tf.newaxis, :] & band[tf.newaxis]
  scores = tf.where(valid, start_logits[:, :, tf.newaxis] + end_logits[:, tf.newaxis, :], -np.inf)
  flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
  best = tf.argmax(flat, axis=1, output_type=tf.int32)
  return (tf.reduce_max(flat, axis=1), best // length, best % length, start_logits[:, 0] + end_logits[:, 0])


def answers_of(features: Features, start_logits: Any, end_logits: Any, contexts: Any, *,
               max_answer_length: int, num_questions: Any, unanswerable: bool = False,
               null_score_diff_threshold: float = 0.0) -> Features:
  """The answer to each question, in TensorFlow ops (serving).

  Args:
    features: `windows(...)` of the questions.
    start_logits, end_logits: `[N, T]`, the model's.
    contexts: string `[B]`, the contexts as given to `windows`.
    max_answer_length: the longest answer, in tokens.
    num_questions: B.
    unanswerable: SQuAD v2.0, a question may have no answer.
    null_score_diff_threshold: v2.0's threshold on `null score - best span score`.

  Returns:
    A dict of `[B]` tensors: `answer` (string), `start` and `end` (int32 characters of
    the answer in the context, end exclusive; -1 without an answer), `score` (the
    span's `start_logit + end_logit`), and for v2.0 `no_answer` (bool) and
    `null_score_diff`.
  """
  from zoo.text.normalize import valid_utf8
  score, start, end, null = window_spans(start_logits, end_logits, features["token_starts"],
                                         features["max_context"], max_answer_length)
  example = features["example"]
  best_score = tf.math.unsorted_segment_max(score, example, num_questions)
  windows_count = tf.size(example)
  best_window = tf.math.unsorted_segment_min(   # the first window with the best score
      tf.where(score >= tf.gather(best_score, example), tf.range(windows_count), windows_count),
      example, num_questions)
  has_span = best_score > -np.inf
  best_window = tf.where(has_span, best_window, windows_count)   # windows_count: a padding row

  def at(values):   # values[best_window], with a row of zeros after the last window
    return tf.gather(tf.pad(values, [[0, 1]] + [[0, 0]] * (values.shape.rank - 1)), best_window)

  rows = tf.range(num_questions)
  byte_start = tf.gather_nd(at(features["token_starts"]), tf.stack([rows, at(start)], 1))
  byte_end = tf.gather_nd(at(features["token_ends"]), tf.stack([rows, at(end)], 1))
  answered = has_span
  outputs: Features = {}
  if unanswerable:
    null_score = tf.math.unsorted_segment_min(null, example, num_questions)
    difference = null_score - best_score
    answered = has_span & (difference <= null_score_diff_threshold)
    outputs.update(no_answer=~answered, null_score_diff=difference)
  texts = valid_utf8(contexts)
  byte_start = tf.where(answered, byte_start, 0)
  byte_end = tf.where(answered, byte_end, 0)
  answer = tf.strings.substr(texts, byte_start, byte_end - byte_start)
  char_start = tf.strings.length(tf.strings.substr(texts, tf.zeros_like(byte_start), byte_start),
                                 unit="UTF8_CHAR")
  char_end = char_start + tf.strings.length(answer, unit="UTF8_CHAR")
  outputs.update(answer=answer, start=tf.where(answered, char_start, -1),
                 end=tf.where(answered, char_end, -1), score=tf.where(has_span, best_score, 0.0))
  return outputs


def decode(windows_arrays: dict[str, np.ndarray], contexts: Sequence[str], *,
           max_answer_length: int) -> tuple[list[str], np.ndarray, np.ndarray]:
  """Evaluation: the best span of every question, from the windows' numpy arrays.

  Args:
    windows_arrays: numpy arrays of the evaluated windows: `start_logits`, `end_logits`,
      `token_starts`, `token_ends`, `max_context` `[N, T]` and `example` `[N]` (the
      question's index in `contexts`).
    contexts: the contexts (str) of the questions, by index.
    max_answer_length: the longest answer, in tokens.

  Returns:
    (answers: list of str, one per question ("" where no window has a span), the best
    span score of each and the null score of each, float64 `[B]`).
  """
  # (The four arrays fill the four tensor parameters: mypy cannot count a starred generator's items.)
  spans = [window_spans(*(windows_arrays[key][at:at + DECODE_CHUNK]  # type: ignore[arg-type, call-arg]
                          for key in ("start_logits", "end_logits", "token_starts", "max_context")),
                        max_answer_length)
           for at in range(0, len(windows_arrays["example"]), DECODE_CHUNK)]
  score, start, end, null = (np.concatenate([part[i].numpy() for part in spans]) if spans else np.zeros([0])
                             for i in range(4))
  count = len(contexts)
  best = np.full([count], -np.inf)
  nulls = np.full([count], np.inf)
  answers = [""] * count
  for window, question in enumerate(windows_arrays["example"]):
    nulls[question] = min(nulls[question], null[window])
    if score[window] > best[question]:
      best[question] = score[window]
      raw = contexts[question].encode("utf-8")
      begin = windows_arrays["token_starts"][window, start[window]]
      finish = windows_arrays["token_ends"][window, end[window]]
      answers[question] = raw[begin:finish].decode("utf-8", errors="ignore")
  return answers, best, nulls


# SQuAD's metrics.

def normalize_answer(text: str) -> str:
  """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
  text = "".join(char for char in text.lower() if char not in set(string.punctuation))
  return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _f1(prediction, gold, empty_matches):
  predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
  if empty_matches and (not predicted or not expected):   # v2.0: no answer is right only against none
    return float(predicted == expected)
  same = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
  if same == 0:
    return 0.0
  precision, recall = same / len(predicted), same / len(expected)
  return 2 * precision * recall / (precision + recall)


def squad_v1_metrics(golds: dict[str, list[str]], predictions: dict[str, str]) -> dict[str, float]:
  """SQuAD v1.1: `exact_match` and `f1` in percent.

  Args:
    golds: `{question id: [gold answer texts]}`.
    predictions: `{question id: answer text}`; a missing question scores 0.
  """
  exact = f1 = 0.0
  for question, answers in golds.items():
    if question not in predictions:
      continue
    prediction = predictions[question]
    exact += max(float(normalize_answer(prediction) == normalize_answer(gold)) for gold in answers)
    f1 += max(_f1(prediction, gold, empty_matches=False) for gold in answers)
  return dict(exact_match=100.0 * exact / len(golds), f1=100.0 * f1 / len(golds))


def squad_v2_metrics(golds: dict[str, list[str]], predictions: dict[str, str],
                     null_score_diffs: dict[str, float] | None = None) -> dict[str, float]:
  """SQuAD v2.0: `exact` and `f1` in percent, over all, answerable (`HasAns_*`) and unanswerable
  (`NoAns_*`) questions; with `null_score_diffs`, the best no-answer thresholds (`best_exact`,
  `best_exact_thresh`, `best_f1`, `best_f1_thresh`).

  Args:
    golds: `{question id: [gold answer texts]}`, `[]` for an unanswerable question.
    predictions: `{question id: answer text}`, "" for no answer.
    null_score_diffs: `{question id: null score - best span score}` (the official
      script's "na_probs": a question whose value passes a threshold gets no answer).
  """
  exact, f1 = {}, {}
  has_answer = {question: bool(answers) for question, answers in golds.items()}
  for question, answers in golds.items():
    if question not in predictions:
      continue
    kept = [answer for answer in answers if normalize_answer(answer)] or [""]
    exact[question] = max(float(normalize_answer(gold) == normalize_answer(predictions[question]))
                          for gold in kept)
    f1[question] = max(_f1(predictions[question], gold, empty_matches=True) for gold in kept)
  results = {}
  for prefix, questions in (("", list(exact)), ("HasAns_", [q for q in exact if has_answer[q]]),
                            ("NoAns_", [q for q in exact if not has_answer[q]])):
    if questions:
      results[f"{prefix}exact"] = 100.0 * sum(exact[q] for q in questions) / len(questions)
      results[f"{prefix}f1"] = 100.0 * sum(f1[q] for q in questions) / len(questions)
      results[f"{prefix}total"] = len(questions)
  if null_score_diffs is not None:
    for name, scores in (("exact", exact), ("f1", f1)):
      results[f"best_{name}"], results[f"best_{name}_thresh"] = _best_threshold(
          predictions, scores, null_score_diffs, has_answer)
  return results


def _best_threshold(predictions, scores, null_score_diffs, has_answer):
  """The score (percent) and threshold of the best "no answer above this null score diff" rule."""
  current = best = sum(1 for answerable in has_answer.values() if not answerable)
  threshold = 0.0
  for question in sorted(null_score_diffs, key=lambda q: null_score_diffs[q]):
    if question not in scores:
      continue
    if has_answer[question]:
      current += scores[question]
    else:
      current += -1 if predictions[question] else 0
    if current > best:
      best, threshold = current, null_score_diffs[question]
  return 100.0 * best / len(scores), float(threshold)


@register
class SquadTask(Task):
  """Extractive question answering (SQuAD v1.1 and v2.0) on `SpanQA`'s start and end logits.

  Each question and its context become windows of T tokens (`tpu.squad.windows`,
  `--max-query-length`, `--doc-stride`); the loss is the mean of the start and end
  cross-entropies over the global number of windows. Evaluation decodes the best span
  of each question over its windows (`--max-answer-length`; v2.0: no answer above
  `--null-score-diff-threshold`) and scores it with SQuAD's exact match and F1.
  Served on a raw question and context: the answer text, its characters in the
  context and its score (v2.0: whether there is no answer).
  """

  name = "squad"
  data_type = "question_answering"
  description = "extractive question answering, SQuAD v1.1 and v2.0 (fine-tuning)"
  settings = (
      Setting("max_query_length", int, 64, "question tokens kept", minimum=1, input=True),
      Setting("doc_stride", int, 128, "tokens between the starts of a context's windows", minimum=1,
              input=True),
      Setting("max_answer_length", int, 30, "the longest answer in tokens", minimum=1),
      Setting("null_score_diff_threshold", float, 0.0, "SQuAD v2.0: no answer when the null score exceeds "
              "the best span's by more"),
      # From the training data (SQuAD v2.0 has questions without an answer), not a flag.
      Setting("unanswerable", bool, False, "some questions have no answer (SQuAD v2.0)", flag=False),
  )
  stat_names = ("span_accuracy",)
  # Raw questions windowed at once in the input pipeline.
  expand_batch = 64

  @classmethod
  def check_config(cls, config: Config) -> None:
    if config.seq_length < config.max_query_length + 4:
      raise ValueError(f"seq_length {config.seq_length} leaves no room for the context after a question of "
                       f"max_query_length {config.max_query_length} ([CLS] question [SEP] context [SEP]): "
                       f"raise --seq-length to at least {config.max_query_length + 4} or lower "
                       "--max-query-length")

  def data_metadata(self, source: DataSource) -> dict[str, Any]:
    return dict(sentence_pair=True, unanswerable=bool(getattr(source, "unanswerable", False)))

  def build(self) -> Any:
    from zoo import models
    check_full_length(self.config, "a span classifier")
    return models.SpanQA(build_encoder(self.config), name="span_qa")

  # Input pipeline.
  def _windows(self, text_encoder, questions, contexts, **answers):
    return windows(text_encoder, questions, contexts, max_query_length=self.config.max_query_length,
                         doc_stride=self.config.doc_stride, **answers)

  def expand(self, examples: Any, text_encoder: TextEncoder) -> Any:
    """Each question -> its windows; `example` is the question's index in `examples`."""
    def windows(raw):
      first = lambda values, empty: tf.pad(values.to_tensor(empty), [[0, 0], [0, 1]],   # noqa: E731
                                           constant_values=empty)[:, 0]
      return self._windows(text_encoder, raw["text_a"], raw["text_b"], answers=first(raw["answers"], ""),
                           answer_starts=first(tf.cast(raw["answer_starts"], tf.int32), -1))

    return self.expand_in_windows(examples, windows, self.expand_batch)

  def features(self, raw: Features, text_encoder: TextEncoder, seed: Any = None) -> Features:
    features = dict(raw)
    features["weight"] = tf.ones_like(features["example"], tf.float32)
    return features

  # Loss.
  def denominators(self, features: Features) -> Features:
    return dict(windows=tf.reduce_sum(features["weight"]))

  def loss(self, features: Features, outputs: Any, denominator: Any) -> Any:
    from zoo.models import losses
    return losses.span_loss(features["start_positions"], features["end_positions"], outputs["start_logits"],
                            outputs["end_logits"], features["weight"], denominator)

  def loss_and_stats(self, features: Features, outputs: Any, denominators: Features) -> tuple[Any, Stats]:
    count = denominators["windows"]
    found = [tf.equal(tf.argmax(outputs[f"{side}_logits"], axis=-1, output_type=tf.int32),
                      features[f"{side}_positions"]) for side in ("start", "end")]
    return (self.loss(features, outputs, count),
            dict(span_accuracy=(weighted_sum(found[0] & found[1], features["weight"]), count)))

  # Evaluation.
  def prepare_evaluation(self, source: DataSource) -> DataSource | None:
    """Keeps the evaluation questions' ids, contexts and gold answers, in the order of the data."""
    self._reference: list[tuple[str, str, list[str]]] = []
    for example in source.dataset:
      answers = example["answers"]
      answers = answers.to_list() if hasattr(answers, "to_list") else answers.numpy().tolist()
      self._reference.append((example["id"].numpy().decode("utf-8"),
                              example["text_b"].numpy().decode("utf-8", errors="ignore"),
                              [answer.decode("utf-8") for answer in answers]))
    return None

  def eval_outputs(self, features: Features, outputs: Any, denominators: Features) -> tuple[Stats, Features]:
    keys = ("token_starts", "token_ends", "max_context", "example", "weight")
    return (dict(loss=(self.loss(features, outputs, 1.0), denominators["windows"])),
            dict(start_logits=tf.cast(outputs["start_logits"], tf.float32),
                 end_logits=tf.cast(outputs["end_logits"], tf.float32),
                 **{key: features[key] for key in keys}))

  def predictions(self, examples: dict[str, np.ndarray]) -> tuple[dict[str, str], dict[str, float]]:
    """`(answers, null score diffs)`: `{id: answer text}` (v2.0: "" for no answer) and `{id: null - best}`."""
    if getattr(self, "_reference", None) is None:
      raise RuntimeError("prepare_evaluation(source) must read the evaluation data before metrics")
    keep = examples["weight"] > 0
    answers, best, nulls = decode({key: value[keep] for key, value in examples.items()},
                                        [context for _, context, _ in self._reference],
                                        max_answer_length=self.config.max_answer_length)
    differences = nulls - best
    if self.config.unanswerable:
      answers = ["" if difference > self.config.null_score_diff_threshold else answer
                 for answer, difference in zip(answers, differences, strict=True)]
    ids = [question for question, _, _ in self._reference]
    return (dict(zip(ids, answers, strict=True)),
            dict(zip(ids, differences.astype(float).tolist(), strict=True)))

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    results = super().metrics(stats, examples)
    predictions, differences = self.predictions(examples)
    golds = {question: answers for question, _, answers in self._reference}
    self._predictions = (predictions, differences if self.config.unanswerable else None)
    if self.config.unanswerable:
      results.update(squad_v2_metrics(golds, predictions, differences))
    else:
      results.update(squad_v1_metrics(golds, predictions))
    results.update(examples=len(golds), windows=int((examples["weight"] > 0).sum()))
    return results

  def eval_predictions(self) -> tuple[dict[str, Any], dict[str, float] | None] | None:
    return getattr(self, "_predictions", None)

  # Serving.
  @property   # the fields of the settings (the base class's is a class attribute)
  def prediction_fields(self) -> tuple[tuple[str, ...], ...]:   # type: ignore[override]
    fields: tuple[tuple[str, ...], ...] = (("answer", "answer", "text"), ("start", "start", "integer"),
                                           ("end", "end", "integer"), ("score", "score", "number"))
    if self.config.unanswerable:
      fields += (("no_answer", "no_answer", "flag"), ("null_score_diff", "null_score_diff", "number"))
    return fields

  def serving_network(self, model: Any) -> Any:
    return model

  def serving_outputs(self, network: Any, features: Features, label_names: Any) -> Features:
    """`start_logits` and `end_logits` `[B, T]` of the windows."""
    outputs = network(features, training=False)
    return {name: tf.cast(outputs[name], tf.float32) for name in ("start_logits", "end_logits")}

  def serving_text_inputs(self) -> tuple[str, ...]:
    return ("question", "context")

  def serving_from_text(self, texts: Features, text_encoder: TextEncoder, from_token_ids: Callable[..., Any],
                        label_names: Any) -> Features:
    """Per question: `answer`, its characters `start` and `end` in the context (-1: none), `score`
    (v2.0 also `no_answer` and `null_score_diff`), over all windows of its context."""
    from zoo.graphs.kit import INPUT_NAMES
    features = self._windows(text_encoder, texts["question"], texts["context"])
    logits = from_token_ids(**{name: features[name] for name in INPUT_NAMES})
    return answers_of(features, logits["start_logits"], logits["end_logits"], texts["context"],
                            max_answer_length=self.config.max_answer_length,
                            num_questions=tf.size(texts["question"]), unanswerable=self.config.unanswerable,
                            null_score_diff_threshold=self.config.null_score_diff_threshold)

  def export_info(self) -> dict[str, Any]:
    config = self.config
    return dict(super().export_info(), max_query_length=config.max_query_length, doc_stride=config.doc_stride,
                max_answer_length=config.max_answer_length, unanswerable=config.unanswerable,
                null_score_diff_threshold=config.null_score_diff_threshold)

