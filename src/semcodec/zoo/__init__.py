"""The model zoo: bundle names, configurations and hashed weights files; releases' decoder parts."""
