"""One module per conversion format, each declaring `FORMAT` (`zoo.convert.registry.Format`).

`python -m zoo.convert` lists every module here; see `zoo.convert.registry` for what a
declaration holds and DESIGN.md ("Adding a conversion format") for the recipe.
"""
