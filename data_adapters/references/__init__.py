"""Data references: which source with which options (`references`, `sources`), the reference of a
real federation over Flower (`flower_reference`), which files a reference may name (`roots`) and the
datasets already on this machine (`discover`). The top of the data adapters, below the package's
public surface (data_adapters/__init__.py)."""
