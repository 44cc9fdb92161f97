"""Run plans: validate (token correctness), ab (interleaved throughput A/B), aa (A/A self-test of the
verdicts) and gate (a declared list of checks reduced to one exit code)."""
