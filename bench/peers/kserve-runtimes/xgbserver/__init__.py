"""A stand-in for KServe's xgbserver (see skiff_kserve_runtime)."""
