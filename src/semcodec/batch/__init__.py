"""Batches of files: executors, output planning, delivery and reports, without the command line."""
