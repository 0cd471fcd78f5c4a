"""VFaith evaluator: prompts, answer parsing, probe plan, metrics, scorer, reference models, report."""
