"""roam_tvm.report"""
