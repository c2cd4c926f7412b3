"""The encoders' forward wiring, written once for both editions: `kit` (their named inputs, the layers an
edition hands over, ALBERT's sharing), `transformer_graph`, `funnel_graph`. Plain Python: the edition's
Keras comes in the kit."""
