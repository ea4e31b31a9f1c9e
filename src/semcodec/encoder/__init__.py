"""The encoder: segmentation, compact coding, prediction choice, residual, ROI, enhancement fit, rate control."""
