"""CRM: masked variants of region-annotated questions (evaluators)."""
