"""CRM loaders: the evaluator's dataset access (`dataset.py`) and `datasets` loading of a release."""
from mmfaith.loaders.crm.dataset import CrmDataset, CrmItem, open_crm_dataset, variant_name
from mmfaith.loaders.crm.load import load_crm

__all__ = ["CrmDataset", "CrmItem", "load_crm", "open_crm_dataset", "variant_name"]
