"""The one base class of problems an operator can act on.

A subclass's message says what is wrong and what to do; `lakehouse` prints it without a
traceback (streaming/cli/exit_codes.py maps errors to exit codes in one place). Imports
nothing of `streaming`, so every layer may raise it.
"""
from __future__ import annotations


class OperatorError(Exception):
    """Bad input, a refused operation or a failed run whose message tells the operator what to do."""
