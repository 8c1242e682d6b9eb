"""roam_tvm.layout: memory layout (offset assignment) for fixed lifetimes. No TVM import."""
from .problem import Buffer, LayoutError, Problem, Solution, live_peak
from .csv_io import read_csv, read_csv_string, solution_from_problem, write_csv
from .validate import ValidationReport, check, is_valid, validate
from .heuristics import (best_heuristic, greedy, greedy_by_area, greedy_by_lifetime, greedy_by_size,
                         long_lived_first)

__all__ = [
    "Buffer", "Problem", "Solution", "LayoutError", "live_peak",
    "read_csv", "read_csv_string", "write_csv", "solution_from_problem",
    "validate", "is_valid", "check", "ValidationReport",
    "best_heuristic", "greedy", "greedy_by_size", "greedy_by_lifetime", "greedy_by_area", "long_lived_first",
]
