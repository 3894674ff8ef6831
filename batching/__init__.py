"""Scheduling only: the queue, coalescing, concurrency slots, deadlines, splitting, the circuit breaker
and the owner event loop. Nothing here knows Agent Zero or any wire format."""
