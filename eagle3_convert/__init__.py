"""eagle3-convert: convert, validate, record and publish EAGLE-3 drafter checkpoints."""

__version__ = "0.1.0"
