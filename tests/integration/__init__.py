"""Integration tests: exporters against local fake backends and a real Arize Phoenix."""
