"""Measure: GPU timing (cold/hot, stopping rules, clocks), hardware ceilings, the traffic model, and the
external programs measured (child processes with hard limits, llama-bench's rows)."""
