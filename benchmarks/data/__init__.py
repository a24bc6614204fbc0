"""Benchmarks of the data pipeline (``research.data``): task synthesis throughput and its filters' drop
reasons, on CPU and on a GPU (``synthesis``)."""
