"""The release stage, shared by every family: a build dir -> a Hugging Face dataset repo layout
(`writer.py`), its card (`card.py`), manifest and verification (`manifest.py`), upload (`push.py`)
and the `release` / `verify` verbs (`cli.py`)."""
