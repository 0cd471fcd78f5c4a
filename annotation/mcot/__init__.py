"""MCoT annotation: the labeling config and the record <-> task mapping."""
