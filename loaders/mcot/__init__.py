"""Typed access to MCoT data: `open_mcot_dataset` (items with their gold and image files, for the evaluator)
and `load_mcot` (a `datasets.Dataset` from a release folder, build dir or Hub repo)."""
from mmfaith.loaders.mcot.dataset import McotDataset, McotItem, open_mcot_dataset
from mmfaith.loaders.mcot.load import load_mcot

__all__ = ["McotDataset", "McotItem", "load_mcot", "open_mcot_dataset"]
