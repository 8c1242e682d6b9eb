"""roam_tvm.zoo"""
