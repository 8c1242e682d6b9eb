"""Relax-level fuzzer for the memory planners (issue 14, item 5).

``generator.generate(seed, features)`` makes a random high-level Relax function;
``harness.run_case`` lowers it with TVM's passes, plans it with
StaticPlanBlockMemory, RoamLayout and RoamOrder+RoamLayout, builds each for
llvm, runs it and compares the results bit for bit. ``python -m tests.relax_fuzz``
runs many.
"""
from .generator import Case, Features, generate
from .harness import Result, run_case

__all__ = ["Case", "Features", "Result", "generate", "run_case"]
