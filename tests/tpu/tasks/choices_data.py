"""Multiple-choice data in the layouts users download, written by tests: RACE's folders of article
files (`write_race`) with questions on real prose (Python's own docstrings)."""

import inspect
import json
import os
import random

COLOURS = ["red", "blue", "green", "yellow", "black", "white", "purple", "orange"]


def prose_sentences():
  """Sentences of the standard library's docstrings (real English on every machine)."""
  import collections
  import functools
  import itertools
  import json as json_module
  import textwrap
  docs = [inspect.getdoc(module) or "" for module in (collections, functools, itertools, json_module,
                                                         textwrap, inspect, os)]
  return [sentence.strip() for doc in docs for sentence in doc.replace("\n", " ").split(". ")
          if len(sentence.split()) > 6]


def colour_articles(count, seed=0, sentences=3):
  """`count` RACE articles: prose with the colour of a box in it, two questions (one a cloze with `_`)
  whose answer is that colour among four options."""
  rng = random.Random(seed)
  prose = prose_sentences()
  articles = []
  for index in range(count):
    colour = rng.choice(COLOURS)
    body = rng.sample(prose, sentences)
    body.insert(rng.randrange(len(body) + 1), f"The box in this story is {colour}")
    options = rng.sample([other for other in COLOURS if other != colour], 3) + [colour]
    rng.shuffle(options)
    answer = "ABCD"[options.index(colour)]
    questions = ["What colour is the box?", "The box is _ ."]
    articles.append(dict(article=". ".join(body) + ".", questions=questions, options=[options, options],
                         answers=[answer, answer], id=f"{index}.txt"))
  return articles


def write_race(root, splits):
  """RACE's layout under `root`: `{split: [article, ...]}` as `root/split/{middle,high}/N.txt`, the
  articles alternating between the two levels; returns `root` as a string."""
  for split, articles in splits.items():
    for index, article in enumerate(articles):
      folder = os.path.join(root, split, ("middle", "high")[index % 2])
      os.makedirs(folder, exist_ok=True)
      with open(os.path.join(folder, f"{index}.txt"), "w", encoding="utf-8") as file:
        json.dump(article, file)
  return str(root)
