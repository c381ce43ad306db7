"""A stand-in for KServe's sklearnserver (see skiff_kserve_runtime)."""
