"""Zoo model directories through keras-hub's own `from_preset`: training runs and converted checkpoints.

A directory `python -m tpu.train` writes (or `python -m zoo.convert` converts into) holds
`config.json` (the preset and its settings), `vocab.txt` and TensorFlow checkpoints; keras-hub
reads neither format. `install()` (run by `import zoo.keras3` when keras-hub is installed) gives
keras-hub's preset loading a loader for them, so they load as a Hugging Face directory does
(`runs/demo` is what `make demo` writes; `runs/mlm` and `runs/embed` a masked-LM and an embed run,
as the pre-training example of tpu/README.md and the retrieval example of README.md write them):

    import keras_hub
    import zoo.keras3

    backbone = keras_hub.models.Backbone.from_preset("runs/demo")        # a FunnelBackbone
    tokenizer = keras_hub.models.Tokenizer.from_preset("runs/demo")      # its vocabulary and casing
    classifier = keras_hub.models.TextClassifier.from_preset("runs/demo", sequence_length=64)
    masked_lm = keras_hub.models.MaskedLM.from_preset("runs/mlm")        # with the run's trained head
    embedder = keras_hub.models.TextEmbedder.from_preset("runs/embed")   # the run's pooling

- The backbone holds the latest checkpoint's encoder (`zoo.keras3.hub.backbone_from_model_dir`);
  `seq_length` and `dtype` go to it.
- The tokenizer gives the ids of the run's `zoo.text.TextEncoder` (`zoo.keras3.models.tokenizer`,
  `rules="bert"`). The preprocessors pack to the run's `seq_length` (`sequence_length=` sets
  another) and trim text pairs with its truncator (`zoo.model_dir.tokenizer_as_written`); a
  masked-LM preprocessor selects the run's `max_predictions_per_seq` positions.
- `TextClassifier.from_preset`: a `classify` or `regress` run's classifier has the run's
  number of classes and its trained head (so it predicts as the run and its SavedModel do).
  As for keras-hub's own presets, `num_classes` asks for a new, random head; a directory
  without a classifier (a converted checkpoint, another task's run) needs it.
- `MaskedLM.from_preset`: an `mlm` run's task has the run's trained head (its activation and
  transform); any other directory's starts a new head, as keras-hub's tasks do.
- `TextEmbedder.from_preset`: an `embed` run's embedder pools and normalises as the run (its
  `pooling` and `normalize`), so it gives the vectors of the run's export; `pooling_mode` and
  `normalize` override them, and any other directory's takes keras-hub's defaults ("mean", True).
"""

from __future__ import annotations

import os
import types
from typing import Any

from zoo.keras3 import hub
from zoo.model_dir import CONFIG_FILE
from zoo.model_dir import MASKED_LM_ROOT
from zoo.model_dir import MODEL_ROOT
from zoo.model_dir import ModelDir
from zoo.model_dir import read_json
from zoo.model_dir import tokenizer_as_written

# The config.json fields that mark another preset format (keras-hub's own, transformers', timm's).
OTHER_FORMATS = ("registered_name", "model_type", "architecture")


def is_model_dir(config: Any) -> bool:
  """Whether a preset's parsed config.json is a zoo model directory's (it names the zoo preset, `model`)."""
  return isinstance(config, dict) and "model" in config and not any(key in config for key in OTHER_FORMATS)


def model_dir_config(preset: Any) -> dict[str, Any] | None:
  """The config.json of a zoo model directory at `preset` (a local or gs:// path), else None."""
  path = str(preset)
  if not (path.startswith("gs://") or os.path.isdir(path)):
    return None
  try:
    config = read_json(os.path.join(path, CONFIG_FILE))
  except FileNotFoundError:
    return None
  return config if is_model_dir(config) else None


# What keras-hub's `from_preset` takes (after `import zoo.keras3`), for the error of a path that is none.
PRESET_KINDS = ("a zoo model directory (config.json naming a zoo preset, vocab.txt, checkpoints/), a Hugging "
                "Face directory (config.json with a model_type, safetensors weights, tokenizer files), a "
                "keras-hub preset directory or a registered preset name (e.g. 'bert_base_en'), or an hf:// "
                "or kaggle:// handle")


def check_preset_path(preset: Any) -> None:
  """Raises a one-line `FileNotFoundError` naming `preset` when it is a local path keras-hub cannot read (a
  string that is not a handle or a registered preset name, and no directory holding config.json), rather
  than keras-hub's own error; does nothing for anything else."""
  from keras_hub.src.utils.preset_utils import BUILTIN_PRESETS
  if not isinstance(preset, str) or "://" in preset or preset in BUILTIN_PRESETS:
    return
  if not os.path.exists(preset):
    raise FileNotFoundError(f"{preset} does not exist, and is no registered preset name: from_preset takes "
                            f"{PRESET_KINDS}")
  if not os.path.isdir(preset):
    raise FileNotFoundError(f"{preset} is a file: from_preset takes {PRESET_KINDS}")
  if not os.path.isfile(os.path.join(preset, CONFIG_FILE)):
    raise FileNotFoundError(f"{preset} holds no {CONFIG_FILE}: from_preset takes {PRESET_KINDS}")


def _trained_masked_lm_head(model_dir: ModelDir, settings: dict[str, Any]) -> dict[str, Any] | None:
  """`{HEAD_NAMES name: array}` of an `mlm` run's trained head, or None for any other directory."""
  from zoo.named_weights import checkpoint_arrays
  if settings.get("task") != "mlm":
    return None
  checkpoint = model_dir.latest_checkpoint()
  if checkpoint is None:
    raise FileNotFoundError(f"{model_dir.path} holds no checkpoint in {model_dir.checkpoint_dir}")
  arrays = checkpoint_arrays(checkpoint, MODEL_ROOT)
  prefix = f"{MASKED_LM_ROOT}/"
  return {name[len(prefix):]: value for name, value in arrays.items() if name.startswith(prefix)}


def model_dir_loader() -> type:
  """keras-hub's `PresetLoader` of zoo model directories (a class: keras-hub's module imported here)."""
  from keras_hub.models import MaskedLM
  from keras_hub.models import MaskedLMPreprocessor
  from keras_hub.models import TextClassifier
  from keras_hub.models import TextEmbedder
  from keras_hub.src.utils.preset_utils import PresetLoader

  from zoo import presets

  class ModelDirLoader(PresetLoader):
    """A zoo model directory as a keras-hub preset; see the module docstring."""

    def __init__(self, preset: Any, config: dict[str, Any]) -> None:
      super().__init__(preset, config)
      self.model_dir = ModelDir(str(preset))
      self.encoder_config = presets.encoder_config(config)
      self.family = self.encoder_config.family

    def check_backbone_class(self) -> type:
      return hub.FAMILIES[self.family].backbone

    def load_backbone(self, cls: type, load_weights: bool, **kwargs: Any) -> Any:
      kwargs = {key: value for key, value in kwargs.items() if value is not None}
      if load_weights:
        return hub.backbone_from_model_dir(self.preset, **kwargs)[0]
      dtype = kwargs.pop("dtype", None)
      return cls(presets.encoder_config(self.config, **kwargs), dtype=dtype)

    def load_tokenizer(self, cls: type, config_file: str | None = None, **kwargs: Any) -> Any:
      from zoo.keras3.loading import tokenizer_settings
      kind = (self.config.get("tokenizer") or {}).get("kind", "wordpiece")
      if kind != "wordpiece":   # before reading a vocab.txt that such a directory does not have
        raise ValueError(f"{self.preset}: {hub.not_wordpiece(kind)}")
      settings = types.SimpleNamespace(family=self.family, **tokenizer_settings(self.model_dir, self.config))
      tokenizer = hub.tokenizer_from_loaded(settings)
      return tokenizer if not kwargs else type(tokenizer).from_config({**tokenizer.get_config(), **kwargs})

    def load_preprocessor(self, cls: Any, config_file: str | None = None, **kwargs: Any) -> Any:
      kwargs.setdefault("tokenizer", self.load_tokenizer(cls.tokenizer_cls))
      kwargs.setdefault("sequence_length", self.encoder_config.built_length)
      kwargs.setdefault("truncate", tokenizer_as_written(self.config)["truncator"])   # the run's pairs
      if issubclass(cls, MaskedLMPreprocessor) and self.config.get("max_predictions_per_seq"):
        kwargs.setdefault("mask_selection_length", int(self.config["max_predictions_per_seq"]))
      return cls(**kwargs)

    def load_task(self, cls: Any, load_weights: bool, load_task_weights: bool, **kwargs: Any) -> Any:
      task_kind = self.config.get("task")
      if issubclass(cls, TextClassifier):
        run_classes = self.config.get("num_classes") if task_kind in hub.SEQUENCE_CLASSIFIER_TASKS else None
        if kwargs.get("num_classes") is None and not run_classes:
          raise ValueError(hub.not_a_classifier(self.preset, task_kind))
        kwargs.setdefault("num_classes", run_classes)
      if issubclass(cls, MaskedLM) and task_kind == "mlm":
        kwargs.setdefault("activation", self.config.get("head_activation"))
        kwargs.setdefault("mlm_transform", self.config.get("mlm_transform", True))
      if issubclass(cls, TextEmbedder):   # an embed run's pooling and normalisation, else keras-hub's
        run = hub.embed_settings(self.config)
        if "pooling" not in kwargs:   # the zoo's name of pooling_mode
          kwargs.setdefault("pooling_mode", run.get("pooling_mode"))
        kwargs.setdefault("normalize", run.get("normalize", True))
      if "backbone" not in kwargs:
        backbone_kwargs = {key: kwargs.pop(key) for key in ("dtype",) if key in kwargs}
        kwargs["backbone"] = self.load_backbone(cls.backbone_cls, load_weights, **backbone_kwargs)
      if "preprocessor" not in kwargs and cls.preprocessor_cls:
        kwargs["preprocessor"] = self.load_preprocessor(cls.preprocessor_cls)
      task = cls(**kwargs)
      if load_weights and load_task_weights:
        self._load_head(task, task_kind)
      return task

    def _load_head(self, task: Any, task_kind: str | None) -> None:
      if isinstance(task, TextClassifier) and task_kind in hub.SEQUENCE_CLASSIFIER_TASKS:
        head = hub.trained_head(self.preset, task.num_classes)
        if head is not None:
          task.output_dense.set_weights(head)
      elif isinstance(task, MaskedLM):
        arrays = _trained_masked_lm_head(self.model_dir, self.config)
        if arrays is not None:
          for name, variable in task.masked_lm_head.named_weights().items():
            variable.assign(arrays[name])

  return ModelDirLoader


def install() -> None:
  """Makes keras-hub's `from_preset` (backbones, tokenizers, preprocessors, tasks) read zoo model
  directories with `model_dir_loader()`'s loader; every other preset keeps keras-hub's loader, and a
  local path that holds no preset fails with one line naming it (`check_preset_path`). Once."""
  import keras_hub.src.models.backbone
  import keras_hub.src.models.preprocessor
  import keras_hub.src.models.task
  import keras_hub.src.tokenizers.tokenizer
  from keras_hub.src.utils import preset_utils
  if getattr(preset_utils.get_preset_loader, "zoo_model_dirs", False):
    return
  keras_hub_loader = preset_utils.get_preset_loader
  loader_class = model_dir_loader()

  def get_preset_loader(preset: Any) -> Any:
    check_preset_path(preset)
    config = model_dir_config(preset)
    return keras_hub_loader(preset) if config is None else loader_class(preset, config)

  setattr(get_preset_loader, "zoo_model_dirs", True)   # noqa: B010  (marks the wrapper: install once)
  for module in (preset_utils, keras_hub.src.models.backbone, keras_hub.src.models.preprocessor,
                 keras_hub.src.models.task, keras_hub.src.tokenizers.tokenizer):
    module.get_preset_loader = get_preset_loader
