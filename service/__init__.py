"""The service layer: the composition root, its transport, detection I/O and the owner-loop runtime."""
