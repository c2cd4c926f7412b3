"""What every encoder family's configuration shares: `EncoderConfig`, a frozen dataclass of the
architectural arguments, its dict form (`to_dict`, `from_dict`: config.json, Keras configs, keras-hub
presets), copies with changes (`replace`) and the length buckets every family answers for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from collections.abc import Mapping
from typing import Any
from typing import ClassVar
from typing import TypeVar

Config = TypeVar("Config", bound="EncoderConfig")


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
  """The base of `TransformerConfig` and `FunnelConfig`: one immutable, checked value per encoder.

  A family's subclass declares every architectural argument as a field (documented in its
  docstring), checks them in `__post_init__` and answers what the rest of the zoo asks of the
  family (`full_length_output`, `length_problem`, `bucket_capacity`, `padding_dependence`).
  Both editions' encoders, the keras-hub backbones, the presets, the converters and the
  training job take it.
  """

  # The name of the family (`zoo.presets.FAMILIES`) and of its encoder class in both editions.
  family: ClassVar[str] = ""
  encoder_name: ClassVar[str] = ""
  # Recorded names whose meaning changed: {field: {recorded value: the value it means now}}, read by
  # `from_dict` only (a config built in code takes the current names).
  RECORDED_NAMES: ClassVar[dict[str, dict[Any, Any]]] = {}

  def to_dict(self) -> dict[str, Any]:
    """`{field: value}`, every field (tuples stay tuples; JSON writes them as lists)."""
    return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

  @classmethod
  def field_names(cls) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(cls))

  @classmethod
  def defaults(cls) -> dict[str, Any]:
    """`{field: default}` of the fields that have one (all but `vocab_size`)."""
    return {field.name: field.default for field in dataclasses.fields(cls)
            if field.default is not dataclasses.MISSING}

  @classmethod
  def from_dict(cls: type[Config], values: Mapping[str, Any], ignore: Collection[str] = ()) -> Config:
    """The config a recorded dict describes (config.json's encoder arguments, a Keras config, a keras-hub
    preset's `encoder_config`): lists become tuples, recorded names their current meaning
    (`RECORDED_NAMES`); keys in `ignore` are dropped, and any other unknown key is refused with the valid
    ones."""
    values = {key: value for key, value in values.items() if key not in ignore}
    unknown = sorted(set(values) - set(cls.field_names()))
    if unknown:
      raise ValueError(f"{cls.encoder_name} has no argument(s) {unknown}; valid: {sorted(cls.field_names())}")
    for name, meanings in cls.RECORDED_NAMES.items():
      if name in values and isinstance(values[name], str):
        values[name] = meanings.get(values[name], values[name])
    return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in values.items()})

  @classmethod
  def taken_from(cls: type[Config], config: Config | None, arguments: dict[str, Any]
                 ) -> tuple[Config, dict[str, Any]]:
    """`(config, the other arguments)` of an encoder's constructor: `config` itself, or the config of the
    `arguments` that are its fields (an encoder takes either, not both)."""
    fields = {key: arguments[key] for key in cls.field_names() if key in arguments}
    others = {key: value for key, value in arguments.items() if key not in fields}
    if config is None:
      return cls(**fields), others
    if not isinstance(config, cls):
      raise TypeError(f"{cls.encoder_name} takes a {cls.__name__}, got {type(config).__name__}")
    if fields:
      raise TypeError(f"{cls.encoder_name} got a {cls.__name__} and its fields {sorted(fields)}: pass "
                      "config.replace(...) instead")
    return config, others

  def replace(self: Config, **changes: Any) -> Config:
    """A copy with `changes`, checked again; unknown names are refused with the valid ones."""
    unknown = sorted(set(changes) - set(self.field_names()))
    if unknown:
      raise ValueError(f"{self.encoder_name} has no argument(s) {unknown}; "
                       f"valid: {sorted(self.field_names())}")
    return dataclasses.replace(self, **changes)

  # What the rest of the zoo asks of a family.
  # Whether the family's masked-LM head transforms the hidden states (dense, activation, layer norm: BERT's)
  # before the output embedding, or reads them as they are (Funnel's).
  masked_lm_transform: ClassVar[bool] = True

  @property
  def full_length_output(self) -> bool:
    """Whether `sequence_output` has a vector per input token (token-level tasks need it)."""
    return True

  @property
  def built_length(self) -> int | None:
    """The static sequence length the encoder's graph is built for (None: any)."""
    return getattr(self, "seq_length", None)

  def length_problem(self, length: int) -> str | None:
    """Why the encoder cannot run on `length` tokens (naming the lengths it takes), or None."""
    return None

  def padding_dependence(self) -> str | None:
    """Why the pooling reads padding (a length then holds fewer texts with the built length's outputs), or
    None when the outputs at real positions never depend on how far the inputs are padded."""
    return None

  def bucket_capacity(self, length: int) -> int:
    """The most real tokens that run at `length` (a length bucket, `zoo.length_buckets`) with the outputs
    they have at the built `seq_length` (0: none)."""
    return length

  def length_ladder(self, lengths: Collection[int], padding_dependent: bool = False) -> list[tuple[int, int]]:
    """`[(length, capacity), ...]` of `lengths` and the built `seq_length`: each length with the most real
    tokens it runs with the outputs of `seq_length`, lengths that hold no more than a shorter one left out.

    Raises a ValueError for lengths the encoder cannot take and, unless `padding_dependent`, for an encoder
    whose pooling reads padding (`padding_dependence`).
    """
    built = self.built_length
    if built is None:
      raise ValueError("length buckets need an encoder built for a static seq_length")
    problem = self.padding_dependence()
    if problem and not padding_dependent:
      raise ValueError(f"length buckets for an encoder whose pooling reads padding are taken only when asked "
                       f"for (padding_dependent=True): {problem}")
    ladder: list[tuple[int, int]] = []
    for length in sorted(set(lengths) | {built}):
      if length > built:
        raise ValueError(f"length bucket {length} is longer than its seq_length {built}")
      problem = self.length_problem(length)
      if problem:
        raise ValueError(f"length bucket {length}: {problem}")
      capacity = self.bucket_capacity(length)
      if capacity > (ladder[-1][1] if ladder else 0):
        ladder.append((length, capacity))
    return ladder


def check_local_attention(attention_window: Any, global_tokens: Any) -> None:
  """The local-attention settings: a window of `>= 0` keys on each side (None: full attention) and
  `>= 1` global tokens."""
  if attention_window is not None and (isinstance(attention_window, bool) or int(attention_window) !=
                                       attention_window or attention_window < 0):
    raise ValueError(f"attention_window must be None (full attention) or a whole number >= 0, got "
                     f"{attention_window!r}")
  if isinstance(global_tokens, bool) or int(global_tokens) != global_tokens or global_tokens < 1:
    raise ValueError(f"global_tokens must be a whole number >= 1 (the [cls] token at least), got "
                     f"{global_tokens!r}")
