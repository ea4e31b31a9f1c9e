"""The decoder: container, layers and the integer-grid networks to pixels (torch-free)."""
