"""roam_tvm.passes"""
