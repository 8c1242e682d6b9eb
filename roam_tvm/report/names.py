"""The planner names ``roam-tvm compare`` knows (no TVM import, so the CLI checks them at once)."""

ALL_PLANNERS = ("tvm-default", "pytorch", "roam-order-only", "roam-layout-only", "roam")
