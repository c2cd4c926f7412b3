"""The synthetic demo dataset: deterministic, balanced, partly learnable by a bag of words, not by one cue
word; negations common enough for the demo's classifier to learn."""

import doctest
import pathlib
import re

import numpy as np
import pytest

from tpu.data import demo as demo_data


@pytest.fixture(scope="module")
def splits():
  return {split: demo_data.examples(split, seed=0) for split in ("train", "validation")}


def test_sizes_balance_and_determinism(splits):
  for split, size in (("train", 4000), ("validation", 500)):
    texts, labels = splits[split]
    assert len(texts) == len(labels) == size
    assert sum(labels) == size // 2
    assert demo_data.examples(split, seed=0) == (texts, labels)
  assert demo_data.examples("validation", seed=1)[0] != splits["validation"][0]
  assert not set(splits["validation"][0]) & set(splits["train"][0])


def test_labels_follow_the_rule_and_words_come_from_the_word_list(splits):
  words = set(demo_data.demo_words())
  for texts, labels in splits.values():
    assert [demo_data.sentiment(text) for text in texts] == labels
    assert {word for text in texts for word in text.split()} <= words
  assert demo_data.demo_corpus() == splits["train"][0] + splits["validation"][0]
  assert demo_data.sentiment("the plot was not good") == 0
  assert demo_data.sentiment("the plot was good but the cast was never awful") == 1
  with pytest.raises(ValueError, match="sum to 0"):
    demo_data.sentiment("the plot was good but the cast was dull")


def test_unknown_split_is_refused():
  with pytest.raises(ValueError, match=r"the demo dataset has splits \['train', 'validation'\], got 'test'"):
    demo_data.examples("test")


def _bag_of_words(texts, vocabulary):
  counts = np.zeros((len(texts), len(vocabulary)), np.float32)
  for row, text in enumerate(texts):
    for word in text.split():
      if word in vocabulary:
        counts[row, vocabulary[word]] += 1
  return counts


def _first_cue_word(text):
  return next(int(demo_data.POLARITY[word] > 0) for word in text.split() if word in demo_data.POLARITY)


def _ignoring_negation(text):
  return int(sum(demo_data.POLARITY.get(word, 0) for word in text.split()) > 0)


def test_a_bag_of_words_learns_it_but_one_cue_word_does_not(splits):
  (train_texts, train_labels), (texts, labels) = splits["train"], splits["validation"]
  vocabulary = {word: i for i, word in enumerate(sorted({w for text in train_texts for w in text.split()}))}
  x_train, y_train = _bag_of_words(train_texts, vocabulary), np.array(train_labels)
  weights, bias = np.zeros(len(vocabulary)), 0.0
  for _ in range(300):   # logistic regression, full-batch gradient descent: well under a second
    error = 1 / (1 + np.exp(-(x_train @ weights + bias))) - y_train
    weights -= x_train.T @ error / len(error)
    bias -= error.mean()
  labels = np.array(labels)
  bag_of_words = np.mean(((_bag_of_words(texts, vocabulary) @ weights + bias) > 0) == labels)
  first_cue = np.mean(np.array([_first_cue_word(text) for text in texts]) == labels)
  no_negation = np.mean(np.array([_ignoring_negation(text) for text in texts]) == labels)
  assert bag_of_words > 0.72
  assert first_cue < 0.70 and first_cue < bag_of_words - 0.1
  assert no_negation < 0.85   # negation decides about one example in five: word order matters
  negated = [text for text in train_texts if set(text.split()) & set(demo_data.NEGATIONS)]
  assert len(negated) > 0.4 * len(train_texts)   # enough for the demo's classifier to learn negation


def test_the_sentences_make_demo_classifies_are_in_the_language_and_labelled_by_its_rule():
  makefile = (pathlib.Path(__file__).resolve().parents[3] / "Makefile").read_text()
  recipe = makefile.split("export.predict", 1)[1].split("\n\n", 1)[0]
  sentences = re.findall(r'"([^"]+)"', recipe)
  assert len(sentences) == 4 and "the soundtrack was not bad" in sentences
  words = set(demo_data.demo_words())
  assert all(set(sentence.split()) <= words for sentence in sentences)
  assert [demo_data.LABEL_NAMES[demo_data.sentiment(sentence)] for sentence in sentences] == [
      "positive", "negative", "positive", "positive"]


def test_docstring_example_runs():
  result = doctest.testmod(demo_data, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0
