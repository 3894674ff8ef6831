"""Stand-in for the few `langchain_core` (0.3.49) pieces A0's memory uses."""
