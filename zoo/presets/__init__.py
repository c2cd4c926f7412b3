"""Named encoder configurations from the RealFormer and Funnel-Transformer papers.

Presets are data: each is a family (`"transformer"` or `"funnel"`) and the values of its
configuration (`zoo.configs.TransformerConfig` or `zoo.configs.FunnelConfig`) that differ from the
defaults; `Preset.encoder_config` makes the typed configuration both editions' encoders take.

- BERT sizes (RealFormer paper, Table 1): small L4/H512/A8, base L12/H768/A12,
  large L24/H1024/A16, xlarge L36/H1536/A24; Post-LN (`bert_*`), Pre-LN
  (`prenorm_*`) and residual attention (`realformer_*`, running mean at 36 layers).
- ALBERT (Lan et al., 2020, Table 1): `albert_base` (12M parameters), `albert_large`
  (18M): embeddings of width 128 projected to H, every layer shared
  (`layer_sharing="all"`), vocabulary 30,000.
- Relative-attention Transformers, the Funnel paper's baselines (Sec. 4.1):
  `rel_transformer_base` (L12H768), `rel_transformer_large` (L24H1024).
- Long inputs (T = 4096) with block-local attention and [cls] as the global token
  (`attention_window=128`, `global_tokens=1`; `zoo.windows`): `realformer_base_long`
  (absolute positions up to 4096), `funnel_b4_4_4_long` and `funnel_b4_4_4_decoder_long` (the
  window counts tokens of each block's own sequence, so it widens with every pooling).
- Funnel-Transformers (Funnel paper, Table 1 and 2): `funnel_b4_4_4`,
  `funnel_b6_3x2_3x2`, `funnel_b6_6_6` (H768), `funnel_b8_8_8`, `funnel_b10_10_10`
  (H1024), encoder only; the `_decoder` variants add the 2-layer decoder. They pool with
  Hugging Face's padding semantics (`pooling_semantics="huggingface"`), what its Funnel and
  the checkpoints it hosts compute, so a Funnel trained here exports to `transformers`
  unchanged (`python -m zoo.convert to-hf`) and a hosted checkpoint fine-tunes with the
  semantics it has. The authors' release converts with their own semantics
  (`zoo.convert funnel-tf`: `"funnel_authors"`), and `"zoo"` is the one whose outputs depend on
  padding least (only where `truncate_seq` cuts a text that nearly fills the length); both are an
  override away.

Model directories (`zoo.model_dir`) record a preset and its overrides. A setting whose
default changed is always recorded by whoever writes a directory (`recorded`), and a
directory that records none was written before the change and keeps the old value
(`as_written`, which `encoder_config` applies): a Funnel trained with the zoo's
pooling semantics stays one.

    >>> import zoo.presets
    >>> zoo.presets.get("funnel_b6_3x2_3x2").config["block_repeats"]
    (1, 2, 2)
    >>> encoder = zoo.presets.build("realformer_small", num_layers=2, seq_length=16)
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Collection
from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any

from zoo.choices import HF_POOLING
from zoo.choices import ZOO_POOLING
from zoo.configs import FamilyConfig
from zoo.configs import config_class
from zoo.configs import from_dict

if TYPE_CHECKING:   # the encoders load with Keras on first use (`Preset.encoder_class`)
  from zoo.models import FunnelEncoder
  from zoo.models import TransformerEncoder

VOCAB_SIZE = 30522   # BERT's uncased WordPiece vocabulary, used by both papers

_BERT_SIZES = {   # name: (layers, width, heads)
    "small": (4, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
    "xlarge": (36, 1536, 24),
}
_FUNNEL_LAYOUTS = {   # name: (block sizes, block repeats, width)
    "b4_4_4": ((4, 4, 4), (1, 1, 1), 768),
    "b6_3x2_3x2": ((6, 3, 3), (1, 2, 2), 768),
    "b6_6_6": ((6, 6, 6), (1, 1, 1), 768),
    "b8_8_8": ((8, 8, 8), (1, 1, 1), 1024),
    "b10_10_10": ((10, 10, 10), (1, 1, 1), 1024),
}
# ALBERT (Lan et al., 2020, Table 1): factorized embeddings (E = 128) and every layer shared; its
# SentencePiece vocabulary has 30,000 pieces; "gelu_approximate" is its gelu_new.
ALBERT_VOCAB_SIZE = 30000
_ALBERT_SIZES = {   # name: (layers, width, heads)
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}
FAMILIES = ("transformer", "funnel")
# The long-input presets: their length and local-attention window (keys on each side of a query).
LONG_LENGTH = 4096
LONG_WINDOW = 128


@dataclasses.dataclass(frozen=True)
class Preset:
  """A named configuration: the encoder family and the values of its configuration that differ from the
  defaults."""
  name: str
  family: str
  config: dict[str, Any]
  description: str

  def encoder_config(self, **overrides: Any) -> FamilyConfig:
    """The family's typed configuration (`zoo.configs`) of this preset with `overrides`; unknown names are
    refused with the valid ones."""
    return from_dict(self.family, {**self.config, **overrides})

  def encoder_class(self) -> type[TransformerEncoder] | type[FunnelEncoder]:
    """The tf_keras encoder class of the family (`zoo.models`)."""
    from zoo import models
    return {"transformer": models.TransformerEncoder, "funnel": models.FunnelEncoder}[self.family]

  @property
  def hidden_size(self) -> int:
    return self.config["hidden_size"]


def _transformer(layers: int, width: int, heads: int, **options: Any) -> dict[str, Any]:
  return {**dict(vocab_size=VOCAB_SIZE, hidden_size=width, num_layers=layers, num_heads=heads,
                 intermediate_size=4 * width), **options}


def _presets() -> dict[str, Preset]:
  presets = {}

  def add(name: str, family: str, config: dict[str, Any], description: str) -> None:
    presets[name] = Preset(name, family, config, description)

  for size, (layers, width, heads) in _BERT_SIZES.items():
    shape = f"L{layers}/H{width}/A{heads}"
    add(f"bert_{size}", "transformer", _transformer(layers, width, heads), f"Post-LN BERT {shape}")
    add(f"prenorm_{size}", "transformer", _transformer(layers, width, heads, norm_first=True),
        f"Pre-LN Transformer {shape}")
    add(f"realformer_{size}", "transformer",
        _transformer(layers, width, heads, residual_attention=True, running_mean=layers > 24),
        f"RealFormer {shape}" + (", running-mean residual attention" if layers > 24 else ""))
  for size, (layers, width, heads) in (("base", (12, 768, 12)), ("large", (24, 1024, 16))):
    add(f"rel_transformer_{size}", "transformer",
        _transformer(layers, width, heads, position_encoding="factorized", activation="gelu_approximate"),
        f"Transformer L{layers}H{width} with Funnel's relative attention (the Funnel paper's baseline)")
  for size, (layers, width, heads) in _ALBERT_SIZES.items():
    add(f"albert_{size}", "transformer",
        _transformer(layers, width, heads, vocab_size=ALBERT_VOCAB_SIZE, embedding_width=128,
                     layer_sharing="all", activation="gelu_approximate"),
        f"ALBERT {size} L{layers}/H{width}/A{heads}, E128, every layer shared")
  # Long inputs (T = 4096): local attention, LONG_WINDOW keys on each side, [cls] global.
  add("realformer_base_long", "transformer",
      _transformer(12, 768, 12, residual_attention=True, max_sequence_length=LONG_LENGTH,
                   seq_length=LONG_LENGTH, attention_window=LONG_WINDOW, global_tokens=1),
      f"RealFormer L12/H768/A12 for {LONG_LENGTH} tokens: local attention (window {LONG_WINDOW}), "
      "[cls] global")
  for layout, (sizes, repeats, width) in _FUNNEL_LAYOUTS.items():
    heads = width // 64
    base = dict(vocab_size=VOCAB_SIZE, hidden_size=width, block_sizes=sizes, block_repeats=repeats,
                num_heads=heads, intermediate_size=4 * width, pooling_semantics=HF_POOLING)
    shape = "-".join(f"{s}x{r}" if r > 1 else f"{s}" for s, r in zip(sizes, repeats, strict=True))
    add(f"funnel_{layout}", "funnel", base, f"Funnel-Transformer B{shape}-H{width}, encoder only")
    add(f"funnel_{layout}_decoder", "funnel", dict(base, num_decoder_layers=2),
        f"Funnel-Transformer B{shape}-H{width} with its 2-layer decoder")
  for suffix, what in (("", "encoder only"), ("_decoder", "with its 2-layer decoder (for pre-training)")):
    add(f"funnel_b4_4_4{suffix}_long", "funnel", dict(
        presets[f"funnel_b4_4_4{suffix}"].config, seq_length=LONG_LENGTH, attention_window=LONG_WINDOW,
        global_tokens=1),
        f"Funnel-Transformer B4-4-4-H768 {what}, for {LONG_LENGTH} tokens: local attention (window "
        f"{LONG_WINDOW} tokens of each block's sequence), [cls] global")
  return presets


PRESETS = _presets()


def names() -> list[str]:
  """All preset names, sorted."""
  return sorted(PRESETS)


def get(name: str) -> Preset:
  """The `Preset` called `name` (a copy: changing it does not change the table)."""
  if name not in PRESETS:
    raise ValueError(f"unknown preset {name!r}; choose one of: {', '.join(names())}")
  return copy.deepcopy(PRESETS[name])


def build(name: str, **overrides: Any) -> TransformerEncoder | FunnelEncoder:
  """Builds the encoder of preset `name`, with constructor arguments overridden.

  Unknown override names raise a ValueError listing the valid ones.
  """
  preset = get(name)
  return preset.encoder_class()(preset.encoder_config(**overrides))


# Settings whose default changed, by family, with the value a model directory that records
# none means (it was written before the change): the Funnel presets pooled with the zoo's
# padding semantics before they took Hugging Face's (then named "authors", which such a
# directory's config.json may hold: `as_written` reads it as "huggingface").
RECORDED = {"funnel": {"pooling_semantics": ZOO_POOLING}}


def recorded(name: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
  """`overrides` with the value of every `RECORDED` setting of the preset's family: what a model
  directory's config.json holds, so reading it never depends on a default."""
  preset = get(name)
  values = {**config_class(preset.family).defaults(), **preset.config, **overrides}
  return {**overrides, **{key: values[key] for key in RECORDED.get(preset.family, {})}}


def as_written(name: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
  """The overrides a model directory's config.json means: a `RECORDED` setting it leaves out takes
  the value from before its default changed (the directory was written then).

  Example:
    >>> as_written("funnel_b4_4_4", {})
    {'pooling_semantics': 'zoo'}
    >>> as_written("funnel_b4_4_4", {"pooling_semantics": "authors"}) == recorded("funnel_b4_4_4", {})
    True
  """
  family = get(name).family
  values = {**RECORDED.get(family, {}), **overrides}
  for key, meanings in config_class(family).RECORDED_NAMES.items():
    if key in values:
      values[key] = meanings.get(values[key], values[key])
  return values


def encoder_config(settings: Mapping[str, Any], **overrides: Any) -> FamilyConfig:
  """The encoder configuration (`zoo.configs`) a model directory's config.json describes.

  The preset `model`, its `model_overrides` (`as_written`), `dropout` (for both dropout
  rates, as the training job applies it), `vocab_size` and `seq_length`, then `overrides`.

  Raises:
    ValueError: config.json names no preset, or an unknown one.
  """
  if not settings.get("model"):
    raise ValueError("config.json names no model (preset): is this a zoo model directory?")
  preset = get(settings["model"])
  values = as_written(settings["model"], settings.get("model_overrides") or {})
  if settings.get("dropout") is not None:
    values.setdefault("dropout", settings["dropout"])
    values.setdefault("attention_dropout", settings["dropout"])
  values.update({key: settings[key] for key in ("vocab_size", "seq_length") if key in settings})
  values.update(overrides)
  return preset.encoder_config(**values)


# Encoder arguments that do not change the weights: a checkpoint fits encoders that differ in them.
NON_ARCHITECTURE_ARGUMENTS = ("dropout", "attention_dropout", "seq_length", "name")


def _plain(value: Any) -> Any:
  """JSON-comparable form: tuples become lists (config.json stores lists)."""
  import json
  return json.loads(json.dumps(value))


def resolve(name: str, overrides: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
  """Every configuration field of preset `name` with `overrides`, as config.json stores them: (family,
  {field: value}).

  Fields the preset leaves at the family's defaults are filled in, so two resolved configurations
  compare field by field.
  """
  preset = get(name)
  return preset.family, _plain(preset.encoder_config(**(overrides or {})).to_dict())


def differences(name: str, overrides: Mapping[str, Any], other_name: str, other_overrides: Mapping[str, Any],
                ignore: Collection[str] = NON_ARCHITECTURE_ARGUMENTS + ("vocab_size",)
                ) -> dict[str, tuple[Any, Any]]:
  """`{argument: (value of the first, value of the second)}` where two configurations build other weights.

  Example:
    >>> differences("bert_base", {}, "realformer_base", {})
    {'residual_attention': (False, True)}
    >>> differences("bert_base", {"dropout": 0.2}, "bert_base", {})
    {}
  """
  family, values = resolve(name, overrides)
  other_family, other_values = resolve(other_name, other_overrides)
  if family != other_family:
    return {"family": (family, other_family)}
  keys = sorted((set(values) | set(other_values)) - set(ignore))
  return {key: (values.get(key), other_values.get(key)) for key in keys
          if values.get(key) != other_values.get(key)}


def match(encoder_class_name: str, config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
  """The preset closest to an encoder's constructor arguments, and the overrides that make it exact.

  Returns `(preset name, overrides)` such that `build(name, **overrides)` rebuilds the
  encoder; `seq_length` and `vocab_size` are left out (a training config holds them).

  Example:
    >>> name, overrides = match("TransformerEncoder", dict(resolve("realformer_small")[1], num_layers=2))
    >>> name, overrides
    ('realformer_small', {'num_layers': 2})
  """
  family = {"TransformerEncoder": "transformer", "FunnelEncoder": "funnel"}.get(encoder_class_name)
  if family is None:
    raise ValueError(f"no preset family builds {encoder_class_name}; "
                     "known: TransformerEncoder, FunnelEncoder")
  config = _plain({key: value for key, value in config.items() if key not in ("name", "trainable", "dtype")})
  best = None
  for name in names():
    if get(name).family != family:
      continue
    _, values = resolve(name)
    unknown = sorted(set(config) - set(values))
    if unknown:
      raise ValueError(f"{encoder_class_name} has no argument(s) {unknown}")
    overrides = {key: value for key, value in config.items()
                 if key not in ("seq_length", "vocab_size") and values.get(key) != value}
    if best is None or len(overrides) < len(best[1]):
      best = (name, overrides)
  assert best is not None, f"no {family} preset"   # every family has presets
  return best
