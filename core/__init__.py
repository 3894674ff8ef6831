"""Pure building blocks (settings, wire dialects, the Qwen3 template, detection, ranking): no I/O, no Agent Zero."""
