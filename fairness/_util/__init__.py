"""Shared helpers with no pipeline knowledge: canonical JSON, hashing, file I/O, the error type, the base models."""
