"""roam_tvm.layout"""
