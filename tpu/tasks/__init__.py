"""The training tasks. A `Task` owns everything that differs from one task to another.

    mlm       BERT's masked language modelling (pre-training)
    electra   ELECTRA's generator + replaced-token detection (pre-training)
    classify  sequence classification, softmax cross-entropy
    regress   sequence regression, squared error
    tag       token classification (e.g. named entities), a label per word on its first piece
    squad     extractive question answering (SQuAD v1.1 and v2.0), answer spans over context windows
    multiple_choice  one of several answers (RACE, SWAG), a score per choice
    embed     text embeddings: a dual encoder on text pairs, evaluated by retrieval

`TASKS` (`tpu.tasks.task_registry`) is the one registry: the command line's `--task`
choices and flags, config validation, the exporter and `export.predict` all ask it.
A task knows

- its settings: `settings`, a tuple of `Setting`s (name, type, default, help,
  validation), which become config.json fields and `python -m tpu.train` flags;
- its data: the `tpu.data` data type it reads (`data_type`) and the metadata it takes
  from the training data into the config (`data_metadata`);
- its model: `build()` (and `encoder(model)`, the part `--init-checkpoint` restores);
- its features: `expand()` turns each raw example into the examples the model sees (by
  default itself; SQuAD: its question and context windows), `features()` turns batches
  of them into the model's inputs;
- its loss and metrics: `denominators`, `loss_and_stats`, `eval_outputs`, `metrics`;
- how it serves: `serving_network`, `serving_outputs`, `label_names` and
  `prediction_fields`, which tell `export.predict` how to print each output.

The modules, one per task family, each task beside its own helpers:

    task_registry.py  TASKS, register, Setting, get_task
    base.py           the Task base class and what tasks share (the encoder a config builds)
    pretraining.py    mlm, electra
    sequence.py       classify, regress, and GLUE's metrics
    squad.py          squad: windows, span decoding, SQuAD's official metrics
    tagging.py        tag: words to pieces and back, CoNLL's entity scores
    multiple_choice.py  multiple_choice: question-and-choice packing, a softmax over the choices
    embedding.py      embed: pooled vectors, the in-batch-negatives loss, retrieval metrics

Adding a task is one new module here: a `Task` subclass decorated with `@register`,
declaring its settings (and its tests). Every module of this package is imported when
the package is, so nothing else changes: the flags, the config fields and their
validation, `--task`'s choices and the export follow from the class.

Losses are exact over the GLOBAL batch under any number of replicas: each replica
divides its sum of per-example (or per-token) losses by the global count of examples
(or masked tokens, or real tokens), which the job all-reduces first (`zoo.models.losses`
with an explicit denominator). Summing the replicas' losses and gradients then gives
the loss and gradient of one device running the whole batch.

Statistics are pairs `(numerator, denominator)` of sums; summed over replicas and steps,
`numerator / denominator` is the metric.

This module imports TensorFlow on first use only, so `--help` stays fast.

Example:
  >>> names()[:4]
  ('mlm', 'electra', 'classify', 'regress')
  >>> TASKS["classify"].data_type
  'classification'
"""


import importlib
import pkgutil

from tpu.tasks.base import Task
from tpu.tasks.base import build_encoder
from tpu.tasks.task_registry import TASKS
from tpu.tasks.task_registry import Setting
from tpu.tasks.task_registry import build_model
from tpu.tasks.task_registry import declared_settings
from tpu.tasks.task_registry import get_task
from tpu.tasks.task_registry import names
from tpu.tasks.task_registry import register
from tpu.tasks.task_registry import settings_of
from tpu.tasks.task_registry import task_class

__all__ = ["TASKS", "Setting", "Task", "build_encoder", "build_model", "declared_settings", "get_task",
           "names", "register", "settings_of", "task_class"]

# The task modules register their tasks when imported: every module but the shared ones, in the
# order of `_FIRST` (what `--help` lists first: pre-training, then sequence-level tasks), then by name.
_SHARED = ("base", "task_registry")
_FIRST = ("pretraining", "sequence", "multiple_choice")
for _module in sorted((info.name for info in pkgutil.iter_modules(__path__)),
                      key=lambda name: (_FIRST.index(name) if name in _FIRST else len(_FIRST), name)):
  if _module not in _SHARED:
    importlib.import_module(f"{__name__}.{_module}")
