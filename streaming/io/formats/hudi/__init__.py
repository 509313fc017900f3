"""Hudi, the production raw format: the sink (sink.py), its write options (options.py)
and its timeline read as files (timeline.py)."""
