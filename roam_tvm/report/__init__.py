"""Reports: the peak simulator, the planner comparison, plan export and plots."""
