"""VFaith pairs and perception items as datasets (build dir, release folder or Hub id)."""
