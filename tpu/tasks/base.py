"""What every task shares: the `Task` base class and the encoder a config builds."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Any

from tpu.tasks import task_registry
from zoo.lazy import lazy_module

if TYPE_CHECKING:
  from tpu.data import DataSource
  from tpu.tasks.task_registry import Setting
  from zoo.configs import EncoderConfig
  from zoo.text import TextEncoder

tf = lazy_module("tensorflow")

# The run's configuration, a `tpu.config.TrainConfig` (`tpu.config` imports this package).
Config = task_registry.Config
# Named tensors: a batch's features, a model's outputs, the denominators.
Features = dict[str, Any]
# `{name: (numerator, denominator)}` of sums (tensors, or numbers once summed).
Stats = dict[str, tuple[Any, Any]]


def encoder_config(config: Config, **extra_overrides: Any) -> EncoderConfig:
  """The encoder configuration (`zoo.configs`) of `config.model` with the config's overrides, vocabulary
  and static length."""
  from zoo import presets
  overrides = dict(config.model_overrides)
  if config.dropout is not None:
    overrides.setdefault("dropout", config.dropout)
    overrides.setdefault("attention_dropout", config.dropout)
  overrides.update(extra_overrides)
  overrides.update(vocab_size=config.vocab_size, seq_length=config.seq_length)
  return presets.get(config.model).encoder_config(**overrides)


def build_encoder(config: Config, **extra_overrides: Any) -> Any:
  """The tf_keras encoder of `encoder_config(config, **extra_overrides)`."""
  from zoo import presets
  return presets.get(config.model).encoder_class()(encoder_config(config, **extra_overrides))


def length_ladder(config: Config) -> list[tuple[int, int]]:
  """`[(length, capacity), ...]` of `config.length_buckets` for the config's encoder (`zoo.length_buckets`):
  each ladder length with the most real tokens it runs with the outputs of `seq_length`; [] without buckets.

  Raises a ValueError naming `--length-buckets` for lengths the encoder cannot take and, without
  `--padding-dependent-buckets`, for an encoder whose pooling reads padding.
  """
  from zoo import presets
  from zoo.length_buckets import parse_ladder
  lengths = parse_ladder(config.length_buckets, config.seq_length)
  if len(lengths) <= 1:
    return []
  preset = presets.get(config.model)
  encoder = preset.encoder_config(**dict(config.model_overrides, seq_length=config.seq_length))
  dependence = encoder.padding_dependence()
  if dependence and not config.padding_dependent_buckets:
    raise ValueError(f"--length-buckets {config.length_buckets}: length buckets for an encoder whose pooling "
                     f"reads padding are taken only when asked for: {dependence} (add "
                     "--padding-dependent-buckets)")
  try:
    return encoder.length_ladder(lengths, config.padding_dependent_buckets)
  except ValueError as error:
    raise ValueError(f"--length-buckets {config.length_buckets}: {error}") from None


def check_full_length(config: Config, what: str) -> None:
  """Token-level tasks predict every position: the encoder must have a full-length sequence output
  (`EncoderConfig.full_length_output`; an encoder-only Funnel pools the sequence away)."""
  from zoo import presets
  preset = presets.get(config.model)
  if not preset.encoder_config(**config.model_overrides).full_length_output:
    choices = [name for name in presets.names() if presets.get(name).family == preset.family
               and presets.get(name).encoder_config().full_length_output]
    raise ValueError(f"task {config.task!r} needs {what} with a full-length sequence output; "
                     f"{config.model} pools its sequence output below the input length. Use a preset with a "
                     f"full-length output: {', '.join(choices)}, or set model_overrides num_decoder_layers")


def encoder_serving_outputs(encoder: Any, features: Features) -> Features:
  """The encoder's float32 `sequence_output` and `pooled_output` (inference mode)."""
  outputs = encoder(features, training=False)
  return {name: tf.cast(outputs[name], tf.float32) for name in ("sequence_output", "pooled_output")}


def weighted_sum(values: Any, weights: Any) -> Any:
  return tf.reduce_sum(tf.cast(values, tf.float32) * tf.cast(weights, tf.float32))


def encode_texts(raw: Features, text_encoder: TextEncoder) -> Features:
  return text_encoder.encode(raw["text_a"], raw.get("text_b"))



class Task:
  """Base class: a pre-training task served as an encoder (its outputs are the encoder's).

  Subclasses set `name`, `data_type` (the `tpu.data` data type they read: "text",
  "classification", "regression", "tagging", "question_answering"), `settings` (their
  own `Setting`s) and `stat_names` (the statistics `loss_and_stats` returns), and
  override what differs. A setting is read as `self.config.<name>`.
  """

  name = ""
  data_type = ""
  description = ""
  settings: tuple[Setting, ...] = ()
  stat_names: tuple[str, ...] = ()
  # Whether the loss all-gathers the replicas' outputs (`tf.distribute.ReplicaContext.all_gather`): the train
  # step then computes it in the replica function itself, between two passes of the model (`tpu.trainer`).
  gathers_across_replicas = False
  # Whether the input pipeline concatenates raw documents into full-length examples before
  # `features` (pre-training, `tpu.data.documents`), instead of making one example per text.
  concatenates_documents = False

  def __init__(self, config: Config) -> None:
    self.config = config

  @classmethod
  def readers_of(cls, data_type: str) -> list[str]:
    """Names of the tasks that train on data of `data_type`."""
    return [name for name, task in task_registry.TASKS.items() if task.data_type == data_type]

  # Data.
  def check_source(self, source: DataSource, spec: str) -> None:
    """Raises a ValueError when the training data does not fit this task."""
    if self.data_type != "text" and source.data_type != self.data_type:
      others = self.readers_of(source.data_type)
      hint = f": use --task {' or '.join(others)}" if others else ""
      raise ValueError(f"task {self.name!r} needs {self.data_type} data, but {spec} is "
                       f"{source.data_type}{hint}")

  def data_metadata(self, source: DataSource) -> dict[str, Any]:
    """Config fields this task takes from the training data (`tpu.data.DataSource`)."""
    return dict(sentence_pair=source.sentence_pair)

  def eval_load_kwargs(self, train_source: DataSource) -> dict[str, Any]:
    """Extra `tpu.data.load` arguments for the evaluation data, given the training data."""
    return {}

  @classmethod
  def check_config(cls, config: Config) -> None:
    """Raises a ValueError for settings this task cannot train with (`TrainConfig.validate` asks,
    after checking each of the task's `settings` on its own)."""

  @classmethod
  def derived_settings(cls, config: Config) -> dict[str, Any]:
    """`{setting: value}` of settings whose default depends on others (filled in by `validate`)."""
    return {}

  def prepare_evaluation(self, source: DataSource) -> DataSource | None:
    """Reads what `metrics` needs from the evaluation data besides the model's outputs (SQuAD's
    contexts and gold answers); called once before evaluating. Returns the source to evaluate on
    when it is another (the embed task's retrieval set of held-out pairs), else None."""

  # Model.
  def build(self) -> Any:
    """Returns the Keras model (build it under the strategy's scope)."""
    raise NotImplementedError

  def initialise(self, model: Any) -> str | None:
    """Initialises what `--init-checkpoint` does not, on a run's start (not on a resume); returns
    a description for the log, or None."""
    return None

  def encoder(self, model: Any) -> Any:
    """The encoder inside `model` (what `--init-checkpoint` restores and `encode` serves)."""
    return model.checkpoint_items["encoder"]

  # Input pipeline.
  def expand(self, examples: Any, text_encoder: TextEncoder) -> Any:
    """Unbatched raw examples -> the unbatched examples `features` gets in batches (default: the same)."""
    return examples

  def expand_in_windows(self, examples: Any, windows: Callable[[Features], Features], batch: int) -> Any:
    """`expand` for tasks that cut each example into windows: `windows(raw batch)` of `batch` raw
    examples at once gives the windows' features with `example`, the example's index in the
    batch, which becomes its index in `examples`."""
    def expand(index, raw):
      features = windows(raw)
      features["example"] = tf.gather(tf.cast(index, tf.int32), features["example"])
      return features

    batches = examples.enumerate().batch(batch)
    return batches.map(expand, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()

  def features(self, raw: Features, text_encoder: TextEncoder, seed: Any = None) -> Features:
    """Batched raw examples (`text_a`, `text_b`?, `label`?) -> the model's features."""
    return encode_texts(raw, text_encoder)

  # Loss.
  def denominators(self, features: Features) -> Features:
    """Local float32 counts that normalise the loss, all-reduced over replicas by the job."""
    raise NotImplementedError

  def loss_and_stats(self, features: Features, outputs: Any, denominators: Features) -> tuple[Any, Stats]:
    """(this replica's share of the global loss, dict of statistics (numerator, denominator)).

    The statistics are shown beside the loss while training; "loss" is not one of them.
    """
    raise NotImplementedError

  def eval_outputs(self, features: Features, outputs: Any, denominators: Features) -> tuple[Stats, Features]:
    """(statistic sums, per-example arrays) of one evaluation batch (per-example may be empty)."""
    _, stats = self.loss_and_stats(features, outputs, denominators)
    return stats, {}

  def metrics(self, stats: Stats, examples: dict[str, Any]) -> dict[str, float]:
    """Final evaluation metrics from summed statistics and concatenated per-example arrays."""
    return {name: float(numerator / denominator) if denominator else float("nan")
            for name, (numerator, denominator) in stats.items()}

  def eval_predictions(self) -> tuple[dict[str, Any], dict[str, float] | None] | None:
    """`(predictions, null_odds or None)` of the last `metrics` call, `{example id: value}`, for tasks
    whose predictions an outside script scores (SQuAD's official evaluation); None for the others."""
    return None

  # Serving.
  def serving_network(self, model: Any) -> Any:
    """The Keras model the exported signatures call (its variables are what the export keeps)."""
    return self.encoder(model)

  def serving_outputs(self, network: Any, features: Features, label_names: Any) -> Features:
    """The `serving_default` outputs (float32 or string tensors) for int32 features `[B, T]`.

    Args:
      network: `serving_network(model)`.
      features: `input_word_ids`, `input_mask`, `input_type_ids`.
      label_names: string `[C]` tensor of `label_names()`.
    """
    return encoder_serving_outputs(network, features)

  def label_names(self) -> list[str]:
    """The class names the export maps label ids to ([] for tasks without classes)."""
    return []

  def serving_signature_aliases(self) -> dict[str, str]:
    """`{extra signature name: signature it repeats}` of the export (the embed task's `embed`)."""
    return {}

  def serving_text_inputs(self) -> tuple[str, ...]:
    """The names of the string `[B]` inputs of `serving_default` and `encode`."""
    return ("text", "text_b") if self.config.sentence_pair else ("text",)

  def serving_text_shapes(self) -> dict[str, list[int | None]]:
    """`{input name: shape}` of the string inputs that are not `[B]` (`[None]`), e.g. a list per example."""
    return {}

  def token_id_shape(self) -> list[int | None]:
    """The shape of the int32 token-id inputs of `from_token_ids`: `[B, T]`."""
    return [None, self.config.seq_length]

  def encoder_outputs(self, encoder: Any, features: Features) -> Features:
    """The `encode` signature's outputs for token-id features of `token_id_shape()`."""
    return encoder_serving_outputs(encoder, features)

  def encode_text(self, texts: Features, text_encoder: TextEncoder) -> Features:
    """int32 `[B, T]` encoder inputs of the string inputs (a dict keyed by `serving_text_inputs`)."""
    return text_encoder.encode(*(texts[name] for name in self.serving_text_inputs()))

  def serving_from_text(self, texts: Features, text_encoder: TextEncoder, from_token_ids: Callable[..., Any],
                      label_names: Any) -> Features:
    """The `serving_default` outputs for the string inputs.

    Args:
      texts: dict of string `[B]` tensors keyed by `serving_text_inputs()`.
      text_encoder: the run's `zoo.text.TextEncoder`.
      from_token_ids: the `from_token_ids` signature (`serving_outputs` on int32 `[B, T]` features).
      label_names: string `[C]` tensor of `label_names()`.
    """
    return from_token_ids(**self.encode_text(texts, text_encoder))

  # How `export.predict` shows one example's outputs: (key, signature output, kind), kind is
  # "text" (a string), "number" (a float), "integer", "flag" (a bool), "list" (a vector), "texts"
  # (a vector of strings) or "by_label" (a vector as a dict keyed by the label names). An optional
  # fourth element names an int output holding each example's length: vectors are cut to it
  # (padding dropped).
  prediction_fields: tuple[tuple[str, ...], ...] = (("pooled_output", "pooled_output", "list"),)

  def export_info(self) -> dict[str, Any]:
    """Task metadata for the export's `model_info.json`."""
    return dict(task=self.name)


