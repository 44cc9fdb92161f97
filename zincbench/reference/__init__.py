"""Float64 NumPy references for the bundled kernels (what every GPU variant is checked against)."""
