"""Process-wide infrastructure: the owner event loop thread and the registry of what is one per
process. Neither scheduling (``batching``) nor composition (``service``): both of those, and the A0
layer, build on it; nothing here knows a wire format, a setting or A0."""
