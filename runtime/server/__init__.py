"""The graph server process: one machine's partition in shared memory, answering typed requests (numpy only, never torch)."""
