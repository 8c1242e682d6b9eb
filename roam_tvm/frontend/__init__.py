"""roam_tvm.frontend"""
