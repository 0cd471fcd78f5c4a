"""SPD-Faith loaders: the evaluator's dataset access (`dataset.py`), `datasets` loading (`load.py`),
parquet rows (`rows.py`) and typed views (`views.py`)."""
from mmfaith.loaders.spd_faith.dataset import SpdDataset, SpdPair, open_spd_dataset

__all__ = ["SpdDataset", "SpdPair", "open_spd_dataset"]
