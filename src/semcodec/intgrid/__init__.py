"""The integer grid: networks whose output is the decoded picture, the same pixels on every CPU."""
