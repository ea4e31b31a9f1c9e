"""The .sem format: the container, its limits and one module per layer kind's bytes (numpy, no torch)."""
