"""Run plans that drive engines: validate (token correctness) and ab (interleaved throughput A/B)."""
