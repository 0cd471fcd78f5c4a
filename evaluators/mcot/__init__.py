"""MCoT ("thinking with images") evaluator: agent loop, interventions, reference models, scoring."""
