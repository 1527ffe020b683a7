"""Command-line interface."""

from .main import build_parser, main

__all__ = ["main", "build_parser"]
