"""Process-wide infrastructure (the owner loop, what is one per process): no wire format, setting or A0 here."""
