"""Meeting researchers in their harness: mmfaith benchmarks as lmms-eval and inspect_ai tasks, and
those harnesses' logs read back as predictions (docs/harnesses.md)."""
