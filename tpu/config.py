"""The training job's configuration: one dataclass, read from defaults, a JSON file and flags.

The fields are the job's own settings and, beside them, the settings of the task
(`tpu.tasks`: each task declares its own, e.g. squad's `doc_stride`), read as
attributes (`config.doc_stride`) and written to config.json at the top level with
the others. A task's setting given to another task is an error.

Precedence: defaults < `--config FILE` < command-line flags < (for the encoder only)
the `--init-checkpoint` model directory's settings, which a disagreeing `--model` may
not change. The resolved config is written to `MODEL_DIR/config.json` (`zoo.model_dir`),
and everything that reads a model directory later (resuming, `export.saved_model`)
rebuilds the model from that file alone.

Example:
  >>> config = TrainConfig(model="funnel_b4_4_4", task="classify", data="demo", model_dir="/tmp/run")
  >>> config.validate().eval_batch_size
  32
  >>> TrainConfig(task="mlm", seq_length=128).validate_fields().max_predictions_per_seq
  20
  >>> TrainConfig.from_dict(config.to_dict()) == config
  True
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from tpu import strategy as strategies
from tpu import tasks
from zoo.model_dir import ModelDir

MIXED_PRECISIONS = ("float32", "bfloat16")

# Fields that fix the model's variables and inputs: a model directory cannot be resumed with
# other values (`check_resumable`).
# (A task's own settings say so themselves: `Setting.architecture`.)
ARCHITECTURE_FIELDS = ("model", "model_overrides", "task", "seq_length", "lower_case", "tokenizer",
                       "num_classes", "label_names", "sentence_pair", "vocab_size")
# The `zoo.text.TextEncoder` arguments `tokenizer` may set (casing is `lower_case`); `kind`
# "sentencepiece" with `keep_accents`: a `zoo.text.SentencePieceEncoder` of the model directory's
# `spiece.model` (`zoo.text.text_encoder`).
TOKENIZER_SETTINGS = ("special_tokens", "cls_type_id", "max_chars_per_word", "truncator", "kind",
                      "keep_accents")


@dataclasses.dataclass(init=False)
class TrainConfig:
  """Everything a training run needs. See `python -m tpu.train --help` for each field.

  `num_classes`, `label_names` and `sentence_pair` describe the data and are filled in by
  the job from the training data; `vocab_size` is the size of the vocabulary used (or
  the size to build one with, when `vocab` is None). `tokenizer` holds the vocabulary's
  other `zoo.text.TextEncoder` settings (`TOKENIZER_SETTINGS`: its names of the special
  tokens, [CLS]'s token type, ...; None: BERT's), which a converted checkpoint records
  and `--init-checkpoint` passes on with its vocabulary.
  """

  model: str = ""
  task: str = ""
  data: str = ""
  model_dir: str = ""
  model_overrides: dict = dataclasses.field(default_factory=dict)
  eval_data: str | None = None
  text_columns: list | None = None
  label_column: str | None = None
  documents: str | None = None
  data_dir: str | None = None
  tpu: str | None = None
  steps: int = 1000
  batch_size: int = 32
  eval_batch_size: int | None = None
  seq_length: int = 128
  learning_rate: float = 1e-4
  warmup_steps: int | None = None
  end_learning_rate: float = 0.0
  weight_decay: float = 0.01
  clip_norm: float = 1.0
  mixed_precision: str = "float32"
  steps_per_execution: int = 1
  jit_compile: bool = False
  checkpoint_every: int = 500
  keep_checkpoints: int = 3
  eval_every: int = 0
  init_checkpoint: str | None = None
  vocab: str | None = None
  vocab_size: int = 8000
  lower_case: bool | None = None
  tokenizer: dict | None = None
  dropout: float | None = None
  shuffle_buffer: int = 10000
  # Length buckets (`zoo.length_buckets`): batches of similar-length examples, each run at the smallest
  # ladder length that holds its longest ("auto", "off"/None, or lengths "32,64" or a list).
  length_buckets: str | list | None = None
  padding_dependent_buckets: bool = False
  seed: int = 0
  export: bool = True
  # A multi-worker run's fault bounds in seconds (`tpu.strategy.FaultBounds`).
  heartbeat_timeout: float = strategies.HEARTBEAT_TIMEOUT_SECONDS
  collective_timeout: float = strategies.COLLECTIVE_TIMEOUT_SECONDS
  registration_timeout: float = strategies.CLUSTER_REGISTER_TIMEOUT_SECONDS
  num_classes: int | None = None
  label_names: list | None = None
  sentence_pair: bool = False
  # The task's settings that differ from their declared defaults (`tpu.tasks.Setting`).
  settings: dict = dataclasses.field(default_factory=dict)

  def __init__(self, **values: Any) -> None:
    declared = tasks.declared_settings()
    settings = dict(values.pop("settings", None) or {})
    for field in dataclasses.fields(self):
      if field.name == "settings":
        continue
      if field.name in values:
        value = values.pop(field.name)
      else:
        # Every field has a default or a default factory.
        value = (field.default_factory() if field.default is dataclasses.MISSING  # type: ignore[misc]
                 else field.default)
      setattr(self, field.name, value)
    unknown = sorted(set(values) - set(declared))
    if unknown:
      raise TypeError(f"TrainConfig has no setting(s) {unknown}")
    settings.update(values)
    self.settings = {name: value for name, value in settings.items()
                     if name not in declared or value != declared[name][0].default}

  def __getattr__(self, name: str) -> Any:
    """A task's setting: its value, or its declared default."""
    if name.startswith("__") or name == "settings":
      raise AttributeError(name)
    declared = tasks.declared_settings()
    if name not in declared:
      raise AttributeError(f"TrainConfig has no setting {name!r}")
    return self.__dict__.get("settings", {}).get(name, declared[name][0].default)

  @classmethod
  def core_fields(cls) -> tuple[str, ...]:
    """The job's own settings (every task's)."""
    return tuple(field.name for field in dataclasses.fields(cls) if field.name != "settings")

  @classmethod
  def from_dict(cls, values: dict[str, Any], source: str = "config", strict: bool = True) -> TrainConfig:
    """A config from a flat dict (config.json's layout); unknown keys raise a ValueError naming the
    valid ones.

    `strict=False` (a model directory's config.json, which older versions wrote with
    every task's settings) drops the settings that the dict's task does not take.
    """
    declared = tasks.declared_settings()
    unknown = sorted(set(values) - set(cls.core_fields()) - set(declared))
    if unknown:
      raise ValueError(f"{source}: unknown setting(s) {unknown}; valid settings: "
                       f"{sorted(cls.core_fields() + tuple(declared))}")
    if not strict and values.get("task") in tasks.TASKS:
      own = tasks.settings_of(values["task"])
      values = {key: value for key, value in values.items() if key not in declared or key in own}
    return cls(**values)

  @classmethod
  def from_file(cls, path: str) -> TrainConfig:
    """Reads a JSON file of settings (any subset of the fields)."""
    from zoo.model_dir import read_json
    try:
      values = read_json(path)
    except FileNotFoundError:
      raise FileNotFoundError(f"config file {path} does not exist") from None
    return cls.from_dict(values, source=path)

  @classmethod
  def from_model_dir(cls, model_dir: str | ModelDir) -> TrainConfig:
    """The config a training run (or a converter) wrote into `model_dir`.

    Its `model_overrides` are what the directory means (`zoo.presets.as_written`): a
    setting whose default changed after the directory was written keeps its old value.
    """
    from zoo import presets
    from zoo.model_dir import tokenizer_as_written
    model_dir = model_dir if isinstance(model_dir, ModelDir) else ModelDir(model_dir)
    values = model_dir.read_config()
    if values.get("model") in presets.PRESETS:
      overrides = presets.as_written(values["model"], values.get("model_overrides") or {})
      values = dict(values, model_overrides=overrides)
    values = dict(values, tokenizer=tokenizer_as_written(values))   # with the truncator the run used
    return cls.from_dict(values, source=model_dir.config_path, strict=False)

  def recorded(self) -> TrainConfig:
    """This config as a model directory records it: with every setting whose default may change
    (`zoo.presets.recorded`, and the `truncator` of text pairs in `tokenizer`)."""
    from zoo import presets
    from zoo.text.packing import DEFAULT_TRUNCATOR
    tokenizer = dict(self.tokenizer or {})
    tokenizer.setdefault("truncator", DEFAULT_TRUNCATOR)
    if not self.model:
      return self.replace(tokenizer=tokenizer)
    return self.replace(model_overrides=presets.recorded(self.model, self.model_overrides),
                        tokenizer=tokenizer)

  def resumed_from(self, saved: TrainConfig) -> TrainConfig:
    """This config continuing the run `saved` (the model directory's): the encoder settings a
    directory records (`zoo.presets.RECORDED`) and the task's architecture settings that this
    config does not set are the saved run's, so defaults that changed since it started do not
    change its model. So is the `truncator` of text pairs when this config's `tokenizer` sets none."""
    from zoo import presets
    config = self
    saved_truncator = (saved.tokenizer or {}).get("truncator")
    if saved_truncator is not None and "truncator" not in (config.tokenizer or {}):
      config = config.replace(tokenizer={**(config.tokenizer or {}), "truncator": saved_truncator})
    if saved.model and (config.model or saved.model) == saved.model:
      family = presets.get(saved.model).family
      kept = {key: value for key, value in saved.model_overrides.items()
              if key in presets.RECORDED.get(family, {}) and key not in config.model_overrides}
      config = config.replace(model_overrides={**kept, **config.model_overrides})
    if saved.task == config.task and config.task in tasks.TASKS:
      own = tasks.settings_of(config.task)
      kept = {name: value for name, value in saved.settings.items()
              if name in own and own[name].architecture and name not in config.settings}
      config = config.replace(**kept)
    return config

  def to_dict(self) -> dict[str, Any]:
    """The flat dict config.json holds: the job's fields, then every setting of the task."""
    values = {name: getattr(self, name) for name in self.core_fields()}
    own = tasks.settings_of(self.task) if self.task in tasks.TASKS else {}
    values.update({name: getattr(self, name) for name in own})
    values.update(self.settings)
    return copy.deepcopy(values)

  def fault_bounds(self) -> strategies.FaultBounds:
    """The `tpu.strategy.FaultBounds` of a multi-worker run."""
    return strategies.FaultBounds(self.heartbeat_timeout, self.collective_timeout, self.registration_timeout)

  def text_encoder_args(self) -> dict[str, Any]:
    """The `zoo.text.TextEncoder` keyword arguments of this run's tokenization (casing and `tokenizer`)."""
    return dict(self.tokenizer or {}, lower_case=True if self.lower_case is None else self.lower_case)

  def replace(self, **changes: Any) -> TrainConfig:
    values = {name: getattr(self, name) for name in self.core_fields()}
    return TrainConfig(**{**values, "settings": dict(self.settings), **changes})

  def validate(self) -> TrainConfig:
    """Checks every setting; returns the config with the derived defaults filled in.

    Raises:
      ValueError: naming the setting and its valid values.
    """
    from zoo import presets

    for name in ("model", "task", "data", "model_dir"):
      if name == "model" and not self.model and self.init_checkpoint:
        raise ValueError("--model is required: the --init-checkpoint has no config.json to take it from")
      if name == "model" and not self.model:
        raise ValueError(f"--model is required: one of the presets of zoo.presets "
                         f"({', '.join(presets.names())}; `python -m zoo.presets` describes them), or "
                         "--init-checkpoint DIR to take the encoder from a model directory (a training run "
                         "or a `python -m zoo.convert` output)")
      if not getattr(self, name):
        raise ValueError(f"--{name.replace('_', '-')} is required")
    presets.get(self.model)   # raises, listing the presets
    return self.validate_fields()

  def validate_fields(self) -> TrainConfig:
    """`validate` without the required fields and the preset: every value and the task's settings."""
    task = tasks.task_class(self.task)   # raises, listing the tasks
    if self.mixed_precision not in MIXED_PRECISIONS:
      raise ValueError(f"unknown mixed precision {self.mixed_precision!r}; choose one of: "
                       f"{', '.join(MIXED_PRECISIONS)}")
    for name in ("steps", "batch_size", "seq_length", "steps_per_execution", "checkpoint_every",
                 "keep_checkpoints", "vocab_size", "shuffle_buffer"):
      if int(getattr(self, name)) < 1:
        raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
    if self.seq_length < 3:
      raise ValueError(f"seq_length must be at least 3, got {self.seq_length}")
    if self.eval_every < 0:
      raise ValueError(f"eval_every must be >= 0 (0: evaluate at the end only), got {self.eval_every}")
    if self.learning_rate <= 0:
      raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
    if self.dropout is not None and not 0 <= self.dropout < 1:
      raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
    if self.tokenizer is not None and (not isinstance(self.tokenizer, dict)
                                       or set(self.tokenizer) - set(TOKENIZER_SETTINGS)):
      raise ValueError(f"tokenizer must be a dict of {list(TOKENIZER_SETTINGS)}, got {self.tokenizer!r}")
    if not isinstance(self.model_overrides, dict):
      raise ValueError(f"model_overrides must be a dict of encoder arguments, got {self.model_overrides!r}")
    self.fault_bounds()   # raises, naming the bound
    warmup = self.warmup_steps if self.warmup_steps is not None else self.steps // 10
    if not 0 <= warmup <= self.steps:
      raise ValueError(f"warmup_steps must be in [0, steps={self.steps}], got {warmup}")
    self._check_settings(task)
    task.check_config(self)
    self._check_length_buckets(task)
    return self.replace(warmup_steps=warmup, eval_batch_size=self.eval_batch_size or self.batch_size,
                        lower_case=True if self.lower_case is None else self.lower_case,
                        **task.derived_settings(self))

  def _check_length_buckets(self, task):
    from zoo.length_buckets import parse_ladder
    lengths = parse_ladder(self.length_buckets, self.seq_length)   # raises, naming the forms
    if len(lengths) > 1 and task.concatenates_documents:
      raise ValueError(f"--length-buckets: task {task.name!r} packs documents into examples of seq_length "
                       f"{self.seq_length} tokens, so every example fills it and buckets would save nothing; "
                       "they are for the fine-tuning tasks: " + ", ".join(
                           name for name, other in tasks.TASKS.items() if not other.concatenates_documents))
    if len(lengths) > 1 and self.model:
      from tpu.tasks.base import length_ladder
      length_ladder(self)   # raises for lengths the encoder cannot take, or a pooling that reads padding

  def _check_settings(self, task):
    declared = tasks.declared_settings()
    clashes = sorted(set(declared) & set(self.core_fields()))
    if clashes:
      raise ValueError(f"task settings {clashes} have the names of the job's own settings")
    own = tasks.settings_of(task.name)
    for name in self.settings:
      if name not in own:
        owners = " or ".join(declared[name][1])
        takes = ", ".join(own) or "no settings of its own"
        raise ValueError(f"{name} is a setting of task {owners}, not of {task.name!r} (which takes {takes})")
    for setting in own.values():
      problem = setting.check(getattr(self, setting.name))
      if problem:
        raise ValueError(problem)


def check_resumable(saved: TrainConfig, config: TrainConfig) -> None:
  """Raises a ValueError if `config` changes a setting that fixes the saved model's variables."""
  fields = ARCHITECTURE_FIELDS + tuple(name for name, setting in tasks.settings_of(config.task).items()
                                       if setting.architecture)
  changed = [name for name in fields if getattr(saved, name) != getattr(config, name)]
  if changed:
    details = "; ".join(f"{name}: {getattr(saved, name)!r} -> {getattr(config, name)!r}" for name in changed)
    raise ValueError(f"{config.model_dir} holds a run with other model settings ({details}); use another "
                     "--model-dir, or the same settings to resume it")


def apply_init_checkpoint(config: TrainConfig, init: TrainConfig) -> TrainConfig:
  """`config` with the encoder of an `--init-checkpoint` model directory's config `init`.

  Without `--model` the encoder is the init directory's (its preset and overrides,
  with the config's own overrides on top); with one, the two must build the same
  weights, or a ValueError names the fields that differ. Dropout rates and the
  sequence length may differ (they change no weight). The casing comes from the init
  directory unless the config sets it, and must then agree; so do the other tokenizer
  settings (`tokenizer`: the special tokens' names, [CLS]'s token type). The run's task settings
  that fix what its model computes (`Setting.architecture`: a head's shape, an embedding's pooling)
  come from the init directory unless the config sets them.
  """
  from zoo import presets

  if not init.model:
    return config
  # The `truncator` of text pairs is this run's packing, not the checkpoint's: neither adopted nor compared.
  theirs = {key: value for key, value in (init.tokenizer or {}).items() if key != "truncator"}
  ours = {key: value for key, value in (config.tokenizer or {}).items() if key != "truncator"}
  if theirs and not ours:
    config = config.replace(tokenizer={**theirs, **(config.tokenizer or {})})
  elif theirs and ours != theirs:
    raise ValueError(f"--init-checkpoint {config.init_checkpoint} tokenizes with {theirs}, this "
                     f"config with {ours}: leave `tokenizer` out to use the checkpoint's")
  if not config.model:
    config = config.replace(model=init.model,
                            model_overrides={**init.model_overrides, **config.model_overrides})
  differing = presets.differences(init.model, init.model_overrides, config.model, config.model_overrides)
  if differing:
    details = "; ".join(f"{name}: {ours!r} in the checkpoint, {theirs!r} here"
                        for name, (ours, theirs) in differing.items())
    raise ValueError(f"--init-checkpoint {config.init_checkpoint} holds a {init.model} encoder that --model "
                     f"{config.model} (with its overrides) does not match: {details}. Omit --model to use "
                     "the checkpoint's encoder")
  # The heads' settings of the checkpoint (its masked-LM head's shape, their activation), where
  # this run's task has them and does not set them.
  own = tasks.settings_of(config.task) if config.task in tasks.TASKS else {}
  adopted = {name: value for name, value in init.settings.items()
             if name in own and own[name].architecture and name not in config.settings}
  if adopted:
    config = config.replace(**adopted)
  if init.lower_case is not None:
    if config.lower_case is None:
      config = config.replace(lower_case=init.lower_case)
    elif config.lower_case != init.lower_case:
      raise ValueError(f"--init-checkpoint {config.init_checkpoint} was trained on "
                       f"{'uncased' if init.lower_case else 'cased'} text; --lower-case={config.lower_case} "
                       "would feed it tokens it never saw")
  return config
