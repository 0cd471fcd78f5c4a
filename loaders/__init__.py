"""Typed access to SPD-Faith data: `load_spd_faith` (a `datasets.Dataset` from a release folder, build dir
or Hub repo) and `spd_pairs` (typed views: PIL images and Difference dataclasses); VFaith's `load_vfaith`;
`load_crm` (a CRM variant config as a `datasets.Dataset`); `load_mcot` (an MCoT source config)."""
from mmfaith.loaders.crm.load import load_crm
from mmfaith.loaders.mcot.load import load_mcot
from mmfaith.loaders.spd_faith.load import load_spd_faith
from mmfaith.loaders.spd_faith.views import Difference, PairView, official_pair_view, spd_pairs
from mmfaith.loaders.vfaith.load import load_vfaith

__all__ = ["Difference", "PairView", "load_crm", "load_mcot", "load_spd_faith", "load_vfaith", "official_pair_view",
           "spd_pairs"]
