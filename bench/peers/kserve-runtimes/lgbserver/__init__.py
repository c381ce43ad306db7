"""A stand-in for KServe's lgbserver (see skiff_kserve_runtime)."""
