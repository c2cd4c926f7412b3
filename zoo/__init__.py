"""A zoo of transformer encoders: RealFormer, Funnel-Transformer and BERT baselines."""

__version__ = "0.1.0"
