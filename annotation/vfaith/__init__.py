"""VFaith: Label Studio labeling config and record <-> task mapping."""
