"""The authors' ten Funnel-Transformer releases as keras-hub presets of `FunnelBackbone`."""


# The Funnel-Transformer authors' ten released checkpoints, as Hugging Face hosts them
# (funnel-transformer/NAME), uncased English: keras-hub preset name -> (hub id, zoo preset of the
# same architecture, parameters of the FunnelBackbone it loads into (its pooler included)).
# `-base` checkpoints have no decoder.
PUBLISHED = {
    "funnel_small_en": ("funnel-transformer/small", "funnel_b4_4_4_decoder", 131574528),
    "funnel_small_base_en": ("funnel-transformer/small-base", "funnel_b4_4_4", 116211456),
    "funnel_medium_en": ("funnel-transformer/medium", "funnel_b6_3x2_3x2_decoder", 131574528),
    "funnel_medium_base_en": ("funnel-transformer/medium-base", "funnel_b6_3x2_3x2", 116211456),
    "funnel_intermediate_en": ("funnel-transformer/intermediate", "funnel_b6_6_6_decoder", 177663744),
    "funnel_intermediate_base_en": ("funnel-transformer/intermediate-base", "funnel_b6_6_6", 162300672),
    "funnel_large_en": ("funnel-transformer/large", "funnel_b8_8_8_decoder", 387204096),
    "funnel_large_base_en": ("funnel-transformer/large-base", "funnel_b8_8_8", 359904256),
    "funnel_xlarge_en": ("funnel-transformer/xlarge", "funnel_b10_10_10_decoder", 469103616),
    "funnel_xlarge_base_en": ("funnel-transformer/xlarge-base", "funnel_b10_10_10", 441803776),
}


def published_presets():
  """keras-hub's preset entries of `PUBLISHED`: a Hugging Face handle and metadata each."""
  entries = {}
  for name, (hub_id, architecture, params) in PUBLISHED.items():
    decoder = "with" if architecture.endswith("_decoder") else "without"
    entries[name] = dict(
        metadata=dict(description=f"Funnel-Transformer {hub_id.split('/')[1]} ({architecture}, {decoder} the "
                                  "decoder), the authors' release, uncased English; loaded from Hugging Face "
                                  "and converted on the fly",
                      params=params, path="funnel"),
        kaggle_handle=f"hf://{hub_id}")
  return entries
