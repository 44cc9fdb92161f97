"""Measure: GPU timing (cold/hot, stopping rules, clocks), hardware ceilings and the traffic model."""
