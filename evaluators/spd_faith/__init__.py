"""SPD-Faith's evaluator parts: probes and prompts, parsing, claims and judges, metrics, the probe
plan the shared run engine drives (`run.py`), the scorer (`score.py`), the report and the reference
models. `family.py` declares them to the registry (`mmfaith.families`)."""
