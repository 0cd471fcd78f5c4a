"""VFaith pairs and perception items as datasets (build dir, release folder or Hub id)."""
from mmfaith.loaders.vfaith.dataset import (VfaithDataset, VfaithPair, VfaithPerception, open_vfaith_dataset)
from mmfaith.loaders.vfaith.load import load_vfaith

__all__ = ["VfaithDataset", "VfaithPair", "VfaithPerception", "load_vfaith", "open_vfaith_dataset"]
