"""An ordinary package project (tests/test_fix_v3.py copies it and adds a pyproject.toml)."""
from .model import TinyClassifier

__all__ = ["TinyClassifier"]
