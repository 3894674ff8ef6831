"""Process-wide infrastructure (the owner loop thread, what is one per process) that ``service`` and the A0
layer build on; nothing here knows a wire format, a setting or A0."""
