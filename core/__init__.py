"""Pure building blocks: configuration, wire dialects, the Qwen3 template, detection logic, ranking.

Nothing in ``core`` performs I/O or imports Agent Zero.
"""
