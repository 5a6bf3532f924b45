"""Verifiable tasks: problem generators, exhaustive solvers and the verifiers their rewards use."""
