def kubernetes_files(spec, source): return {}
