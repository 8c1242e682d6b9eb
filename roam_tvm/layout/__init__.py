"""roam_tvm.layout: memory layout (offset assignment) for fixed lifetimes. No TVM import.

Modelled on google/minimalloc: plain data (:class:`Buffer`, :class:`Problem`,
:class:`Solution`), CSV I/O, an independent validator, greedy heuristics, a
canonical branch-and-bound, a HiGHS MIP and ROAM's piecewise join.
"""
from .problem import Buffer, LayoutError, Problem, Solution, live_peak
from .csv_io import read_csv, read_csv_string, solution_from_problem, write_csv
from .validate import ValidationReport, check, is_valid, validate
from .heuristics import (best_heuristic, greedy, greedy_by_area, greedy_by_lifetime, greedy_by_size,
                         long_lived_first)
from .search import SearchParams, search_fit
from .mip import solve_mip
from .join import compact, join_solve
from .solver import solve
from .from_graph import LayoutPlan, plan_layout, problem_from_graph


def layout_main(argv: list[str] | None = None) -> int:
    """``roam-tvm layout FILE.csv [--time-limit S] [--alignment A] [--capacity C] [--output OUT.csv]``."""
    from .cli import layout_main as _main
    return _main(argv)


__all__ = [
    "Buffer", "Problem", "Solution", "LayoutError", "live_peak",
    "read_csv", "read_csv_string", "write_csv", "solution_from_problem",
    "validate", "is_valid", "check", "ValidationReport",
    "best_heuristic", "greedy", "greedy_by_size", "greedy_by_lifetime", "greedy_by_area", "long_lived_first",
    "SearchParams", "search_fit", "solve_mip", "compact", "join_solve", "solve",
    "LayoutPlan", "plan_layout", "problem_from_graph", "layout_main",
]
