"""Benchmarks: each workload is measured beside its baseline, in the same run."""
