"""Host-side launchers of the bundled kernels, one module per kernel family.

Launchers only enqueue work on the current CuPy stream: no synchronisation, no host round-trips
and no allocations inside a launch that is timed (workspaces are allocated by ``prepare`` steps).
"""
