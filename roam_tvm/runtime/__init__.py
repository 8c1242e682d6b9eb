"""roam_tvm.runtime"""
