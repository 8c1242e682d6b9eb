"""roam-tvm: ROAM-style operator ordering and memory layout for training in TVM Relax."""
__version__ = "0.1.0"
