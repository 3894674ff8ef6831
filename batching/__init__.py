"""Scheduling only: the queue, coalescing, concurrency slots, deadlines, splitting, balancing over replicas,
breakers, retries and hedges. Nothing here knows Agent Zero or any wire format."""
