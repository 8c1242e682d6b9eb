"""roam_tvm.order"""
